#include "pipeplan/topology/topology.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "pipeplan/error.hpp"

namespace pipeplan::topology {
namespace {

Topology read(const std::string& text) {
  return read_topology(io::source_from_text("topo.json", text));
}

std::string read_error(const std::string& text) {
  try {
    read(text);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

int index(const Topology& topo, const std::string& id) {
  auto found = topo.index_of(id);
  EXPECT_TRUE(found.has_value()) << id;
  return found.value_or(0);
}

PairCost cost(const Topology& topo, const std::string& a, const std::string& b) {
  return topo.pair(index(topo, a), index(topo, b));
}

std::vector<std::string> ids(const Topology& topo) {
  std::vector<std::string> out;
  for (const Gpu& gpu : topo.gpus()) out.push_back(gpu.id);
  return out;
}

// Explicit GPUs `ids` (each its own node) and links "a b bandwidth latency_s".
std::string explicit_topology(
    const std::vector<std::string>& gpu_ids,
    const std::vector<std::tuple<std::string, std::string, double, double>>& links) {
  std::string text = R"({"gpus": [)";
  for (std::size_t i = 0; i < gpu_ids.size(); ++i) {
    text += (i ? ", " : "") + std::string(R"({"id": ")") + gpu_ids[i] + "\"}";
  }
  text += R"(], "links": [)";
  for (std::size_t i = 0; i < links.size(); ++i) {
    const auto& [a, b, bandwidth, latency] = links[i];
    text += (i ? ", " : "") + std::string(R"({"between": [")") + a + "\", \"" + b +
            "\"], \"bandwidth\": " + std::to_string(bandwidth) +
            ", \"latency\": " + std::to_string(latency) + "}";
  }
  return text + "]}";
}

TEST(TopologyTest, ShorthandNamesNodesAndGpus) {
  Topology topo = read(R"({"nodes": [
      {"name": "dgx", "count": 2, "gpus": 2, "link": {"bandwidth": "25 GB/s", "latency": "2 us"}},
      {"name": "solo", "gpus": 1}],
    "network": {"bandwidth": "100 Gbit/s", "latency": "10 us"}})");
  EXPECT_EQ(ids(topo), (std::vector<std::string>{"dgx0/gpu0", "dgx0/gpu1", "dgx1/gpu0", "dgx1/gpu1",
                                                 "solo/gpu0"}));
  EXPECT_EQ(topo.gpu(0).node, "dgx0");
  EXPECT_EQ(topo.gpu(3).node, "dgx1");
  EXPECT_EQ(topo.gpu(4).node, "solo");
  EXPECT_EQ(topo.node_count(), 3);
  EXPECT_EQ(topo.size(), 5);
  EXPECT_EQ(topo.gpu(0).speed, 1.0);
  EXPECT_FALSE(topo.gpu(0).memory_bytes.has_value());
}

// A name ending in a digit gets a `-` before the node index: `dgx-h100` with 8 nodes would
// otherwise give `dgx-h1000` .. `dgx-h1007`, which read as node 0 of `dgx-h100` or of `dgx-h10`.
TEST(TopologyTest, ShorthandSeparatesTheIndexFromANameEndingInADigit) {
  Topology topo = read(R"({"nodes": [{"name": "dgx-h100", "count": 8, "gpus": 2},
                                      {"name": "a100", "gpus": 1}, {"name": "n", "count": 2, "gpus": 1}],
    "network": {"bandwidth": "100 Gbit/s", "latency": "10 us"}})");
  ASSERT_EQ(topo.size(), 19);
  for (int node = 0; node < 8; ++node) {
    for (int gpu = 0; gpu < 2; ++gpu) {
      const std::string node_name = "dgx-h100-" + std::to_string(node);
      EXPECT_EQ(topo.gpu(2 * node + gpu).id, node_name + "/gpu" + std::to_string(gpu));
      EXPECT_EQ(topo.gpu(2 * node + gpu).node, node_name);
    }
  }
  // One node keeps its name as it is, and a name ending in a letter gets no separator.
  EXPECT_EQ(topo.gpu(16).id, "a100/gpu0");
  EXPECT_EQ(topo.gpu(17).id, "n0/gpu0");
  EXPECT_EQ(topo.gpu(18).id, "n1/gpu0");
  EXPECT_EQ(topo.node_count(), 11);
}

