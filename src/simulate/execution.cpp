// The execution figures of spec sections 3 and 8.3, per stage and per group. Every rule that
// turns a model, a topology and a placement into durations, sizes and memory is here.
//
// For a v1 stage (t = 1, no recomputation, replicated optimizer) every figure is computed with
// the same operations, in the same order, as the section-3 formulas, so that v1 plans stay
// byte-identical: a forward takes `F_s / speed` (plus a tensor-parallel term that is exactly
// 0), the static bytes are `phi * W_s`, and so on.
//
// Context parallelism (spec 10.3) divides the per-GPU values (model::at_context_degree, once per
// call) and adds ring steps layer by layer (`layered_compute`); full sharding (docs/decisions.md)
// adds each layer's all-gathers and reduce-scatter there too, and its working copies once per
// device (`device_working_copies`); sharded gradients (ZeRO-2) the same without the backward's
// all-gather and the weights' copies.
//
// Complexity: O(layers x degrees) per stage for the sums (model::stage_cost), O(r c t) for its
// groups and rings, O(L x degrees) more for the divided model when c > 1, O(S log S) GPU-list
// comparisons for the devices when the gradients are sharded.

#include "pipeplan/simulate/execution.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

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

// The slowest of several rings: the smallest bandwidth and largest latency among their edges.
Ring slowest_ring(const topology::Topology& topology, const std::vector<std::vector<int>>& rings) {
  Ring slowest;
  for (const std::vector<int>& gpus : rings) {
    const Ring ring = ring_of(topology, gpus);
    slowest.bandwidth = std::min(slowest.bandwidth, ring.bandwidth);
    slowest.latency_ms = std::max(slowest.latency_ms, ring.latency_ms);
  }
  return slowest;
}

// The rings of a group of `c` tensor-parallel groups of `t` consecutive GPUs (spec 10.2):
// `tensor` the c groups themselves, `context` the t rings through the j-th GPU of each group, in
// group order. O(c t).
std::vector<std::vector<int>> group_rings(const std::vector<int>& gpus, int t, bool context) {
  const std::size_t tt = static_cast<std::size_t>(t);
  const std::size_t c = gpus.size() / tt;
  std::vector<std::vector<int>> rings(context ? tt : c);
  for (std::size_t k = 0; k < gpus.size(); ++k) rings[context ? k % tt : k / tt].push_back(gpus[k]);
  return rings;
}

// A group's speed (its slowest GPU's) and its smallest memory.
void group_resources(const topology::Topology& topology, GroupExecution& group) {
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
}

// What a group's layers overlap their compute with: the context ring's steps (spec 10.3) and,
// with sharded gradients, each layer's all-gathers and reduce-scatter over the data-parallel rings
// (docs/decisions.md "A fully sharded data-parallel stage", "A data-parallel stage with sharded
// gradients").
struct LayerComm {
  Ring context;             // the context ring (c > 1)
  Ring gather;              // the slowest data-parallel ring (sharded gradients, n > 1)
  double gather_ranks = 1;  // n = r c: the ranks a layer's gradients are sharded over
  // All-gathers of a layer's weights before its backward: 1 fully sharded (resharded after the
  // forward), 0 with sharded gradients only (the weights kept from the forward, ZeRO-2).
  double backward_gathers = 1;
};

// One all-gather (or reduce-scatter) of a layer's `bytes` per GPU over a ring of `n` GPUs; 0 for
// a layer without parameters (nothing to gather).
double gather_ms(double n, double bytes, const Ring& ring) {
  return bytes > 0 ? ring_all_gather_ms(n, bytes, ring.bandwidth, ring.latency_ms) : 0;
}

// The compute of a group layer by layer, for a context-parallel stage or one with sharded
// gradients: each layer takes the longest of its compute and what overlaps it, in each direction.
// Context parallelism: `c - 1` ring steps of `lambda + x / beta` in its forward and `2 (c - 1)` in
// its backward (its `I` when split). Full sharding: an all-gather of its weights in its forward, an
// all-gather and a reduce-scatter of its gradients in its backward (the all-gather in its `I`, the
// reduce-scatter in its `W` when split); sharded gradients only: the same without the backward's
// all-gather. The tensor-parallel all-reduces come on top (already in `group`); a recomputing
// stage's backward leaves out what it recomputes itself (`model::backward_recompute_ms_at`), and
// adds its forward again (group_execution): returned, the forward as it runs again in the
// backward (without the all-gather where the weights were kept). `divided` holds the per-GPU
// values at `c` (model::at_context_degree). O(layers of the stage x degrees).
double layered_compute(const model::Model& divided, const Stage& stage, const LayerComm& comm,
                       GroupExecution& group) {
  const int t = stage.tensor_parallel;
  const double steps = stage.context_parallel - 1;
  const double v = group.speed;
  double forward = 0, backward = 0, input = 0, weight = 0, again = 0;
  const double gathers = comm.backward_gathers;
  for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
    const model::Layer& layer = divided.layers[static_cast<std::size_t>(l)];
    const double bytes = steps > 0 ? model::ring_step_bytes(layer, t, stage.context_parallel) : 0;
    const double step =
        bytes > 0 ? comm.context.latency_ms + bytes / comm.context.bandwidth * 1e3 : 0;
    const double gather =
        gather_ms(comm.gather_ranks, model::parameter_bytes_at(layer, t), comm.gather);
    const double saved = stage.recompute ? model::backward_recompute_ms_at(layer, t) : 0;
    const double b = (model::backward_ms_at(layer, t) - saved) / v;
    const double w = model::backward_weight_ms_at(layer, t) / v;
    const double f = model::forward_ms_at(layer, t) / v;
    forward += std::max({f, steps * step, gather});
    backward += std::max({b, 2 * steps * step, (1 + gathers) * gather});
    input += std::max({b - w, 2 * steps * step, gathers * gather});
    weight += std::max(w, gather);
    again += std::max(f, steps * step);
  }
  group.forward_ms = forward + group.forward_allreduce_ms;
  group.backward_ms = backward + group.backward_allreduce_ms;
  group.input_ms = input + group.backward_allreduce_ms;
  group.weight_ms = weight;
  return gathers > 0 ? group.forward_ms : again + group.forward_allreduce_ms;
}

