// Partition and placement by dynamic programming.
//
// Reference: the DP of Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN
// Training" (INFOCOM 2022), over (layer prefix, prefix of the GPU order); here run over
// suffixes so that a stage's round trip to the end of the pipeline is known when the stage is
// added. The objective is stated in docs/algorithms.md.
//
// State (i, k, r, t): layers i..L-1, the first of their stages on the run of r GPUs at
// positions k..k+r-1 of the order, as groups of t consecutive GPUs (spec 8: t = 1 for every
// v1 model). Knowing the run and degree of the next stage lets a boundary be priced over every
// GPU pair it may use (replicas route micro-batches freely) and with its size A / min(t, t').
// A state combines its first stage (layers i..j-1, recomputing or not) with a state
// (j, k+r, r', t') for every r' and t', or ends the plan when j = L (positions k+r..N-1 stay
// unused). Each state keeps the Pareto front of (latency, excess, tail): all three only grow
// along a transition and the objective is their sum, so the front is exact.
// Complexity: O(L^2 N R^2 D^2 C F^2) for R run lengths, D degrees, C = 1 or 2 recomputation
// choices and fronts of size F <= kMaxFront = 32 (each insertion scans its front), plus O(r)
// per stage term of a group run (t > 1 or recomputation; O(1) otherwise) and O(N R^3) for the
// pairwise costs between adjacent runs; memory O(L N R D F). Exact while no front reaches
// kMaxFront. A v1 model has D = 1, and recomputation is a choice only when asked for.

#include "pipeplan/partition/dp.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>

#include "pipeplan/partition/building_blocks.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

// ceil(a / b) for a >= 0, b > 0.
long ceil_div(long a, long b) { return (a + b - 1) / b; }

// ---- Layer sums ---------------------------------------------------------------------------

// The per-GPU layer columns at one degree t (spec 8.1), as prefix sums: entry l sums layers
// 0..l-1. At t = 1 they are the layers' own fields, summed exactly as LayerSums sums them.
struct DegreeColumns {
  int t = 1;
  std::vector<double> forward, backward, parameters, stash, update;
  std::vector<double> backward_recompute;  // the part of backward a recomputing stage skips
  std::vector<double> forward_allreduce_bytes, backward_allreduce_bytes;  // count x bytes
  std::vector<double> forward_allreduces, backward_allreduces;            // counts
  std::vector<int> listing;  // layers with tensor_parallel that list t
  // recompute_max[k][l]: the largest per-GPU transient of layers l..l+2^k-1 when recomputing
  // (model::backward_transient_bytes_at: its stash and working set; a sparse table); likewise
  // transient_max without recomputation (the working sets) and parameter_max for the parameters
  // (the working copies of sharded gradients).
  std::vector<std::vector<double>> recompute_max, transient_max, parameter_max;
};

// Which range-maximum tables to build (each O(L log L) per degree instead of O(L)): the
// transients for recomputation, the parameters for sharded gradients, the working sets for a model
// that has them (`make_sums` sets `working`).
struct MaxTables {
  bool recompute = false;
  bool parameters = false;
  bool working = false;
};

// Everything the DP sums over layer ranges, per candidate degree.
struct Sums {
  std::vector<int> with_split;     // prefix count of layers that have tensor_parallel
  std::vector<double> inputs;      // prefix sum of each layer's input bytes (recomputation)
  std::vector<double> least_time;  // prefix of min_t (f + b) per GPU, for the pruning floors
  std::vector<double> least_work;  // prefix of min_t t (f + b)
  std::vector<DegreeColumns> degrees;
};

DegreeColumns degree_columns(const model::Model& model, int t, MaxTables tables) {
  const std::size_t n = model.layers.size();
  DegreeColumns c;
  c.t = t;
  for (auto* column : {&c.forward, &c.backward, &c.backward_recompute, &c.parameters, &c.stash,
                       &c.update, &c.forward_allreduce_bytes, &c.backward_allreduce_bytes,
                       &c.forward_allreduces, &c.backward_allreduces}) {
    column->assign(n + 1, 0);
  }
  c.listing.assign(n + 1, 0);
  std::vector<double> recomputing(n, 0), transient(n, 0), parameters(n, 0);
  for (std::size_t l = 0; l < n; ++l) {
    const model::Layer& layer = model.layers[l];
    const bool lists =
        layer.tensor_parallel && std::binary_search(layer.tensor_parallel->degrees.begin(),
                                                    layer.tensor_parallel->degrees.end(), t);
    c.listing[l + 1] = c.listing[l] + (lists ? 1 : 0);
    // A layer that cannot run at t contributes nothing; the ranges holding it are not allowed.
    const int at = (t == 1 || lists || !layer.tensor_parallel) ? t : 1;
    c.forward[l + 1] = c.forward[l] + model::forward_ms_at(layer, at);
    c.backward[l + 1] = c.backward[l] + model::backward_ms_at(layer, at);
    c.backward_recompute[l + 1] =
        c.backward_recompute[l] + model::backward_recompute_ms_at(layer, at);
    parameters[l] = model::parameter_bytes_at(layer, at);
    c.parameters[l + 1] = c.parameters[l] + parameters[l];
    c.stash[l + 1] = c.stash[l] + model::stash_bytes_at(layer, at);
    recomputing[l] = model::backward_transient_bytes_at(layer, at, true);
    transient[l] = model::backward_transient_bytes_at(layer, at, false);
    c.update[l + 1] = c.update[l] + model::update_ms_at(layer, at);
    const double forward_count = model::allreduces_forward_at(layer, at);
    const double backward_count = model::allreduces_backward_at(layer, at);
    c.forward_allreduces[l + 1] = c.forward_allreduces[l] + forward_count;
    c.backward_allreduces[l + 1] = c.backward_allreduces[l] + backward_count;
    c.forward_allreduce_bytes[l + 1] =
        c.forward_allreduce_bytes[l] + forward_count * model::allreduce_bytes(layer);
    c.backward_allreduce_bytes[l + 1] =
        c.backward_allreduce_bytes[l] + backward_count * model::allreduce_bytes(layer);
  }
  if (tables.recompute) c.recompute_max = range_max_table(std::move(recomputing));
  if (tables.working) c.transient_max = range_max_table(std::move(transient));
  if (tables.parameters) c.parameter_max = range_max_table(std::move(parameters));
  return c;
}

Sums make_sums(const model::Model& model, const std::vector<int>& degrees, MaxTables tables) {
  const std::size_t n = model.layers.size();
  Sums sums;
  sums.with_split.assign(n + 1, 0);
  sums.inputs.assign(n + 1, 0);
  sums.least_time.assign(n + 1, 0);
  sums.least_work.assign(n + 1, 0);
  tables.working = model::has_backward_working_bytes(model);
  for (std::size_t l = 0; l < n; ++l) {
    const model::Layer& layer = model.layers[l];
    sums.with_split[l + 1] = sums.with_split[l] + (layer.tensor_parallel ? 1 : 0);
    sums.inputs[l + 1] =
        sums.inputs[l] + (l == 0 ? model.input_bytes : model.layers[l - 1].activation_bytes);
    double time = layer.forward_ms + layer.backward_ms, work = time;
    if (layer.tensor_parallel) {
      for (const int t : layer.tensor_parallel->degrees) {
        const double per_gpu = model::forward_ms_at(layer, t) + model::backward_ms_at(layer, t);
        time = std::min(time, per_gpu);
        work = std::min(work, t * per_gpu);
      }
    }
    sums.least_time[l + 1] = sums.least_time[l] + time;
    sums.least_work[l + 1] = sums.least_work[l] + work;
  }
  for (const int t : degrees) sums.degrees.push_back(degree_columns(model, t, tables));
  return sums;
}

