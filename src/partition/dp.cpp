// Partition and placement by dynamic programming.
//
// Reference: the DP of Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN
// Training" (INFOCOM 2022), over (layer prefix, prefix of the GPU order); here run over
// suffixes so that a stage's round trip to the end of the pipeline is known when the stage is
// added. The objective is stated in docs/algorithms.md.
//
// State (i, k, r): layers i..L-1, the first of their stages on the run of r GPUs at
// positions k..k+r-1 of the order. Knowing the run of the next stage lets a boundary be
// priced over every GPU pair it may use (replicas route micro-batches freely). A state
// combines its first stage (layers i..j-1) with a state (j, k+r, r') for every r', or ends
// the plan when j = L (positions k+r..N-1 stay unused). Each state keeps the Pareto front of
// (latency, excess, tail): all three only grow along a transition and the objective is their
// sum, so the front is exact.
// Complexity: O(L^2 N R^2 F^2) for R = min(N, M) and fronts of size F <= kMaxFront = 32 (each
// insertion scans its front), plus O(N R^3) for the pairwise costs between adjacent runs;
// memory O(L N R F). Exact while no front reaches kMaxFront.

#include "pipeplan/partition/dp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "pipeplan/partition/building_blocks.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

// Stage sums come from the shared prefix sums (building_blocks.hpp), so that the DP and
// `objective` agree to the last bit.
using Prefix = LayerSums;

// What a run of GPUs offers a stage: the shared run statistics plus the split of the M
// micro-batches over its replicas.
struct Run : RunStats {
  double time_per_work = 0;     // makespan of M micro-batches of unit work, best integral split
  long most_micro_batches = 0;  // micro-batches on the busiest replica of that split
};

// The slowest bandwidth and the largest latency over every GPU pair between two runs: a
// boundary transfer costs at most `latency + bytes / bandwidth` whichever replicas it joins.
struct Cross {
  double bandwidth = std::numeric_limits<double>::infinity();
  double latency_ms = 0;
  [[nodiscard]] double transfer_ms(double bytes) const {
    return latency_ms + bytes / bandwidth * 1e3;
  }
};

Cross cross(const topology::Topology& topology, const std::vector<int>& from,
            const std::vector<int>& to) {
  Cross c;
  for (int u : from) {
    for (int v : to) {
      c.bandwidth = std::min(c.bandwidth, topology.bandwidth_bytes_per_s(u, v));
      c.latency_ms = std::max(c.latency_ms, topology.latency_ms(u, v));
    }
  }
  return c;
}

// The terms a stage contributes, given its run and layers (first..last+1 = [i, j)).
struct Terms {
  bool fits = false;
  double latency = 0;        // (F + B) / fastest
  double load = 0;           // P: the stage's work over the iteration
  double memory_rounds = 0;  // ceil(ceil(M/r) / k) when memory caps in-flight work, else 0
  double allreduce = 0;
  double backward = 0;  // B / fastest
};

// The best split of M identical micro-batches over replicas of different speeds: each in
// turn goes where it would finish first (optimal for identical jobs on uniform machines;
// ties to the earlier replica). O(M r).
// With `round_robin`, micro-batch m simply goes to replica m mod r.
void split_micro_batches(Run& run, int M, bool round_robin) {
  std::vector<long> count(run.speeds.size(), 0);
  for (int m = 0; m < M; ++m) {
    std::size_t best = round_robin ? static_cast<std::size_t>(m) % count.size() : 0;
    for (std::size_t g = 1; g < count.size() && !round_robin; ++g) {
      if (static_cast<double>(count[g] + 1) / run.speeds[g] <
          static_cast<double>(count[best] + 1) / run.speeds[best])
        best = g;
    }
    ++count[best];
  }
  run.time_per_work = 0;
  run.most_micro_batches = 0;
  for (std::size_t g = 0; g < count.size(); ++g) {
    run.time_per_work = std::max(run.time_per_work, static_cast<double>(count[g]) / run.speeds[g]);
    run.most_micro_batches = std::max(run.most_micro_batches, count[g]);
  }
}