// Names that still come out the same from two entries are refused, naming the second entry.
TEST(TopologyTest, ShorthandRefusesEntriesWhoseNamesCollide) {
  const std::string network = R"("network": {"bandwidth": 1, "latency": 0})";
  // `a1` with two nodes gives `a1-0` and `a1-1`; so does `a1-`, which ends in no digit.
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "a1", "count": 2, "gpus": 1},
                                     {"name": "a1-", "count": 2, "gpus": 1}], )" +
                       network + "}"),
            "topo.json: /nodes/1/name: generated node name \"a1-0\" collides with the one from "
            "/nodes/0");
  // Node 1 of `a` and a single node named `a1` are both `a1`.
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "a", "count": 2, "gpus": 1},
                                     {"name": "a1", "gpus": 1}], )" +
                       network + "}"),
            "topo.json: /nodes/1/name: generated node name \"a1\" collides with the one from "
            "/nodes/0");
  // With the separator, `a` with 12 nodes (`a11`) and `a1` with 2 (`a1-0`, `a1-1`) are apart.
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "a", "count": 12, "gpus": 1},
                                     {"name": "a1", "count": 2, "gpus": 1}], )" +
                       network + "}"),
            "no error");
}

TEST(TopologyTest, ShorthandUsesNodeLinkInsideAndNetworkOutside) {
  Topology topo = read(R"({"nodes": [{"name": "n", "count": 2, "gpus": 2, "memory": "32 GiB",
      "speed": 0.5, "link": {"bandwidth": "25 GB/s", "latency": "2 us"}}],
    "network": {"bandwidth": "100 Gbit/s", "latency": "10 us"}})");
  PairCost inside = cost(topo, "n0/gpu0", "n0/gpu1");
  EXPECT_EQ(inside.bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(inside.latency_ms, 0.002);
  EXPECT_EQ(inside.hops, 1);
  PairCost outside = cost(topo, "n0/gpu1", "n1/gpu0");
  EXPECT_EQ(outside.bandwidth_bytes_per_s, 12.5e9);
  EXPECT_DOUBLE_EQ(outside.latency_ms, 0.01);
  EXPECT_EQ(outside.hops, 1);
  EXPECT_EQ(topo.gpu(2).speed, 0.5);
  EXPECT_EQ(topo.gpu(2).memory_bytes, 34359738368.0);
}

TEST(TopologyTest, ExplicitGpusJoinShorthandNodes) {
  Topology topo = read(R"({
    "nodes": [{"name": "n", "gpus": 2, "link": {"bandwidth": "50 GB/s", "latency": "1 us"}}],
    "network": {"bandwidth": "10 GB/s", "latency": "5 us"},
    "gpus": [{"id": "e", "node": "n", "memory": "16 GiB", "speed": 2}, {"id": "f"}]})");
  // Explicit GPUs come after the shorthand's.
  EXPECT_EQ(ids(topo), (std::vector<std::string>{"n/gpu0", "n/gpu1", "e", "f"}));
  EXPECT_EQ(topo.gpu(2).node, "n");
  EXPECT_EQ(topo.gpu(3).node, "f");
  EXPECT_EQ(topo.node_count(), 2);
  EXPECT_EQ(cost(topo, "e", "n/gpu1").bandwidth_bytes_per_s, 50e9);
  EXPECT_EQ(cost(topo, "e", "f").bandwidth_bytes_per_s, 10e9);
  EXPECT_EQ(cost(topo, "n/gpu0", "f").bandwidth_bytes_per_s, 10e9);
  EXPECT_EQ(topo.gpu(2).speed, 2.0);
  EXPECT_EQ(topo.gpu(2).memory_bytes, 16.0 * 1024 * 1024 * 1024);
}

TEST(TopologyTest, ExplicitGpusShareANamedNodeWithoutALink) {
  Topology topo = read(R"({"network": {"bandwidth": "10 GB/s", "latency": "5 us"},
    "gpus": [{"id": "a", "node": "box"}, {"id": "b", "node": "box"}, {"id": "c"}]})");
  EXPECT_EQ(topo.node_count(), 2);
  // No link inside "box": a and b reach each other through c.
  PairCost inside = cost(topo, "a", "b");
  EXPECT_EQ(inside.bandwidth_bytes_per_s, 10e9);
  EXPECT_DOUBLE_EQ(inside.latency_ms, 0.01);
  EXPECT_EQ(inside.hops, 2);
  EXPECT_EQ(cost(topo, "a", "c").hops, 1);
}