// Whether layers [i, j) may run at the degree of `c` (model::stage_allows_degree, O(1)).
bool allowed(const Sums& sums, const DegreeColumns& c, int i, int j) {
  if (c.t == 1) return true;
  const int split =
      sums.with_split[static_cast<std::size_t>(j)] - sums.with_split[static_cast<std::size_t>(i)];
  const int listing =
      c.listing[static_cast<std::size_t>(j)] - c.listing[static_cast<std::size_t>(i)];
  return split > 0 && listing == split;
}

// A stage's per-GPU sums at its degree: layers [i, j).
struct StageSums {
  double forward = 0, backward = 0, parameters = 0, stash = 0, update = 0;
  double backward_recompute = 0;
  double forward_allreduce_bytes = 0, backward_allreduce_bytes = 0;
  double forward_allreduces = 0, backward_allreduces = 0;
  double inputs = 0, largest_parameters = 0;
  double largest_transient = 0, largest_recompute_transient = 0;  // MaxTables' two transients
  int layers = 0;
};

StageSums stage_sums(const Sums& sums, const DegreeColumns& c, int i, int j) {
  const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
  StageSums x;
  x.forward = c.forward[b] - c.forward[a];
  x.backward = c.backward[b] - c.backward[a];
  x.backward_recompute = c.backward_recompute[b] - c.backward_recompute[a];
  x.parameters = c.parameters[b] - c.parameters[a];
  x.stash = c.stash[b] - c.stash[a];
  x.update = c.update[b] - c.update[a];
  x.forward_allreduce_bytes = c.forward_allreduce_bytes[b] - c.forward_allreduce_bytes[a];
  x.backward_allreduce_bytes = c.backward_allreduce_bytes[b] - c.backward_allreduce_bytes[a];
  x.forward_allreduces = c.forward_allreduces[b] - c.forward_allreduces[a];
  x.backward_allreduces = c.backward_allreduces[b] - c.backward_allreduces[a];
  x.inputs = sums.inputs[b] - sums.inputs[a];
  if (!c.recompute_max.empty()) x.largest_recompute_transient = range_max(c.recompute_max, i, j);
  if (!c.transient_max.empty()) x.largest_transient = range_max(c.transient_max, i, j);
  if (!c.parameter_max.empty()) x.largest_parameters = range_max(c.parameter_max, i, j);
  x.layers = j - i;
  return x;
}

// ---- Runs of GPUs ---------------------------------------------------------------------------

// One group of t consecutive GPUs: its speed (the slowest), and the cost of its
// tensor-parallel all-reduces, `per_byte * bytes + per_call * count` (spec 8.3).
struct Group {
  double speed = 1;
  double per_byte = 0;  // ms per byte: 2 (t-1)/t / beta
  double per_call = 0;  // ms per all-reduce: 2 (t-1) lambda
};

struct Ring {
  double bandwidth = std::numeric_limits<double>::infinity();
  double latency_ms = 0;
};

// What a run of GPUs offers a stage at degree t: the shared run statistics (all its GPUs in
// order: capacity, and for t = 1 the AllReduce ring), its groups, the t data-parallel rings, and
// the split of the M micro-batches over its groups.
struct Run : RunStats {
  int t = 1;
  int groups_count = 0;         // r
  std::vector<Ring> rings{};    // t > 1 only: ring i through the i-th GPU of every group
  double time_per_work = 0;     // makespan of M micro-batches of unit work, best integral split
  long most_micro_batches = 0;  // micro-batches on the busiest group of that split
  double fastest_group = 0;     // the largest group speed
  // The groups, each distinct (group, micro-batch count) once: what `stage_terms` reads. A
  // cluster of identical nodes has at most two (the counts ceil(M/r) and floor(M/r)), so a
  // stage's terms cost O(classes) instead of O(r).
  std::vector<std::pair<Group, long>> classes{};
};

// The split of M identical micro-batches over groups of different speeds: each in turn goes
// where it would finish first (optimal for identical jobs on uniform machines; ties to the
// earlier group). O(M r), or O(r) when every speed is the same: the rule then fills the groups
// in turn. With `round_robin`, micro-batch m simply goes to group m mod r. Sets the run's
// makespan and busiest group; returns the micro-batches per group.
std::vector<long> split_micro_batches(Run& run, const std::vector<double>& speeds, int M,
                                      bool round_robin) {
  std::vector<long> count(speeds.size(), 0);
  const bool alike =
      std::adjacent_find(speeds.begin(), speeds.end(), std::not_equal_to<>()) == speeds.end();
  if (alike || round_robin) {
    const auto r = static_cast<long>(count.size());
    for (long g = 0; g < r; ++g) count[static_cast<std::size_t>(g)] = M / r + (g < M % r ? 1 : 0);
  } else {
    for (int m = 0; m < M; ++m) {
      std::size_t best = 0;
      for (std::size_t g = 1; g < count.size(); ++g) {
        if (static_cast<double>(count[g] + 1) / speeds[g] <
            static_cast<double>(count[best] + 1) / speeds[best])
          best = g;
      }
      ++count[best];
    }
  }
  run.time_per_work = 0;
  run.most_micro_batches = 0;
  for (std::size_t g = 0; g < count.size(); ++g) {
    run.time_per_work = std::max(run.time_per_work, static_cast<double>(count[g]) / speeds[g]);
    run.most_micro_batches = std::max(run.most_micro_batches, count[g]);
  }
  return count;
}

Ring ring_through(const topology::Topology& topology, const std::vector<int>& gpus) {
  Ring ring;
  for (std::size_t x = 0; x < gpus.size() && gpus.size() > 1; ++x) {
    const int u = gpus[x], v = gpus[(x + 1) % gpus.size()];
    ring.bandwidth = std::min(ring.bandwidth, topology.bandwidth_bytes_per_s(u, v));
    ring.latency_ms = std::max(ring.latency_ms, topology.latency_ms(u, v));
  }
  return ring;
}

// The distinct (group, micro-batch count) pairs of `groups` and `count`, in increasing order.
// O(r log r).
std::vector<std::pair<Group, long>> group_classes(const std::vector<Group>& groups,
                                                  const std::vector<long>& count) {
  std::vector<std::pair<Group, long>> classes;
  classes.reserve(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) classes.emplace_back(groups[g], count[g]);
  auto key = [](const std::pair<Group, long>& c) {
    return std::tie(c.first.speed, c.first.per_byte, c.first.per_call, c.second);
  };
  std::sort(classes.begin(), classes.end(),
            [&](const auto& lhs, const auto& rhs) { return key(lhs) < key(rhs); });
  classes.erase(std::unique(classes.begin(), classes.end(),
                            [&](const auto& lhs, const auto& rhs) { return key(lhs) == key(rhs); }),
                classes.end());
  return classes;
}

