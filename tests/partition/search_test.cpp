#include "pipeplan/partition/search.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "../support/builders.hpp"
#include "../support/enumerate.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

using namespace pipeplan::testing;

TEST(SearchTest, CountsAndEnumeratesEveryShape) {
  for (int L = 1; L <= 6; ++L) {
    for (int N = 1; N <= 5; ++N) {
      for (int R = 1; R <= N; ++R) {
        for (int S = 1; S <= 6; ++S) {
          SCOPED_TRACE(std::to_string(L) + " " + std::to_string(N) + " " + std::to_string(R) + " " +
                       std::to_string(S));
          std::vector<int> order(static_cast<std::size_t>(N));
          std::iota(order.rbegin(), order.rend(), 0);
          const ShapeLimits limits{L, R, S};
          int shapes = 0, plans = 0;
          for_each_shape(limits, order, [&](const std::vector<Stage>&) { ++shapes; });
          for_each_plan(L, order, R, S, [&](const std::vector<Stage>&) { ++plans; });
          EXPECT_EQ(shapes, plans);
          EXPECT_EQ(count_shapes(limits, N), static_cast<double>(plans));
        }
      }
    }
  }
}

TEST(SearchTest, NeighboursAreValidShapes) {
  std::mt19937 rng(7);
  const model::Model model = random_model(rng, 9, 1e6);
  const topology::Topology topology = uniform_topology(7, 10e9, 0.01);
  const std::vector<int> order{6, 5, 4, 3, 2, 1, 0};
  const ShapeLimits limits{9, 3, 4};
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<Stage> start = random_shape(rng, order, limits);
    ASSERT_NO_THROW(simulate::check_stages(model, topology, start));
    const auto around = neighbours(model, start, order, limits);
    EXPECT_FALSE(around.empty());
    for (const auto& stages : around) {
      ASSERT_NO_THROW(simulate::check_stages(model, topology, stages)) << stages_text(stages);
      EXPECT_LE(static_cast<int>(stages.size()), limits.max_stages);
      for (const Stage& stage : stages)
        EXPECT_LE(static_cast<int>(stage.gpus.size()), limits.max_replicas);
    }
  }
}

TEST(SearchTest, GreedyPackingNeedsTheFewestGpus) {
  // Greedy is optimal for contiguous one-GPU-per-stage packing along an order: compare it with
  // the fewest stages of every such packing that fits.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 7);
    const model::Model model = random_model(rng, L, 4e6);
    const topology::Topology topology =
        uniform_topology(6, 10e9, 0.01, {}, 4e6 + 4e6 * (rng() % 4));
    const std::vector<int> order{0, 1, 2, 3, 4, 5};
    int fewest = 0;
    for_each_plan(L, order, 1, 6, [&](const std::vector<Stage>& stages) {
      for (const Stage& stage : stages) {
        double w = 0, y = 0;
        for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
          w += model.layers[static_cast<std::size_t>(l)].parameter_bytes;
          y += model.layers[static_cast<std::size_t>(l)].stash_bytes;
        }
        if (simulate::max_in_flight(4 * w, y, topology.gpu(stage.gpus[0]).memory_bytes, 1) < 1)
          return;
      }
      const int S = static_cast<int>(stages.size());
      if (fewest == 0 || S < fewest) fewest = S;
    });
    int needed = 0;
    const auto packed = greedy_packing(model, topology, order, 1, 6, &needed);
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_EQ(packed.has_value(), fewest > 0);
    if (packed) {
      EXPECT_EQ(static_cast<int>(packed->size()), fewest);
    }
  }
}

}  // namespace
}  // namespace pipeplan::partition
