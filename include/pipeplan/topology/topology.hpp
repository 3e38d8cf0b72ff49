#pragma once
/// \file
/// The GPU cluster (spec section 2): GPUs with speeds and memories, and the effective cost of
/// sending bytes between every pair of GPUs.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pipeplan/io/files.hpp"

namespace pipeplan::topology {

/// The schema string of a topology file.
inline constexpr const char* kTopologySchema = "pipeplan/topology/v1";

/// Most GPUs a topology may have: pair costs take 16 bytes per unordered pair, so this keeps
/// them under 1 GiB.
inline constexpr int kMaxGpus = 11585;

/// One GPU.
struct Gpu {
  std::string id;                           ///< Unique id, e.g. `dgx0/gpu3`.
  std::string node;                         ///< The node (server) it belongs to.
  double speed = 1.0;                       ///< Relative compute speed (> 0).
  std::optional<double> memory_bytes;       ///< Capacity; absent means unlimited.
};

/// A direct, undirected link between two GPUs (indices into the GPU list).
struct Link {
  int a = 0;
  int b = 0;
  double bandwidth_bytes_per_s = 0;  ///< > 0.
  double latency_ms = 0;             ///< >= 0.
};

/// The effective cost of one GPU pair.
struct PairCost {
  double bandwidth_bytes_per_s = 0;  ///< Bottleneck bandwidth of the path used.
  double latency_ms = 0;             ///< Sum of latencies along the path used.
  int hops = 0;                      ///< 1 for a direct link.
};

/// Direct links as dense arrays over unordered GPU pairs (bandwidth 0 means no link): the
/// shorthand joins every pair, so a list of links would be quadratic anyway.
class DirectLinks {
 public:
  /// No links among `gpu_count` GPUs.
  explicit DirectLinks(int gpu_count);
  /// Sets (or replaces) the link between distinct GPUs `a` and `b`.
  void set(int a, int b, double bandwidth_bytes_per_s, double latency_ms);
  /// Whether `a` and `b` are linked.
  [[nodiscard]] bool has(int a, int b) const;

 private:
  friend class Topology;
  int gpu_count_;
  std::vector<double> bandwidth_;
  std::vector<double> latency_ms_;
};

/// A cluster with its effective pair costs. Immutable once built.
class Topology {
 public:
  Topology() = default;

  /// Builds the effective pair costs from direct links (spec section 2): a pair joined by a
  /// link uses it; any other pair uses the path of greatest bottleneck bandwidth (ties: fewest
  /// hops, then the lexicographically smallest sequence of GPU ids read from the smaller id).
  /// Throws `InputError` prefixed with `file` when the GPUs
  /// are not all connected.
  /// Complexity: O(N^2) for the matrix, plus, for every GPU with an unlinked partner,
  /// O(E log N) for the widest paths and O(E) per distinct bottleneck value for the tie-breaks.
  static Topology build(std::string name, std::vector<Gpu> gpus, DirectLinks links,
                        const std::string& file);
  /// The same from a list of links (which must not repeat a pair).
  static Topology build(std::string name, std::vector<Gpu> gpus,
                        const std::vector<Link>& links, const std::string& file);

  /// The topology's name (empty when absent).
  [[nodiscard]] const std::string& name() const { return name_; }
  /// Number of GPUs.
  [[nodiscard]] int size() const { return static_cast<int>(gpus_.size()); }
  /// All GPUs, in input order (shorthand nodes first, then explicit GPUs).
  [[nodiscard]] const std::vector<Gpu>& gpus() const { return gpus_; }
  /// GPU `index`.
  [[nodiscard]] const Gpu& gpu(int index) const { return gpus_[static_cast<std::size_t>(index)]; }
  /// Index of the GPU with this id.
  [[nodiscard]] std::optional<int> index_of(std::string_view id) const;
  /// Number of distinct nodes.
  [[nodiscard]] int node_count() const { return node_count_; }

  /// Effective cost between two distinct GPUs.
  [[nodiscard]] PairCost pair(int u, int v) const;
  /// Effective bandwidth between two distinct GPUs, bytes/s.
  [[nodiscard]] double bandwidth_bytes_per_s(int u, int v) const {
    return bandwidth_[slot(u, v)];
  }
  /// Effective latency between two distinct GPUs, ms.
  [[nodiscard]] double latency_ms(int u, int v) const { return latency_ms_[slot(u, v)]; }
  /// Time to send `bytes` from `u` to `v`: latency + bytes / bandwidth, in ms.
  [[nodiscard]] double transfer_ms(int u, int v, double bytes) const {
    std::size_t at = slot(u, v);
    return latency_ms_[at] + bytes / bandwidth_[at] * 1e3;
  }

 private:
  // Index of the unordered pair {u, v}, u != v, in the upper-triangle arrays.
  [[nodiscard]] std::size_t slot(int u, int v) const {
    auto a = static_cast<std::size_t>(u < v ? u : v);
    auto b = static_cast<std::size_t>(u < v ? v : u);
    auto n = gpus_.size();
    return a * n - a * (a + 1) / 2 + (b - a - 1);
  }

  std::string name_;
  std::vector<Gpu> gpus_;
  int node_count_ = 0;
  std::unordered_map<std::string, int> index_;
  std::vector<double> bandwidth_;   // bytes/s, per unordered pair
  std::vector<double> latency_ms_;  // ms, per unordered pair
  std::vector<std::uint16_t> hops_; // path length, per unordered pair
};

/// Reads and validates a `topo.json` (spec section 2). Throws `InputError` naming the file
/// and JSON pointer of the first problem.
Topology read_topology(const io::Source& source);

}  // namespace pipeplan::topology