// The run of `gpus` (consecutive in the order) at degree t; requires `gpus.size()` to be a
// multiple of t. O(r t + r log r), and O(M r) more when the group speeds differ.
Run make_run(const topology::Topology& topology, const std::vector<int>& gpus, int t, int M,
             bool round_robin) {
  Run run{RunStats::of(topology, gpus)};
  run.t = t;
  run.groups_count = static_cast<int>(gpus.size()) / t;
  std::vector<double> speeds;
  std::vector<Group> groups;  // a GPU of its own at t = 1: no all-reduces
  if (t == 1) {
    speeds = run.speeds;
    run.fastest_group = run.fastest;
    for (const double speed : speeds) groups.push_back({speed, 0, 0});
  } else {
    const double tt = t;
    for (int g = 0; g < run.groups_count; ++g) {
      const std::vector<int> members(gpus.begin() + static_cast<std::ptrdiff_t>(g) * t,
                                     gpus.begin() + static_cast<std::ptrdiff_t>(g + 1) * t);
      Group group;
      group.speed = std::numeric_limits<double>::infinity();
      for (const int gpu : members) group.speed = std::min(group.speed, topology.gpu(gpu).speed);
      const Ring ring = ring_through(topology, members);
      group.per_byte = 2 * (tt - 1) / tt / ring.bandwidth * 1e3;
      group.per_call = 2 * (tt - 1) * ring.latency_ms;
      speeds.push_back(group.speed);
      run.fastest_group = std::max(run.fastest_group, group.speed);
      groups.push_back(group);
    }
    for (int i = 0; i < t; ++i) {
      std::vector<int> members;
      members.reserve(static_cast<std::size_t>(run.groups_count));
      for (int g = 0; g < run.groups_count; ++g)
        members.push_back(gpus[static_cast<std::size_t>(g) * static_cast<std::size_t>(t) +
                               static_cast<std::size_t>(i)]);
      run.rings.push_back(ring_through(topology, members));
    }
  }
  run.classes = group_classes(groups, split_micro_batches(run, speeds, M, round_robin));
  return run;
}

// ---- The terms of one stage -----------------------------------------------------------------

// The terms a stage contributes, given its run, sums and recomputation.
struct Terms {
  bool fits = false;
  double latency = 0;        // one micro-batch's F + B on the fastest group
  double load = 0;           // P: the stage's work over the iteration
  double memory_rounds = 0;  // ceil(ceil(M/r) / k) when memory caps in-flight work, else 0
  double allreduce = 0;      // its AllReduce, then its optimizer step
  double backward = 0;       // B on the fastest group
};

// How the optimizer's state is held (spec 8.3; sharded gradients and full sharding:
// docs/decisions.md).
struct MemoryRule {
  double factor = 4;          // phi
  double sharded_factor = 2;  // phi_sh
  bool sharded = false;
  double reserve = 0;      // the framework reserve (Model::reserve_bytes), once per GPU
  bool fully = false;      // everything sharded, and each layer's weights gathered
  double working = 3;      // sharded gradients: the working copies per byte of the largest layer
  bool gradients = false;  // the gradients and the optimizer state sharded, the weights whole
  double weights = 1;      // the weights' part of phi
  // Whether the gradients are reduce-scattered with each backward (no AllReduce).
  [[nodiscard]] bool shards_gradients() const { return fully || gradients; }
};

MemoryRule memory_rule(const model::Model& model, Optimizer optimizer) {
  const model::FactorSplit split = model::factor_split(model);
  MemoryRule rule;
  rule.factor = model.parameter_memory_factor;
  rule.sharded_factor = model::sharded_factor(model);
  rule.sharded = optimizer == Optimizer::kSharded;
  rule.reserve = model.reserve_bytes;
  rule.fully = optimizer == Optimizer::kFullySharded;
  rule.gradients = optimizer == Optimizer::kShardedGradients;
  rule.working = rule.fully ? 2 * split.weights + split.gradients : split.gradients;
  rule.weights = split.weights;
  return rule;
}

// A stage's static bytes per GPU over `r` replicas, as simulate::execution counts them.
double static_bytes_of(const StageSums& x, const MemoryRule& rule, double r) {
  if (rule.sharded)
    return x.parameters * (rule.factor - rule.sharded_factor + rule.sharded_factor / r);
  if (rule.fully && r > 1)
    return rule.factor * x.parameters / r + rule.working * x.largest_parameters;
  if (rule.gradients && r > 1) {
    return x.parameters * (rule.weights + (rule.factor - rule.weights) / r) +
           rule.working * x.largest_parameters;
  }
  return rule.factor * x.parameters;
}

// Whether the stage fits, and with how many micro-batches in flight; sets `fits` and
// `memory_rounds` of `t`.
void memory_terms(Terms& t, const StageSums& x, const Run& run, bool recompute,
                  const MemoryRule& rule, const ScheduleModel& schedule) {
  const double static_bytes = static_bytes_of(x, rule, run.groups_count);
  const double transient = recompute ? x.largest_recompute_transient : x.largest_transient;
  const double stash = recompute ? x.inputs : x.stash;
  const long per_replica = run.most_micro_batches;
  const long needed = schedule.stashes > 0 ? std::min(schedule.stashes, per_replica) : 1;
  const long in_flight = simulate::max_in_flight(static_bytes + transient + rule.reserve, stash,
                                                 run.capacity, per_replica);
  if (in_flight < needed) return;
  t.fits = true;
  t.memory_rounds = schedule.stashes == 0 && in_flight < per_replica
                        ? static_cast<double>(ceil_div(per_replica, in_flight))
                        : 0;
}

// The slowest of a run's data-parallel rings: the smallest bandwidth and the largest latency.
Ring slowest_data_parallel_ring(const Run& run) {
  if (run.t == 1) return {run.ring_bandwidth, run.ring_latency_ms};
  Ring slowest;
  for (const Ring& ring : run.rings) {
    slowest.bandwidth = std::min(slowest.bandwidth, ring.bandwidth);
    slowest.latency_ms = std::max(slowest.latency_ms, ring.latency_ms);
  }
  return slowest;
}

