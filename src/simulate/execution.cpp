// The execution figures of spec sections 3 and 8.3, per stage and per group. Every rule that
// turns a model, a topology and a placement into durations, sizes and memory is here.
//
// For a v1 stage (t = 1, no recomputation, replicated optimizer) every figure is computed with
// the same operations, in the same order, as the section-3 formulas, so that v1 plans stay
// byte-identical: a forward takes `F_s / speed` (plus a tensor-parallel term that is exactly
// 0), the static bytes are `phi * W_s`, and so on.
//
// Complexity: O(layers x degrees) per stage for the sums (model::stage_cost), O(r t) for its
// groups and rings.

#include "pipeplan/simulate/execution.hpp"

#include <algorithm>
#include <limits>

#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

// The smallest bandwidth and largest latency of the closed ring through `gpus` in order.
struct Ring {
  double bandwidth = std::numeric_limits<double>::infinity();
  double latency_ms = 0;
};

Ring ring_of(const topology::Topology& topology, const std::vector<int>& gpus) {
  Ring ring;
  const std::size_t n = gpus.size();
  if (n < 2) return ring;
  for (std::size_t i = 0; i < n; ++i) {
    const int u = gpus[i];
    const int v = gpus[(i + 1) % n];
    ring.bandwidth = std::min(ring.bandwidth, topology.bandwidth_bytes_per_s(u, v));
    ring.latency_ms = std::max(ring.latency_ms, topology.latency_ms(u, v));
  }
  return ring;
}

// `count` tensor-parallel all-reduces of `bytes` in all over a group ring of `t` GPUs:
// `2 (t-1)/t * bytes / beta + 2 (t-1) * lambda * count` (spec 8.3, summed over the layers).
double tensor_parallel_ms(int t, double bytes, std::int64_t count, const Ring& ring) {
  if (t < 2 || count == 0) return 0;
  const double tt = t;
  return 2 * (tt - 1) / tt * bytes / ring.bandwidth * 1e3 +
         2 * (tt - 1) * ring.latency_ms * static_cast<double>(count);
}

GroupExecution group_execution(const topology::Topology& topology, const Stage& stage, int i,
                               const model::StageCost& cost, bool updates, double update_divisor) {
  GroupExecution group;
  group.gpus = stage.group(i);
  group.leader = group.gpus.front();
  group.speed = std::numeric_limits<double>::infinity();
  group.tightest_gpu = group.leader;
  for (const int g : group.gpus) {
    const topology::Gpu& gpu = topology.gpu(g);
    group.speed = std::min(group.speed, gpu.speed);
    if (gpu.memory_bytes && (!group.capacity_bytes || *gpu.memory_bytes < *group.capacity_bytes)) {
      group.capacity_bytes = gpu.memory_bytes;
      group.tightest_gpu = g;
    }
  }
  const int t = stage.tensor_parallel;
  const Ring ring = ring_of(topology, group.gpus);
  group.forward_allreduce_ms =
      tensor_parallel_ms(t, cost.forward_allreduce_bytes, cost.forward_allreduces, ring);
  const double backward_allreduce_ms =
      tensor_parallel_ms(t, cost.backward_allreduce_bytes, cost.backward_allreduces, ring);
  const double v = group.speed;
  group.forward_ms = cost.forward_ms / v + group.forward_allreduce_ms;
  group.backward_ms = cost.backward_ms / v + backward_allreduce_ms;
  group.backward_allreduce_ms = backward_allreduce_ms;
  double work = cost.forward_ms + cost.backward_ms;
  if (stage.recompute) {
    // The backward runs the whole forward again first (spec 8.3).
    group.recompute_ms = group.forward_ms;
    group.backward_ms += group.forward_ms;
    group.backward_allreduce_ms += group.forward_allreduce_ms;
    work += cost.forward_ms;
  }
  group.work_ms = work / v + group.forward_allreduce_ms + group.backward_allreduce_ms;
  if (updates) group.update_ms = cost.update_ms / v / update_divisor;
  group.weight_ms = cost.backward_weight_ms / v;
  return group;
}

// The data-parallel AllReduce of a stage with r > 1 groups: t rings in parallel, ring i through
// the i-th GPU of every group in group order, each carrying W_s; the longest ring's time.
double data_parallel_allreduce_ms(const topology::Topology& topology, const Stage& stage,
                                  double bytes) {
  const int r = stage.replicas();
  if (r < 2) return 0;
  if (stage.tensor_parallel == 1) return allreduce_ms(topology, stage.gpus, bytes);
  double longest = 0;
  for (int i = 0; i < stage.tensor_parallel; ++i) {
    std::vector<int> ring;
    ring.reserve(static_cast<std::size_t>(r));
    for (int k = 0; k < r; ++k) {
      ring.push_back(
          stage.gpus[static_cast<std::size_t>(k) * static_cast<std::size_t>(stage.tensor_parallel) +
                     static_cast<std::size_t>(i)]);
    }
    longest = std::max(longest, allreduce_ms(topology, ring, bytes));
  }
  return longest;
}

}  // namespace

std::vector<StageExecution> execution(const model::Model& model, const topology::Topology& topology,
                                      const std::vector<Stage>& stages, Optimizer optimizer) {
  const bool updates = model::has_updates(model);
  const double phi = model.parameter_memory_factor;
  const double phi_sharded = model::sharded_factor(model);
  std::vector<StageExecution> out;
  out.reserve(stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    const int t = stage.tensor_parallel;
    const int r = stage.replicas();
    const model::StageCost cost = model::stage_cost(model, stage.first_layer, stage.last_layer, t);
    StageExecution e;
    e.forward_ms = cost.forward_ms;
    e.backward_ms = cost.backward_ms;
    e.parameter_bytes = cost.parameter_bytes;
    if (s + 1 < stages.size()) {
      e.boundary_bytes = model.layers[static_cast<std::size_t>(stage.last_layer)].activation_bytes;
      e.transfer_bytes = e.boundary_bytes / std::min(t, stages[s + 1].tensor_parallel);
    }
    const bool sharded = optimizer == Optimizer::kSharded;
    e.static_bytes = sharded ? cost.parameter_bytes * (phi - phi_sharded + phi_sharded / r)
                             : phi * cost.parameter_bytes;
    e.reserve_bytes = model.reserve_bytes;
    if (stage.recompute) {
      e.stash_bytes = cost.recompute_input_bytes;
      e.transient_bytes = cost.max_stash_bytes;
    } else {
      e.stash_bytes = cost.stash_bytes;
    }
    e.weight_stash_bytes = cost.weight_stash_bytes;
    e.allreduce_ms = data_parallel_allreduce_ms(topology, stage, cost.parameter_bytes);
    const double divisor = sharded ? static_cast<double>(r) : 1.0;
    for (int i = 0; i < r; ++i) {
      e.groups.push_back(group_execution(topology, stage, i, cost, updates, divisor));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace pipeplan::simulate