TEST(TopologyTest, LinkReplacesShorthandPair) {
  Topology topo = read(R"({"nodes": [{"name": "dgx", "gpus": 4,
      "link": {"bandwidth": "25 GB/s", "latency": "2 us"}}],
    "links": [{"between": ["dgx/gpu3", "dgx/gpu0"], "bandwidth": "50 GB/s", "latency": "1 us"}]})");
  PairCost replaced = cost(topo, "dgx/gpu0", "dgx/gpu3");
  EXPECT_EQ(replaced.bandwidth_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(replaced.latency_ms, 0.001);
  EXPECT_EQ(cost(topo, "dgx/gpu0", "dgx/gpu1").bandwidth_bytes_per_s, 25e9);
}

TEST(TopologyTest, DirectLinkWinsOverWiderPath) {
  Topology topo = read(explicit_topology(
      {"a", "b", "c"}, {{"a", "b", 1e9, 1e-6}, {"a", "c", 10e9, 1e-6}, {"c", "b", 10e9, 1e-6}}));
  PairCost direct = cost(topo, "a", "b");
  EXPECT_EQ(direct.bandwidth_bytes_per_s, 1e9);
  EXPECT_EQ(direct.hops, 1);
}

TEST(TopologyTest, WidestBottleneckPathIsChosen) {
  // s-t: through x (bottleneck 5 GB/s, 2 hops), through y (3 GB/s, 2 hops), or through
  // p and q (8 GB/s, 3 hops): the widest wins even with more hops.
  Topology topo = read(explicit_topology({"s", "t", "x", "y", "p", "q"}, {{"s", "x", 5e9, 1e-6},
                                                                          {"x", "t", 9e9, 1e-6},
                                                                          {"s", "y", 3e9, 1e-6},
                                                                          {"y", "t", 3e9, 1e-6},
                                                                          {"s", "p", 8e9, 2e-6},
                                                                          {"p", "q", 8e9, 3e-6},
                                                                          {"q", "t", 8e9, 4e-6}}));
  PairCost widest = cost(topo, "s", "t");
  EXPECT_EQ(widest.bandwidth_bytes_per_s, 8e9);
  EXPECT_EQ(widest.hops, 3);
  EXPECT_DOUBLE_EQ(widest.latency_ms, 0.009);  // summed along the path
}

TEST(TopologyTest, BandwidthTieBrokenByFewestHops) {
  // Both paths have bottleneck 10 GB/s; the 2-hop one (latency 7 us) beats the 3-hop one
  // (latency 3 us) although it is slower.
  Topology topo = read(explicit_topology({"s", "t", "a", "b", "c"}, {{"s", "a", 10e9, 3e-6},
                                                                     {"a", "t", 20e9, 4e-6},
                                                                     {"s", "b", 10e9, 1e-6},
                                                                     {"b", "c", 10e9, 1e-6},
                                                                     {"c", "t", 10e9, 1e-6}}));
  PairCost chosen = cost(topo, "s", "t");
  EXPECT_EQ(chosen.bandwidth_bytes_per_s, 10e9);
  EXPECT_EQ(chosen.hops, 2);
  EXPECT_DOUBLE_EQ(chosen.latency_ms, 0.007);
}

TEST(TopologyTest, HopTieBrokenByIdsInByteOrder) {
  // Two 2-hop paths of equal bandwidth from "gpu1" to "gpu2": through "gpu9" (listed first,
  // latency 2 us) or through "gpu10" (latency 6 us). In byte order "gpu10" < "gpu9".
  Topology topo =
      read(explicit_topology({"gpu1", "gpu2", "gpu9", "gpu10"}, {{"gpu1", "gpu9", 10e9, 1e-6},
                                                                 {"gpu9", "gpu2", 10e9, 1e-6},
                                                                 {"gpu1", "gpu10", 10e9, 3e-6},
                                                                 {"gpu10", "gpu2", 10e9, 3e-6}}));
  EXPECT_DOUBLE_EQ(cost(topo, "gpu1", "gpu2").latency_ms, 0.006);
  EXPECT_EQ(cost(topo, "gpu1", "gpu2").hops, 2);
  // Upper case sorts before lower case: "Z" < "a".
  Topology cased = read(explicit_topology({"s", "t", "a", "Z"}, {{"s", "a", 10e9, 1e-6},
                                                                 {"a", "t", 10e9, 1e-6},
                                                                 {"s", "Z", 10e9, 2e-6},
                                                                 {"Z", "t", 10e9, 2e-6}}));
  EXPECT_DOUBLE_EQ(cost(cased, "s", "t").latency_ms, 0.004);
}