Terms stage_terms(const model::Model& model, const Prefix& prefix, int i, int j, const Run& run,
                  const ScheduleModel& schedule) {
  Terms t;
  const double F =
      prefix.forward[static_cast<std::size_t>(j)] - prefix.forward[static_cast<std::size_t>(i)];
  const double B =
      prefix.backward[static_cast<std::size_t>(j)] - prefix.backward[static_cast<std::size_t>(i)];
  const double W = prefix.parameters[static_cast<std::size_t>(j)] -
                   prefix.parameters[static_cast<std::size_t>(i)];
  const double Y =
      prefix.stash[static_cast<std::size_t>(j)] - prefix.stash[static_cast<std::size_t>(i)];
  const long per_replica = run.most_micro_batches;
  const long needed = schedule.stashes > 0 ? std::min(schedule.stashes, per_replica) : 1;
  const long in_flight =
      simulate::max_in_flight(model.parameter_memory_factor * W, Y, run.capacity, per_replica);
  if (in_flight < needed) return t;
  t.fits = true;
  t.latency = (F + B) / run.fastest;
  t.load = (F + B) * run.time_per_work;
  t.memory_rounds = schedule.stashes == 0 && in_flight < per_replica
                        ? static_cast<double>((per_replica + in_flight - 1) / in_flight)
                        : 0;
  t.allreduce =
      simulate::ring_allreduce_ms(run.replicas, W, run.ring_bandwidth, run.ring_latency_ms);
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
  int stages;  // in this suffix, this entry's stage included
  int j;       // next state's first layer (== L: the plan ends here)
  int b;       // next state's run length
  int next;    // index in the next state's front; -1 at the end
};

// Most entries a front keeps. Real profiles (memory-tight stages, whose round trips trade
// against their steady state) can grow fronts into the thousands and the DP by as much; beyond
// this size the entry of largest sum is dropped (ties: the latest), so the DP is exact while
// fronts stay below it (every test instance and shipped example) and a fast proposal for the
// replayed search otherwise.
constexpr std::size_t kMaxFront = 32;

// Adds `e` unless an entry is at least as good in all three (and, when the stage count is
// capped, has no more stages: fewer stages leave more room in front); drops entries it
// dominates; keeps at most kMaxFront entries. O(front size).
void insert(std::vector<Entry>& front, const Entry& e, bool count_stages) {
  pareto_insert(front, e, [count_stages](const Entry& a, const Entry& b) {
    return a.latency <= b.latency && a.excess <= b.excess && a.tail <= b.tail &&
           (!count_stages || a.stages <= b.stages);
  });
  if (front.size() > kMaxFront) {
    std::size_t worst = 0;
    for (std::size_t x = 1; x < front.size(); ++x) {
      if (front[x].latency + front[x].excess + front[x].tail >=
          front[worst].latency + front[worst].excess + front[worst].tail) {
        worst = x;
      }
    }
    front.erase(front.begin() + static_cast<std::ptrdiff_t>(worst));
  }
}

}  // namespace

std::optional<Objective> objective(const model::Model& model, const topology::Topology& topology,
                                   const std::vector<Stage>& stages, int micro_batches,
                                   const ScheduleModel& schedule) {
  const Prefix prefix(model);
  const int S = static_cast<int>(stages.size());
  double latency = 0, excess = 0, tail = 0;
  for (int s = S - 1; s >= 0; --s) {
    const Stage& stage = stages[static_cast<std::size_t>(s)];
    Run run{RunStats::of(topology, stage.gpus)};
    split_micro_batches(run, micro_batches, schedule.round_robin);
    const Terms t =
        stage_terms(model, prefix, stage.first_layer, stage.last_layer + 1, run, schedule);
    if (!t.fits) return std::nullopt;
    if (s == S - 1) {
      latency = t.latency;
      excess = stage_excess(t, latency);
      tail = t.allreduce;
      continue;
    }
    const double bytes = model.layers[static_cast<std::size_t>(stage.last_layer)].activation_bytes;
    const auto& next = stages[static_cast<std::size_t>(s + 1)].gpus;
    const double c = cross(topology, stage.gpus, next).transfer_ms(bytes);
    const long channels = static_cast<long>(std::max(stage.gpus.size(), next.size()));
    const long per_replica = (micro_batches + channels - 1) / channels;
    latency = t.latency + 2 * c + latency;
    excess = std::max(excess,
                      std::max(stage_excess(t, latency), static_cast<double>(per_replica) * c - c));
    tail = std::max(t.allreduce, tail - (c + t.backward));
  }
  return Objective{latency, excess, tail, latency + excess + tail};
}

