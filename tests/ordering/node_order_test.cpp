// The min-cut order of a node-cost topology (issue 33 item 2) is read from its nodes
// (`split_by_node` in src/ordering/mincut_order.cpp) instead of its n^2 pair weights: it must be
// the order the general algorithm finds on the same file's dense pair costs.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::ordering {
namespace {

topology::Topology read(const std::string& text, topology::PairLayout layout) {
  return topology::read_topology(io::source_from_text("topo.json", text), std::nullopt, layout);
}

// A random cluster without links of about `scale` GPUs: shorthand entries (some without a link,
// bandwidths drawn from a few values so that they tie with each other and with the network,
// sometimes slower than it, which needs a cut), then explicit GPUs joining those nodes or named
// nodes in random order (so a node's GPUs are not contiguous), and some GPUs of their own.
std::string random_cluster(std::mt19937& random, int scale) {
  auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  const char* bandwidths[] = {"25 GB/s", "150 GB/s", "12.5 GB/s", "25 GB/s", "300 GB/s"};
  const char* latencies[] = {"0 us", "2 us", "5 us", "2 us", "9 us"};
  auto link = [&] {
    return std::string(R"({"bandwidth": ")") + bandwidths[pick(0, 4)] + R"(", "latency": ")" +
           latencies[pick(0, 4)] + R"("})";
  };
  std::string text = R"({"nodes": [)";
  std::vector<std::string> node_names;
  const int entries = pick(1, 3);
  int gpus = 0;
  for (int e = 0; e < entries; ++e) {
    const std::string base(1, static_cast<char>('a' + e));
    const int per_node = pick(1, 8);
    const int count = pick(1, std::max(1, scale / per_node / entries));
    gpus += count * per_node;
    text += std::string(e ? ", " : "") + R"({"name": ")" + base + R"(", "count": )" +
            std::to_string(count) + R"(, "gpus": )" + std::to_string(per_node) + R"(, "speed": 1)";
    if (pick(0, 4) != 0) text += R"(, "link": )" + link();
    text += "}";
    for (int i = 0; i < count; ++i)
      node_names.push_back(count == 1 ? base : base + std::to_string(i));
  }
  text += R"(], "network": )" + link() + R"(, "gpus": [)";
  const int extra = pick(0, std::max(0, std::min(40, scale - gpus)));
  for (int g = 0; g < extra; ++g) {
    text += std::string(g ? ", " : "") + R"({"id": "x)" + std::to_string(g) + R"(", "speed": 1)";
    const int kind = pick(0, 3);
    if (kind == 1 || kind == 2) {
      const auto at = static_cast<std::size_t>(pick(0, static_cast<int>(node_names.size()) - 1));
      text += R"(, "node": ")" + node_names[at] + "\"";
    }
    if (kind == 3) text += R"(, "node": "box)" + std::to_string(pick(0, 2)) + "\"";
    text += "}";
  }
  return text + "]}";
}

TEST(NodeOrderTest, NodeCostTopologiesOrderAsTheGeneralAlgorithm) {
  std::mt19937 random(33);
  int compared = 0, largest = 0;
  for (int trial = 0; trial < 108; ++trial) {
    const int scale = trial < 100 ? 4 + trial * 3 : 1024;
    const std::string text = random_cluster(random, scale);
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