TEST(TopologyTest, LexicographicOrderReadsPathsFromTheSmallerId) {
  // From "u" (smaller than "v") the paths are u-a-d-v and u-c-b-v; "a" < "c" picks the first
  // (latency 3 us). Read from "v", v-d-a-u would lose to v-b-c-u, so reading from the wrong end
  // would give 30 us.
  Topology topo =
      read(explicit_topology({"u", "v", "a", "b", "c", "d"}, {{"u", "a", 10e9, 1e-6},
                                                              {"a", "d", 10e9, 1e-6},
                                                              {"d", "v", 10e9, 1e-6},
                                                              {"u", "c", 10e9, 10e-6},
                                                              {"c", "b", 10e9, 10e-6},
                                                              {"b", "v", 10e9, 10e-6}}));
  EXPECT_DOUBLE_EQ(cost(topo, "u", "v").latency_ms, 0.003);
  EXPECT_DOUBLE_EQ(cost(topo, "v", "u").latency_ms, 0.003);
  EXPECT_EQ(cost(topo, "v", "u").hops, 3);
}

TEST(TopologyTest, PairCostsAreSymmetric) {
  Topology topo = read(R"({"nodes": [{"name": "n", "count": 3, "gpus": 3}],
    "network": {"bandwidth": "10 GB/s", "latency": "5 us"},
    "links": [{"between": ["n0/gpu0", "n0/gpu1"], "bandwidth": "90 GB/s", "latency": "1 us"}]})");
  for (int u = 0; u < topo.size(); ++u) {
    for (int v = 0; v < topo.size(); ++v) {
      if (u == v) continue;
      EXPECT_EQ(topo.pair(u, v).bandwidth_bytes_per_s, topo.pair(v, u).bandwidth_bytes_per_s);
      EXPECT_EQ(topo.pair(u, v).latency_ms, topo.pair(v, u).latency_ms);
      EXPECT_EQ(topo.pair(u, v).hops, topo.pair(v, u).hops);
    }
  }
}

TEST(TopologyTest, NodeWithoutLinkGoesThroughTheSmallestIdElsewhere) {
  // No node link: GPUs of one node reach each other in 2 hops through the GPU of smallest id
  // in another node.
  Topology topo = read(R"({"nodes": [{"name": "n", "count": 3, "gpus": 4}],
    "network": {"bandwidth": "10 GB/s", "latency": "5 us"}})");
  PairCost inside = cost(topo, "n1/gpu2", "n1/gpu3");
  EXPECT_EQ(inside.bandwidth_bytes_per_s, 10e9);
  EXPECT_EQ(inside.hops, 2);
  EXPECT_DOUBLE_EQ(inside.latency_ms, 0.01);
  EXPECT_EQ(cost(topo, "n0/gpu0", "n1/gpu3").hops, 1);
}

TEST(TopologyTest, TransferTimeIsLatencyPlusBytesOverBandwidth) {
  Topology topo = read(R"({"nodes": [{"name": "n", "gpus": 2,
      "link": {"bandwidth": "25 GB/s", "latency": "2 us"}}]})");
  EXPECT_DOUBLE_EQ(topo.transfer_ms(0, 1, 1e9), 0.002 + 40.0);
  EXPECT_DOUBLE_EQ(topo.transfer_ms(1, 0, 0), 0.002);
  EXPECT_DOUBLE_EQ(topo.transfer_ms(1, 0, 25e6), 1.002);
}

TEST(TopologyTest, DisconnectedTopologyIsRejected) {
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "a", "gpus": 2, "link": {"bandwidth": 1,
      "latency": 0}}, {"name": "b", "gpus": 1}]})"),
            "topo.json: topology is not connected: no path between \"a/gpu0\" and "
            "\"b/gpu0\" (add a link, a node link or a network)");
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "a", "gpus": 2}]})"),
            "topo.json: topology is not connected: no path between \"a/gpu0\" and "
            "\"a/gpu1\" (add a link, a node link or a network)");
}

