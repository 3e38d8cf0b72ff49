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
#include "pipeplan/io/files.hpp"
#include "pipeplan/model/transformer.hpp"
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

// The DP's best solution on the identity order and its replay under the list schedule, the
// fastest of its rules as spp's last step keeps it (schedule::ListRule: two priorities, two
// replica loads); nullopt when the DP finds nothing or the shape does not fit when replayed.
std::optional<Tracked> tracked(const model::Model& model, const topology::Topology& topology,
                               int micro_batches, const SolveOptions& options = {}) {
  std::vector<int> order(topology.gpus().size());
  std::iota(order.begin(), order.end(), 0);
  const auto solutions =
      solve_several(model, topology, order, micro_batches, ScheduleModel{}, options);
  if (solutions.empty()) return std::nullopt;
  planners::Request request{model, topology};
  request.micro_batches = micro_batches;
  std::optional<double> replay;
  std::vector<schedule::ListRule> rules{schedule::ListRule{}};
  rules.insert(rules.end(), schedule::other_list_rules().begin(),
               schedule::other_list_rules().end());
  for (const schedule::ListRule& rule : rules) {
    request.list_rule = rule;
    const planners::Finished finished =
        planners::try_finish_plan("test", planners::Partition{order, solutions.front().stages},
                                  request, schedule::Policy::kList);
    if (!finished.plan) return std::nullopt;
    replay = std::min(replay.value_or(finished.plan->timeline.iteration_ms),
                      finished.plan->timeline.iteration_ms);
  }
  return Tracked{solutions.front().stages, solutions.front().objective.total_ms, *replay};
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

// The same pipeline, every stage recomputing, each layer's backward holding 0.5 ms of forward work
// that it recomputes itself (selective recomputation's attention core): a recomputing stage runs
// F + (B - 0.5) + F = 3.5 ms a micro-batch, and the DP's estimate is the replay's 11 x 3.5.
TEST(DpTrackingTest, ARecomputingPipelineIsEstimatedExactly) {
  model::Model model =
      make_model({{1, 2, 0, 100, 0}, {1, 2, 0, 100, 0}, {1, 2, 0, 100, 0}, {1, 2, 0, 100, 0}});
  for (model::Layer& layer : model.layers) layer.backward_recompute_ms = 0.5;
  const topology::Topology topology = uniform_topology(4, 1e9, 0, {}, 500);
  SolveOptions options;
  options.choices.must_recompute = true;
  const auto result = tracked(model, topology, 8, options);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(stages_text(result->stages), "0-0@0 1-1@1 2-2@2 3-3@3");
  EXPECT_DOUBLE_EQ(result->replay_ms, 38.5);
  EXPECT_DOUBLE_EQ(result->estimate_ms, 38.5);
}

// The DP's solutions (up to 16) for `model` on the identity order of `topology`.
std::vector<Solution> proposals(const model::Model& model, const topology::Topology& topology,
                                int micro_batches) {
  std::vector<int> order(topology.gpus().size());
  std::iota(order.begin(), order.end(), 0);
  SolveOptions options;
  options.solutions = 16;
  return solve_several(model, topology, order, micro_batches, ScheduleModel{}, options);
}

// A model whose stages memory makes many: 96 layers of F = 1 ms and B = 2 ms, 400 static bytes
// each, on 256 GPUs of 1,700 bytes (four layers a GPU: at least 24 stages), M = 256, links of
// no latency (the all-reduces over 1e12 bytes/s add under a nanosecond). The grid's runs are
// units of 16 GPUs (16 positions): nothing fits. On units of 8 GPUs (32 positions) the best
// plan is 32 stages of 3 layers, each on 8 GPUs, 32 micro-batches a replica: the textbook
// pipeline (M / r + S - 1)(F + B) = (32 + 31) x 9 = 567 ms, which the DP estimates and the list
// schedule replays. Runs of single GPUs are at most 4 GPUs long within the budget (96^2 blocks
// x 256 positions x lengths^2), so their best plans are slower (666 ms, 80 stages): until
// 2026-12-06 they were all the DP proposed here.
TEST(DpTrackingTest, AMemoryTightModelGetsTheCoarsestNarrowerUnitThatHoldsIt) {
  const model::Model model = make_model(std::vector<L>(96, L{1, 2, 0, 100, 0}));
  const topology::Topology topology = uniform_topology(256, 1e12, 0, {}, 1700);
  const std::vector<Solution> solutions = proposals(model, topology, 256);
  ASSERT_GE(solutions.size(), 2U);
  EXPECT_EQ(solutions.front().grid_unit, 8);
  EXPECT_EQ(solutions.front().stages.size(), 32U);
  for (const Stage& stage : solutions.front().stages) {
    EXPECT_EQ(stage.gpus.size(), 8U);
    EXPECT_EQ(stage.last_layer - stage.first_layer, 2);
  }
  EXPECT_NEAR(solutions.front().objective.total_ms, 567, 1e-5);
  EXPECT_EQ(solutions.back().grid_unit, 1);
  EXPECT_GT(solutions.back().objective.total_ms, 567);
  const auto result = tracked(model, topology, 256);
  ASSERT_TRUE(result.has_value());
  EXPECT_NEAR(result->replay_ms, 567, 1e-5);
}

// The same layers, 34 of them (at least 17 stages) on 256 GPUs of 900 bytes (two layers a GPU):
// runs of single GPUs (up to 16 long) hold 16 stages of 2 layers on 15 GPUs (18 micro-batches
// of 6 ms on the busiest replica) and 2 stages of 1 layer on 8: the round trip 16 x 6 + 2 x 3 =
// 102 ms plus 17 more micro-batches of 6 ms, 204 ms, estimated and replayed. Units of 8 GPUs
// leave some stage a single unit (17 stages x 2 units > 32): their plans are slower and come
// after, as the DP proposed before units between were tried.
TEST(DpTrackingTest, RunsOfSingleGpusStayFirstWhereTheyAreBetter) {
  const model::Model model = make_model(std::vector<L>(34, L{1, 2, 0, 100, 0}));
  const topology::Topology topology = uniform_topology(256, 1e12, 0, {}, 900);
  const std::vector<Solution> solutions = proposals(model, topology, 256);
  ASSERT_FALSE(solutions.empty());
  EXPECT_EQ(solutions.front().grid_unit, 1);
  EXPECT_NEAR(solutions.front().objective.total_ms, 204, 1e-5);
  EXPECT_TRUE(std::any_of(solutions.begin(), solutions.end(),
                          [](const Solution& solution) { return solution.grid_unit == 8; }));
  for (const Solution& solution : solutions)
    EXPECT_GE(solution.objective.total_ms, solutions.front().objective.total_ms);
  const auto result = tracked(model, topology, 256);
  ASSERT_TRUE(result.has_value());
  EXPECT_NEAR(result->replay_ms, 204, 1e-5);
}

// Issue 33 item 8's case: GPT-3 175B as its preset describes it (no sequence parallelism, no
// selective recomputation) with a replicated optimizer on 64 DGX A100 80GB nodes, M = 1,536,
// every tensor-parallel degree and recomputation per stage open, as spp asks. The grid's units
// of 128 GPUs leave 4 positions, where no stage fits; runs of single GPUs alone proposed 54
// one-GPU stages the DP estimated at 431 s and the list schedule replayed at 1,778 s (-76 %).
// Units of 64 GPUs hold 8 stages of 8-way tensor-parallel groups, estimated within a few
// percent of their replay (+1.0 % measured).
TEST(DpTrackingTest, Gpt3With175BOn512A100sIsProposedOnUnitsThatHoldIt) {
  const model::Model model = described_model(model::find_transformer_preset("gpt3-175b")->config);
  const topology::Topology topology = topology::read_topology(
      io::source_from_text(
          "topo.json", R"({"nodes": [{"name": "node", "count": 64, "type": "dgx-a100-80gb"}]})"),
      model.profile_device);
  std::vector<int> order(topology.gpus().size());
  std::iota(order.begin(), order.end(), 0);
  SolveOptions options;
  options.choices.degrees = {1, 2, 4, 8};
  options.choices.may_recompute = true;
  options.solutions = 8;
  const int M = 1536;
  const auto solutions = solve_several(model, topology, order, M, ScheduleModel{}, options);
  ASSERT_FALSE(solutions.empty());
  const Solution& best = solutions.front();
  EXPECT_EQ(best.grid_unit, 64);
  EXPECT_LE(best.stages.size(), 8U);
  planners::Request request{model, topology};
  request.micro_batches = M;
  const planners::Finished finished = planners::try_finish_plan(
      "test", planners::Partition{order, best.stages}, request, schedule::Policy::kList);
  ASSERT_TRUE(finished.plan.has_value());
  const double replay = finished.plan->timeline.iteration_ms;
  EXPECT_NEAR(best.objective.total_ms / replay, 1, 0.03)
      << best.objective.total_ms << " " << replay;
  EXPECT_LT(replay, 60e3);
}

// The error of the DP's closed form (round trip + (M - 1) x the slowest stage's steady state +
// the all-reduce tail) against the list schedule's replay of the same shape, on seeded
// instances: a one-stage shape is exact (the closed form is the replay); a pipeline is off both
// ways. Over its fill the replay can overlap less than the closed form assumes where memory
// bounds the stashes or replica groups of different sizes hand micro-batches to each other
// (underestimates, to -16% on these seeds with the list scheduler's best rule; -19% before the
// replicas' per-task load, -25% backward-first alone), and the closed form charges every stage the
// whole round trip where unbalanced stages hide part of it (overestimates, to +25%). The bounds
// below are the measured spread (docs/decisions.md, "The DP's estimate against its own replay"):
// they pin it, they are not a target.
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
  EXPECT_GE(spread.low, -0.18);  // measured -0.161 (-0.166 without the per-task load, -0.22
                                 // backward-first alone)
  EXPECT_LE(spread.high, 0.3);   // measured 0.254
  EXPECT_LE(spread.sum_abs / spread.pipelines, 0.04);  // measured 0.037 (0.042, 0.052)
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
  EXPECT_GE(spread.low, -0.17);  // measured -0.145 (-0.190 without the per-task load, -0.250
                                 // backward-first alone)
  EXPECT_LE(spread.high, 0.15);  // measured 0.111
  EXPECT_LE(spread.sum_abs / spread.pipelines, 0.05);  // measured 0.044 (0.056, 0.080)
}

}  // namespace
}  // namespace pipeplan::partition
