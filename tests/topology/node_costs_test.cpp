// Pair costs held per node (issue 33 item 2): a topology without explicit links is built with
// its costs per node and for the network, and every pair must cost exactly (bit for bit) what
// the dense pair matrices of the widest-path search give for the same file.

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::topology {
namespace {

Topology read(const std::string& text, PairLayout layout) {
  return read_topology(io::source_from_text("topo.json", text), "V100-SXM2-32GB", layout);
}

std::string read_error(const std::string& text, PairLayout layout) {
  try {
    read(text, layout);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

// Every pair of `by_node` costs the same bits as in `dense`, both ways round.
void expect_same_costs(const Topology& by_node, const Topology& dense, const std::string& what) {
  ASSERT_EQ(by_node.size(), dense.size()) << what;
  EXPECT_EQ(by_node.node_count(), dense.node_count()) << what;
  int differences = 0;
  for (int u = 0; u < dense.size() && differences < 5; ++u) {
    EXPECT_EQ(by_node.gpu(u).id, dense.gpu(u).id) << what;
    for (int v = 0; v < dense.size(); ++v) {
      if (u == v) continue;
      const PairCost a = by_node.pair(u, v), b = dense.pair(u, v);
      const bool same = std::bit_cast<std::uint64_t>(a.bandwidth_bytes_per_s) ==
                            std::bit_cast<std::uint64_t>(b.bandwidth_bytes_per_s) &&
                        std::bit_cast<std::uint64_t>(a.latency_ms) ==
                            std::bit_cast<std::uint64_t>(b.latency_ms) &&
                        a.hops == b.hops &&
                        std::bit_cast<std::uint64_t>(by_node.transfer_ms(u, v, 12345.0)) ==
                            std::bit_cast<std::uint64_t>(dense.transfer_ms(u, v, 12345.0)) &&
                        by_node.bandwidth_bytes_per_s(u, v) == a.bandwidth_bytes_per_s &&
                        by_node.latency_ms(u, v) == a.latency_ms;
      if (!same) {
        ++differences;
        ADD_FAILURE() << what << ": " << dense.gpu(u).id << " - " << dense.gpu(v).id << ": by node "
                      << a.bandwidth_bytes_per_s << " B/s, " << a.latency_ms << " ms, " << a.hops
                      << " hops; dense " << b.bandwidth_bytes_per_s << " B/s, " << b.latency_ms
                      << " ms, " << b.hops << " hops";
      }
    }
  }
}

TEST(NodeCostsTest, ExampleTopologiesWithoutLinksCostTheSameByNode) {
  int compared = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::filesystem::path(PIPEPLAN_SOURCE_DIR) / "examples" / "topologies")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream file(entry.path());
    const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    const Topology automatic = read(text, PairLayout::kAuto);
    const Topology dense = read(text, PairLayout::kDense);
    EXPECT_FALSE(dense.costs_by_node());
    const bool has_links = text.find("\"links\"") != std::string::npos;
    EXPECT_EQ(automatic.costs_by_node(), !has_links) << entry.path();
    if (automatic.costs_by_node()) ++compared;
    expect_same_costs(automatic, dense, entry.path().filename().string());
  }
  EXPECT_GE(compared, 4);  // pcie-server, two-node-nvlink-ib and the two llm clusters
}

TEST(NodeCostsTest, CatalogueNodesAndANodeWithoutALinkCostTheSameByNode) {
  // dgx-h100 nodes (catalogue NVLink and NIC), a node of four GPUs without a link (two hops of
  // the network: 2 x 7 us), explicit GPUs joining a shorthand node and a named node, and a GPU
  // of its own.
  const std::string text = R"({"nodes": [{"name": "dgx", "count": 3, "type": "dgx-h100"},
      {"name": "bare", "gpus": 4, "speed": 1}],
    "network": {"bandwidth": "20 GB/s", "latency": "7 us"},
    "gpus": [{"id": "extra", "node": "dgx1", "speed": 1}, {"id": "p", "node": "box", "speed": 1},
             {"id": "q", "node": "box", "speed": 1}, {"id": "alone", "speed": 1}]})";
  const Topology topo = read(text, PairLayout::kAuto);
  ASSERT_TRUE(topo.costs_by_node());
  EXPECT_EQ(topo.size(), 32);
  EXPECT_EQ(topo.node_count(), 6);  // dgx0..2, bare, box, alone
  const int bare0 = topo.index_of("bare/gpu0").value(), bare3 = topo.index_of("bare/gpu3").value();
  EXPECT_EQ(topo.pair(bare0, bare3).bandwidth_bytes_per_s, 20e9);
  EXPECT_EQ(topo.pair(bare0, bare3).latency_ms, 0.007 + 0.007);
  EXPECT_EQ(topo.pair(bare0, bare3).hops, 2);
  const int extra = topo.index_of("extra").value(), dgx1 = topo.index_of("dgx1/gpu5").value();
  EXPECT_EQ(topo.bandwidth_bytes_per_s(extra, dgx1), 369e9);  // the node's NVLink
  expect_same_costs(topo, read(text, PairLayout::kDense), "catalogue");
}

