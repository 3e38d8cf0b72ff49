// The reader refuses a disconnected cluster from the link specifications alone, before the
// pair matrices exist (read_topology.cpp, check_connected): checked against a breadth-first search
// over the pairs the specifications link, on random small clusters with a fixed seed.

#include <gtest/gtest.h>

#include <queue>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/error.hpp"
#include "pipeplan/io/files.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::topology {
namespace {

// The first GPU that GPU 0 cannot reach over `linked` pairs (breadth-first), or -1. O(n^2).
int first_unreached(const std::vector<std::vector<bool>>& linked) {
  const int n = static_cast<int>(linked.size());
  std::vector<bool> seen(static_cast<std::size_t>(n));
  std::queue<int> queue;
  queue.push(0);
  seen[0] = true;
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop();
    for (int v = 0; v < n; ++v) {
      if (linked[u][v] && !seen[v]) {
        seen[v] = true;
        queue.push(v);
      }
    }
  }
  for (int v = 0; v < n; ++v) {
    if (!seen[v]) return v;
  }
  return -1;
}

TEST(ConnectivityTest, TheReaderAgreesWithASearchOverTheLinkedPairs) {
  std::mt19937 rng(18);
  int connected = 0, disconnected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    // 2-7 GPUs: shorthand nodes (with or without a node link), explicit GPUs (own node or a
    // named one), some explicit links, a network or not.
    std::vector<int> node_of;     // per GPU
    std::vector<bool> node_link;  // per node
    std::vector<std::string> ids;
    std::string nodes, gpus;
    const int shorthand = static_cast<int>(rng() % 3);
    for (int k = 0; k < shorthand; ++k) {
      const int count = 1 + static_cast<int>(rng() % 3);
      const bool link = rng() % 2 == 0;
      nodes += std::string(nodes.empty() ? "" : ", ") + R"({"name": "s)" + std::to_string(k) +
               R"(", "gpus": )" + std::to_string(count) +
               (link ? R"(, "link": {"bandwidth": "1 GB/s", "latency": "1 us"}})" : "}");
      for (int g = 0; g < count; ++g) {
        ids.push_back("s" + std::to_string(k) + "/gpu" + std::to_string(g));
        node_of.push_back(static_cast<int>(node_link.size()));
      }
      node_link.push_back(link);
    }
    const int named = static_cast<int>(node_link.size());  // the node "shared", if used
    bool shared_used = false;
    const int explicit_count = (ids.empty() ? 2 : 0) + static_cast<int>(rng() % 3);
    for (int e = 0; e < explicit_count; ++e) {
      const std::string id = "e" + std::to_string(e);
      const bool share = rng() % 2 == 0;
      gpus += std::string(gpus.empty() ? "" : ", ") + R"({"id": ")" + id + "\"" +
              (share ? R"(, "node": "shared"})" : "}");
      ids.push_back(id);
      if (share) {
        if (!shared_used) node_link.push_back(false);
        shared_used = true;
        node_of.push_back(named);
      } else {
        node_of.push_back(1000 + e);  // a node of its own
      }
    }
    const int n = static_cast<int>(ids.size());
    std::vector<std::vector<bool>> linked(static_cast<std::size_t>(n),
                                          std::vector<bool>(static_cast<std::size_t>(n)));
    const bool network = rng() % 3 == 0;
    for (int u = 0; u < n; ++u) {
      for (int v = 0; v < n; ++v) {
        if (u == v) continue;
        const bool same = node_of[u] == node_of[v];
        if (same && node_of[u] < static_cast<int>(node_link.size()) && node_link[node_of[u]]) {
          linked[u][v] = true;
        }
        if (!same && network) linked[u][v] = true;
      }
    }
    std::string links;
    for (int u = 0; u < n; ++u) {
      for (int v = u + 1; v < n; ++v) {
        if (rng() % 6 != 0) continue;
        links += std::string(links.empty() ? "" : ", ") + R"({"between": [")" + ids[u] + R"(", ")" +
                 ids[v] + R"("], "bandwidth": "2 GB/s", "latency": "1 us"})";
        linked[u][v] = linked[v][u] = true;
      }
    }
    std::string text = "{";
    if (!nodes.empty()) text += R"("nodes": [)" + nodes + "], ";
    if (!gpus.empty()) text += R"("gpus": [)" + gpus + "], ";
    if (network) text += R"("network": {"bandwidth": "1 GB/s", "latency": "1 us"}, )";
    text += R"("links": [)" + links + "]}";

    // The oracle: the first GPU that GPU 0 cannot reach.
    const int unreached = first_unreached(linked);
    SCOPED_TRACE(text);
    if (unreached < 0) {
      ++connected;
      EXPECT_NO_THROW(read_topology(io::source_from_text("topo.json", text)));
    } else {
      ++disconnected;
      try {
        read_topology(io::source_from_text("topo.json", text));
        ADD_FAILURE() << "accepted a disconnected cluster";
      } catch (const InputError& error) {
        EXPECT_EQ(std::string(error.what()),
                  "topo.json: topology is not connected: no path between \"" + ids[0] +
                      "\" and \"" + ids[static_cast<std::size_t>(unreached)] +
                      "\" (add a link, a node link or a network)");
      }
    }
  }
  EXPECT_GT(connected, 50);
  EXPECT_GT(disconnected, 50);
}

}  // namespace
}  // namespace pipeplan::topology
