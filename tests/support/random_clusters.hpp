#pragma once
// Random topologies written with `nodes` (no links), for the tests that compare a node-cost
// topology's fast paths with the general algorithms on the same file's dense pair costs
// (`topology::PairLayout::kDense`).

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace pipeplan::testing {

// A random cluster without links of about `scale` GPUs: shorthand entries (some without a link,
// bandwidths drawn from a few values so that they tie with each other and with the network,
// sometimes slower than it, which needs a cut), then explicit GPUs joining those nodes or named
// nodes in random order (so a node's GPUs are not contiguous), and some GPUs of their own.
inline std::string random_cluster(std::mt19937& random, int scale) {
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

}  // namespace pipeplan::testing
