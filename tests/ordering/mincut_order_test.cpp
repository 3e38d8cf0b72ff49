#include "pipeplan/ordering/mincut_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "../support/builders.hpp"

namespace pipeplan::ordering {
namespace {

using namespace pipeplan::testing;

// Whether the GPUs whose id starts with `prefix` form one contiguous run of `order`.
bool contiguous(const topology::Topology& topology, const std::vector<int>& order,
                const std::string& prefix) {
  int first = -1, last = -1, count = 0;
  for (int p = 0; p < static_cast<int>(order.size()); ++p) {
    if (topology.gpu(order[static_cast<std::size_t>(p)]).id.rfind(prefix, 0) != 0) continue;
    if (first < 0) first = p;
    last = p;
    ++count;
  }
  return count > 0 && last - first + 1 == count;
}

bool is_permutation_of_all(const std::vector<int>& order, int n) {
  std::set<int> seen(order.begin(), order.end());
  return static_cast<int>(order.size()) == n && static_cast<int>(seen.size()) == n;
}

TEST(MincutOrderTest, ServersStayContiguous) {
  // Two servers of eight GPUs on NVLink (150 GB/s), joined by a 25 GB/s network, listed
  // interleaved so that the input order mixes them. A plain minimum cut would cut off one
  // GPU: 7 x 150 + 8 x 25 = 1250 weighs less than the 64 x 25 = 1600 between the servers.
  std::vector<std::string> ids;
  for (int j = 0; j < 8; ++j) {
    ids.push_back("a/gpu" + std::to_string(j));
    ids.push_back("b/gpu" + std::to_string(j));
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < 16; ++u) {
    for (int v = u + 1; v < 16; ++v) {
      const bool same = ids[static_cast<std::size_t>(u)][0] == ids[static_cast<std::size_t>(v)][0];
      links.push_back({u, v, same ? 150e9 : 25e9, same ? 0.002 : 0.01});
    }
  }
  topology::Topology topology = linked_topology(ids, links);
  std::vector<int> order = mincut_order(topology);
  ASSERT_TRUE(is_permutation_of_all(order, 16));
  EXPECT_TRUE(contiguous(topology, order, "a/"));
  EXPECT_TRUE(contiguous(topology, order, "b/"));
}

// A DGX-1 (V100) hybrid cube-mesh: quads 0-3 and 4-7, NVLink pairs with one (25 GB/s) or two
// (50 GB/s) links as `nvidia-smi topo -m` shows them, and the remaining pairs over PCIe/QPI.
topology::Topology dgx1() {
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back("gpu" + std::to_string(i));
  const int nv[8][8] = {{0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0},
                        {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
                        {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
                        {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};
  std::vector<topology::Link> links;
  for (int u = 0; u < 8; ++u) {
    for (int v = u + 1; v < 8; ++v) {
      EXPECT_EQ(nv[u][v], nv[v][u]);
      links.push_back({u, v, nv[u][v] == 0 ? 10e9 : 25e9 * nv[u][v], nv[u][v] == 0 ? 0.02 : 0.003});
    }
  }
  return linked_topology(ids, links);
}

TEST(MincutOrderTest, DgxHybridCubeMeshSplitsIntoQuads) {
  topology::Topology topology = dgx1();
  std::vector<int> order = mincut_order(topology);
  ASSERT_TRUE(is_permutation_of_all(order, 8));
  std::set<int> first(order.begin(), order.begin() + 4);
  EXPECT_TRUE(first == std::set<int>({0, 1, 2, 3}) || first == std::set<int>({4, 5, 6, 7}))
      << "first half: " << *first.begin();
  // Neighbours in the order are NVLink-connected everywhere (no PCIe hop inside the order).
  for (std::size_t p = 0; p + 1 < order.size(); ++p) {
    EXPECT_GE(topology.bandwidth_bytes_per_s(order[p], order[p + 1]), 25e9) << "position " << p;
  }
  // The quad split is a strictly better ratio cut than cutting off one GPU (they tie as
  // plain cuts once the PCIe background is subtracted).
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_LT(ratio_cut(topology, all, {true, true, true, true, false, false, false, false}),
            ratio_cut(topology, all, {true, false, false, false, false, false, false, false}));
}

TEST(MincutOrderTest, ChainKeepsChainOrder) {
  // A - B - C - D with equal links, listed as C, A, D, B: every pair has the same bottleneck
  // bandwidth, so the latencies (hops) decide.
  topology::Topology topology = linked_topology(
      {"C", "A", "D", "B"}, {{1, 3, 10e9, 0.01}, {3, 0, 10e9, 0.01}, {0, 2, 10e9, 0.01}});
  std::vector<int> order = mincut_order(topology);
  std::string names;
  for (int g : order) names += topology.gpu(g).id;
  EXPECT_TRUE(names == "ABCD" || names == "DCBA") << names;
}

TEST(MincutOrderTest, ChainOfDifferentLinksKeepsChainOrder) {
  topology::Topology topology = linked_topology(
      {"D", "B", "A", "C"}, {{2, 1, 100e9, 0.001}, {1, 3, 10e9, 0.001}, {3, 0, 50e9, 0.001}});
  std::vector<int> order = mincut_order(topology);
  std::string names;
  for (int g : order) names += topology.gpu(g).id;
  EXPECT_TRUE(names == "ABCD" || names == "DCBA") << names;
}

TEST(MincutOrderTest, IsDeterministic) {
  topology::Topology topology = dgx1();
  EXPECT_EQ(mincut_order(topology), mincut_order(topology));
}

TEST(MincutOrderTest, UniformGroupsKeepInputOrder) {
  topology::Topology topology = uniform_topology(5, 10e9, 0.01);
  EXPECT_EQ(mincut_order(topology), (std::vector<int>{0, 1, 2, 3, 4}));
  topology::Topology single = uniform_topology(1, 10e9, 0.01);
  EXPECT_EQ(mincut_order(single), (std::vector<int>{0}));
}

TEST(MincutOrderTest, ThreeLevelHierarchy) {
  // 2 racks x 2 nodes x 2 GPUs: NVLink 100, rack network 20, between racks 5 GB/s.
  std::vector<std::string> ids;
  for (int rack = 0; rack < 2; ++rack)
    for (int node = 0; node < 2; ++node)
      for (int gpu = 0; gpu < 2; ++gpu)
        ids.push_back("r" + std::to_string(rack) + "n" + std::to_string(node) + "g" +
                      std::to_string(gpu));
  std::reverse(ids.begin(), ids.end());
  std::vector<topology::Link> links;
  for (int u = 0; u < 8; ++u) {
    for (int v = u + 1; v < 8; ++v) {
      const auto& a = ids[static_cast<std::size_t>(u)];
      const auto& b = ids[static_cast<std::size_t>(v)];
      const double bw = a.substr(0, 4) == b.substr(0, 4)   ? 100e9
                        : a.substr(0, 2) == b.substr(0, 2) ? 20e9
                                                           : 5e9;
      links.push_back({u, v, bw, 0.005});
    }
  }
  topology::Topology topology = linked_topology(ids, links);
  std::vector<int> order = mincut_order(topology);
  for (const char* prefix : {"r0", "r1", "r0n0", "r0n1", "r1n0", "r1n1"}) {
    EXPECT_TRUE(contiguous(topology, order, prefix)) << prefix;
  }
}

TEST(MincutOrderTest, SmallNoisyClustersUseTheCutsOnly) {
  const topology::Topology topology = noisy_clusters(3, 8, 1);
  OrderStats stats;
  const std::vector<int> order = mincut_order(topology, &stats);
  EXPECT_EQ(stats.spanning_tree_groups, 0u);
  for (const char* prefix : {"c0/", "c1/", "c2/"})
    EXPECT_TRUE(contiguous(topology, order, prefix)) << prefix;
}

TEST(MincutOrderTest, LargeGroupsWithoutStructureFallBackToTheSpanningTree) {
  // 4 x 120 GPUs: one Stoer-Wagner cut of all 480 would cost 480^3 = 1.1e8 > kMaxOrderWork, so
  // the whole cluster is ordered by maximum spanning tree, which still keeps groups together.
  const topology::Topology topology = noisy_clusters(4, 120, 2);
  OrderStats stats;
  const std::vector<int> order = mincut_order(topology, &stats);
  EXPECT_EQ(stats.spanning_tree_groups, 1u);
  EXPECT_EQ(stats.spanning_tree_gpus, 480u);
  ASSERT_TRUE(is_permutation_of_all(order, 480));
  for (const char* prefix : {"c0/", "c1/", "c2/", "c3/"})
    EXPECT_TRUE(contiguous(topology, order, prefix)) << prefix;
  EXPECT_EQ(mincut_order(topology), order);  // deterministic
}

TEST(MincutOrderTest, TheBudgetBoundsPeelingOneGpuAtATime) {
  // A "staircase": GPU i's links to every GPU after it are worth 1 + i GB/s, so each level's
  // cut peels GPU 0 off; 300 levels of Stoer-Wagner would be O(N^4). The budget hands what
  // is left when it runs out to the spanning tree.
  const int n = 300;
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back("g" + std::to_string(1000 + i));
  std::vector<topology::Link> links;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(0, 1e6);
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) links.push_back({u, v, (1.0 + u) * 1e9 + noise(rng), 0.005});
  }
  const topology::Topology topology = linked_topology(ids, links);
  OrderStats stats;
  const std::vector<int> order = mincut_order(topology, &stats);
  ASSERT_TRUE(is_permutation_of_all(order, n));
  EXPECT_GT(stats.spanning_tree_groups, 0u);
}

}  // namespace
}  // namespace pipeplan::ordering
