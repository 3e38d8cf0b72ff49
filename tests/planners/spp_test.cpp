#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;

TEST(SppTest, FixedPoliciesGetPlansThatFitTheirMemory) {
  // 1 MB stash per layer, GPUs of 10 MB: fill-drain cannot keep 8 micro-batches of a
  // two-layer stage, so spp must plan differently for it (or say why it cannot).
  model::Model model = make_model(
      {{1, 2, 1e5, 0, 1e6}, {1, 2, 1e5, 0, 1e6}, {1, 2, 1e5, 0, 1e6}, {1, 2, 0, 0, 1e6}});
  topology::Topology topology = uniform_topology(4, 10e9, 0.01, {}, 10e6);
  for (schedule::Policy policy :
       {schedule::Policy::kList, schedule::Policy::kOneFOneB, schedule::Policy::kGpipe}) {
    SCOPED_TRACE(std::string(schedule::policy_name(policy)));
    Plan plan = plan_spp({model, topology, 8}, policy);
    EXPECT_EQ(plan.schedule_policy, schedule::policy_name(policy));
    EXPECT_FALSE(simulate::memory_violation(topology, plan.timeline).has_value());
    EXPECT_FALSE(plan.notes.empty());
  }
}

TEST(SppTest, SaysWhenOnlyTheListScheduleFits) {
  // One GPU holds the whole model with 2 stashes, never 8.
  model::Model model = make_model({{1, 2, 0, 0, 1e6}});
  topology::Topology topology = uniform_topology(1, 10e9, 0.01, {}, 2.5e6);
  EXPECT_NO_THROW(plan_spp({model, topology, 8}, schedule::Policy::kList));
  try {
    plan_spp({model, topology, 8}, schedule::Policy::kGpipe);
    FAIL() << "no error";
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(
        error.what(),
        "no placement fits in GPU memory under the gpipe schedule, which keeps every micro-batch "
        "of a "
        "replica in flight; the default list schedule, which waits for memory instead, has a plan "
        "(--schedule list)");
  }
}

TEST(SppTest, NeverSlowerThanItsSingleGpuOption) {
  // spp searches a superset of the one-GPU plan, and the list schedule of one stage on one
  // GPU is exact, so its plan is never slower than that.
  model::Model model =
      make_model({{3, 6, 1e8, 1e8, 1e6}, {1, 2, 1e8, 1e6, 1e6}, {5, 9, 0, 1e7, 1e6}});
  topology::Topology topology = uniform_topology(3, 1e9, 0.05);
  Plan plan = plan_spp({model, topology, 4});
  EXPECT_LE(plan.timeline.iteration_ms, 4 * (3 + 6 + 1 + 2 + 5 + 9) * (1 + 1e-12));
}

TEST(SppTest, WarnsWhenTheOrderingFellBackToTheSpanningTree) {
  const model::Model model = make_model({{1, 2, 1e6, 1e6}, {1, 2, 1e6, 1e6}});
  const Plan large = make_plan("spp", Request{model, noisy_clusters(4, 120, 2), 4});
  ASSERT_EQ(large.warnings.size(), 1u);
  EXPECT_EQ(large.warnings[0],
            "min-cut order: 480 GPUs in 1 group(s) without structure were ordered by maximum "
            "spanning tree, the minimum cuts' work budget being spent (docs/algorithms.md)");
  EXPECT_TRUE(make_plan("spp", Request{model, noisy_clusters(3, 8, 1), 4}).warnings.empty());
}

}  // namespace
}  // namespace pipeplan::planners
