// Partition and placement by dynamic programming.
//
// Reference: the DP of Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN
// Training" (INFOCOM 2022), over (layer prefix, prefix of the GPU order); here run over
// suffixes so that a stage's round trip to the end of the pipeline is known when the stage is
// added. The objective is stated in docs/algorithms.md.
//
// State (i, k): layers i..L-1 on runs of the order starting exactly at position k. A
// transition adds the first stage (layers i..j-1 on positions k..b-1) before state (j, b),
// or ends the plan when j = L (positions b..N-1 stay unused). Each state keeps the Pareto
// front of (latency, excess, tail): all three only grow along a transition and the
// objective is their sum, so the front is exact.
// Complexity: O(L^2 N min(N, M) F) transitions for fronts of size F; memory O(L N F).

#include "pipeplan/partition/dp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

// Prefix sums of the layer columns: both the DP and `objective` take stage sums from here,
// so that they agree to the last bit.
struct Prefix {
  std::vector<double> forward, backward, parameters, stash;
  explicit Prefix(const model::Model& model) {
    const std::size_t n = model.layers.size();
    forward.assign(n + 1, 0);
    backward.assign(n + 1, 0);
    parameters.assign(n + 1, 0);
    stash.assign(n + 1, 0);
    for (std::size_t l = 0; l < n; ++l) {
      const auto& layer = model.layers[l];
      forward[l + 1] = forward[l] + layer.forward_ms;
      backward[l + 1] = backward[l] + layer.backward_ms;
      parameters[l + 1] = parameters[l] + layer.parameter_bytes;
      stash[l + 1] = stash[l] + layer.stash_bytes;
    }
  }
};

// What a run of GPUs offers a stage.
struct Run {
  int replicas = 0;
  double speed_sum = 0;
  double fastest = 0;
  std::optional<double> capacity;  // smallest memory in the run
  double ring_bandwidth = std::numeric_limits<double>::infinity();
  double ring_latency_ms = 0;
};

// The terms a stage contributes, given its run and layers (first..last+1 = [i, j)).
struct Terms {
  bool fits = false;
  double latency = 0;      // (F + B) / fastest
  double load = 0;         // P: the stage's work over the iteration
  double memory_rounds = 0;  // ceil(ceil(M/r) / k) when memory caps in-flight work, else 0
  double allreduce = 0;
  double backward = 0;     // B / fastest
};

Terms stage_terms(const model::Model& model, const Prefix& prefix, int i, int j, const Run& run, int M) {
  Terms t;
  const double F = prefix.forward[static_cast<std::size_t>(j)] - prefix.forward[static_cast<std::size_t>(i)];
  const double B = prefix.backward[static_cast<std::size_t>(j)] - prefix.backward[static_cast<std::size_t>(i)];
  const double W = prefix.parameters[static_cast<std::size_t>(j)] - prefix.parameters[static_cast<std::size_t>(i)];
  const double Y = prefix.stash[static_cast<std::size_t>(j)] - prefix.stash[static_cast<std::size_t>(i)];
  const long per_replica = (M + run.replicas - 1) / run.replicas;
  const long in_flight = simulate::max_in_flight(model.parameter_memory_factor * W, Y, run.capacity, per_replica);
  if (in_flight < 1) return t;
  t.fits = true;
  t.latency = (F + B) / run.fastest;
  t.load = std::max(M * (F + B) / run.speed_sum, static_cast<double>(per_replica) * (F + B) / run.fastest);
  t.memory_rounds = in_flight < per_replica ? static_cast<double>((per_replica + in_flight - 1) / in_flight) : 0;
  t.allreduce = simulate::ring_allreduce_ms(run.replicas, W, run.ring_bandwidth, run.ring_latency_ms);
  t.backward = B / run.fastest;
  return t;
}

// The excess of a stage whose round trip to the end and back is `round_trip`.
double stage_excess(const Terms& t, double round_trip) {
  return std::max(t.load - t.latency, t.memory_rounds * round_trip - t.latency);
}

struct Entry {
  double latency;
  double excess;
  double tail;
  int j;     // next state's layer (== L: the plan ends here)
  int b;     // next state's position
  int next;  // index in the next state's front; -1 at the end
};

// Adds `e` unless an entry is at least as good in all three; drops entries it dominates.
void insert(std::vector<Entry>& front, const Entry& e) {
  for (const Entry& f : front) {
    if (f.latency <= e.latency && f.excess <= e.excess && f.tail <= e.tail) return;
  }
  front.erase(std::remove_if(front.begin(), front.end(),
                             [&](const Entry& f) {
                               return e.latency <= f.latency && e.excess <= f.excess && e.tail <= f.tail;
                             }),
              front.end());
  front.push_back(e);
}

}  // namespace

