#pragma once
/// \file
/// Step 1 of the planner: order the GPUs so that tightly linked groups are contiguous, by
/// recursive global minimum cuts of the bandwidth graph (Luo et al., INFOCOM 2022).

#include <vector>

#include "pipeplan/topology/topology.hpp"

namespace pipeplan::ordering {

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
/// identical nodes never reach the Stoer-Wagner step, so they cost O(N^2) overall.
std::vector<int> mincut_order(const topology::Topology& topology);

/// The value `cut(A, B) / (|A| |B|)` that step 3 minimises, for a side `in_a` (true = A) of
/// the GPUs in `group`, with pair weights `bandwidth - slowest bandwidth of the group`.
/// Exposed for tests.
double ratio_cut(const topology::Topology& topology, const std::vector<int>& group,
                 const std::vector<bool>& in_a);

}  // namespace pipeplan::ordering
