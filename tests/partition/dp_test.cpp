#include "pipeplan/partition/dp.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "../support/builders.hpp"
#include "../support/enumerate.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

using namespace pipeplan::testing;

// Every plan the DP may choose: contiguous layer ranges on consecutive runs of `order`
// from its first GPU, 1 <= r <= M replicas each. Returns the smallest objective.
std::optional<double> brute_force(const model::Model& model, const topology::Topology& topology,
                                  const std::vector<int>& order, int M, int* plans_seen,
                                  const ScheduleModel& schedule = {}) {
  std::optional<double> best;
  for_each_plan(static_cast<int>(model.layers.size()), order, M, 1 << 30,
                [&](const std::vector<Stage>& stages) {
                  ++*plans_seen;
                  auto value = objective(model, topology, stages, M, schedule);
                  if (value && (!best || value->total_ms < *best)) best = value->total_ms;
                });
  return best;
}

TEST(DpTest, EqualsExhaustiveSearchOnRandomInstances) {
  std::mt19937 rng(20221);
  int instances = 0, infeasible = 0, plans = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 7);
    const int N = 1 + static_cast<int>(rng() % 5);
    const int M = 1 + static_cast<int>(rng() % 8);
    model::Model model = random_model(rng, L, 4e6);
    topology::Topology topology = random_topology(rng, N, 2e6, 40e6);
    std::vector<int> order(static_cast<std::size_t>(N));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    // A third of the instances plan for the fixed orders (round robin, stashes that must fit).
    ScheduleModel schedule;
    if (trial % 3 == 1) schedule = {true, 1 + static_cast<long>(rng() % 4)};
    auto expected = brute_force(model, topology, order, M, &plans, schedule);
    auto solution = solve(model, topology, order, M, schedule);
    ++instances;
    ASSERT_EQ(expected.has_value(), solution.has_value()) << "trial " << trial;
    if (!expected) {
      ++infeasible;
      continue;
    }
    EXPECT_NEAR(solution->objective.total_ms, *expected, 1e-9 * *expected) << "trial " << trial;
    // The stages it returns have exactly the value it reports.
    auto check = objective(model, topology, solution->stages, M, schedule);
    ASSERT_TRUE(check.has_value());
    EXPECT_DOUBLE_EQ(check->total_ms, solution->objective.total_ms) << "trial " << trial;
    EXPECT_NO_THROW(simulate::check_stages(model, topology, solution->stages));
  }
  EXPECT_EQ(instances, 240);
  EXPECT_GT(plans, 5000);                // the oracle really searched
  EXPECT_LT(infeasible, instances / 3);  // and most instances had a plan
}

TEST(DpTest, ObjectiveByHand) {
  // Two stages f+b = 3 and 9 at speed 1, boundary 1 MB over 1 GB/s (c = 1 ms), M = 4.
  model::Model model = make_model({{1, 2, 1e6, 0, 0}, {3, 6, 0, 0, 0}});
  topology::Topology topology = uniform_topology(2, 1e9, 0);
  auto value = objective(model, topology, {{0, 0, {0}}, {1, 1, {1}}}, 4);
  ASSERT_TRUE(value.has_value());
  EXPECT_DOUBLE_EQ(value->latency_ms, 3 + 2 * 1 + 9);  // one micro-batch's round trip
  EXPECT_DOUBLE_EQ(value->excess_ms, 3 * 9);           // the slow stage's other 3 micro-batches
  EXPECT_DOUBLE_EQ(value->tail_ms, 0);
  EXPECT_DOUBLE_EQ(value->total_ms, 14 + 27);
}

TEST(DpTest, AllReduceTailIsHiddenByTheDrain) {
  // Stage 1 is replicated and has 1 GB of parameters: its AllReduce (1000 ms over 1 GB/s)
  // starts once its last backward ends, and overlaps the drain of stage 0 (c + B_0).
  model::Model model = make_model({{1, 100, 1e6, 0, 0}, {3, 6, 0, 1e9, 0}});
  topology::Topology topology = uniform_topology(3, 1e9, 0);
  auto value = objective(model, topology, {{0, 0, {0}}, {1, 1, {1, 2}}}, 4);
  ASSERT_TRUE(value.has_value());
  EXPECT_DOUBLE_EQ(value->tail_ms, 1000 - (1 + 100));
}

TEST(DpTest, MemoryDecidesFeasibility) {
  // 4 x 10 MB of parameters plus 1 MB of stash per layer: a 48 MB GPU holds one layer with
  // up to 8 stashes, not two layers.
  model::Model model = make_model({{1, 1, 0, 10e6, 1e6}, {1, 1, 0, 10e6, 1e6}});
  topology::Topology one = uniform_topology(1, 1e9, 0, {}, 48e6);
  EXPECT_FALSE(solve(model, one, {0}, 4).has_value());
  topology::Topology two = uniform_topology(2, 1e9, 0, {}, 48e6);
  auto solution = solve(model, two, {0, 1}, 4);
  ASSERT_TRUE(solution.has_value());
  EXPECT_EQ(solution->stages.size(), 2u);
}