std::optional<Objective> objective(const model::Model& model, const topology::Topology& topology,
                                   const std::vector<Stage>& stages, int micro_batches) {
  const Prefix prefix(model);
  const int S = static_cast<int>(stages.size());
  double latency = 0, excess = 0, tail = 0;
  for (int s = S - 1; s >= 0; --s) {
    const Stage& stage = stages[static_cast<std::size_t>(s)];
    Run run;
    run.replicas = static_cast<int>(stage.gpus.size());
    for (std::size_t x = 0; x < stage.gpus.size(); ++x) {
      const auto& gpu = topology.gpu(stage.gpus[x]);
      run.speed_sum += gpu.speed;
      run.fastest = std::max(run.fastest, gpu.speed);
      if (gpu.memory_bytes) run.capacity = run.capacity ? std::min(*run.capacity, *gpu.memory_bytes) : *gpu.memory_bytes;
      if (stage.gpus.size() > 1) {
        const int u = stage.gpus[x], v = stage.gpus[(x + 1) % stage.gpus.size()];
        run.ring_bandwidth = std::min(run.ring_bandwidth, topology.bandwidth_bytes_per_s(u, v));
        run.ring_latency_ms = std::max(run.ring_latency_ms, topology.latency_ms(u, v));
      }
    }
    const Terms t = stage_terms(model, prefix, stage.first_layer, stage.last_layer + 1, run, micro_batches);
    if (!t.fits) return std::nullopt;
    if (s == S - 1) {
      latency = t.latency;
      excess = stage_excess(t, latency);
      tail = t.allreduce;
      continue;
    }
    const double bytes = model.layers[static_cast<std::size_t>(stage.last_layer)].activation_bytes;
    const double c = topology.transfer_ms(stage.gpus.back(), stages[static_cast<std::size_t>(s + 1)].gpus.front(), bytes);
    const long per_replica = (micro_batches + run.replicas - 1) / run.replicas;
    latency = t.latency + 2 * c + latency;
    excess = std::max(excess, std::max(stage_excess(t, latency), static_cast<double>(per_replica) * c - c));
    tail = std::max(t.allreduce, tail - (c + t.backward));
  }
  return Objective{latency, excess, tail, latency + excess + tail};
}

std::optional<Solution> solve(const model::Model& model, const topology::Topology& topology,
                              const std::vector<int>& order, int micro_batches) {
  const int L = static_cast<int>(model.layers.size());
  const int N = static_cast<int>(order.size());
  const int M = micro_batches;
  const Prefix prefix(model);
  std::vector<std::vector<Entry>> fronts(static_cast<std::size_t>(L) * static_cast<std::size_t>(N));
  auto front = [&](int i, int k) -> std::vector<Entry>& {
    return fronts[static_cast<std::size_t>(i) * static_cast<std::size_t>(N) + static_cast<std::size_t>(k)];
  };

  for (int i = L - 1; i >= 0; --i) {
    for (int k = N - 1; k >= 0; --k) {
      std::vector<Entry>& here = front(i, k);
      Run run;
      double chain_bandwidth = std::numeric_limits<double>::infinity();
      double chain_latency = 0;
      for (int b = k + 1; b <= N && b - k <= M; ++b) {
        // Extend the run by position b-1.
        const int added = order[static_cast<std::size_t>(b - 1)];
        const auto& gpu = topology.gpu(added);
        run.replicas = b - k;
        run.speed_sum += gpu.speed;
        run.fastest = std::max(run.fastest, gpu.speed);
        if (gpu.memory_bytes) run.capacity = run.capacity ? std::min(*run.capacity, *gpu.memory_bytes) : *gpu.memory_bytes;
        if (b - k >= 2) {
          const int previous = order[static_cast<std::size_t>(b - 2)];
          chain_bandwidth = std::min(chain_bandwidth, topology.bandwidth_bytes_per_s(previous, added));
          chain_latency = std::max(chain_latency, topology.latency_ms(previous, added));
          const int first = order[static_cast<std::size_t>(k)];
          run.ring_bandwidth = std::min(chain_bandwidth, topology.bandwidth_bytes_per_s(added, first));
          run.ring_latency_ms = std::max(chain_latency, topology.latency_ms(added, first));
        }
        for (int j = i + 1; j <= L; ++j) {
          const Terms t = stage_terms(model, prefix, i, j, run, M);
          if (!t.fits) break;  // more layers only need more memory
          if (j == L) {
            insert(here, Entry{t.latency, stage_excess(t, t.latency), t.allreduce, j, b, -1});
            continue;
          }
          if (b == N) continue;  // no GPU left for the next stage
          const std::vector<Entry>& rest = front(j, b);
          if (rest.empty()) continue;
          const double bytes = model.layers[static_cast<std::size_t>(j - 1)].activation_bytes;
          const double c = topology.transfer_ms(added, order[static_cast<std::size_t>(b)], bytes);
          const long per_replica = (M + run.replicas - 1) / run.replicas;
          const double channel = static_cast<double>(per_replica) * c - c;
          for (std::size_t x = 0; x < rest.size(); ++x) {
            const Entry& e = rest[x];
            const double latency = t.latency + 2 * c + e.latency;
            const double excess = std::max(e.excess, std::max(stage_excess(t, latency), channel));
            const double tail = std::max(t.allreduce, e.tail - (c + t.backward));
            insert(here, Entry{latency, excess, tail, j, b, static_cast<int>(x)});
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
    if (a.latency + a.excess + a.tail < b.latency + b.excess + b.tail) best = x;
  }
  Solution solution;
  const Entry& top = start[best];
  solution.objective = Objective{top.latency, top.excess, top.tail, top.latency + top.excess + top.tail};
  int i = 0, k = 0;
  int x = static_cast<int>(best);
  while (true) {
    const Entry& e = front(i, k)[static_cast<std::size_t>(x)];
    Stage stage;
    stage.first_layer = i;
    stage.last_layer = e.j - 1;
    for (int p = k; p < e.b; ++p) stage.gpus.push_back(order[static_cast<std::size_t>(p)]);
    solution.stages.push_back(std::move(stage));
    if (e.next < 0) break;
    i = e.j;
    k = e.b;
    x = e.next;
  }
  return solution;
}

}  // namespace pipeplan::partition