TEST(TopologyTest, QuantitiesAcceptBaseUnitsOrStrings) {
  Topology numbers = read(R"({"nodes": [{"name": "n", "gpus": 2, "memory": 34359738368,
      "link": {"bandwidth": 25e9, "latency": 2e-6}}]})");
  Topology strings = read(R"({"nodes": [{"name": "n", "gpus": 2, "memory": "32 GiB",
      "link": {"bandwidth": "25 GB/s", "latency": "2 us"}}]})");
  Topology others = read(R"({"nodes": [{"name": "n", "gpus": 2, "memory": "32768MiB",
      "link": {"bandwidth": "200 Gbit/s", "latency": "2000 ns"}}]})");
  for (const Topology* topo : {&numbers, &strings, &others}) {
    EXPECT_EQ(topo->gpu(0).memory_bytes, 34359738368.0);
    EXPECT_DOUBLE_EQ(topo->bandwidth_bytes_per_s(0, 1), 25e9);
    EXPECT_DOUBLE_EQ(topo->latency_ms(0, 1), 0.002);
  }
}

TEST(TopologyTest, IntegralFloatsCountAsIntegers) {
  Topology topo = read(R"({"nodes": [{"name": "n", "count": 2.0, "gpus": 3e0}],
    "network": {"bandwidth": 1, "latency": 0}})");
  EXPECT_EQ(topo.size(), 6);
}

TEST(TopologyTest, ExtensionKeysAreIgnoredEverywhere) {
  Topology topo = read(R"({"x-root": 1, "nodes": [{"name": "n", "gpus": 2, "x-a": [1],
      "link": {"bandwidth": 1, "latency": 0, "x-b": {"deep": true}}}],
    "gpus": [{"id": "e", "x-c": null}], "network": {"bandwidth": 1, "latency": 0, "x-d": 2},
    "links": [{"between": ["e", "n/gpu0"], "bandwidth": 2, "latency": 0, "x-e": "?"}]})");
  EXPECT_EQ(topo.size(), 3);
}

TEST(TopologyTest, NegativeZeroLatencyIsZero) {
  Topology topo = read(R"({"nodes": [{"name": "n", "gpus": 2, "memory": -0.0,
      "link": {"bandwidth": 1, "latency": -0.0}}]})");
  EXPECT_FALSE(std::signbit(topo.latency_ms(0, 1)));
  EXPECT_FALSE(std::signbit(*topo.gpu(0).memory_bytes));
}

TEST(TopologyTest, BuildRejectsBrokenLinksAsBugs) {
  std::vector<Gpu> gpus(2);
  gpus[0].id = "a";
  gpus[1].id = "b";
  EXPECT_THROW(Topology::build("", gpus, {Link{0, 0, 1, 0}}, "t"), InternalError);
  EXPECT_THROW(Topology::build("", gpus, {Link{0, 2, 1, 0}}, "t"), InternalError);
  EXPECT_THROW(Topology::build("", gpus, {Link{0, 1, 0, 0}}, "t"), InternalError);
  EXPECT_THROW(Topology::build("", gpus, {Link{0, 1, 1, 0}, Link{1, 0, 1, 0}}, "t"), InternalError);
  gpus[1].id = "a";
  EXPECT_THROW(Topology::build("", gpus, {Link{0, 1, 1, 0}}, "t"), InternalError);
  gpus[1].id = "b";
  Topology topo = Topology::build("pair", gpus, {Link{1, 0, 5, 0.5}}, "t");
  EXPECT_EQ(topo.bandwidth_bytes_per_s(0, 1), 5);
  EXPECT_EQ(topo.latency_ms(1, 0), 0.5);
  EXPECT_EQ(topo.name(), "pair");
  EXPECT_EQ(topo.node_count(), 1);
}

// The best path between every pair by enumerating every simple path: greatest bottleneck,
// then fewest hops, then smallest id sequence read from the smaller id.
struct Oracle {
  double bandwidth = 0;
  double latency_ms = 0;
  int hops = 0;
};

Oracle brute_force(const std::vector<Gpu>& gpus, const std::vector<std::vector<double>>& bw,
                   const std::vector<std::vector<double>>& lat, int from, int to) {
  if (gpus[static_cast<std::size_t>(to)].id < gpus[static_cast<std::size_t>(from)].id) {
    std::swap(from, to);
  }
  const auto n = gpus.size();
  Oracle best;
  std::vector<std::string> best_sequence;
  std::vector<int> path{from};
  std::vector<char> on_path(n, 0);
  on_path[static_cast<std::size_t>(from)] = 1;
  std::function<void(double, double)> extend = [&](double width, double latency) {
    int last = path.back();
    if (last == to) {
      std::vector<std::string> sequence;
      for (int g : path) sequence.push_back(gpus[static_cast<std::size_t>(g)].id);
      int hops = static_cast<int>(path.size()) - 1;
      bool better = width > best.bandwidth ||
                    (width == best.bandwidth &&
                     (hops < best.hops || (hops == best.hops && sequence < best_sequence)));
      if (best.hops == 0 || better) {
        best = Oracle{width, latency, hops};
        best_sequence = sequence;
      }
      return;
    }
    for (std::size_t next = 0; next < n; ++next) {
      double b = bw[static_cast<std::size_t>(last)][next];
      if (b <= 0 || on_path[next]) continue;
      on_path[next] = 1;
      path.push_back(static_cast<int>(next));
      extend(std::min(width, b), latency + lat[static_cast<std::size_t>(last)][next]);
      path.pop_back();
      on_path[next] = 0;
    }
  };
  extend(std::numeric_limits<double>::infinity(), 0);
  return best;
}

