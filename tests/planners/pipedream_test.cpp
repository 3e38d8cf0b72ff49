// The pipedream baseline: its objective by hand, its DP against every partition and replica
// count, and its memory rule (exact 1F1B stash counts).

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;
using schedule::Policy;

TEST(PipeDreamTest, ObjectiveByHand) {
  // F+B = 3 and 9 ms; 1 MB after layer 0 over 1 GB/s is 1 ms each way.
  const model::Model model = make_model({{1, 2, 1e6, 0, 0}, {3, 6, 0, 0, 0}});
  const topology::Topology topology = uniform_topology(2, 1e9, 0.5);
  // Pipeline: max(3, 9, 2 x 1 ms); latency is ignored, as PipeDream's optimizer does.
  EXPECT_DOUBLE_EQ(
      *pipedream_objective(model, topology, {{0, 0, {0}}, {1, 1, {1}}}, 4, Policy::kOneFOneB), 9);
  // Data parallel: (12 ms + AllReduce of nothing, 2 x 0.5 ms of latency) / 2.
  EXPECT_DOUBLE_EQ(*pipedream_objective(model, topology, {{0, 1, {0, 1}}}, 4, Policy::kOneFOneB),
                   6.5);
  auto solution = pipedream_solve(model, topology, 4, Policy::kOneFOneB);
  ASSERT_TRUE(solution.has_value());
  EXPECT_DOUBLE_EQ(solution->slowest_ms, 6.5);
  EXPECT_EQ(stages_text(solution->stages), "0-1@0,1");
}

TEST(PipeDreamTest, AllReduceCostsReplication) {
  // 1 GB of parameters in layer 1: replicating it costs 2 (1/2) 1 GB / 1 GB/s = 1000 ms of
  // AllReduce, halved over 2 replicas; the pipeline wins.
  const model::Model model = make_model({{1, 2, 1e6, 0, 0}, {3, 6, 0, 1e9, 0}});
  const topology::Topology topology = uniform_topology(2, 1e9, 0);
  EXPECT_DOUBLE_EQ(*pipedream_objective(model, topology, {{0, 1, {0, 1}}}, 4, Policy::kOneFOneB),
                   (12 + 1000) / 2.0);
  auto solution = pipedream_solve(model, topology, 4, Policy::kOneFOneB);
  ASSERT_TRUE(solution.has_value());
  EXPECT_DOUBLE_EQ(solution->slowest_ms, 9);
  EXPECT_EQ(stages_text(solution->stages), "0-0@0 1-1@1");
}

TEST(PipeDreamTest, ReplicasRunAtTheSlowestSpeed) {
  const model::Model model = make_model({{1, 2}, {3, 6}});
  const topology::Topology topology = uniform_topology(2, 1e9, 0, {1, 0.5});
  EXPECT_DOUBLE_EQ(*pipedream_objective(model, topology, {{0, 1, {0, 1}}}, 4, Policy::kOneFOneB),
                   12 / 0.5 / 2);
}

TEST(PipeDreamTest, IgnoresTheMicroBatchCount) {
  std::mt19937 rng(7);
  std::vector<L> layers;
  for (int l = 0; l < 7; ++l) {
    layers.push_back(L{1.0 + static_cast<double>(rng() % 5), 2, 1e6, 1e7, 1e6});
  }
  const model::Model model = make_model(layers);
  const topology::Topology topology = uniform_topology(4, 10e9, 0.01, {1, 1, 0.5, 2});
  const auto one = pipedream_solve(model, topology, 1, Policy::kOneFOneB);
  const auto many = pipedream_solve(model, topology, 64, Policy::kOneFOneB);
  ASSERT_TRUE(one && many);
  EXPECT_EQ(stages_text(one->stages), stages_text(many->stages));
  EXPECT_DOUBLE_EQ(one->slowest_ms, many->slowest_ms);
}

TEST(PipeDreamTest, OneFOneBStashesDecideFeasibility) {
  // Two layers stashing 10 MB each, 15 MB GPUs, 4 micro-batches. Data parallel holds 20 MB
  // per replica; as a pipeline, stage 0's 1F1B warm-up keeps two stashes (20 MB). Nothing
  // fits under 1F1B; a list schedule needs one stash per GPU, so the pipeline fits.
  const model::Model model = make_model({{1, 1, 1e6, 0, 10e6}, {1, 1, 0, 0, 10e6}});
  const topology::Topology topology = uniform_topology(2, 1e9, 0, {}, 15e6);
  EXPECT_FALSE(pipedream_solve(model, topology, 4, Policy::kOneFOneB).has_value());
  try {
    (void)make_plan("pipedream", Request{model, topology, 4});
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(
        error.what(),
        "pipedream: no partition of the 2 layers over all 2 GPUs in input order fits in memory "
        "with every stage holding the stashes of its 1F1B warm-up; the list schedule needs only "
        "one (--schedule list)");
  }
  Plan plan = make_plan("pipedream", Request{model, topology, 4}, Policy::kList);
  EXPECT_EQ(stages_text(plan.stages), "0-0@0 1-1@1");
  EXPECT_EQ(plan.schedule_policy, "list");
}