namespace {

// Where stages may begin and end. Below the thresholds every layer boundary and every GPU
// position is allowed and the DP is exact; above them (large models or clusters) the layers
// are grouped into blocks and runs are aligned to units of GPUs, and the DP is exact on that
// grid. Documented in docs/algorithms.md and docs/performance.md.
struct Grid {
  std::vector<int> cuts;  // allowed layer boundaries, 0 = first, L = last
  int unit = 1;           // run starts and lengths are multiples of this
  int positions = 0;      // run starts: 0, unit, 2 unit, ... (positions * unit <= N)
  int lengths = 0;        // run lengths: unit, 2 unit, ..., lengths * unit <= min(N, M)
};

constexpr int kMaxBlocks = 192;    // layer blocks the DP sees at most
constexpr int kMaxPositions = 32;  // run starts at most
constexpr int kMaxLengths = 16;    // run lengths at most
constexpr double kBudget = 80e6;   // blocks^2 x starts x lengths^2: about a second

// `single_gpus`: runs start at every position (unit 1) and are at most a few GPUs long, for
// plans whose stages must be many and narrow (memory-tight models); the lengths shrink instead
// of the positions to meet the budget.
Grid make_grid(const model::Model& model, int gpus, int micro_batches, double budget,
               bool single_gpus = false) {
  const int L = static_cast<int>(model.layers.size());
  const int R = std::min(gpus, micro_batches);
  Grid grid;
  while (!single_gpus && std::isfinite(budget) &&
         (gpus / grid.unit > kMaxPositions || R / grid.unit > kMaxLengths)) {
    grid.unit *= 2;
  }
  grid.unit = std::min(grid.unit, std::max(R, 1));
  int blocks = std::isfinite(budget) ? std::min(L, kMaxBlocks) : L;
  int lengths = R / grid.unit;
  auto cost = [&] {
    const double positions = gpus / grid.unit;
    return static_cast<double>(blocks) * blocks * positions * lengths * lengths;
  };
  // Over budget: coarser GPU units first (clusters are made of identical nodes), then fewer
  // layer blocks.
  if (single_gpus) {
    while (cost() > budget && lengths > 1) lengths /= 2;
  }
  while (!single_gpus && cost() > budget && grid.unit * 2 <= R) {
    grid.unit *= 2;
    lengths = R / grid.unit;
  }
  while (cost() > budget && blocks > 16) blocks = blocks * 3 / 4;
  grid.positions = gpus / grid.unit;
  grid.lengths = lengths;
  grid.cuts.push_back(0);
  if (L <= blocks) {
    for (int l = 1; l <= L; ++l) grid.cuts.push_back(l);
    return grid;
  }
  // Blocks of about equal compute; inside each window the cut goes where the activation
  // crossing it is smallest (ties: the earlier boundary).
  const Prefix prefix(model);
  const double total = prefix.forward.back() + prefix.backward.back();
  int previous = 0;
  for (int b = 1; b < blocks; ++b) {
    const double low = total * (b - 0.5) / blocks, high = total * (b + 0.5) / blocks;
    int best = -1;
    for (int l = previous + 1; l < L; ++l) {
      const double work = prefix.forward[static_cast<std::size_t>(l)] +
                          prefix.backward[static_cast<std::size_t>(l)];
      if (work < low) continue;
      if (work > high && best >= 0) break;
      if (best < 0 || model.layers[static_cast<std::size_t>(l - 1)].activation_bytes <
                          model.layers[static_cast<std::size_t>(best - 1)].activation_bytes) {
        best = l;
      }
      if (work > high) break;
    }
    if (best > previous && best < L) {
      grid.cuts.push_back(best);
      previous = best;
    }
  }
  grid.cuts.push_back(L);
  return grid;
}

// The DP proper over `grid`. `cap` > 0 keeps only the `cap` entries of smallest sum per state
// (a fast heuristic whose result is an upper bound); `upper_bound` drops entries that cannot
// lead to a plan of total <= upper_bound (see the bounds below). Both off: exact on the grid.
// Past `max_work` (kMaxPassWork in solve) the pass gives up: `gave_up` is set, nothing returned.
// Returns the `count` best plans of the final front (smallest total first, ties in front order)
// with at most `max_stages` stages.
std::vector<Solution> run_dp(const model::Model& model, const topology::Topology& topology,
                             const std::vector<int>& order, int micro_batches, const Grid& grid,
                             const ScheduleModel& schedule, std::size_t cap, double upper_bound,
                             double max_work, bool& gave_up, std::size_t count, int max_stages) {
  double work = 0;
  const int C = static_cast<int>(grid.cuts.size()) - 1;  // blocks
  const int P = grid.positions;
  const int Q = grid.lengths;
  const int U = grid.unit;
  const int N = static_cast<int>(order.size());
  const int M = micro_batches;
  const Prefix prefix(model);
  if (Q == 0 || P == 0) return {};
  // The stage count enters the fronts only when the cap can bind.
  const bool count_stages = max_stages < std::min(C, P);

  // Runs: stats of the run starting at position p * U with q * U GPUs.
  std::vector<Run> runs(static_cast<std::size_t>(P) * static_cast<std::size_t>(Q));
  auto run_at = [&](int p, int q) -> Run& {
    return runs[static_cast<std::size_t>(p) * static_cast<std::size_t>(Q) +
                static_cast<std::size_t>(q - 1)];
  };
  for (int p = 0; p < P; ++p) {
    Run run;
    const int k = p * U;
    for (int r = 1; k + r <= N && r <= Q * U; ++r) {
      run.add(topology, order[static_cast<std::size_t>(k + r - 1)]);
      if (r % U == 0) {
        run_at(p, r / U) = run;
        split_micro_batches(run_at(p, r / U), M, schedule.round_robin);
      }
    }
  }
  // Worst-pair costs between the run of q1 units ending at position p and the run of q2 units
  // starting there, built from the cost of every unit pair (O(P Q^2 U^2)).
  std::vector<Cross> unit_pairs(static_cast<std::size_t>(P) * static_cast<std::size_t>(P));
  for (int a = 0; a < P; ++a) {
    for (int b = a + 1; b < P; ++b) {
      Cross c;
      for (int u = a * U; u < (a + 1) * U; ++u) {
        for (int v = b * U; v < (b + 1) * U; ++v) {
          c.bandwidth = std::min(
              c.bandwidth, topology.bandwidth_bytes_per_s(order[static_cast<std::size_t>(u)],
                                                          order[static_cast<std::size_t>(v)]));
          c.latency_ms =
              std::max(c.latency_ms, topology.latency_ms(order[static_cast<std::size_t>(u)],
                                                         order[static_cast<std::size_t>(v)]));
        }
      }
      unit_pairs[static_cast<std::size_t>(a) * static_cast<std::size_t>(P) +
                 static_cast<std::size_t>(b)] = c;
    }
  }
  std::vector<Cross> crosses(static_cast<std::size_t>(P + 1) * static_cast<std::size_t>(Q) *
                             static_cast<std::size_t>(Q));
  auto cross_at = [&](int p, int q1, int q2) -> Cross& {
    return crosses[(static_cast<std::size_t>(p) * static_cast<std::size_t>(Q) +
                    static_cast<std::size_t>(q1 - 1)) *
                       static_cast<std::size_t>(Q) +
                   static_cast<std::size_t>(q2 - 1)];
  };
  for (int p = 1; p < P; ++p) {
    for (int q1 = 1; q1 <= Q && p - q1 >= 0; ++q1) {
      for (int q2 = 1; q2 <= Q && p + q2 <= P; ++q2) {
        Cross c = q2 > 1 ? cross_at(p, q1, q2 - 1) : (q1 > 1 ? cross_at(p, q1 - 1, q2) : Cross{});
        // Add the pairs of the newest receiver unit (q2 > 1) or sender unit (q2 == 1).
        const int first_sender = q2 > 1 ? p - q1 : p - q1;
        const int last_sender = q2 > 1 ? p - 1 : p - q1;
        const int receiver_from = q2 > 1 ? p + q2 - 1 : p;
        for (int a = first_sender; a <= last_sender; ++a) {
          const Cross& pair = unit_pairs[static_cast<std::size_t>(a) * static_cast<std::size_t>(P) +
                                         static_cast<std::size_t>(receiver_from)];
          c.bandwidth = std::min(c.bandwidth, pair.bandwidth);
          c.latency_ms = std::max(c.latency_ms, pair.latency_ms);
        }
        cross_at(p, q1, q2) = c;
      }
    }
  }

  const auto states =
      static_cast<std::size_t>(C) * static_cast<std::size_t>(P) * static_cast<std::size_t>(Q);
  std::vector<std::vector<Entry>> fronts(states);
  auto front = [&](int ci, int p, int q) -> std::vector<Entry>& {
    return fronts[(static_cast<std::size_t>(ci) * static_cast<std::size_t>(P) +
                   static_cast<std::size_t>(p)) *
                      static_cast<std::size_t>(Q) +
                  static_cast<std::size_t>(q - 1)];
  };

  double fastest_anywhere = 0;
  for (int g : order) fastest_anywhere = std::max(fastest_anywhere, topology.gpu(g).speed);
  std::vector<double> speed_before(static_cast<std::size_t>(N) + 1, 0);  // speeds of positions < k
  for (int k = 0; k < N; ++k) {
    speed_before[static_cast<std::size_t>(k) + 1] =
        speed_before[static_cast<std::size_t>(k)] +
        topology.gpu(order[static_cast<std::size_t>(k)]).speed;
  }
  const double prune_above = upper_bound * (1 + 1e-9);

  for (int ci = C - 1; ci >= 0; --ci) {
    const int i = grid.cuts[static_cast<std::size_t>(ci)];
    const double prefix_work =
        prefix.forward[static_cast<std::size_t>(i)] + prefix.backward[static_cast<std::size_t>(i)];
    // Only reachable states: the layers before i need GPUs before k, and plans start at k = 0.
    for (int p = P - 1; p >= 0; --p) {
      if ((ci == 0) != (p == 0)) continue;
      const int k = p * U;
      // Lower bounds on what the layers before i add to a suffix entry: their compute at the
      // fastest speed, and (the busiest of their stages works at least M prefix_work / speeds
      // of the GPUs before k) a steady state that replaces the entry's excess.
      const double floor_latency = prefix_work / fastest_anywhere;
      const double floor_load =
          k > 0 ? M * prefix_work / speed_before[static_cast<std::size_t>(k)] : 0;
      auto keep = [&](const Entry& e) {
        return e.latency + std::max(e.excess + floor_latency, floor_load) <= prune_above;
      };
      for (int q = 1; q <= Q && p + q <= P; ++q) {
        std::vector<Entry>& here = front(ci, p, q);
        const Run& run = run_at(p, q);
        const int next_p = p + q;
        for (int cj = ci + 1; cj <= C; ++cj) {
          const int j = grid.cuts[static_cast<std::size_t>(cj)];
          const Terms t = stage_terms(model, prefix, i, j, run, schedule);
          if (!t.fits) break;  // more layers only need more memory
          if (cj == C) {
            const Entry e{t.latency, stage_excess(t, t.latency), t.allreduce, 1, cj, 0, -1};
            if (keep(e)) insert(here, e, count_stages);
            continue;
          }
          const double bytes = model.layers[static_cast<std::size_t>(j - 1)].activation_bytes;
          for (int q2 = 1; q2 <= Q && next_p + q2 <= P; ++q2) {
            const std::vector<Entry>& rest = front(cj, next_p, q2);
            if (rest.empty()) continue;
            const double c = cross_at(next_p, q, q2).transfer_ms(bytes);
            const long channels = static_cast<long>(std::max(q, q2)) * U;
            const long per_channel = (M + channels - 1) / channels;
            const double channel = static_cast<double>(per_channel) * c - c;
            work += static_cast<double>(rest.size()) * static_cast<double>(here.size() + 1);
            if (work > max_work) {
              gave_up = true;
              return {};
            }
            for (std::size_t x = 0; x < rest.size(); ++x) {
              const Entry& e = rest[x];
              if (count_stages && e.stages >= max_stages) continue;
              const double latency = t.latency + 2 * c + e.latency;
              const double excess = std::max(e.excess, std::max(stage_excess(t, latency), channel));
              const double tail = std::max(t.allreduce, e.tail - (c + t.backward));
              const Entry next{latency, excess, tail, e.stages + 1, cj, q2, static_cast<int>(x)};
              if (keep(next)) insert(here, next, count_stages);
            }
          }
        }
        if (cap > 0 && here.size() > cap) {
          // Keep the `cap` smallest sums, in their original order (deterministic).
          std::vector<std::size_t> rank(here.size());
          std::iota(rank.begin(), rank.end(), 0);
          std::stable_sort(rank.begin(), rank.end(), [&](std::size_t lhs, std::size_t rhs) {
            return here[lhs].latency + here[lhs].excess + here[lhs].tail <
                   here[rhs].latency + here[rhs].excess + here[rhs].tail;
          });
          rank.resize(cap);
          std::sort(rank.begin(), rank.end());
          std::vector<Entry> kept;
          for (std::size_t x : rank) kept.push_back(here[x]);
          here = std::move(kept);
        }
      }
    }
  }

  // The plan starts at position 0 with any first-run length: the `count` smallest totals.
  std::vector<std::pair<int, std::size_t>> tops;
  for (int q = 1; q <= Q; ++q) {
    for (std::size_t x = 0; x < front(0, 0, q).size(); ++x) tops.emplace_back(q, x);
  }
  auto total_of = [&](const std::pair<int, std::size_t>& top) {
    const Entry& e = front(0, 0, top.first)[top.second];
    return e.latency + e.excess + e.tail;
  };
  std::stable_sort(tops.begin(), tops.end(),
                   [&](const auto& a, const auto& b) { return total_of(a) < total_of(b); });
  if (tops.size() > count) tops.resize(count);
  std::vector<Solution> solutions;
  for (const auto& [first_q, first_x] : tops) {
    Solution solution;
    int ci = 0, p = 0, q = first_q;
    int x = static_cast<int>(first_x);
    const Entry& top = front(0, 0, q)[first_x];
    solution.objective =
        Objective{top.latency, top.excess, top.tail, top.latency + top.excess + top.tail};
    while (true) {
      const Entry& e = front(ci, p, q)[static_cast<std::size_t>(x)];
      Stage stage;
      stage.first_layer = grid.cuts[static_cast<std::size_t>(ci)];
      stage.last_layer = grid.cuts[static_cast<std::size_t>(e.j)] - 1;
      for (int g = p * U; g < (p + q) * U; ++g)
        stage.gpus.push_back(order[static_cast<std::size_t>(g)]);
      solution.stages.push_back(std::move(stage));
      if (e.next < 0) break;
      ci = e.j;
      p += q;
      q = e.b;
      x = e.next;
    }
    solutions.push_back(std::move(solution));
  }
  return solutions;
}

// The best objective among simple plans on the grid: S stages of equal compute (cut at grid
// boundaries), each on q units of consecutive GPUs, for every q and S. A cheap upper bound
// for the exact pass (infinity when none fits). O(P log P) plans of O(L + S r^2) each.
double simple_plans_bound(const model::Model& model, const topology::Topology& topology,
                          const std::vector<int>& order, int micro_batches, const Grid& grid,
                          const ScheduleModel& schedule, int max_stages) {
  const int C = static_cast<int>(grid.cuts.size()) - 1;
  const Prefix prefix(model);
  auto work_at = [&](int ci) {
    const auto l = static_cast<std::size_t>(grid.cuts[static_cast<std::size_t>(ci)]);
    return prefix.forward[l] + prefix.backward[l];
  };
  const double total = work_at(C);
  double best = std::numeric_limits<double>::infinity();
  for (int q = 1; q <= grid.lengths; ++q) {
    for (int S = 1; S <= C && S <= max_stages && S * q <= grid.positions; ++S) {
      std::vector<Stage> stages;
      int first = 0;  // block index
      for (int s = 0; s < S; ++s) {
        int last = first + 1;  // exclusive block index
        if (s == S - 1) {
          last = C;
        } else {
          // Extend while the cumulative work stays below the stage's share, leaving a block
          // for each later stage.
          const double target = total * (s + 1) / S;
          while (last + 1 <= C - (S - 1 - s) && work_at(last + 1) <= target) ++last;
        }
        Stage stage{grid.cuts[static_cast<std::size_t>(first)],
                    grid.cuts[static_cast<std::size_t>(last)] - 1,
                    {}};
        for (int g = s * q * grid.unit; g < (s + 1) * q * grid.unit; ++g)
          stage.gpus.push_back(order[static_cast<std::size_t>(g)]);
        stages.push_back(std::move(stage));
        first = last;
      }
      if (auto value = objective(model, topology, stages, micro_batches, schedule))
        best = std::min(best, value->total_ms);
    }
  }
  return best;
}

}  // namespace