// Random clusters of `min_gpus` to `max_gpus` GPUs in `nodes` nodes: a node link and a
// network, each possibly missing, then random overrides with probability 1/`override_odds`,
// all with few distinct bandwidths so that ties are common. Returns how many multi-hop pairs
// were compared with the brute force.
int check_random_clusters(unsigned seed, int trials, int min_gpus, int max_gpus, unsigned nodes,
                          unsigned override_odds) {
  std::mt19937 random(seed);
  const std::vector<std::string> names = {"a",      "B",       "a1",     "a10",   "a9",
                                          "b",      "Z",       "gpu2",   "gpu10", "c/gpu0",
                                          "c/gpu1", "c/gpu10", "c/gpu2", "d"};
  int checked = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const int n =
        min_gpus + static_cast<int>(random() % static_cast<unsigned>(max_gpus - min_gpus + 1));
    std::vector<std::string> pool = names;
    std::shuffle(pool.begin(), pool.end(), random);
    std::vector<Gpu> gpus(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      gpus[static_cast<std::size_t>(i)].id = pool[static_cast<std::size_t>(i)];
      gpus[static_cast<std::size_t>(i)].node = "node" + std::to_string(random() % nodes);
    }
    std::vector<std::vector<double>> bw(static_cast<std::size_t>(n),
                                        std::vector<double>(static_cast<std::size_t>(n), 0));
    auto lat = bw;
    const double network_bw = static_cast<double>(random() % 3);
    const double node_link = static_cast<double>(random() % 4);
    DirectLinks links(n);
    for (int u = 0; u < n; ++u) {
      for (int v = u + 1; v < n; ++v) {
        const auto su = static_cast<std::size_t>(u), sv = static_cast<std::size_t>(v);
        const bool same_node = gpus[su].node == gpus[sv].node;
        double b = same_node ? node_link : network_bw;
        double l = same_node ? 1 : 5;
        if (random() % override_odds == 0) {
          b = static_cast<double>(random() % 4);
          l = static_cast<double>(random() % 7);
        }
        if (b > 0) {
          links.set(u, v, b, l);
          bw[su][sv] = bw[sv][su] = b;
          lat[su][sv] = lat[sv][su] = l;
        }
      }
    }
    Topology topo;
    try {
      topo = Topology::build("random", gpus, links, "random.json");
    } catch (const InputError&) {
      continue;  // disconnected
    }
    for (int u = 0; u < n; ++u) {
      for (int v = 0; v < n; ++v) {
        if (u == v) continue;
        PairCost got = topo.pair(u, v);
        const auto su = static_cast<std::size_t>(u), sv = static_cast<std::size_t>(v);
        if (bw[su][sv] > 0) {
          EXPECT_EQ(got.bandwidth_bytes_per_s, bw[su][sv]);
          EXPECT_EQ(got.latency_ms, lat[su][sv]);
          EXPECT_EQ(got.hops, 1);
          continue;
        }
        Oracle want = brute_force(gpus, bw, lat, u, v);
        EXPECT_GT(want.hops, 1) << "trial " << trial;
        EXPECT_EQ(got.bandwidth_bytes_per_s, want.bandwidth) << "trial " << trial;
        EXPECT_EQ(got.hops, want.hops) << "trial " << trial;
        EXPECT_DOUBLE_EQ(got.latency_ms, want.latency_ms)
            << "trial " << trial << " " << gpus[su].id << " " << gpus[sv].id;
        ++checked;
      }
    }
  }
  return checked;
}

TEST(TopologyTest, PathsMatchBruteForceOnSmallRandomClusters) {
  EXPECT_GT(check_random_clusters(20240611, 400, 2, 7, 3, 4), 500);
}

