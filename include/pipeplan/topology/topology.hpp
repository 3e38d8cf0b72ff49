#pragma once
/// \file
/// The GPU cluster (spec section 2): GPUs with speeds and memories, and the effective cost of
/// sending bytes between every pair of GPUs. Reading is in src/topology/read_topology.cpp, the
/// pair costs (`Topology::build`) in src/topology/pair_costs.cpp.

#include <cstddef>
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

/// Most GPUs a topology with explicit `links` may have: its pair costs are dense, 16 bytes per
/// unordered pair (plus 2 for the hop count), and spp's ordering 8 more, so that planning on
/// this many GPUs stays within about 1 GiB and 5 s (8,192 one-GPU nodes: 3 s, 860 MB; 11,585
/// took 5.7 s and 1.7 GB).
inline constexpr int kMaxGpus = 8192;

/// Most GPUs a topology without explicit `links` may have (shorthand `nodes`, and explicit GPUs
/// without links): every pair's cost is then a function of the two GPUs' nodes, held per node
/// and for the network (`Topology::build_by_node`), so memory is linear in the GPUs. 131,072
/// is the largest cluster the planners are measured on (docs/performance.md, "Clusters of any
/// size").
inline constexpr int kMaxNodeGpus = 131072;

/// Work allowed to the widest-path searches that fill unlinked pairs (GPUs and classes looked at).
/// They cost O(N) per distinct bottleneck per source: nothing on clusters written with the
/// `nodes` shorthand or links that form a tree (one path per pair, no search), up to O(N^3) on a
/// long ring of distinct bandwidths (a ring of 600 GPUs takes about 7e7). 2e8 steps take about
/// two seconds; beyond them the topology is rejected.
inline constexpr std::uint64_t kMaxPathSteps = 200'000'000;

/// Longest node name or GPU id accepted, in bytes. A shorthand node's name is repeated in the
/// id of each of its GPUs, so without a limit a small file could ask for gigabytes of ids.
inline constexpr std::size_t kMaxNameBytes = 256;

/// Slowest GPU speed accepted (a millionth of the profiled GPU's). Smaller positive speeds,
/// such as 1e-320, are typos that would make compute times overflow to infinity.
inline constexpr double kMinSpeed = 1e-6;

/// Narrowest bandwidth accepted, bytes/s: 1 bit/s. Smaller positive bandwidths, such as
/// 1e-320, are typos that would make transfer times overflow to infinity.
inline constexpr double kMinBandwidthBytesPerS = 0.125;

/// One GPU.
struct Gpu {
  std::string id;                      ///< Unique id, e.g. `dgx0/gpu3`.
  std::string node;                    ///< The node (server) it belongs to.
  double speed = 1.0;                  ///< Relative compute speed (> 0).
  std::optional<double> memory_bytes;  ///< Capacity; absent means unlimited.
};

/// A direct, undirected link between two GPUs (indices into the GPU list).
struct Link {
  int a = 0;                         ///< One end (index into the GPU list).
  int b = 0;                         ///< The other end, != a.
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
  /// No links among `gpu_count` GPUs (0 to `kMaxGpus`; anything else throws `InternalError`).
  explicit DirectLinks(int gpu_count);
  /// Sets (or replaces) the link between distinct GPUs `a` and `b`. Bandwidth must be finite
  /// and > 0, latency finite and >= 0; a violation is a bug and throws `InternalError`.
  void set(int a, int b, double bandwidth_bytes_per_s, double latency_ms);
  /// Whether distinct GPUs `a` and `b` are linked.
  [[nodiscard]] bool has(int a, int b) const;
  /// Number of GPUs.
  [[nodiscard]] int size() const { return gpu_count_; }

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
  /// hops, then the lexicographically smallest sequence of GPU ids, in byte order, read from
  /// the end with the smaller id), with the latencies summed along it.
  /// Throws `InputError` prefixed with `file` when the GPUs are not all connected (or a path's
  /// summed latency overflows). GPU ids must be unique and the links' size must match the
  /// GPUs (else `InternalError`).
  /// Complexity: O(N^2) time and memory when every pair is linked, or when the links form a
  /// tree (one walk of it per GPU). Otherwise a maximum spanning
  /// tree (O(N^2)) gives every bottleneck, and for every GPU with an unlinked partner of larger
  /// id, one breadth-first search per distinct bottleneck value among those partners, limited
  /// to the GPUs reachable at that bottleneck: O(N^2) in all for shorthand clusters, at worst
  /// O(N^3) for pathological inputs with many distinct bandwidths: beyond `kMaxPathSteps`
  /// steps of those searches it throws `InputError` (too many distinct paths to search).
  static Topology build(std::string name, std::vector<Gpu> gpus, DirectLinks links,
                        const std::string& file);
  /// The same from a list of links (which must not repeat a pair; else `InternalError`).
  static Topology build(std::string name, std::vector<Gpu> gpus, const std::vector<Link>& links,
                        const std::string& file);
  /// A topology whose pair costs depend only on the two GPUs' nodes: `gpu_node[g]` is GPU g's
  /// node (0 to `node_costs.size() - 1`), two GPUs of node k cost `node_costs[k]`, two GPUs of
  /// different nodes cost `network`. Up to `kMaxNodeGpus` GPUs; the costs are held per node, so
  /// memory is O(N + nodes) and every pair query O(1). The reader builds this for every file
  /// without explicit links, with exactly the costs `build` would find (`read_topology`).
  /// Throws `InternalError` on sizes that do not match, a node index out of range or a node
  /// without GPUs.
  /// Complexity: O(N) (plus hashing the ids).
  static Topology build_by_node(std::string name, std::vector<Gpu> gpus, std::vector<int> gpu_node,
                                std::vector<PairCost> node_costs, PairCost network);

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

