#pragma once
/// \file
/// The pieces every partition search is built from, written once and shared by `spp`'s DP
/// (`partition/dp.cpp`) and the baselines (`planners/gpipe.cpp`, `planners/pipedream.cpp`):
/// prefix sums of the layer columns, the statistics of a run of GPUs, and insertion into a
/// Pareto front. The stash rule of each schedule is `schedule::stashes_per_replica`.

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::partition {

/// Prefix sums of the layer columns: entry `l` sums layers `0..l-1`, so a stage of layers
/// `[i, j)` sums to `column[j] - column[i]`. Every search takes its stage sums from here, so
/// that a search and the objective it states agree to the last bit. `work` sums
/// `forward_ms + backward_ms` layer by layer (not `forward + backward` of the prefix sums,
/// which rounds differently). O(L) to build.
struct LayerSums {
  std::vector<double> forward;     ///< forward_ms
  std::vector<double> backward;    ///< backward_ms
  std::vector<double> work;        ///< forward_ms + backward_ms
  std::vector<double> parameters;  ///< parameter_bytes
  std::vector<double> stash;       ///< stash_bytes
  /// The `range_max_table` of `backward_working_bytes`; empty when no layer has one.
  std::vector<std::vector<double>> working_max;
  explicit LayerSums(const model::Model& model);

  /// The transient of a stage of layers `[i, j)` at degree 1 without recomputation: its largest
  /// backward working set (`model::backward_transient_bytes_at`). O(1).
  [[nodiscard]] double largest_working(int i, int j) const;
};

/// The sparse table of `values` for O(1) range maxima: row k holds the maxima of 2^k
/// consecutive values. O(n log n).
std::vector<std::vector<double>> range_max_table(std::vector<double> values);

/// The largest of values `[i, j)` (`i < j`) of a `range_max_table`. O(log (j - i)).
double range_max(const std::vector<std::vector<double>>& table, int i, int j);

/// What a run of GPUs offers a stage, built one GPU at a time in ring order (`add`): its
/// speeds, its smallest memory, and the slowest bandwidth and largest latency of the ring that
/// closes it (last GPU back to the first). O(1) per GPU added (plus the speed list).
struct RunStats {
  int replicas = 0;
  std::vector<double> speeds;  ///< In run order.
  double fastest = 0;
  double slowest = std::numeric_limits<double>::infinity();
  std::optional<double> capacity;  ///< Smallest memory in the run; none: unlimited.
  double ring_bandwidth = std::numeric_limits<double>::infinity();  ///< bytes/s; inf for r = 1.
  double ring_latency_ms = 0;
  double chain_bandwidth = std::numeric_limits<double>::infinity();  ///< Without the closing edge.
  double chain_latency_ms = 0;
  int first_gpu = -1;
  int last_gpu = -1;

  /// Appends `gpu` to the run.
  void add(const topology::Topology& topology, int gpu);
  /// The statistics of `gpus` in ring order. O(r).
  static RunStats of(const topology::Topology& topology, const std::vector<int>& gpus);
};

/// Inserts `entry` into the Pareto `front` unless an entry of it is at least as good
/// (`at_least_as_good(kept, entry)`), and drops the entries `entry` is at least as good as.
/// Entries keep their insertion order (ties go to the first found). O(front size).
template <class Entry, class AtLeastAsGood>
void pareto_insert(std::vector<Entry>& front, const Entry& entry, AtLeastAsGood at_least_as_good) {
  for (const Entry& kept : front) {
    if (at_least_as_good(kept, entry)) return;
  }
  front.erase(std::remove_if(front.begin(), front.end(),
                             [&](const Entry& kept) { return at_least_as_good(entry, kept); }),
              front.end());
  front.push_back(entry);
}

}  // namespace pipeplan::partition