TEST(TopologyTest, PathsMatchBruteForceOnShorthandLikeClusters) {
  // Larger nodes with rare overrides: many twins, which the search handles as classes.
  EXPECT_GT(check_random_clusters(7, 80, 8, 9, 3, 12), 100);
}

// A chain whose bandwidths fall along it, ids in chain order, closed into a ring by a link
// narrower than all: from each GPU every later one has its own bottleneck, and each needs a
// search of the chain up to it, about N^3 / 3 steps. (Without the closing link the links are
// a tree, whose paths need no search.)
Topology falling_ring(int n) {
  std::vector<Gpu> gpus;
  for (int i = 0; i < n; ++i) {
    Gpu g;
    g.id = "g" + std::to_string(1000 + i);
    g.node = g.id;
    gpus.push_back(g);
  }
  std::vector<Link> links;
  for (int i = 0; i + 1 < n; ++i) links.push_back({i, i + 1, 1e9 * (2 * n - i), 0.001});
  links.push_back({n - 1, 0, 1e9, 0.001});
  return Topology::build("ring", gpus, links, "ring.json");
}

TEST(TopologyTest, PathSearchesHaveALimit) {
  // 600 GPUs: about 7e7 steps, accepted (the widest paths follow the chain).
  const Topology accepted = falling_ring(600);
  EXPECT_EQ(accepted.pair(0, 598).hops, 598);
  EXPECT_EQ(accepted.pair(0, 597).hops, 597);
  EXPECT_DOUBLE_EQ(accepted.pair(0, 597).bandwidth_bytes_per_s, 1e9 * (1200 - 596));
  // 1,000 GPUs: about 3.3e8 steps, beyond kMaxPathSteps: refused, not minutes of work.
  try {
    falling_ring(1000);
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              "ring.json: too many distinct paths to search: the widest paths between the 1000 "
              "GPUs' unlinked pairs take more than 2e+08 steps (many distinct link bandwidths "
              "and few links); link more pairs directly or use fewer distinct bandwidths (see "
              "\"Limits\" in docs/errors.md)");
  }
}

// Links that form a tree (N - 1 links) have one path per pair, found without a search: any
// number of distinct bandwidths is accepted. Random trees against the brute force (latencies
// of several magnitudes, so that the order of the sums shows), and a star of 8,000 GPUs with
// 7,999 distinct bandwidths, which the searches refused.
TEST(TopologyTest, TreesOfLinksNeedNoSearch) {
  std::mt19937 random(33);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(random() % 8);
    std::vector<Gpu> gpus(static_cast<std::size_t>(n));
    const auto size = static_cast<std::size_t>(n);
    for (std::size_t i = 0; i < size; ++i) {
      gpus[i].id = "t" + std::to_string(random() % 1000) + "-" + std::to_string(i);
      gpus[i].node = gpus[i].id;
    }
    std::vector<std::vector<double>> bw(size, std::vector<double>(size, 0)), lat = bw;
    std::vector<Link> links;
    for (int v = 1; v < n; ++v) {
      const int u = static_cast<int>(random() % static_cast<unsigned>(v));
      const double b = 1e9 * static_cast<double>(1 + random() % 5);
      const double l = std::ldexp(1.0 + static_cast<double>(random() % 1000) / 7.0,
                                  -static_cast<int>(random() % 30));
      links.push_back({u, v, b, l});
      const auto su = static_cast<std::size_t>(u), sv = static_cast<std::size_t>(v);
      bw[su][sv] = bw[sv][su] = b;
      lat[su][sv] = lat[sv][su] = l;
    }
    const Topology topo = Topology::build("tree", gpus, links, "tree.json");
    for (int u = 0; u < n; ++u) {
      for (int v = u + 1; v < n; ++v) {
        const Oracle want = brute_force(gpus, bw, lat, u, v);
        const PairCost got = topo.pair(u, v);
        EXPECT_EQ(got.bandwidth_bytes_per_s, want.bandwidth) << "trial " << trial;
        EXPECT_EQ(got.hops, want.hops) << "trial " << trial;
        EXPECT_EQ(got.latency_ms, want.latency_ms) << "trial " << trial;  // summed in order
      }
    }
  }
  std::vector<Gpu> gpus(8000);
  std::vector<Link> links;
  for (int i = 0; i < 8000; ++i) {
    gpus[static_cast<std::size_t>(i)].id = "g" + std::to_string(i);
    gpus[static_cast<std::size_t>(i)].node = gpus[static_cast<std::size_t>(i)].id;
    if (i > 0) links.push_back({0, i, 1e9 + 1e6 * i, 0.001});
  }
  const Topology star = Topology::build("star", gpus, links, "star.json");
  EXPECT_EQ(star.pair(1, 7999).bandwidth_bytes_per_s, 1e9 + 1e6);
  EXPECT_EQ(star.pair(1, 7999).hops, 2);
  EXPECT_EQ(star.pair(1, 7999).latency_ms, 0.002);
}

