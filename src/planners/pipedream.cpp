// PipeDream baseline: the optimizer's dynamic program minimising the slowest replicated stage.
//
// Reference: Narayanan et al., "PipeDream: Generalized Pipeline Parallelism for DNN
// Training", SOSP 2019, section 3.1: A(j, m) = min over the last stage (layers i+1..j on m'
// machines) of max(A(i, m - m'), 2 C_i, T(i+1 -> j, m')), where a stage replicated on m'
// machines takes (compute + data-parallel weight synchronisation) / m' per minibatch and C_i
// is the time to send layer i's activations. Here with this tool's inputs: compute at the
// slowest replica's speed (round-robin waits for it), the synchronisation is the ring
// AllReduce of the execution model over the stage's GPUs, C_i is `A_i / bandwidth` between the
// two GPUs on either side of the boundary in the input order, and every GPU is used, as the
// original optimizer does. It ignores the micro-batch count and the flush (as the original);
// the schedule is 1F1B with a flush (PipeDream-Flush, Narayanan et al., ICML 2021).
//
// Memory, which the original does not model: a stage must hold its static bytes plus the
// stashes of its schedule. Under 1F1B those depend on the stages after it (the warm-up
// w_s = min(M, max_{t>=s} (S-t) r_t)), so the DP runs over suffixes (layers i..L-1 on GPU
// positions p..N-1) and each state keeps the Pareto front of (slowest, stage count, warm-up):
// prepending a stage only raises all three, and whether it fits depends only on them, so the
// front is exact and the DP equals an exhaustive search of its own objective.
//
// Complexity: O(L^2 N^2 F) for L layers, N GPUs and fronts of at most F <= min(L, N) M
// entries (each insertion scans its front); memory O(L N F).

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>

#include "pipeplan/error.hpp"
#include "pipeplan/partition/building_blocks.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using partition::LayerSums;
using partition::RunStats;

// ((F + B) / v + AR) / r for layers [i, j) on `run`.
double stage_cost(const LayerSums& prefix, int i, int j, const RunStats& run) {
  const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
  const double allreduce =
      simulate::ring_allreduce_ms(run.replicas, prefix.parameters[b] - prefix.parameters[a],
                                  run.ring_bandwidth, run.ring_latency_ms);
  return ((prefix.work[b] - prefix.work[a]) / run.slowest + allreduce) / run.replicas;
}

// Whether layers [i, j) on `run` hold `stashes` stashes on every replica.
bool fits(const model::Model& model, const LayerSums& prefix, int i, int j, const RunStats& run,
          long stashes) {
  const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
  return simulate::max_in_flight(
             model.parameter_memory_factor * (prefix.parameters[b] - prefix.parameters[a]) +
                 prefix.largest_working(i, j) + model.reserve_bytes,
             prefix.stash[b] - prefix.stash[a], run.capacity, stashes) >= stashes;
}

// 2 A / bandwidth across the boundary after layer `last` between GPUs u and v, ms.
double boundary_cost(const model::Model& model, const topology::Topology& topology, int last, int u,
                     int v) {
  return 2 * model.layers[static_cast<std::size_t>(last)].activation_bytes /
         topology.bandwidth_bytes_per_s(u, v) * 1e3;
}

struct Entry {
  double slowest;
  int stages;   // in this suffix
  long warmup;  // min(M, max over its stages t of (stages from t to the end) r_t)
  int j;        // next state's first layer (== L: this stage is the last)
  int b;        // next state's first GPU position
  int next;     // index in the next state's front; -1 at the end
};

// Adds `e` unless an entry is at least as good in all three; drops the entries it dominates.
void insert(std::vector<Entry>& front, const Entry& e) {
  partition::pareto_insert(front, e, [](const Entry& a, const Entry& b) {
    return a.slowest <= b.slowest && a.stages <= b.stages && a.warmup <= b.warmup;
  });
}

std::string stash_rule(schedule::Policy policy) {
  switch (policy) {
    case schedule::Policy::kGpipe:
    case schedule::Policy::kLoopedBfs:
      return "all of its micro-batches' stashes, as fill-drain keeps";
    case schedule::Policy::kOneFOneB:
    case schedule::Policy::kInterleaved1F1B:
    case schedule::Policy::kZbH1:
    case schedule::Policy::kZbV:
      return "the stashes of its 1F1B warm-up";
    case schedule::Policy::kList:
      return "one stash";
  }
  return "";
}

}  // namespace

std::optional<double> pipedream_objective(const model::Model& model,
                                          const topology::Topology& topology,
                                          const std::vector<Stage>& stages, int micro_batches,
                                          schedule::Policy policy) {
  const LayerSums prefix(model);
  double slowest = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    const RunStats run = RunStats::of(topology, stage.gpus);
    const long need = peak_stashes(stages, static_cast<int>(s), micro_batches, policy);
    if (!fits(model, prefix, stage.first_layer, stage.last_layer + 1, run, need)) {
      return std::nullopt;
    }
    slowest = std::max(slowest, stage_cost(prefix, stage.first_layer, stage.last_layer + 1, run));
    if (s + 1 < stages.size()) {
      slowest = std::max(slowest, boundary_cost(model, topology, stage.last_layer,
                                                stage.gpus.back(), stages[s + 1].gpus.front()));
    }
  }
  return slowest;
}