// A random topology without links: shorthand entries (with or without a link, bandwidths
// drawn from a few values so that they tie), explicit GPUs in shorthand nodes, in named
// nodes and alone, and a network.
std::string random_node_topology(std::mt19937& random) {
  auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  const char* bandwidths[] = {"10 GB/s", "25 GB/s", "150 GB/s", "12.5 GB/s", "3 GB/s"};
  const char* latencies[] = {"0 us", "2 us", "5 us", "1.1 us", "0.3 ms"};
  std::string text = R"({"nodes": [)";
  std::vector<std::string> node_names;
  const int entries = pick(1, 4);
  for (int e = 0; e < entries; ++e) {
    const std::string base = std::string(1, static_cast<char>('a' + e));
    const int count = pick(1, 5);
    const int gpus = pick(1, 6);
    text += std::string(e ? ", " : "") + R"({"name": ")" + base + R"(", "count": )" +
            std::to_string(count) + R"(, "gpus": )" + std::to_string(gpus);
    if (pick(0, 3) != 0) {
      text += R"(, "link": {"bandwidth": ")" + std::string(bandwidths[pick(0, 4)]) +
              R"(", "latency": ")" + latencies[pick(0, 4)] + R"("})";
    }
    text += "}";
    for (int i = 0; i < count; ++i)
      node_names.push_back(count == 1 ? base : base + std::to_string(i));
  }
  text += R"(], "network": {"bandwidth": ")" + std::string(bandwidths[pick(0, 4)]) +
          R"(", "latency": ")" + latencies[pick(0, 4)] + R"("}, "gpus": [)";
  const int explicit_gpus = pick(0, 5);
  for (int g = 0; g < explicit_gpus; ++g) {
    text += std::string(g ? ", " : "") + R"({"id": "x)" + std::to_string(g) + "\"";
    const int kind = pick(0, 2);
    if (kind == 1)
      text +=
          R"(, "node": ")" +
          node_names[static_cast<std::size_t>(pick(0, static_cast<int>(node_names.size()) - 1))] +
          "\"";
    if (kind == 2) text += R"(, "node": "box)" + std::to_string(pick(0, 1)) + "\"";
    text += "}";
  }
  return text + "]}";
}

TEST(NodeCostsTest, RandomNodeTopologiesCostTheSameByNode) {
  std::mt19937 random(20261204);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_node_topology(random);
    const std::string dense_error = read_error(text, PairLayout::kDense);
    if (dense_error != "no error") {
      // A single node without a link is not connected: refused alike.
      EXPECT_EQ(read_error(text, PairLayout::kAuto), dense_error) << text;
      continue;
    }
    const Topology topo = read(text, PairLayout::kAuto);
    ASSERT_TRUE(topo.costs_by_node()) << text;
    expect_same_costs(topo, read(text, PairLayout::kDense), text);
    ++compared;
  }
  EXPECT_GE(compared, 250);
}

TEST(NodeCostsTest, NodeTopologiesReachTheirOwnLimitAndLinkedOnesKeepTheirs) {
  const Topology large =
      read(R"({"nodes": [{"name": "n", "count": 16384, "type": "dgx-h100"}]})", PairLayout::kAuto);
  EXPECT_TRUE(large.costs_by_node());
  EXPECT_EQ(large.size(), kMaxNodeGpus);
  EXPECT_EQ(large.node_count(), 16384);
  EXPECT_EQ(large.gpu(kMaxNodeGpus - 1).id, "n16383/gpu7");
  EXPECT_EQ(large.bandwidth_bytes_per_s(0, kMaxNodeGpus - 1), 46e9);
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "n", "count": 16385, "type": "dgx-h100"}]})",
                       PairLayout::kAuto),
            "topo.json: /nodes/0: too many GPUs: pipeplan handles at most 131072");
  EXPECT_EQ(
      read_error(R"({"nodes": [{"name": "n", "count": 1025, "type": "dgx-h100"}],
                     "links": [{"between": ["n0/gpu0", "n1/gpu0"], "bandwidth": 1, "latency": 0}]})",
                 PairLayout::kAuto),
      "topo.json: /links: too many GPUs for a topology with \"links\": 8200; pipeplan handles at "
      "most 8192 with links (131072 without)");
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "n", "count": 1025, "type": "dgx-h100"}]})",
                       PairLayout::kDense),
            "topo.json: too many GPUs: 8200; pipeplan handles at most 8192 whose pair costs are "
            "not a function of their nodes");
}

}  // namespace
}  // namespace pipeplan::topology
