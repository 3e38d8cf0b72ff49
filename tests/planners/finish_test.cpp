// "Does not fit" as a value: try_finish_plan (and try_make_schedule below it) return the
// refusal finish_plan throws, with the same message, and the same plan where it fits.

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../support/builders.hpp"
#include "../support/builders_v2.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/schedule/scheduler.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;

// The message finish_plan throws, or "" when it makes a plan.
std::string thrown(const Partition& partition, const Request& request, schedule::Policy policy) {
  try {
    (void)finish_plan("test", partition, request, policy);
  } catch (const InfeasibleError& error) {
    return error.what();
  }
  return "";
}

// Two layers, each 400 bytes of static state (100 parameter bytes, factor 4) and 200 bytes of
// stash per micro-batch, on GPUs of `memory` bytes.
struct Case {
  model::Model model = make_model({{1, 2, 8, 100, 200}, {1, 2, 8, 100, 200}});
  topology::Topology topology;
  explicit Case(double memory) : topology(uniform_topology(2, 1e9, 0.01, {}, memory)) {}
  [[nodiscard]] Request request(int micro_batches) const {
    Request r{model, topology};
    r.micro_batches = micro_batches;
    return r;
  }
};

const Partition kTwoStages{{0, 1}, stages({{0, 0, {0}}, {1, 1, {1}}})};
const Partition kOneStage{{0, 1}, stages({{0, 1, {0}}})};

TEST(FinishPlanTest, AStageThatCannotHoldOneMicroBatchIsAValue) {
  const Case c(500);  // 400 static + 200 stash > 500
  const Request request = c.request(4);
  const Finished finished = try_finish_plan("test", kTwoStages, request, schedule::Policy::kList);
  EXPECT_FALSE(finished.plan);
  EXPECT_NE(finished.refusal.find("with one micro-batch in flight"), std::string::npos)
      << finished.refusal;
  EXPECT_EQ(finished.refusal, thrown(kTwoStages, request, schedule::Policy::kList));
  const schedule::ScheduleAttempt attempt = schedule::try_make_schedule(
      c.model, c.topology, kTwoStages.stages, 4, schedule::Policy::kList);
  EXPECT_FALSE(attempt.scheduled);
  EXPECT_EQ(attempt.refusal, finished.refusal);
}

TEST(FinishPlanTest, AReplayOverMemoryIsAValue) {
  const Case c(900);  // the list schedule holds 2 stashes; GPipe keeps all 4 in flight
  const Request request = c.request(4);
  const Finished gpipe = try_finish_plan("test", kTwoStages, request, schedule::Policy::kGpipe);
  EXPECT_FALSE(gpipe.plan);
  EXPECT_NE(gpipe.refusal.find("does not fit in memory"), std::string::npos) << gpipe.refusal;
  EXPECT_EQ(gpipe.refusal, thrown(kTwoStages, request, schedule::Policy::kGpipe));
  // The same partition fits under the list schedule, which caps what is in flight.
  EXPECT_TRUE(try_finish_plan("test", kTwoStages, request, schedule::Policy::kList).plan);
}

TEST(FinishPlanTest, TheTaskLimitIsAValue) {
  const Case c(1e12);
  // A search's limit ("test" is no planner's name: the stricter limit, kMaxSearchTasks).
  const int M = static_cast<int>(kMaxSearchTasks / 6) + 1;  // 2 stages: 6 M tasks > the limit
  const Request request = c.request(M);
  const Finished finished = try_finish_plan("test", kTwoStages, request, schedule::Policy::kList);
  EXPECT_FALSE(finished.plan);
  EXPECT_EQ(finished.refusal, task_limit_refusal(2, M, false, kMaxSearchTasks).value_or("none"));
  EXPECT_EQ(finished.refusal, thrown(kTwoStages, request, schedule::Policy::kList));
  EXPECT_FALSE(task_limit_refusal(1, M, false, kMaxSearchTasks));  // one stage: 2 M tasks fit
  EXPECT_FALSE(task_limit_refusal(2, M));  // within the plan limit of a fixed configuration
}

TEST(FinishPlanTest, WhereItFitsThePlanIsFinishPlansOwn) {
  const Case c(1e12);
  const Request request = c.request(4);
  for (const Partition& partition : {kOneStage, kTwoStages}) {
    for (schedule::Policy policy : schedule::all_policies()) {
      if (schedule::policy_refusal(policy, partition.stages, request.micro_batches)) continue;
      const Finished finished = try_finish_plan("test", partition, request, policy);
      ASSERT_TRUE(finished.plan) << finished.refusal;
      EXPECT_TRUE(finished.refusal.empty());
      const Plan plan = finish_plan("test", partition, request, policy);
      EXPECT_EQ(report::plan_json_text(*finished.plan, c.model, c.topology),
                report::plan_json_text(plan, c.model, c.topology));
    }
  }
}