TEST(DpTest, ShallowPipelinesWhenMicroBatchesAreFew) {
  // One micro-batch: splitting only adds transfers, so a single GPU is best.
  model::Model model = make_model({{1, 2, 1e6, 0, 0}, {1, 2, 1e6, 0, 0}, {1, 2, 0, 0, 0}});
  topology::Topology topology = uniform_topology(3, 1e9, 0.01);
  auto solution = solve(model, topology, {0, 1, 2}, 1);
  ASSERT_TRUE(solution.has_value());
  EXPECT_EQ(solution->stages.size(), 1u);
  EXPECT_EQ(solution->stages[0].gpus.size(), 1u);
  // Many micro-batches: without parameters, data parallelism costs nothing extra and wins;
  // with 1 GB of parameters per layer its AllReduce (4 s) does not, and a pipeline does.
  auto wide = solve(model, topology, {0, 1, 2}, 32);
  ASSERT_TRUE(wide.has_value());
  EXPECT_EQ(wide->stages.size(), 1u);
  EXPECT_EQ(wide->stages[0].gpus.size(), 3u);
  model::Model heavy = make_model({{1, 2, 1e6, 1e9, 0}, {1, 2, 1e6, 1e9, 0}, {1, 2, 0, 1e9, 0}});
  auto deep = solve(heavy, topology, {0, 1, 2}, 32);
  ASSERT_TRUE(deep.has_value());
  EXPECT_EQ(deep->stages.size(), 3u);
}

TEST(DpTest, PassesBeyondTheirWorkRetryOnACoarserGrid) {
  // 160 layers on 32 GPUs, M = 16: a grid of units of 2 GPUs, within the budget. With no
  // work allowed, every pass gives up until the grid can be no coarser, which then runs to
  // the end: a valid plan, evaluated consistently, no better than the finer grid's.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> jitter(0.7, 1.3);
  std::vector<L> layers;
  for (int l = 0; l < 160; ++l) {
    layers.push_back(L{2 * jitter(rng), 4 * jitter(rng), 8e6 * jitter(rng), 25e6, 16e6});
  }
  const model::Model model = make_model(layers);
  const topology::Topology topology = uniform_topology(32, 25e9, 0.005);
  std::vector<int> order(32);
  std::iota(order.begin(), order.end(), 0);
  const auto fine = solve(model, topology, order, 16);
  const auto coarse = solve(model, topology, order, 16, {}, false, 0);
  ASSERT_TRUE(fine.has_value());
  ASSERT_TRUE(coarse.has_value());
  EXPECT_GE(coarse->objective.total_ms, fine->objective.total_ms * (1 - 1e-12));
  EXPECT_EQ(coarse->stages.front().first_layer, 0);
  EXPECT_EQ(coarse->stages.back().last_layer, 159);
  const auto evaluated = objective(model, topology, coarse->stages, 16);
  ASSERT_TRUE(evaluated.has_value());
  EXPECT_NEAR(evaluated->total_ms, coarse->objective.total_ms, 1e-9 * coarse->objective.total_ms);
  EXPECT_EQ(fine->grid_unit, 2);
  EXPECT_EQ(fine->grid_blocks, 160);
  EXPECT_EQ(coarse->grid_unit, 4);  // the grid of a quarter of the budget
  for (const auto& stage : coarse->stages) EXPECT_EQ(stage.gpus.size() % 4, 0u);
  // Deterministic.
  const auto again = solve(model, topology, order, 16, {}, false, 0);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->objective.total_ms, coarse->objective.total_ms);
}

TEST(DpTest, FewestStagesForStaticBytesByHand) {
  // Four layers of 1e9 parameter bytes, phi = 4: 4e9 static bytes each; 10e9 GPUs hold two.
  const model::Model model = make_model(std::vector<L>(4, L{1, 2, 1e3, 1e9, 1e6}));
  const std::vector<int> order{0, 1, 2, 3};
  EXPECT_EQ(
      fewest_stages_for_static_bytes(model, uniform_topology(4, 10e9, 0.01, {}, 10e9), order, {1}),
      2);
  // Sharded over unboundedly many replicas: phi - phi_sh = 2 bytes per byte, five fit in 10e9.
  EXPECT_EQ(fewest_stages_for_static_bytes(model, uniform_topology(4, 10e9, 0.01, {}, 10e9), order,
                                           {1}, Optimizer::kSharded),
            1);
  // No layer fits a 3e9 GPU; a GPU without a limit gives no bound; no degree, no plan.
  EXPECT_EQ(
      fewest_stages_for_static_bytes(model, uniform_topology(4, 10e9, 0.01, {}, 3e9), order, {1}),
      -1);
  EXPECT_EQ(fewest_stages_for_static_bytes(model, uniform_topology(4, 10e9, 0.01), order, {1}), 0);
  EXPECT_EQ(
      fewest_stages_for_static_bytes(model, uniform_topology(4, 10e9, 0.01, {}, 10e9), order, {}),
      -1);
}

TEST(DpTest, FewestStagesForStaticBytesIsALowerBound) {
  // Every plan that fits (one stash beside its static bytes, as the list schedule needs) has at
  // least the bound's stages (the DP skips a grid with room for fewer, docs/algorithms.md).
  std::mt19937 rng(31);
  int bounded = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 7);
    const model::Model model = random_model(rng, L, 4e6);
    const double memory = 4e6 + 4e6 * static_cast<double>(rng() % 6);
    const topology::Topology topology = uniform_topology(5, 10e9, 0.01, {}, memory);
    const std::vector<int> order{0, 1, 2, 3, 4};
    const int bound = fewest_stages_for_static_bytes(model, topology, order, {1});
    SCOPED_TRACE("trial " + std::to_string(trial) + ", bound " + std::to_string(bound));
    const int fewest = fewest_fitting_stages(model, order, 2, 5, memory);
    if (bound < 0) {
      EXPECT_EQ(fewest, 0);  // nothing fits
    } else if (fewest > 0) {
      EXPECT_LE(bound, fewest);
      if (bound > 1) ++bounded;
    }
  }
  EXPECT_GT(bounded, 10);  // the bound says something
}

}  // namespace
}  // namespace pipeplan::partition
