// "Does not fit" as a value: try_finish_plan (and try_make_schedule below it) return the
// refusal finish_plan throws, with the same message, and the same plan where it fits.

#include <gtest/gtest.h>

#include <string>

#include "../support/builders.hpp"
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

}  // namespace
}  // namespace pipeplan::planners