std::optional<PipeDreamSolution> pipedream_solve(const model::Model& model,
                                                 const topology::Topology& topology,
                                                 int micro_batches, schedule::Policy policy,
                                                 int only_replicas) {
  const int L = static_cast<int>(model.layers.size());
  const int N = topology.size();
  const long M = micro_batches;
  const LayerSums prefix(model);
  std::vector<std::vector<Entry>> fronts(static_cast<std::size_t>(L) * static_cast<std::size_t>(N));
  auto front = [&](int i, int p) -> std::vector<Entry>& {
    return fronts[static_cast<std::size_t>(i) * static_cast<std::size_t>(N) +
                  static_cast<std::size_t>(p)];
  };

  for (int i = L - 1; i >= 0; --i) {
    for (int p = N - 1; p >= 0; --p) {
      std::vector<Entry>& here = front(i, p);
      RunStats run;
      for (int b = p + 1; b <= N; ++b) {
        run.add(topology, b - 1);  // extend the run (input order: position == GPU index)
        const long r = run.replicas;
        if (only_replicas > 0 && r != only_replicas) continue;
        for (int j = i + 1; j <= L; ++j) {
          if (!fits(model, prefix, i, j, run, 1)) break;  // more layers only need more memory
          const double cost = stage_cost(prefix, i, j, run);
          if (j == L) {
            if (b != N) continue;  // every GPU is used
            const long warmup = std::min(M, r);
            if (fits(model, prefix, i, j, run,
                     schedule::stashes_per_replica(policy, M, r, warmup))) {
              insert(here, Entry{cost, 1, warmup, j, b, -1});
            }
            continue;
          }
          if (b == N) continue;  // no GPU left for the next stage
          const std::vector<Entry>& rest = front(j, b);
          const double boundary = boundary_cost(model, topology, j - 1, b - 1, b);
          for (std::size_t x = 0; x < rest.size(); ++x) {
            const Entry& e = rest[x];
            const long warmup =
                std::min(M, std::max(e.warmup, static_cast<long>(e.stages + 1) * r));
            if (!fits(model, prefix, i, j, run,
                      schedule::stashes_per_replica(policy, M, r, warmup)))
              continue;
            insert(here, Entry{std::max({cost, boundary, e.slowest}), e.stages + 1, warmup, j, b,
                               static_cast<int>(x)});
          }
        }
      }
    }
  }

  const std::vector<Entry>& start = front(0, 0);
  if (start.empty()) return std::nullopt;
  std::size_t best = 0;
  for (std::size_t x = 1; x < start.size(); ++x) {
    const Entry& a = start[x];
    const Entry& b = start[best];
    if (std::tie(a.slowest, a.stages, a.warmup) < std::tie(b.slowest, b.stages, b.warmup)) best = x;
  }
  PipeDreamSolution solution;
  solution.slowest_ms = start[best].slowest;
  int i = 0, p = 0;
  int x = static_cast<int>(best);
  while (true) {
    const Entry& e = front(i, p)[static_cast<std::size_t>(x)];
    Stage stage;
    stage.first_layer = i;
    stage.last_layer = e.j - 1;
    for (int g = p; g < e.b; ++g) stage.gpus.push_back(g);
    solution.stages.push_back(std::move(stage));
    if (e.next < 0) break;
    i = e.j;
    p = e.b;
    x = e.next;
  }
  return solution;
}

Partition pipedream_partition(const Request& request, schedule::Policy policy) {
  std::optional<PipeDreamSolution> solution;
  if (request.uniform) {
    // --uniform: the best of PipeDream's DP with every stage at r replicas, for every r that
    // divides the GPUs (every GPU is used) and shares the micro-batches equally; ties to the
    // smaller r.
    const int N = request.topology.size();
    for (int r = 1; r <= N; ++r) {
      if (N % r != 0 || !partition::shares_equally(request.micro_batches, r)) continue;
      auto candidate =
          pipedream_solve(request.model, request.topology, request.micro_batches, policy, r);
      if (candidate && (!solution || candidate->slowest_ms < solution->slowest_ms))
        solution = std::move(candidate);
    }
  } else {
    solution = pipedream_solve(request.model, request.topology, request.micro_batches, policy);
  }
  if (!solution) {
    throw InfeasibleError(
        "pipedream: no partition of the " + std::to_string(request.model.layers.size()) +
        " layers over all " + std::to_string(request.topology.size()) +
        " GPUs in input order fits in memory with every stage holding " + stash_rule(policy) +
        (policy == schedule::Policy::kList
             ? " (" + infeasibility_reason(request) + ")"
             : std::string("; the list schedule needs only one (--schedule list)")));
  }
  Partition partition;
  partition.gpu_order.resize(static_cast<std::size_t>(request.topology.size()));
  std::iota(partition.gpu_order.begin(), partition.gpu_order.end(), 0);
  partition.stages = std::move(solution->stages);
  return partition;
}

}  // namespace pipeplan::planners