GroupExecution group_execution(const topology::Topology& topology, const model::Model& divided,
                               const Stage& stage, int i, const model::StageCost& cost,
                               bool updates, double update_divisor, LayerComm comm) {
  GroupExecution group;
  group.gpus = stage.group(i);
  group.leader = group.gpus.front();
  group_resources(topology, group);
  const int t = stage.tensor_parallel;
  const bool context = stage.context_parallel > 1;
  const bool layered = context || comm.gather_ranks > 1;
  const Ring ring = context ? slowest_ring(topology, group_rings(group.gpus, t, false))
                            : ring_of(topology, group.gpus);
  group.forward_allreduce_ms =
      tensor_parallel_ms(t, cost.forward_allreduce_bytes, cost.forward_allreduces, ring);
  group.backward_allreduce_ms =
      tensor_parallel_ms(t, cost.backward_allreduce_bytes, cost.backward_allreduces, ring);
  const double v = group.speed;
  double again = 0;  // the forward as a recomputing backward runs it again
  if (layered) {
    if (context) comm.context = slowest_ring(topology, group_rings(group.gpus, t, true));
    again = layered_compute(divided, stage, comm, group);
  } else {
    group.forward_ms = cost.forward_ms / v + group.forward_allreduce_ms;
    group.backward_ms = cost.own_backward_ms(stage.recompute) / v + group.backward_allreduce_ms;
    group.weight_ms = cost.backward_weight_ms / v;
    again = group.forward_ms;
  }
  double work = cost.forward_ms + cost.own_backward_ms(stage.recompute);
  if (stage.recompute) {
    // The backward runs the whole forward again first (spec 8.3), and not the forward work it
    // would recompute itself (own_backward_ms; docs/decisions.md).
    group.recompute_ms = again;
    group.backward_ms += again;
    group.backward_allreduce_ms += group.forward_allreduce_ms;
    if (layered) group.input_ms += again;
    work += cost.forward_ms;
  }
  if (!layered) group.input_ms = group.backward_ms - group.weight_ms;
  group.work_ms = layered ? group.forward_ms + group.backward_ms
                          : work / v + group.forward_allreduce_ms + group.backward_allreduce_ms;
  if (updates) group.update_ms = cost.update_ms / v / update_divisor;
  return group;
}

// The data-parallel rings of a stage (spec 8.3 and 10.3): t rings, ring i through the i-th GPU of
// every tensor-parallel group of every replica, in group order (the data- and context-parallel
// ranks together). O(r c t).
std::vector<std::vector<int>> data_parallel_rings(const Stage& stage) {
  const auto t = static_cast<std::size_t>(stage.tensor_parallel);
  std::vector<std::vector<int>> rings(t);
  for (std::size_t k = 0; k < stage.gpus.size(); ++k) rings[k % t].push_back(stage.gpus[k]);
  return rings;
}

// The data-parallel AllReduce of a stage (spec 8.3 and 10.3): its rings in parallel, each
// carrying W_s; the longest ring's time; 0 when a ring has one GPU.
double data_parallel_allreduce_ms(const topology::Topology& topology, const Stage& stage,
                                  double bytes) {
  const int t = stage.tensor_parallel;
  const std::size_t members = stage.gpus.size() / static_cast<std::size_t>(t);
  if (members < 2) return 0;
  if (t == 1) return allreduce_ms(topology, stage.gpus, bytes);
  double longest = 0;
  for (const std::vector<int>& ring : data_parallel_rings(stage)) {
    longest = std::max(longest, allreduce_ms(topology, ring, bytes));
  }
  return longest;
}