Terms stage_terms(const StageSums& x, const Run& run, bool recompute, const MemoryRule& rule,
                  const ScheduleModel& schedule) {
  Terms t;
  memory_terms(t, x, run, recompute, rule, schedule);
  if (!t.fits) return t;
  // B: the backward's own compute (model::StageCost::own_backward_ms).
  const double F = x.forward, B = recompute ? x.backward - x.backward_recompute : x.backward;
  const double update_divisor = rule.sharded || rule.shards_gradients() ? run.groups_count : 1;
  // Sharded gradients overlap each layer's gathers with its compute; the DP takes the stage's
  // sums (a lower bound of the per-layer maxima simulate::execution adds up) and has no
  // AllReduce. The backward's collectives: a reduce-scatter, and fully sharded an all-gather.
  double gather = 0;  // its layers' all-gathers, one latency per layer as execution counts them
  const double backward_collectives = rule.fully ? 2 : 1;
  if (rule.shards_gradients()) {
    const Ring ring = slowest_data_parallel_ring(run);
    gather = simulate::ring_all_gather_ms(run.groups_count, x.parameters, ring.bandwidth,
                                          ring.latency_ms, x.layers);
  }
  if (run.t == 1 && !recompute && !rule.shards_gradients()) {
    // Section 3's stage: every group is one GPU and its work is proportional to 1 / speed.
    t.latency = (F + B) / run.fastest;
    t.load = (F + B) * run.time_per_work;
    t.allreduce = simulate::ring_allreduce_ms(run.replicas, x.parameters, run.ring_bandwidth,
                                              run.ring_latency_ms) +
                  x.update / run.slowest / update_divisor;
    t.backward = B / run.fastest;
    return t;
  }
  // Groups (spec 8.3): F = f / v + all-reduces, B = b / v + all-reduces (+ F when recomputing).
  t.latency = std::numeric_limits<double>::infinity();
  t.backward = std::numeric_limits<double>::infinity();
  double slowest = std::numeric_limits<double>::infinity();
  for (const auto& [group, count] : run.classes) {
    const double forward = std::max(F / group.speed, gather) +
                           group.per_byte * x.forward_allreduce_bytes +
                           group.per_call * x.forward_allreduces;
    double backward = std::max(B / group.speed, backward_collectives * gather) +
                      group.per_byte * x.backward_allreduce_bytes +
                      group.per_call * x.backward_allreduces;
    // The forward again; with sharded gradients only, the weights kept from the forward.
    if (recompute && rule.gradients) {
      backward += F / group.speed + group.per_byte * x.forward_allreduce_bytes +
                  group.per_call * x.forward_allreduces;
    } else if (recompute) {
      backward += forward;
    }
    t.latency = std::min(t.latency, forward + backward);
    t.backward = std::min(t.backward, backward);
    t.load = std::max(t.load, static_cast<double>(count) * (forward + backward));
    slowest = std::min(slowest, group.speed);
  }
  double allreduce = 0;  // none with sharded gradients: reduce-scattered with each backward
  if (!rule.shards_gradients() && run.t == 1) {
    allreduce = simulate::ring_allreduce_ms(run.replicas, x.parameters, run.ring_bandwidth,
                                            run.ring_latency_ms);
  } else if (!rule.shards_gradients()) {
    for (const Ring& ring : run.rings) {
      allreduce = std::max(allreduce, simulate::ring_allreduce_ms(run.groups_count, x.parameters,
                                                                  ring.bandwidth, ring.latency_ms));
    }
  }
  t.allreduce = allreduce + x.update / slowest / update_divisor;
  return t;
}

// The excess of a stage whose round trip to the end and back is `round_trip`.
double stage_excess(const Terms& t, double round_trip) {
  return std::max(t.load - t.latency, t.memory_rounds * round_trip - t.latency);
}

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
  const topology::PairCost worst = topology.worst_pair(from, to);
  return {worst.bandwidth_bytes_per_s, worst.latency_ms};
}

// ---- Fronts -----------------------------------------------------------------------------------

struct Entry {
  double latency;
  double excess;
  double tail;
  int stages;      // in this suffix, this entry's stage included
  int j;           // next state's first cut index (== C: the plan ends here)
  int b;           // next state's run length
  int d;           // next state's degree index
  int next;        // index in the next state's front; -1 at the end
  bool recompute;  // whether this entry's stage recomputes
};

// Most entries a front keeps (tuning::kMaxFront). Real profiles (memory-tight stages, whose
// round trips trade against their steady state) can grow fronts into the thousands and the DP
// by as much; beyond this size the entry of largest sum is dropped (ties: the latest), so the DP
// is exact while fronts stay below it (every test instance and shipped example) and a fast
// proposal for the replayed search otherwise.
using tuning::kMaxFront;

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

// The recomputation choices a stage has.
std::vector<bool> recompute_options(const StageChoices& choices) {
  if (choices.must_recompute) return {true};
  if (choices.may_recompute) return {false, true};
  return {false};
}

}  // namespace

namespace {

// The objective of `stages` with the layer sums of `sums`, whose degrees (`degrees`, ascending)
// include every stage's. O(S + sum r_s t_s).
std::optional<Objective> objective_with(const model::Model& model, const Sums& sums,
                                        const std::vector<int>& degrees,
                                        const topology::Topology& topology,
                                        const std::vector<Stage>& stages, int micro_batches,
                                        const ScheduleModel& schedule, Optimizer optimizer) {
  auto columns = [&](int t) -> const DegreeColumns& {
    return sums.degrees[static_cast<std::size_t>(
        std::lower_bound(degrees.begin(), degrees.end(), t) - degrees.begin())];
  };
  const MemoryRule rule = memory_rule(model, optimizer);
  const int S = static_cast<int>(stages.size());
  double latency = 0, excess = 0, tail = 0;
  for (int s = S - 1; s >= 0; --s) {
    const Stage& stage = stages[static_cast<std::size_t>(s)];
    const Run run =
        make_run(topology, stage.gpus, stage.tensor_parallel, micro_batches, schedule.round_robin);
    const StageSums x =
        stage_sums(sums, columns(stage.tensor_parallel), stage.first_layer, stage.last_layer + 1);
    const Terms t = stage_terms(x, run, stage.recompute, rule, schedule);
    if (!t.fits) return std::nullopt;
    if (s == S - 1) {
      latency = t.latency;
      excess = stage_excess(t, latency);
      tail = t.allreduce;
      continue;
    }
    const Stage& following = stages[static_cast<std::size_t>(s) + 1];
    const double bytes = model.layers[static_cast<std::size_t>(stage.last_layer)].activation_bytes /
                         std::min(stage.tensor_parallel, following.tensor_parallel);
    const double c = cross(topology, stage.gpus, following.gpus).transfer_ms(bytes);
    const long channels = std::max(stage.replicas(), following.replicas());
    const long per_replica = (micro_batches + channels - 1) / channels;
    latency = t.latency + 2 * c + latency;
    excess = std::max(excess,
                      std::max(stage_excess(t, latency), static_cast<double>(per_replica) * c - c));
    tail = std::max(t.allreduce, tail - (c + t.backward));
  }
  return Objective{latency, excess, tail, latency + excess + tail};
}

}  // namespace

std::optional<Objective> objective(const model::Model& model, const topology::Topology& topology,
                                   const std::vector<Stage>& stages, int micro_batches,
                                   const ScheduleModel& schedule, Optimizer optimizer) {
  std::vector<int> degrees;
  bool recompute = false;
  for (const Stage& stage : stages) {
    degrees.push_back(stage.tensor_parallel);
    recompute = recompute || stage.recompute;
  }
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  const Sums sums = make_sums(model, degrees, {recompute, shards_gradients(optimizer)});
  return objective_with(model, sums, degrees, topology, stages, micro_batches, schedule, optimizer);
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
  int lengths = 0;        // run lengths: unit, 2 unit, ..., lengths * unit <= min(N, M t_max)
};

// The grid's limits (search_constants.hpp): layer blocks, run starts and run lengths at most,
// and blocks^2 x starts x lengths^2 x choices within kGridBudget (about a second).
using tuning::kGridBudget;
using tuning::kMaxBlocks;
using tuning::kMaxLengths;
using tuning::kMaxPositions;

// The longest run a stage may have: min(N, M t_max) GPUs (at most M groups).
int longest_run(int gpus, int micro_batches, const StageChoices& choices) {
  const long t_max = choices.degrees.empty() ? 1 : choices.degrees.back();
  return static_cast<int>(std::min<long>(gpus, static_cast<long>(micro_batches) * t_max));
}

// How many (degree, next degree, recomputation) combinations a transition weighs: 1 for a v1
// model. A uniform plan's next stage has the stage's own degree and run length.
double choice_factor(const StageChoices& choices) {
  const double d = static_cast<double>(choices.degrees.size());
  return (choices.uniform ? d : d * d) * static_cast<double>(recompute_options(choices).size());
}

