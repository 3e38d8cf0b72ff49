// Uniform baseline: equal layer counts per stage, one GPU per stage.
//
// Reference: the naive even split used as a baseline throughout the pipeline literature
// (e.g. the "straight" partition in Narayanan et al., "PipeDream", SOSP 2019, section 5, and
// PyTorch's Pipe with equal balance). S = min(N, L) stages of floor(L / S) layers; the first
// L mod S stages take one layer more, so no stage is empty. Stage s runs alone on GPU s of the
// input order. Complexity: O(L + N).

#include <algorithm>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/planners/baselines.hpp"

namespace pipeplan::planners {

Partition uniform_partition(const Request& request, schedule::Policy policy) {
  const int L = static_cast<int>(request.model.layers.size());
  const int N = request.topology.size();
  const int S = std::min(N, L);
  Partition partition;
  partition.gpu_order.resize(static_cast<std::size_t>(N));
  std::iota(partition.gpu_order.begin(), partition.gpu_order.end(), 0);
  int first = 0;
  for (int s = 0; s < S; ++s) {
    const int count = L / S + (s < L % S ? 1 : 0);
    partition.stages.push_back(Stage{first, first + count - 1, {s}});
    first += count;
  }
  for (int s = 0; s < S; ++s) {
    const long stashes = peak_stashes(partition.stages, s, request.micro_batches, policy);
    if (auto shortfall =
            memory_shortfall(request.model, request.topology,
                             partition.stages[static_cast<std::size_t>(s)], s, stashes)) {
      throw InfeasibleError("uniform: " + *shortfall + " under the " +
                            std::string(schedule::policy_name(policy)) + " schedule");
    }
  }
  return partition;
}

}  // namespace pipeplan::planners