// Every partition PipeDream may choose: contiguous layer ranges on consecutive runs of the
// input order, any replica count, every GPU used. Returns the smallest objective and, among
// its optima, the fewest stages.
std::optional<std::pair<double, int>> brute_force(const model::Model& model,
                                                  const topology::Topology& topology, int M,
                                                  Policy policy, int* partitions) {
  const int L = static_cast<int>(model.layers.size());
  const int N = topology.size();
  std::optional<std::pair<double, int>> best;
  std::vector<Stage> current;
  std::function<void(int, int)> extend = [&](int layer, int gpu) {
    if (layer == L) {
      if (gpu != N) return;
      ++*partitions;
      auto value = pipedream_objective(model, topology, current, M, policy);
      if (!value) return;
      const std::pair<double, int> here{*value, static_cast<int>(current.size())};
      if (!best || here < *best) best = here;
      return;
    }
    for (int last = layer; last < L; ++last) {
      for (int r = 1; gpu + r <= N; ++r) {
        Stage stage{layer, last, {}};
        for (int g = gpu; g < gpu + r; ++g) stage.gpus.push_back(g);
        current.push_back(stage);
        extend(last + 1, gpu + r);
        current.pop_back();
      }
    }
  };
  extend(0, 0);
  return best;
}

TEST(PipeDreamTest, DpEqualsExhaustiveSearchOnRandomInstances) {
  std::mt19937 rng(2019);
  const Policy policies[] = {Policy::kOneFOneB, Policy::kGpipe, Policy::kList};
  int instances = 0, infeasible = 0, partitions = 0, replicated = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 7);
    const int N = 1 + static_cast<int>(rng() % 5);
    const int M = 1 + static_cast<int>(rng() % 8);
    const Policy policy = policies[rng() % 3];
    const model::Model model = random_model(rng, L, 4e6);
    const topology::Topology topology = random_topology(rng, N, 4e6, 50e6);
    const auto expected = brute_force(model, topology, M, policy, &partitions);
    const auto solution = pipedream_solve(model, topology, M, policy);
    ++instances;
    ASSERT_EQ(expected.has_value(), solution.has_value()) << "trial " << trial;
    if (!expected) {
      ++infeasible;
      EXPECT_THROW((void)make_plan("pipedream", Request{model, topology, M}, policy),
                   InfeasibleError);
      continue;
    }
    EXPECT_DOUBLE_EQ(solution->slowest_ms, expected->first) << "trial " << trial;
    EXPECT_EQ(static_cast<int>(solution->stages.size()), expected->second)
        << "trial " << trial;  // ties
    // The stages it returns have exactly the value it reports.
    auto check = pipedream_objective(model, topology, solution->stages, M, policy);
    ASSERT_TRUE(check.has_value()) << "trial " << trial;
    EXPECT_EQ(*check, solution->slowest_ms) << "trial " << trial;

    // Its plan is valid, and the memory rule is the replay's: under a fixed policy the fullest
    // GPU of every stage holds exactly static + peak_stashes stashes.
    Plan plan;
    ASSERT_NO_THROW(plan = make_plan("pipedream", Request{model, topology, M}, policy))
        << "trial " << trial;
    EXPECT_EQ(stages_text(plan.stages), stages_text(solution->stages));
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      if (plan.stages[s].gpus.size() > 1) ++replicated;
      if (policy == Policy::kList) continue;
      const auto profile = simulate::stage_profile(model, plan.stages, static_cast<int>(s));
      double peak = 0;
      for (int g : plan.stages[s].gpus) {
        peak = std::max(peak, plan.timeline.gpus[static_cast<std::size_t>(g)].peak_memory_bytes);
      }
      const double expected_peak =
          model.parameter_memory_factor * profile.parameter_bytes +
          static_cast<double>(peak_stashes(plan.stages, static_cast<int>(s), M, policy)) *
              profile.stash_bytes;
      EXPECT_NEAR(peak, expected_peak, 1e-6 * expected_peak + 1e-6)
          << "trial " << trial << " stage " << s;
    }
  }
  EXPECT_GE(instances, 100);
  EXPECT_GT(partitions, 5000);           // the oracle really searched
  EXPECT_LT(infeasible, instances / 3);  // most instances had a plan
  EXPECT_GT(infeasible, 0);              // and memory did bind sometimes
  EXPECT_GT(replicated, 50);             // replicated stages were exercised
}

}  // namespace
}  // namespace pipeplan::planners