// Layer blocks of about equal compute; inside each window the cut goes where the activation
// crossing it is smallest (ties: the earlier boundary). O(L blocks).
std::vector<int> block_cuts(const model::Model& model, int blocks) {
  const int L = static_cast<int>(model.layers.size());
  std::vector<int> cuts{0};
  if (L <= blocks) {
    for (int l = 1; l <= L; ++l) cuts.push_back(l);
    return cuts;
  }
  const LayerSums prefix(model);
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
      cuts.push_back(best);
      previous = best;
    }
  }
  cuts.push_back(L);
  return cuts;
}

// `narrow_unit` > 0: runs start at every multiple of that unit and are as long as the budget
// allows, for plans whose stages must be many and narrow (memory-tight models); the lengths
// shrink instead of the positions to meet the budget.
Grid make_grid(const model::Model& model, int gpus, int micro_batches, double budget,
               const StageChoices& choices, int narrow_unit = 0) {
  const bool narrow = narrow_unit > 0;
  const int L = static_cast<int>(model.layers.size());
  const int R = longest_run(gpus, micro_batches, choices);
  const double factor = choice_factor(choices);
  Grid grid;
  if (narrow) grid.unit = narrow_unit;
  while (!narrow && std::isfinite(budget) &&
         (gpus / grid.unit > kMaxPositions || R / grid.unit > kMaxLengths)) {
    grid.unit *= 2;
  }
  grid.unit = std::min(grid.unit, std::max(R, 1));
  int blocks = std::isfinite(budget) ? std::min(L, kMaxBlocks) : L;
  int lengths = R / grid.unit;
  auto cost = [&] {
    const int positions = gpus / grid.unit;  // whole units
    return static_cast<double>(blocks) * blocks * positions * lengths * lengths * factor;
  };
  // Over budget: coarser GPU units first (clusters are made of identical nodes), then fewer
  // layer blocks.
  if (narrow) {
    while (cost() > budget && lengths > 1) lengths /= 2;
  }
  while (!narrow && cost() > budget && grid.unit * 2 <= R) {
    grid.unit *= 2;
    lengths = R / grid.unit;
  }
  while (cost() > budget && blocks > 16) blocks = blocks * 3 / 4;
  grid.positions = gpus / grid.unit;
  grid.lengths = lengths;
  grid.cuts = block_cuts(model, blocks);
  return grid;
}

// One pass of the DP over a grid. `cap` > 0 keeps only the `cap` entries of smallest sum per
// state (a fast heuristic whose result is an upper bound); `upper_bound` drops entries that
// cannot lead to a plan of total <= upper_bound (see `keep`). Both off: exact on the grid.
// Past `max_work` (kMaxPassWork in solve) the pass gives up: `gave_up` is set, nothing returned.
class Pass {
 public:
  Pass(const model::Model& model, const topology::Topology& topology, const std::vector<int>& order,
       int micro_batches, const Grid& grid, const ScheduleModel& schedule,
       const StageChoices& choices)
      : model_(model),
        topology_(topology),
        order_(order),
        M_(micro_batches),
        grid_(grid),
        schedule_(schedule),
        choices_(choices),
        sums_(make_sums(model, choices.degrees,
                        {choices.may_recompute || choices.must_recompute,
                         shards_gradients(choices.optimizer)})),
        prefix_(model),
        rule_(memory_rule(model, choices.optimizer)),
        recompute_(recompute_options(choices)),
        C_(static_cast<int>(grid.cuts.size()) - 1),
        P_(grid.positions),
        Q_(grid.lengths),
        U_(grid.unit),
        D_(static_cast<int>(choices.degrees.size())),
        N_(static_cast<int>(order.size())) {
    build_runs();
    build_crosses();
    fronts_.resize(static_cast<std::size_t>(C_) * static_cast<std::size_t>(P_) *
                   static_cast<std::size_t>(Q_) * static_cast<std::size_t>(D_));
  }

  // Returns the `count` best plans of the final front (smallest total first, ties in front
  // order) with at most `max_stages` stages.
  std::vector<Solution> run(std::size_t cap, double upper_bound, double max_work, bool& gave_up,
                            std::size_t count, int max_stages) {
    if (Q_ == 0 || P_ == 0) return {};
    count_stages_ = max_stages < std::min(C_, P_);  // the stage count enters the fronts only
    max_stages_ = max_stages;                       // when the cap can bind
    cap_ = cap;
    prune_above_ = upper_bound * (1 + 1e-9);
    max_work_ = max_work;
    prepare_floors();
    for (int ci = C_ - 1; ci >= 0; --ci) {
      for (int p = P_ - 1; p >= 0; --p) {
        // Only reachable states: the layers before i need GPUs before k; plans start at k = 0.
        if ((ci == 0) != (p == 0)) continue;
        if (!fill_states(ci, p)) {
          gave_up = true;
          return {};
        }
      }
    }
    return best_solutions(count);
  }

 private:
  [[nodiscard]] std::size_t run_index(int p, int q, int d) const {
    return (static_cast<std::size_t>(p) * static_cast<std::size_t>(Q_) +
            static_cast<std::size_t>(q - 1)) *
               static_cast<std::size_t>(D_) +
           static_cast<std::size_t>(d);
  }
  std::vector<Entry>& front(int ci, int p, int q, int d) {
    return fronts_[static_cast<std::size_t>(ci) * static_cast<std::size_t>(P_) *
                       static_cast<std::size_t>(Q_) * static_cast<std::size_t>(D_) +
                   run_index(p, q, d)];
  }
  [[nodiscard]] const std::optional<Run>& run_at(int p, int q, int d) const {
    return runs_[run_index(p, q, d)];
  }
  Cross& cross_at(int p, int q1, int q2) {
    return crosses_[(static_cast<std::size_t>(p) * static_cast<std::size_t>(Q_) +
                     static_cast<std::size_t>(q1 - 1)) *
                        static_cast<std::size_t>(Q_) +
                    static_cast<std::size_t>(q2 - 1)];
  }

  // Runs: the run starting at position p U with q U GPUs at each degree that divides it, of at
  // most M groups. O(P Q D Q U log(Q U)), plus O(M r) per run of unequal speeds.
  void build_runs() {
    runs_.assign(
        static_cast<std::size_t>(P_) * static_cast<std::size_t>(Q_) * static_cast<std::size_t>(D_),
        std::nullopt);
    for (int p = 0; p < P_; ++p) {
      const int k = p * U_;
      std::vector<int> gpus;
      for (int n = 1; k + n <= N_ && n <= Q_ * U_; ++n) {
        gpus.push_back(order_[static_cast<std::size_t>(k + n - 1)]);
        if (n % U_ != 0) continue;
        for (int d = 0; d < D_; ++d) {
          const int t = choices_.degrees[static_cast<std::size_t>(d)];
          if (n % t != 0 || n / t > M_) continue;
          runs_[run_index(p, n / U_, d)] = make_run(topology_, gpus, t, M_, schedule_.round_robin);
        }
      }
    }
  }

  // The GPUs of unit a, in order.
  [[nodiscard]] std::vector<int> unit(int a) const {
    return {order_.begin() + static_cast<std::ptrdiff_t>(a) * U_,
            order_.begin() + static_cast<std::ptrdiff_t>(a + 1) * U_};
  }

