#pragma once
/// \file
/// Step 1 of the planner: order the GPUs so that tightly linked groups are contiguous, by
/// recursive global minimum cuts of the bandwidth graph (Luo et al., INFOCOM 2022).

#include <cstddef>
#include <vector>

#include "pipeplan/topology/topology.hpp"

namespace pipeplan::ordering {

/// Work allowed to the cuts of one ordering beyond the first level's N^2: the sum of n^2 for
/// each group split and n^3 for each Stoer-Wagner cut, in GPUs of the group.
inline constexpr double kMaxOrderWork = 1e8;

/// What `mincut_order` had to do beyond the cuts.
struct OrderStats {
  std::size_t spanning_tree_groups = 0;  ///< groups ordered by spanning tree, out of budget
  std::size_t spanning_tree_gpus = 0;    ///< GPUs in those groups
};

/// Orders all GPUs of `topology` by recursive minimum cut:
///
/// 1. A group whose pairs all have the same bandwidth and latency is kept in input order.
/// 2. Otherwise the slowest bandwidth of the group is subtracted from every pair (so the
///    background of slow links that joins everything weighs nothing; without this a global
///    minimum cut of a dense graph tends to cut off a single GPU). If the remaining graph
///    falls apart, its connected components are the groups.
/// 3. Otherwise Boost.Graph's Stoer-Wagner finds a global minimum cut, which is then improved
///    for the ratio `cut / (|A| |B|)` by single-GPU moves (so ties and near-ties go to the
///    more balanced cut, e.g. the two quads of a DGX-1).
/// 4. Within a group of equal bandwidths but different latencies, the same steps run on the
///    affinity 1 / latency (so a chain of equal links keeps chain order).
///
/// Groups are ordered recursively and joined, each join oriented to maximise the bandwidth
/// (then minimise the latency) across it; remaining ties keep input order. Deterministic.
///
/// Complexity: O(n^2) per level to find the slowest link and the components; a Stoer-Wagner
/// cut costs O(n^3) (Boost, dense graph) plus O(n^2) per improving move. Clusters built from
/// identical nodes never reach the Stoer-Wagner step, so they cost O(N^2) overall. Without
/// such structure (every pair's bandwidth different, as in measured bandwidths) the cuts may
/// peel a few GPUs at a time, O(N^4) in all; so the work is bounded by `kMaxOrderWork` (about
/// a second), and a group reached when it is spent is ordered by single linkage over a
/// maximum spanning tree instead (O(n^2), same goal: strong links inside contiguous runs).
/// `stats`, when given, counts such groups. Deterministic: the budget counts work, not time.
/// `max_work` replaces `kMaxOrderWork` (infinity: cuts only; 0: the spanning tree wherever a
/// cut is needed), for measuring what the fallback costs.
std::vector<int> mincut_order(const topology::Topology& topology, OrderStats* stats = nullptr,
                              double max_work = kMaxOrderWork);

/// The value `cut(A, B) / (|A| |B|)` that step 3 minimises, for a side `in_a` (true = A) of
/// the GPUs in `group`, with pair weights `bandwidth - slowest bandwidth of the group`.
/// Exposed for tests.
double ratio_cut(const topology::Topology& topology, const std::vector<int>& group,
                 const std::vector<bool>& in_a);

}  // namespace pipeplan::ordering