// The static bytes of a stage and their weights' and gradients' parts (spec 8.3 and 10.3; full
// sharding: docs/decisions.md). Replicated: `phi W_s`. Sharded: the optimizer state divided
// among the `n = r c` shards. Sharded gradients: everything but the weights divided among them.
// Fully sharded: everything divided among them (nothing when n = 1); the working copies of FSDP's
// per-layer units are the device's (`device_working_copies`).
void static_memory(const model::Model& model, const model::StageCost& cost, Optimizer optimizer,
                   int shards, StageExecution& e) {
  const double phi = model.parameter_memory_factor;
  const model::FactorSplit split = model::factor_split(model);
  const double W =
      optimizer == Optimizer::kFullySharded ? cost.parameter_bytes / shards : cost.parameter_bytes;
  if (optimizer == Optimizer::kSharded) {
    const double phi_sharded = model::sharded_factor(model);
    e.static_bytes = W * (phi - phi_sharded + phi_sharded / shards);
  } else if (optimizer == Optimizer::kShardedGradients) {
    e.static_bytes = W * (split.weights + (phi - split.weights) / shards);
  } else {
    e.static_bytes = phi * W;
  }
  e.weight_bytes = split.weights * W;
  e.gradient_bytes = split.gradients * (optimizer == Optimizer::kShardedGradients ? W / shards : W);
}

// The working copies of sharded gradients, once per device (the stages of one GPU list): the
// largest layer among its stages with n > 1, its gradients unsharded once before their
// reduce-scatter and, fully sharded, its weights gathered twice (the layer computing and the next,
// prefetched: one layer computes at a time on a device). O(S log S) list comparisons.
void device_working_copies(const model::Model& model, const std::vector<Stage>& stages,
                           Optimizer optimizer, const std::vector<double>& largest,
                           std::vector<StageExecution>& out) {
  std::map<std::vector<int>, double> per_device;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    double& most = per_device[stages[s].gpus];
    if (stages[s].shards() > 1) most = std::max(most, largest[s]);
  }
  const model::FactorSplit split = model::factor_split(model);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const double bytes = per_device[stages[s].gpus];
    if (optimizer == Optimizer::kFullySharded)
      out[s].working_weight_bytes = 2 * split.weights * bytes;
    out[s].working_gradient_bytes = split.gradients * bytes;
  }
}

}  // namespace

std::vector<StageExecution> execution(const model::Model& model, const topology::Topology& topology,
                                      const std::vector<Stage>& stages, Optimizer optimizer) {
  const bool updates = model::has_updates(model);
  const int c = context_parallel(stages);
  // Per-GPU values at the plan's context-parallel degree (spec 10.1); the model itself at c = 1
  // (not copied: replays in searches call this often).
  std::optional<model::Model> divided_at_c;
  if (c > 1) divided_at_c = model::at_context_degree(model, c);
  const model::Model& divided = divided_at_c ? *divided_at_c : model;
  std::vector<StageExecution> out;
  out.reserve(stages.size());
  std::vector<double> largest;  // fully sharded: each stage's largest layer, per GPU
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    const int t = stage.tensor_parallel;
    const int r = stage.replicas();
    const model::StageCost cost =
        model::stage_cost(divided, stage.first_layer, stage.last_layer, t);
    StageExecution e;
    e.forward_ms = cost.forward_ms;
    e.backward_ms = cost.backward_ms;
    e.backward_recompute_ms = cost.backward_recompute_ms;
    e.parameter_bytes = cost.parameter_bytes;
    if (s + 1 < stages.size()) {
      e.boundary_bytes = model.layers[static_cast<std::size_t>(stage.last_layer)].activation_bytes;
      e.transfer_bytes = e.boundary_bytes / (c * std::min(t, stages[s + 1].tensor_parallel));
    }
    // A sharded optimizer divides its shard among the data- and context-parallel ranks (10.3).
    const int shards = stage.shards();
    static_memory(model, cost, optimizer, shards, e);
    e.reserve_bytes = model.reserve_bytes;
    e.stash_bytes = stage.recompute ? cost.recompute_input_bytes : cost.stash_bytes;
    e.transient_bytes = cost.transient_bytes(stage.recompute);
    e.weight_stash_bytes = cost.weight_stash_bytes;
    LayerComm comm;
    if (shards_gradients(optimizer)) largest.push_back(cost.max_parameter_bytes);
    if (shards_gradients(optimizer) && shards > 1) {
      comm.gather = slowest_ring(topology, data_parallel_rings(stage));
      comm.gather_ranks = shards;
      comm.backward_gathers = optimizer == Optimizer::kFullySharded ? 1 : 0;
      e.gather_ms = gather_ms(shards, cost.parameter_bytes, comm.gather);
    } else {
      e.allreduce_ms = data_parallel_allreduce_ms(topology, stage, cost.parameter_bytes);
    }
    const double divisor = optimizer == Optimizer::kReplicated ? 1.0 : static_cast<double>(shards);
    for (int i = 0; i < r; ++i) {
      e.groups.push_back(
          group_execution(topology, divided, stage, i, cost, updates, divisor, comm));
    }
    out.push_back(std::move(e));
  }
  if (shards_gradients(optimizer)) device_working_copies(model, stages, optimizer, largest, out);
  return out;
}

}  // namespace pipeplan::simulate