  // Worst-pair costs between the run of q1 units ending at position p and the run of q2 units
  // starting there, built from the cost of every unit pair (O(P^2 U^2 + P Q^2), O(P^2 U log U)
  // for a node-cost topology).
  void build_crosses() {
    std::vector<Cross> unit_pairs(static_cast<std::size_t>(P_) * static_cast<std::size_t>(P_));
    for (int a = 0; a < P_; ++a) {
      for (int b = a + 1; b < P_; ++b) {
        unit_pairs[static_cast<std::size_t>(a) * static_cast<std::size_t>(P_) +
                   static_cast<std::size_t>(b)] = cross(topology_, unit(a), unit(b));
      }
    }
    crosses_.assign(static_cast<std::size_t>(P_ + 1) * static_cast<std::size_t>(Q_) *
                        static_cast<std::size_t>(Q_),
                    Cross{});
    for (int p = 1; p < P_; ++p) {
      for (int q1 = 1; q1 <= Q_ && p - q1 >= 0; ++q1) {
        for (int q2 = 1; q2 <= Q_ && p + q2 <= P_; ++q2) {
          Cross c = q2 > 1 ? cross_at(p, q1, q2 - 1) : (q1 > 1 ? cross_at(p, q1 - 1, q2) : Cross{});
          // Add the pairs of the newest receiver unit (q2 > 1) or sender unit (q2 == 1).
          const int first_sender = p - q1;
          const int last_sender = q2 > 1 ? p - 1 : p - q1;
          const int receiver = q2 > 1 ? p + q2 - 1 : p;
          for (int a = first_sender; a <= last_sender; ++a) {
            const Cross& pair =
                unit_pairs[static_cast<std::size_t>(a) * static_cast<std::size_t>(P_) +
                           static_cast<std::size_t>(receiver)];
            c.bandwidth = std::min(c.bandwidth, pair.bandwidth);
            c.latency_ms = std::max(c.latency_ms, pair.latency_ms);
          }
          cross_at(p, q1, q2) = c;
        }
      }
    }
  }

  // Lower bounds on what the layers before a state add to its entries: their compute at the
  // fastest speed, and (the busiest of their stages works at least M prefix_work / speeds of the
  // GPUs before k) a steady state that replaces the entry's excess. With tensor parallelism a
  // layer counts at its least time and least total work over its degrees.
  void prepare_floors() {
    fastest_anywhere_ = 0;
    for (int g : order_) fastest_anywhere_ = std::max(fastest_anywhere_, topology_.gpu(g).speed);
    speed_before_.assign(static_cast<std::size_t>(N_) + 1, 0);
    for (int k = 0; k < N_; ++k) {
      speed_before_[static_cast<std::size_t>(k) + 1] =
          speed_before_[static_cast<std::size_t>(k)] +
          topology_.gpu(order_[static_cast<std::size_t>(k)]).speed;
    }
  }
  // The floors of the states with first layer i at position k (once per (i, k)).
  void set_floors(int i, int k) {
    const auto l = static_cast<std::size_t>(i);
    const bool v1 = D_ == 1 && choices_.degrees.front() == 1;
    const double time = v1 ? prefix_.forward[l] + prefix_.backward[l] : sums_.least_time[l];
    const double work = v1 ? time : sums_.least_work[l];
    floor_latency_ = time / fastest_anywhere_;
    floor_load_ = k > 0 ? M_ * work / speed_before_[static_cast<std::size_t>(k)] : 0;
  }
  [[nodiscard]] bool keep(const Entry& e) const {
    return e.latency + std::max(e.excess + floor_latency_, floor_load_) <= prune_above_;
  }

  // Every state (ci, p, q, d) for q, d. False when the pass ran out of work.
  bool fill_states(int ci, int p) {
    const int i = grid_.cuts[static_cast<std::size_t>(ci)];
    set_floors(i, p * U_);
    for (int q = 1; q <= Q_ && p + q <= P_; ++q) {
      for (int d = 0; d < D_; ++d) {
        const std::optional<Run>& run = run_at(p, q, d);
        if (!run) continue;
        std::vector<Entry>& here = front(ci, p, q, d);
        for (int cj = ci + 1; cj <= C_; ++cj) {
          const int j = grid_.cuts[static_cast<std::size_t>(cj)];
          const DegreeColumns& columns = sums_.degrees[static_cast<std::size_t>(d)];
          if (!allowed(sums_, columns, i, j)) continue;
          const StageSums x = stage_sums(sums_, columns, i, j);
          bool any_fits = false;
          for (const bool recompute : recompute_) {
            const Terms t = stage_terms(x, *run, recompute, rule_, schedule_);
            if (!t.fits) continue;  // more layers only need more memory
            any_fits = true;
            if (!transitions(here, t, recompute, cj, p, q, d)) return false;
          }
          if (!any_fits) break;
        }
        if (cap_ > 0 && here.size() > cap_) keep_smallest(here);
      }
    }
    return true;
  }

  // The entries of state (ci, p, q, d) whose first stage (layers up to cut cj) has terms `t`.
  bool transitions(std::vector<Entry>& here, const Terms& t, bool recompute, int cj, int p, int q,
                   int d) {
    if (cj == C_) {
      const Entry e{t.latency, stage_excess(t, t.latency), t.allreduce, 1, cj, 0, 0, -1, recompute};
      if (keep(e)) insert(here, e, count_stages_);
      return true;
    }
    const int j = grid_.cuts[static_cast<std::size_t>(cj)];
    const int next_p = p + q;
    const int t_here = choices_.degrees[static_cast<std::size_t>(d)];
    const int r_here = run_at(p, q, d)->groups_count;
    const double activation = model_.layers[static_cast<std::size_t>(j - 1)].activation_bytes;
    for (int q2 = 1; q2 <= Q_ && next_p + q2 <= P_; ++q2) {
      for (int d2 = 0; d2 < D_; ++d2) {
        if (choices_.uniform && (q2 != q || d2 != d)) continue;  // one shape for every stage
        const std::vector<Entry>& rest = front(cj, next_p, q2, d2);
        if (rest.empty()) continue;
        const int t_next = choices_.degrees[static_cast<std::size_t>(d2)];
        const double bytes = activation / std::min(t_here, t_next);  // exact at t = 1
        const double c = cross_at(next_p, q, q2).transfer_ms(bytes);
        const long channels = std::max(r_here, run_at(next_p, q2, d2)->groups_count);
        const long per_channel = (M_ + channels - 1) / channels;
        const double channel = static_cast<double>(per_channel) * c - c;
        work_ += static_cast<double>(rest.size()) * static_cast<double>(here.size() + 1);
        if (work_ > max_work_) return false;
        for (std::size_t x = 0; x < rest.size(); ++x) {
          const Entry& e = rest[x];
          if (count_stages_ && e.stages >= max_stages_) continue;
          const double latency = t.latency + 2 * c + e.latency;
          const double excess = std::max(e.excess, std::max(stage_excess(t, latency), channel));
          const double tail = std::max(t.allreduce, e.tail - (c + t.backward));
          const Entry next{latency,  excess, tail, e.stages + 1, cj, q2, d2, static_cast<int>(x),
                           recompute};
          if (keep(next)) insert(here, next, count_stages_);
        }
      }
    }
    return true;
  }

