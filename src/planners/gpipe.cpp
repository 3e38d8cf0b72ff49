// GPipe baseline: one stage per GPU, layers split by an exact min-max of stage compute.
//
// Reference: Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
// Parallelism", NeurIPS 2019 (one partition per accelerator, "minimize the variance in the
// estimated cost of all cells", fill-drain schedule); the split by profiled time follows
// torchgpipe's `balance_by_time` (Kim et al., 2020), here solved exactly and with each GPU's
// speed.
//
// Dynamic program over (stage index s, first layer i) from the back: best(s, i) is the
// smallest bottleneck of layers i..L-1 on GPUs s..S-1, one non-empty stage each, every stage
// holding the stashes its policy keeps. The split is rebuilt from the front taking, for each
// stage, the shortest layer range that still reaches the optimum (ties: earliest boundaries).
// Complexity: O(S L^2) time, O(S L) memory.

#include <algorithm>
#include <limits>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/partition/building_blocks.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Stashes a GPU of stage s of an S-stage chain without replicas keeps under `policy` (the
// 1F1B warm-up of such a chain is min(M, S - s)).
long chain_stashes(int S, int s, int M, schedule::Policy policy) {
  return schedule::stashes_per_replica(policy, M, 1, std::min(M, S - s));
}

std::string stash_rule(int M, schedule::Policy policy) {
  switch (policy) {
    case schedule::Policy::kGpipe:
    case schedule::Policy::kLoopedBfs:
      return "all " + std::to_string(M) +
             " micro-batches' stashes on every GPU, as fill-drain keeps";
    case schedule::Policy::kOneFOneB:
    case schedule::Policy::kInterleaved1F1B:
    case schedule::Policy::kZbH1:
    case schedule::Policy::kZbV:
      return "the stashes of the 1F1B warm-up on every GPU";
    case schedule::Policy::kList:
      return "one stash on every GPU";
  }
  return "";
}

}  // namespace

std::optional<GpipeSplit> gpipe_split(const model::Model& model, const topology::Topology& topology,
                                      const std::vector<int>& gpus, int micro_batches,
                                      schedule::Policy policy) {
  const int L = static_cast<int>(model.layers.size());
  const int S = static_cast<int>(gpus.size());
  if (S < 1 || S > L) throw InternalError("gpipe_split needs 1 to " + std::to_string(L) + " GPUs");
  const partition::LayerSums sums(model);
  const auto& work = sums.work;
  const auto& parameters = sums.parameters;
  const auto& stash = sums.stash;
  // cost(s, i, j): layers i..j (inclusive) on GPU gpus[s]; infinity when they do not fit.
  auto cost = [&](int s, int i, int j) {
    const auto& gpu = topology.gpu(gpus[static_cast<std::size_t>(s)]);
    const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j) + 1;
    const long need = chain_stashes(S, s, micro_batches, policy);
    const long fit =
        simulate::max_in_flight(model.parameter_memory_factor * (parameters[b] - parameters[a]) +
                                    sums.largest_working(i, j + 1) + model.reserve_bytes,
                                stash[b] - stash[a], gpu.memory_bytes, need);
    if (fit < need) return kInfinity;
    return (work[b] - work[a]) / gpu.speed;
  };

  // best(s, i) for s in 0..S and i in 0..L; stage s may start at layers s..L-(S-s).
  std::vector<double> table((static_cast<std::size_t>(S) + 1) * (static_cast<std::size_t>(L) + 1),
                            kInfinity);
  auto best = [&](int s, int i) -> double& {
    return table[static_cast<std::size_t>(s) * (static_cast<std::size_t>(L) + 1) +
                 static_cast<std::size_t>(i)];
  };
  best(S, L) = 0;
  for (int s = S - 1; s >= 0; --s) {
    for (int i = s; i <= L - (S - s); ++i) {
      double value = kInfinity;
      for (int j = i; j <= L - (S - s); ++j) {
        const double here = cost(s, i, j);
        if (here == kInfinity) break;  // more layers only need more memory
        value = std::min(value, std::max(here, best(s + 1, j + 1)));
      }
      best(s, i) = value;
    }
  }
  const double optimum = best(0, 0);
  if (optimum == kInfinity) return std::nullopt;

  // `max` is exact, so the optimum is reproduced bit for bit along an optimal split.
  GpipeSplit split;
  split.bottleneck_ms = optimum;
  int i = 0;
  for (int s = 0; s < S; ++s) {
    int last = -1;
    for (int j = i; j <= L - (S - s); ++j) {
      const double here = cost(s, i, j);
      if (here == kInfinity) break;
      if (std::max(here, best(s + 1, j + 1)) <= optimum) {
        last = j;
        break;
      }
    }
    if (last < 0) {
      throw InternalError("gpipe_split lost its optimal split at stage " + std::to_string(s));
    }
    split.stages.push_back(Stage{i, last, {gpus[static_cast<std::size_t>(s)]}});
    i = last + 1;
  }
  return split;
}

Partition gpipe_partition(const Request& request, schedule::Policy policy) {
  const model::Model& model = request.model;
  const int L = static_cast<int>(model.layers.size());
  const int S = std::min(request.topology.size(), L);
  Partition partition;
  partition.gpu_order.resize(static_cast<std::size_t>(request.topology.size()));
  std::iota(partition.gpu_order.begin(), partition.gpu_order.end(), 0);
  const std::vector<int> gpus(partition.gpu_order.begin(), partition.gpu_order.begin() + S);
  auto split = gpipe_split(model, request.topology, gpus, request.micro_batches, policy);
  if (!split) {
    // Name the most demanding layer: if it fits nowhere, that alone explains the failure.
    const long stashes = chain_stashes(S, 0, request.micro_batches, policy);
    double worst = 0;
    int worst_layer = 0;
    for (int l = 0; l < L; ++l) {
      const auto& layer = model.layers[static_cast<std::size_t>(l)];
      const double need = model.parameter_memory_factor * layer.parameter_bytes +
                          static_cast<double>(stashes) * layer.stash_bytes +
                          layer.backward_working_bytes + model.reserve_bytes;
      if (need > worst) {
        worst = need;
        worst_layer = l;
      }
    }
    throw InfeasibleError(
        "gpipe: no split of the " + std::to_string(L) + " layers into " + std::to_string(S) +
        " stages, one per GPU in input order, fits in memory with " +
        stash_rule(request.micro_batches, policy) + "; with " + std::to_string(stashes) +
        (stashes == 1 ? " stash" : " stashes") + ", layer " + std::to_string(worst_layer) +
        " alone needs " + io::format_bytes(worst));
  }
  partition.stages = std::move(split->stages);
  return partition;
}

}  // namespace pipeplan::planners
