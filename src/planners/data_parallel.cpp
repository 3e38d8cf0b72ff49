// Data-parallel baseline: one stage holding every layer, replicated on every GPU.
//
// Reference: synchronous data parallelism with ring AllReduce (Sergeev and Del Balso,
// "Horovod", 2018; Goyal et al., "Accurate, Large Minibatch SGD", 2017): each GPU runs whole
// micro-batches (micro-batch m on GPU m mod N under the fixed policies), then the gradients
// are averaged by one ring AllReduce in input order. Complexity: O(L + N).

#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/baselines.hpp"

namespace pipeplan::planners {

std::optional<std::string> data_parallel_refusal(const Request& request) {
  const int N = request.topology.size();
  if (!request.uniform || partition::shares_equally(request.micro_batches, N)) return std::nullopt;
  const std::string m = std::to_string(request.micro_batches), n = std::to_string(N);
  return "--micro-batches " + m + ": under --uniform every replica takes the same number of " +
         "micro-batches, and the data-parallel planner's " + n + " replicas (every GPU) cannot " +
         "share " + m + "; give a multiple of " + n + " micro-batches";
}

Partition data_parallel_partition(const Request& request, schedule::Policy policy) {
  const int L = static_cast<int>(request.model.layers.size());
  const int N = request.topology.size();
  Partition partition;
  partition.gpu_order.resize(static_cast<std::size_t>(N));
  std::iota(partition.gpu_order.begin(), partition.gpu_order.end(), 0);
  partition.stages.push_back(Stage{0, L - 1, partition.gpu_order});
  const long stashes = peak_stashes(partition.stages, 0, request.micro_batches, policy);
  if (auto shortfall =
          memory_shortfall(request.model, request.topology, partition.stages.front(), 0, stashes)) {
    throw InfeasibleError("data-parallel: " + *shortfall + " under the " +
                          std::string(schedule::policy_name(policy)) + " schedule");
  }
  return partition;
}

}  // namespace pipeplan::planners