  // Keeps the `cap_` smallest sums, in their original order (deterministic).
  void keep_smallest(std::vector<Entry>& here) const {
    std::vector<std::size_t> rank(here.size());
    std::iota(rank.begin(), rank.end(), 0);
    std::stable_sort(rank.begin(), rank.end(), [&](std::size_t lhs, std::size_t rhs) {
      return here[lhs].latency + here[lhs].excess + here[lhs].tail <
             here[rhs].latency + here[rhs].excess + here[rhs].tail;
    });
    rank.resize(cap_);
    std::sort(rank.begin(), rank.end());
    std::vector<Entry> kept;
    kept.reserve(rank.size());
    for (std::size_t x : rank) kept.push_back(here[x]);
    here = std::move(kept);
  }

  // The plan starts at position 0 with any first-run length and degree: the `count` smallest
  // totals, each followed back to its stages.
  std::vector<Solution> best_solutions(std::size_t count) {
    struct Top {
      int q, d;
      std::size_t x;
    };
    std::vector<Top> tops;
    for (int q = 1; q <= Q_; ++q) {
      for (int d = 0; d < D_; ++d) {
        for (std::size_t x = 0; x < front(0, 0, q, d).size(); ++x) tops.push_back({q, d, x});
      }
    }
    auto total_of = [&](const Top& top) {
      const Entry& e = front(0, 0, top.q, top.d)[top.x];
      return e.latency + e.excess + e.tail;
    };
    std::stable_sort(tops.begin(), tops.end(),
                     [&](const Top& a, const Top& b) { return total_of(a) < total_of(b); });
    if (tops.size() > count) tops.resize(count);
    std::vector<Solution> solutions;
    for (const Top& top : tops) {
      Solution solution;
      const Entry& first = front(0, 0, top.q, top.d)[top.x];
      solution.objective = Objective{first.latency, first.excess, first.tail,
                                     first.latency + first.excess + first.tail};
      int ci = 0, p = 0, q = top.q, d = top.d;
      int x = static_cast<int>(top.x);
      while (true) {
        const Entry& e = front(ci, p, q, d)[static_cast<std::size_t>(x)];
        Stage stage;
        stage.first_layer = grid_.cuts[static_cast<std::size_t>(ci)];
        stage.last_layer = grid_.cuts[static_cast<std::size_t>(e.j)] - 1;
        for (int g = p * U_; g < (p + q) * U_; ++g)
          stage.gpus.push_back(order_[static_cast<std::size_t>(g)]);
        stage.tensor_parallel = choices_.degrees[static_cast<std::size_t>(d)];
        stage.recompute = e.recompute;
        solution.stages.push_back(std::move(stage));
        if (e.next < 0) break;
        ci = e.j;
        p += q;
        q = e.b;
        d = e.d;
        x = e.next;
      }
      solutions.push_back(std::move(solution));
    }
    return solutions;
  }

  const model::Model& model_;
  const topology::Topology& topology_;
  const std::vector<int>& order_;
  const int M_;
  const Grid& grid_;
  const ScheduleModel& schedule_;
  const StageChoices& choices_;
  const Sums sums_;
  const LayerSums prefix_;
  const MemoryRule rule_;
  const std::vector<bool> recompute_;
  const int C_, P_, Q_, U_, D_, N_;
  std::vector<std::optional<Run>> runs_;
  std::vector<Cross> crosses_;
  std::vector<std::vector<Entry>> fronts_;
  double fastest_anywhere_ = 0;
  std::vector<double> speed_before_;
  double floor_latency_ = 0;
  double floor_load_ = 0;
  bool count_stages_ = false;
  int max_stages_ = 0;
  std::size_t cap_ = 0;
  double prune_above_ = 0;
  double max_work_ = 0;
  double work_ = 0;
};

// A necessary condition for any plan on `grid` (see fewest_stages_for_static_bytes): no more
// stages needed than the grid has positions (each run is at least one unit), blocks and the cap
// allow, at the degrees a run of the grid can hold. On 3,360 GPUs the 530B model needs at least
// 14 stages and a grid of 512-GPU units has 6 positions: the passes that would find nothing are
// skipped (about a second per order). O(L D).
bool grid_can_fit(const model::Model& model, const topology::Topology& topology,
                  const std::vector<int>& order, const Grid& grid, const StageChoices& choices,
                  int max_stages) {
  std::vector<int> degrees;
  for (const int t : choices.degrees) {
    if (t <= grid.lengths * grid.unit) degrees.push_back(t);
  }
  const int stages =
      fewest_stages_for_static_bytes(model, topology, order, degrees, choices.optimizer);
  const int blocks = static_cast<int>(grid.cuts.size()) - 1;
  return stages >= 0 && stages <= std::min({grid.positions, blocks, max_stages});
}

// The best objective among simple plans on the grid: S stages of equal compute (cut at grid
// boundaries), each on q units of consecutive GPUs at one degree, for every q, S and degree.
// A cheap upper bound for the exact pass (infinity when none fits). O(P log P D) plans of
// O(L + S r^2) each.
double simple_plans_bound(const model::Model& model, const topology::Topology& topology,
                          const std::vector<int>& order, int micro_batches, const Grid& grid,
                          const ScheduleModel& schedule, int max_stages,
                          const StageChoices& choices) {
  const int C = static_cast<int>(grid.cuts.size()) - 1;
  const LayerSums prefix(model);
  const Sums sums = make_sums(model, choices.degrees,
                              {choices.must_recompute, shards_gradients(choices.optimizer)});
  auto work_at = [&](int ci) {
    const auto l = static_cast<std::size_t>(grid.cuts[static_cast<std::size_t>(ci)]);
    return prefix.forward[l] + prefix.backward[l];
  };
  const double total = work_at(C);
  double best = std::numeric_limits<double>::infinity();
  for (const int t : choices.degrees) {
    for (int q = 1; q <= grid.lengths; ++q) {
      const int n = q * grid.unit;
      if (n % t != 0 || n / t > micro_batches) continue;
      for (int S = 1; S <= C && S <= max_stages && S * q <= grid.positions; ++S) {
        std::vector<Stage> stages;
        int first = 0;  // block index
        bool valid = true;
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
          for (int g = s * n; g < (s + 1) * n; ++g)
            stage.gpus.push_back(order[static_cast<std::size_t>(g)]);
          stage.tensor_parallel = t;
          stage.recompute = choices.must_recompute;
          valid =
              valid && model::stage_allows_degree(model, stage.first_layer, stage.last_layer, t);
          stages.push_back(std::move(stage));
          first = last;
        }
        if (!valid) continue;
        if (auto value = objective_with(model, sums, choices.degrees, topology, stages,
                                        micro_batches, schedule, choices.optimizer))
          best = std::min(best, value->total_ms);
      }
    }
  }
  return best;
}

}  // namespace

