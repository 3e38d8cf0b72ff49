// The DP's estimate against the replay of its own best shape (issue 33 item 2): the objective of
// solve_several's best solution and the list schedule's replay of that same shape
// (try_finish_plan), on a pipeline worked out by hand and on seeded instances.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../support/builders.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::partition {
namespace {

using namespace pipeplan::testing;

struct Tracked {
  std::vector<Stage> stages;
  double estimate_ms = 0;
  double replay_ms = 0;
  [[nodiscard]] double error() const { return (estimate_ms - replay_ms) / replay_ms; }
  [[nodiscard]] bool equal_replicas() const {
    return std::all_of(stages.begin(), stages.end(), [&](const Stage& stage) {
      return stage.gpus.size() == stages.front().gpus.size();
    });
  }
};

// The DP's best solution on the identity order and its replay under the list schedule; nullopt
// when the DP finds nothing or the shape does not fit when replayed.
std::optional<Tracked> tracked(const model::Model& model, const topology::Topology& topology,
                               int micro_batches) {
  std::vector<int> order(topology.gpus().size());
  std::iota(order.begin(), order.end(), 0);
  const auto solutions = solve_several(model, topology, order, micro_batches, ScheduleModel{}, {});
  if (solutions.empty()) return std::nullopt;
  planners::Request request{model, topology};
  request.micro_batches = micro_batches;
  const planners::Finished finished =
      planners::try_finish_plan("test", planners::Partition{order, solutions.front().stages},
                                request, schedule::Policy::kList);
  if (!finished.plan) return std::nullopt;
  return Tracked{solutions.front().stages, solutions.front().objective.total_ms,
                 finished.plan->timeline.iteration_ms};
}

// Four layers of F = 1 ms and B = 2 ms, each 100 parameter bytes (400 static bytes at factor 4)
// on GPUs of 500 bytes: one layer per GPU, so the DP's only shape is 4 stages of 1 GPU. With
// M = 8 micro-batches, no activation bytes and links of 0 latency, the replay is the textbook
// pipeline (M + S - 1)(F + B) = 11 x 3 = 33 ms, and the DP's round trip S (F + B) = 12 plus
// (M - 1) (F + B) = 21 for the slowest stage give the same 33 ms.
TEST(DpTrackingTest, ABalancedPipelineIsEstimatedExactly) {
  const model::Model model =
      make_model({{1, 2, 0, 100, 0}, {1, 2, 0, 100, 0}, {1, 2, 0, 100, 0}, {1, 2, 0, 100, 0}});
  const topology::Topology topology = uniform_topology(4, 1e9, 0, {}, 500);
  const auto result = tracked(model, topology, 8);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(stages_text(result->stages), "0-0@0 1-1@1 2-2@2 3-3@3");
  EXPECT_DOUBLE_EQ(result->replay_ms, 33);
  EXPECT_DOUBLE_EQ(result->estimate_ms, 33);
}

// The error of the DP's closed form (round trip + (M - 1) x the slowest stage's steady state +
// the all-reduce tail) against the list schedule's replay of the same shape, on seeded
// instances: a one-stage shape is exact (the closed form is the replay); a pipeline is off both
// ways. Over its fill the replay can overlap less than the closed form assumes where memory
// bounds the stashes or replica groups of different sizes hand micro-batches to each other
// (underestimates, to -25% on these seeds), and the closed form charges every stage the whole
// round trip where unbalanced stages hide part of it (overestimates, to +25%). The bounds below
// are the measured spread (docs/decisions-dpfit.md): they pin it, they are not a target.
struct Spread {
  int one_stage = 0, pipelines = 0;
  double sum_abs = 0, low = 0, high = 0;
  void add(const Tracked& result) {
    if (result.stages.size() == 1) {
      ++one_stage;
      EXPECT_NEAR(result.estimate_ms, result.replay_ms, 1e-9 * result.replay_ms);
      return;
    }
    ++pipelines;
    sum_abs += std::abs(result.error());
    low = std::min(low, result.error());
    high = std::max(high, result.error());
  }
};

TEST(DpTrackingTest, RandomLayersTrackWithinTheMeasuredSpread) {
  std::mt19937 rng(33);
  Spread spread;
  for (int trial = 0; trial < 300; ++trial) {
    const int layers = 4 + static_cast<int>(rng() % 12);
    const int gpus = 2 + static_cast<int>(rng() % 7);
    const int micro_batches = 4 + static_cast<int>(rng() % 29);
    const model::Model model = random_model(rng, layers, 4e6);
    const double memory = 4e6 + static_cast<double>(rng() % 40) * 1e6;
    const topology::Topology topology = uniform_topology(gpus, 50e9, 0.01, {}, memory);
    const auto result = tracked(model, topology, micro_batches);
    if (!result) continue;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + stages_text(result->stages));
    spread.add(*result);
  }
  EXPECT_GE(spread.one_stage, 10);
  ASSERT_GE(spread.pipelines, 150);
  EXPECT_GE(spread.low, -0.3);
  EXPECT_LE(spread.high, 0.3);
  EXPECT_LE(spread.sum_abs / spread.pipelines, 0.08);  // measured 0.052
}

// Identical layers (a transformer's decoder blocks), memory forcing up to 16 stages.
TEST(DpTrackingTest, IdenticalLayersTrackWithinTheMeasuredSpread) {
  std::mt19937 rng(7);
  Spread spread;
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = 4 + static_cast<int>(rng() % 29);
    const int gpus = 2 + static_cast<int>(rng() % 15);
    const int micro_batches = 4 + static_cast<int>(rng() % 61);
    const double f = 1 + static_cast<double>(rng() % 10);
    const model::Model model =
        make_model(std::vector<L>(static_cast<std::size_t>(layers), L{f, 2 * f, 1e5, 1e5, 2e5}));
    const int per_gpu = 1 + static_cast<int>(rng() % static_cast<unsigned>(layers));
    const topology::Topology topology =
        uniform_topology(gpus, 10e9, 0.01, {}, per_gpu * 4e5 + 2.5e6);
    const auto result = tracked(model, topology, micro_batches);
    if (!result) continue;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + stages_text(result->stages));
    spread.add(*result);
  }
  EXPECT_GE(spread.one_stage, 10);
  ASSERT_GE(spread.pipelines, 150);
  EXPECT_GE(spread.low, -0.3);
  EXPECT_LE(spread.high, 0.15);
  EXPECT_LE(spread.sum_abs / spread.pipelines, 0.12);  // measured 0.080
}

}  // namespace
}  // namespace pipeplan::partition