// A search's candidate (try_candidate_plan) refuses what try_finish_plan refuses, with the same
// message, and where it fits has the same decisions, times and peaks without the task lists;
// completed, it is the finished plan byte for byte, and the finished plan completed again is
// itself, whatever the request (complete_plan keeps a complete plan as it is). Seeded random models
// (half with split backwards and update steps), topologies with tight memories, one to three stages
// of one to two replicas, every policy that can run them.
TEST(FinishPlanTest, ACandidateCompletedIsTheFinishedPlan) {
  std::mt19937 rng(20261205);
  int fitted = 0, refused = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int L = 2 + static_cast<int>(rng() % 4), N = 2 + static_cast<int>(rng() % 5);
    model::Model model = random_v2_model(rng, L, 4e8, {1}, trial % 2 == 0);
    if (trial % 2 == 0) {
      for (model::Layer& layer : model.layers) layer.backward_weight_ms = layer.backward_ms / 3;
    }
    const topology::Topology topology = random_topology(rng, N, 1e9, 6e9);
    const int S = 1 + static_cast<int>(rng() % static_cast<unsigned>(std::min({3, L, N})));
    Partition partition;
    for (int s = 0, gpu = 0; s < S; ++s) {
      Stage stage;
      stage.first_layer = s;
      stage.last_layer = s + 1 == S ? L - 1 : s;  // the last stage takes the remaining layers
      stage.gpus = {gpu++};
      if (N - gpu > S - s - 1 && rng() % 2 == 0) stage.gpus.push_back(gpu++);
      partition.stages.push_back(stage);
    }
    for (int g = 0; g < N; ++g) partition.gpu_order.push_back(g);
    Request request{model, topology};
    request.micro_batches = 1 + static_cast<int>(rng() % 8);
    request.optimizer = trial % 3 == 0 ? Optimizer::kSharded : Optimizer::kReplicated;
    for (const schedule::Policy policy : schedule::all_policies()) {
      if (schedule::policy_refusal(policy, partition.stages, request.micro_batches)) continue;
      const Finished finished = try_finish_plan("test", partition, request, policy);
      const Candidate candidate = try_candidate_plan("test", partition, request, policy);
      ASSERT_EQ(candidate.sketch.has_value(), finished.plan.has_value());
      EXPECT_EQ(candidate.refusal, finished.refusal);
      if (!finished.plan) {
        ++refused;
        continue;
      }
      ++fitted;
      const Plan& sketch = *candidate.sketch;
      EXPECT_EQ(sketch.timeline.iteration_ms, finished.plan->timeline.iteration_ms);
      EXPECT_TRUE(sketch.timeline.compute.empty());
      EXPECT_TRUE(sketch.timeline.transfers.empty());
      ASSERT_EQ(sketch.timeline.gpus.size(), finished.plan->timeline.gpus.size());
      for (std::size_t g = 0; g < sketch.timeline.gpus.size(); ++g) {
        EXPECT_EQ(sketch.timeline.gpus[g].peak_memory_bytes,
                  finished.plan->timeline.gpus[g].peak_memory_bytes);
        EXPECT_EQ(sketch.timeline.gpus[g].busy_ms, finished.plan->timeline.gpus[g].busy_ms);
      }
      const std::string text = report::plan_json_text(*finished.plan, model, topology);
      EXPECT_EQ(report::plan_json_text(complete_plan(*candidate.sketch, request), model, topology),
                text)
          << "trial " << trial << " " << schedule::policy_name(policy);
      // A complete plan is completed as it is, not replayed again: even asked under the other
      // optimizer, whose replay would hold other bytes, it keeps its own.
      Request other = request;
      other.optimizer =
          request.optimizer == Optimizer::kSharded ? Optimizer::kReplicated : Optimizer::kSharded;
      EXPECT_EQ(report::plan_json_text(complete_plan(*finished.plan, other), model, topology),
                text);
    }
  }
  // Both sides of the property were exercised.
  EXPECT_GT(fitted, 40);
  EXPECT_GT(refused, 5);
}

}  // namespace
}  // namespace pipeplan::planners