int fewest_stages_for_static_bytes(const model::Model& model, const topology::Topology& topology,
                                   const std::vector<int>& order, const std::vector<int>& degrees,
                                   Optimizer optimizer) {
  double memory = 0;
  for (const int gpu : order) {
    const auto& bytes = topology.gpu(gpu).memory_bytes;
    if (!bytes) return 0;  // a GPU without a memory limit: no bound
    memory = std::max(memory, *bytes);
  }
  if (degrees.empty()) return -1;
  const MemoryRule rule = memory_rule(model, optimizer);
  memory -= rule.reserve;  // what a GPU holds besides its framework reserve
  // Full sharding divides everything among the replicas: no stage count is necessary; sharded
  // gradients leave the weights whole.
  const double factor = rule.fully       ? 0
                        : rule.gradients ? rule.weights
                        : rule.sharded   ? rule.factor - rule.sharded_factor
                                         : rule.factor;
  int stages = 1;
  double filled = 0;
  for (int l = 0; l < static_cast<int>(model.layers.size()); ++l) {
    const model::Layer& layer = model.layers[static_cast<std::size_t>(l)];
    double bytes = layer.parameter_bytes;
    for (const int t : degrees) {
      if (t > 1 && model::stage_allows_degree(model, l, l, t)) {
        bytes = std::min(bytes, model::parameter_bytes_at(layer, t));
      }
    }
    const double need = factor * bytes;
    if (need > memory) return -1;
    if (filled + need > memory) {
      ++stages;
      filled = 0;
    }
    filled += need;
  }
  return stages;
}

namespace {

// A capped pass (4 entries per state), then the exact pass under its best, which keeps the
// optimum (exact on the grid); the capped pass's solutions where the exact one finds nothing.
// `pass(cap, upper_bound)` runs one pass of the DP.
template <typename RunPass>
std::vector<Solution> capped_then_exact(const RunPass& pass) {
  auto heuristic = pass(4, std::numeric_limits<double>::infinity());
  if (heuristic.empty()) return {};
  auto exact = pass(0, heuristic.front().objective.total_ms);
  return exact.empty() ? heuristic : exact;
}

// `solutions` with the grid they were found on recorded.
std::vector<Solution> on_grid(std::vector<Solution> solutions, const Grid& grid) {
  for (Solution& solution : solutions) {
    solution.grid_unit = grid.unit;
    solution.grid_blocks = static_cast<int>(grid.cuts.size()) - 1;
  }
  return solutions;
}

// The DP's solutions on a narrow `grid` (`capped_then_exact`); empty when nothing fits.
std::vector<Solution> narrow_pass(const model::Model& model, const topology::Topology& topology,
                                  const std::vector<int>& order, int micro_batches,
                                  const ScheduleModel& schedule, const SolveOptions& options,
                                  const Grid& grid, double max_work) {
  const StageChoices& choices = options.choices;
  const int max_stages =
      options.max_stages > 0 ? options.max_stages : std::numeric_limits<int>::max();
  if (!grid_can_fit(model, topology, order, grid, choices, max_stages)) return {};
  bool gave_up = false;  // a pass that gives up finds nothing; the other's are a proposal
  return on_grid(capped_then_exact([&](std::size_t cap, double upper_bound) {
                   Pass dp(model, topology, order, micro_batches, grid, schedule, choices);
                   return dp.run(cap, upper_bound, max_work, gave_up, options.solutions,
                                 max_stages);
                 }),
                 grid);
}

// Nothing fits on runs of whole units of `unit` GPUs: memory needs more, narrower stages than
// the units allow (a unit of 2 GPUs halves the stages). Two narrow grids, each within the budget
// by shorter runs, then fewer blocks (`make_grid`'s `narrow_unit`): runs of single GPUs, which
// start anywhere but are short, and the coarsest narrower unit (halving `unit`) on which
// anything fits, whose runs are longer (more replicas a stage). Their solutions are pooled, each
// shape once, smallest total first (ties: the coarser grid's), `options.solutions` kept. Runs of
// single GPUs alone (the rule until 2026-12-06) proposed a 54-stage plan of GPT-3 175B on 512
// A100s, replicated optimizer, that the DP estimated at 431 s and the list schedule replays at
// 1,778 s, where units of 64 GPUs hold an 8-stage one of 43.6 s (replayed at 43.2 s).
// O(log2 unit) passes, usually two, each within kGridBudget.
std::vector<Solution> narrower_solutions(const model::Model& model,
                                         const topology::Topology& topology,
                                         const std::vector<int>& order, int micro_batches,
                                         const ScheduleModel& schedule, const SolveOptions& options,
                                         int unit, double max_work) {
  const int N = static_cast<int>(order.size());
  auto on_unit = [&](int narrow_unit) {
    const Grid grid = make_grid(model, N, micro_batches, kGridBudget, options.choices, narrow_unit);
    return narrow_pass(model, topology, order, micro_batches, schedule, options, grid, max_work);
  };
  std::vector<Solution> pooled;
  for (int narrow_unit = unit / 2; narrow_unit > 1 && pooled.empty(); narrow_unit /= 2)
    pooled = on_unit(narrow_unit);
  for (Solution& solution : on_unit(1)) {
    const bool seen = std::any_of(pooled.begin(), pooled.end(), [&](const Solution& other) {
      return other.stages == solution.stages;
    });
    if (!seen) pooled.push_back(std::move(solution));
  }
  std::stable_sort(pooled.begin(), pooled.end(), [](const Solution& x, const Solution& y) {
    return x.objective.total_ms < y.objective.total_ms;
  });
  if (pooled.size() > options.solutions) pooled.resize(options.solutions);
  return pooled;
}

}  // namespace

std::vector<Solution> solve_several(const model::Model& model, const topology::Topology& topology,
                                    const std::vector<int>& order, int micro_batches,
                                    const ScheduleModel& schedule, const SolveOptions& options) {
  const double unlimited = std::numeric_limits<double>::infinity();
  const bool full_grid = options.full_grid;
  const StageChoices& choices = options.choices;
  const int max_stages =
      options.max_stages > 0 ? options.max_stages : std::numeric_limits<int>::max();
  const int N = static_cast<int>(order.size());
  double budget = full_grid ? unlimited : kGridBudget;
  Grid grid = make_grid(model, N, micro_batches, budget, choices);
  while (true) {
    // Large fronts can make a grid within the budget slow: a pass that passes max_pass_work
    // gives up and the grid is made coarser (a quarter of the budget), until it can be no
    // coarser; the last grid runs without a limit. Work is counted, not timed: deterministic.
    const Grid coarser = full_grid ? grid : make_grid(model, N, micro_batches, budget / 4, choices);
    const bool last = coarser.cuts == grid.cuts && coarser.unit == grid.unit;
    const double max_work = last ? unlimited : options.max_pass_work;
    bool gave_up = false;
    auto pass = [&](std::size_t cap, double upper_bound) {
      Pass dp(model, topology, order, micro_batches, grid, schedule, choices);
      return dp.run(cap, upper_bound, max_work, gave_up, options.solutions, max_stages);
    };
    auto result = [&]() -> std::vector<Solution> {
      if (!grid_can_fit(model, topology, order, grid, choices, max_stages)) return {};
      // An upper bound lets the exact pass drop every entry that cannot beat it. Simple
      // equal-compute plans usually give a good one; when none fits in memory (or within the
      // stage cap), a capped pass finds a plan whose value serves instead.
      const double simple = simple_plans_bound(model, topology, order, micro_batches, grid,
                                               schedule, max_stages, choices);
      if (std::isfinite(simple)) {
        auto exact = pass(0, simple);
        if (!exact.empty() || gave_up) return exact;
      }
      return capped_then_exact(pass);
    }();
    if (!gave_up && result.empty() && grid.unit > 1 && !options.full_grid) {
      return narrower_solutions(model, topology, order, micro_batches, schedule, options, grid.unit,
                                max_work);
    }
    if (!gave_up) return on_grid(std::move(result), grid);
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