std::vector<Solution> solve_several(const model::Model& model, const topology::Topology& topology,
                                    const std::vector<int>& order, int micro_batches,
                                    const ScheduleModel& schedule, const SolveOptions& options) {
  const double unlimited = std::numeric_limits<double>::infinity();
  const bool full_grid = options.full_grid;
  const int max_stages =
      options.max_stages > 0 ? options.max_stages : std::numeric_limits<int>::max();
  double budget = full_grid ? unlimited : kBudget;
  Grid grid = make_grid(model, static_cast<int>(order.size()), micro_batches, budget);
  while (true) {
    // Large fronts can make a grid within the budget slow: a pass that passes max_pass_work
    // gives up and the grid is made coarser (a quarter of the budget), until it can be no
    // coarser; the last grid runs without a limit. Work is counted, not timed: deterministic.
    const Grid coarser =
        full_grid ? grid
                  : make_grid(model, static_cast<int>(order.size()), micro_batches, budget / 4);
    const bool last = coarser.cuts == grid.cuts && coarser.unit == grid.unit;
    const double max_work = last ? unlimited : options.max_pass_work;
    bool gave_up = false;
    auto pass = [&](std::size_t cap, double upper_bound) {
      return run_dp(model, topology, order, micro_batches, grid, schedule, cap, upper_bound,
                    max_work, gave_up, options.solutions, max_stages);
    };
    auto result = [&]() -> std::vector<Solution> {
      // An upper bound lets the exact pass drop every entry that cannot beat it. Simple
      // equal-compute plans usually give a good one; when none fits in memory (or within the
      // stage cap), a capped pass (4 entries per state) finds a plan whose value serves
      // instead. Either way the exact pass keeps the optimum, so the result is exact (on the grid).
      const double simple =
          simple_plans_bound(model, topology, order, micro_batches, grid, schedule, max_stages);
      if (std::isfinite(simple)) {
        auto exact = pass(0, simple);
        if (!exact.empty() || gave_up) return exact;
      }
      auto heuristic = pass(4, unlimited);
      if (heuristic.empty()) return {};
      auto exact = pass(0, heuristic.front().objective.total_ms);
      return exact.empty() ? heuristic : exact;
    }();
    if (!gave_up && result.empty() && grid.unit > 1 && !options.full_grid) {
      // Nothing fits on runs of whole units: memory may need more, narrower stages than the
      // units allow (a unit of 2 GPUs halves the stages). Try runs of single GPUs once.
      Grid narrow = make_grid(model, static_cast<int>(order.size()), micro_batches, kBudget, true);
      if (narrow.unit == 1) {
        grid = narrow;
        result = [&] {
          auto heuristic = pass(4, unlimited);
          if (heuristic.empty() || gave_up) return heuristic;
          auto exact = pass(0, heuristic.front().objective.total_ms);
          return exact.empty() ? heuristic : exact;
        }();
        gave_up = false;  // a proposal for the search either way
      }
    }
    if (!gave_up) {
      for (Solution& solution : result) {
        solution.grid_unit = grid.unit;
        solution.grid_blocks = static_cast<int>(grid.cuts.size()) - 1;
      }
      return result;
    }
    budget /= 4;
    grid = coarser;
  }
}

std::optional<Solution> solve(const model::Model& model, const topology::Topology& topology,
                              const std::vector<int>& order, int micro_batches,
                              const ScheduleModel& schedule, bool full_grid, double max_pass_work) {
  SolveOptions options;
  options.full_grid = full_grid;
  options.max_pass_work = max_pass_work;
  auto solutions = solve_several(model, topology, order, micro_batches, schedule, options);
  if (solutions.empty()) return std::nullopt;
  return std::move(solutions.front());
}

}  // namespace pipeplan::partition
