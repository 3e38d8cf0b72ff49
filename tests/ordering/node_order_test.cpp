// The min-cut order of a node-cost topology (issue 33 item 2) is read from its nodes
// (`split_by_node` in src/ordering/mincut_order.cpp) instead of its n^2 pair weights: it must be
// the order the general algorithm finds on the same file's dense pair costs.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../support/random_clusters.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::ordering {
namespace {

topology::Topology read(const std::string& text, topology::PairLayout layout) {
  return topology::read_topology(io::source_from_text("topo.json", text), std::nullopt, layout);
}

TEST(NodeOrderTest, NodeCostTopologiesOrderAsTheGeneralAlgorithm) {
  std::mt19937 random(33);
  int compared = 0, largest = 0;
  for (int trial = 0; trial < 108; ++trial) {
    const int scale = trial < 100 ? 4 + trial * 3 : 1024;
    const std::string text = testing::random_cluster(random, scale);
    topology::Topology by_node, dense;
    try {
      dense = read(text, topology::PairLayout::kDense);
    } catch (const InputError&) {
      continue;  // a lone node without a link: not connected
    }
    by_node = read(text, topology::PairLayout::kAuto);
    ASSERT_TRUE(by_node.costs_by_node());
    // The default budget, none (the spanning tree wherever a cut is needed) and a small one.
    for (double max_work : {kMaxOrderWork, 0.0, 2e4}) {
      OrderStats fast_stats, general_stats;
      EXPECT_EQ(mincut_order(by_node, &fast_stats, max_work),
                mincut_order(dense, &general_stats, max_work))
          << "budget " << max_work << ": " << text;
      EXPECT_EQ(fast_stats.spanning_tree_gpus, general_stats.spanning_tree_gpus);
    }
    ++compared;
    largest = std::max(largest, dense.size());
  }
  EXPECT_GE(compared, 100);
  EXPECT_GE(largest, 500);  // 825 GPUs with this seed
}

TEST(NodeOrderTest, ACatalogueClusterOfTheLargestSizeKeepsItsNodesInOrder) {
  // 16,384 dgx-h100 nodes: NVLink inside (369 GB/s) is faster than the network (46 GB/s), so
  // the nodes are the components, each uniform: the input order, found from the nodes in
  // O(N log N) (the weights would take 68 GB).
  const topology::Topology topology =
      read(R"({"nodes": [{"name": "n", "count": 16384, "type": "dgx-h100", "speed": 1}]})",
           topology::PairLayout::kAuto);
  OrderStats stats;
  const std::vector<int> order = mincut_order(topology, &stats);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(topology::kMaxNodeGpus));
  for (int g = 0; g < topology::kMaxNodeGpus; ++g) ASSERT_EQ(order[static_cast<std::size_t>(g)], g);
  EXPECT_EQ(stats.spanning_tree_gpus, 0U);
}

}  // namespace
}  // namespace pipeplan::ordering