  /// Whether every pair's cost is a function of the two GPUs' nodes, held per node
  /// (`build_by_node`); then `node_of`, `node_cost` and `network_cost` describe all pairs.
  [[nodiscard]] bool costs_by_node() const { return by_node_; }
  /// The node of GPU `gpu` (by node-cost topologies only: 0 to `node_count() - 1`).
  [[nodiscard]] int node_of(int gpu) const { return gpu_node_[static_cast<std::size_t>(gpu)]; }
  /// The cost between two GPUs of node `node` (node-cost topologies only).
  [[nodiscard]] const PairCost& node_cost(int node) const {
    return node_costs_[static_cast<std::size_t>(node)];
  }
  /// The cost between two GPUs of different nodes (node-cost topologies only).
  [[nodiscard]] const PairCost& network_cost() const { return network_; }

  /// Effective cost between two distinct GPUs.
  [[nodiscard]] PairCost pair(int u, int v) const;
  /// Effective bandwidth between two distinct GPUs, bytes/s.
  [[nodiscard]] double bandwidth_bytes_per_s(int u, int v) const {
    if (by_node_) return by_node(u, v).bandwidth_bytes_per_s;
    return bandwidth_[slot(u, v)];
  }
  /// Effective latency between two distinct GPUs, ms.
  [[nodiscard]] double latency_ms(int u, int v) const {
    if (by_node_) return by_node(u, v).latency_ms;
    return latency_ms_[slot(u, v)];
  }
  /// The narrowest bandwidth and the longest latency over every pair of a GPU of `from` and one
  /// of `to` (what a transfer between any replicas of two stages costs at most); infinite
  /// bandwidth and no latency when either is empty. O(|from| |to|), or O((|from| + |to|) log)
  /// for a node-cost topology, from the nodes the two sets touch (131,072 GPUs: stages of
  /// thousands of GPUs each).
  [[nodiscard]] PairCost worst_pair(const std::vector<int>& from, const std::vector<int>& to) const;
  /// Time to send `bytes` from `u` to `v`: latency + bytes / bandwidth, in ms.
  [[nodiscard]] double transfer_ms(int u, int v, double bytes) const {
    if (by_node_) {
      const PairCost& cost = by_node(u, v);
      return cost.latency_ms + bytes / cost.bandwidth_bytes_per_s * 1e3;
    }
    std::size_t at = slot(u, v);
    return latency_ms_[at] + bytes / bandwidth_[at] * 1e3;
  }

 private:
  // The cost of {u, v} in a node-cost topology.
  [[nodiscard]] const PairCost& by_node(int u, int v) const {
    const int node = gpu_node_[static_cast<std::size_t>(u)];
    return node == gpu_node_[static_cast<std::size_t>(v)]
               ? node_costs_[static_cast<std::size_t>(node)]
               : network_;
  }

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
  std::vector<double> bandwidth_;    // bytes/s, per unordered pair
  std::vector<double> latency_ms_;   // ms, per unordered pair
  std::vector<std::uint16_t> hops_;  // path length, per unordered pair
  // Node-cost topologies (`build_by_node`): the arrays above stay empty.
  bool by_node_ = false;
  std::vector<int> gpu_node_;         // per GPU
  std::vector<PairCost> node_costs_;  // per node: between two of its GPUs
  PairCost network_;                  // between GPUs of different nodes
};

/// Reads and validates a `topo.json` (spec section 2). Throws `InputError` naming the file
/// and JSON pointer of the first problem. Beyond the spec: speeds at least `kMinSpeed`,
/// bandwidths at least `kMinBandwidthBytesPerS`; at most `kMaxNodeGpus` GPUs, and at most
/// `kMaxGpus` when the file has explicit `links` (whose pair costs are dense); node names
/// and GPU ids at most `kMaxNameBytes` long; a GPU without `node` is a node of its own named
/// after its id, so that name must not be another node's; latencies must stay finite in ms,
/// also summed along a path.
///
/// A GPU (or shorthand node) may name a catalogue `type` (`pipeplan model gpus`); it then
/// defaults `memory` to the type's and `speed` to the ratio of the type's 16-bit training peak
/// (`hardware::training_peak_flops_per_s`) to that of `profiled_device`, the model's
/// `profile.device` (matched by `hardware::find_gpu`). A type without `speed` when
/// `profiled_device` is absent or not in the catalogue is an `InputError` at the `type`.
///
/// A file without `links` gives a node-cost topology (`Topology::costs_by_node`): every pair
/// of a node uses the node's link (or, for a node without one, two hops of the network), every
/// other pair the network, exactly the costs the dense pair matrices would hold.
/// `layout` kDense forces the dense matrices (for tests comparing the two; up to `kMaxGpus`).
enum class PairLayout { kAuto, kDense };
Topology read_topology(const io::Source& source,
                       const std::optional<std::string>& profiled_device = std::nullopt,
                       PairLayout layout = PairLayout::kAuto);

}  // namespace pipeplan::topology