// ---- A GPU's catalogue `type`: memory and speed defaults, and the errors.

Topology read_with(const std::string& text, const std::optional<std::string>& device) {
  return read_topology(io::source_from_text("topo.json", text), device);
}

std::string read_error_with(const std::string& text, const std::optional<std::string>& device) {
  try {
    read_with(text, device);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

const char* const kMixed = R"({"nodes": [
  {"name": "a", "gpus": 2, "type": "A100-80GB", "link": {"bandwidth": "300 GB/s", "latency": 0}},
  {"name": "h", "gpus": 1, "type": "h100 sxm5", "memory": "40 GiB"}],
  "gpus": [{"id": "v", "type": "V100", "speed": 0.5}],
  "network": {"bandwidth": "25 GB/s", "latency": "5 us"}})";

TEST(TopologyGpuTypeTest, DefaultsSpeedAndMemoryFromTheCatalogue) {
  const Topology topo = read_with(kMixed, "A100-80GB");
  ASSERT_EQ(topo.size(), 4);
  EXPECT_EQ(topo.gpu(0).speed, 1.0);                      // the profiled GPU itself
  EXPECT_EQ(topo.gpu(0).memory_bytes, 80.0 * (1 << 30));  // the type's memory
  EXPECT_DOUBLE_EQ(topo.gpu(2).speed, 989.4 / 312);       // bf16 peaks
  EXPECT_EQ(topo.gpu(2).memory_bytes, 40.0 * (1 << 30));  // given memory wins
  EXPECT_EQ(topo.gpu(3).speed, 0.5);                      // given speed wins
  // Relative to a V100 (fp16 peak, 125 TFLOP/s), an A100 is 312 / 125.
  EXPECT_DOUBLE_EQ(read_with(kMixed, "Tesla V100-SXM2-32GB").gpu(0).speed, 312.0 / 125);
}

TEST(TopologyGpuTypeTest, ExplainsWhySpeedCannotDefault) {
  EXPECT_EQ(read_error_with(kMixed, std::nullopt),
            "topo.json: /nodes/0/type: cannot default \"speed\": the model has no profile.device "
            "to relate A100-80GB to; give \"speed\"");
  EXPECT_EQ(read_error_with(kMixed, "TITAN RTX"),
            "topo.json: /nodes/0/type: cannot default \"speed\": the model's profile.device "
            "\"TITAN RTX\" is not a catalogue GPU (see pipeplan model gpus); give \"speed\"");
  // With a speed there is nothing to default: no profiled device is needed.
  EXPECT_EQ(read_with(R"({"gpus": [{"id": "g", "type": "B200", "speed": 2}]})", std::nullopt)
                .gpu(0)
                .memory_bytes,
            180.0 * (1 << 30));
  EXPECT_EQ(read_error_with(R"({"gpus": [{"id": "g", "type": "A100-16GB", "speed": 1}]})", "A100"),
            "topo.json: /gpus/0/type: unknown GPU type \"A100-16GB\" (known: V100-32GB, "
            "A100-40GB, A100-80GB, H100-SXM, H200, GH200, B200, MI300X)");
  EXPECT_EQ(read_error_with(R"({"gpus": [{"id": "g", "type": 100}]})", "A100"),
            "topo.json: /gpus/0/type: must be a string, got number 100");
  EXPECT_EQ(read_error_with(R"({"gpus": [{"id": "g", "typ": "A100"}]})", "A100"),
            "topo.json: /gpus/0/typ: unknown key (did you mean \"type\"?)");
}

TEST(TopologyGpuTypeTest, WithoutTypeNothingChanges) {
  const char* const text = R"({"gpus": [{"id": "g"}, {"id": "h", "speed": 2}],
    "network": {"bandwidth": 1, "latency": 0}})";
  const Topology topo = read_with(text, "A100-80GB");
  EXPECT_EQ(topo.gpu(0).speed, 1.0);
  EXPECT_FALSE(topo.gpu(0).memory_bytes.has_value());
  EXPECT_EQ(topo.gpu(1).speed, 2.0);
}

}  // namespace
}  // namespace pipeplan::topology
