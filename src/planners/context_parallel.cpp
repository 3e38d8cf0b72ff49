// Context parallelism in planning (spec 10.4): the reduced problem, its plan expanded to real
// GPUs, and the fastest degree kept. See context_parallel.hpp for the reduction and why the plan
// stays exact.

#include "pipeplan/planners/context_parallel.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/settings_choice.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

// Blocks of `c` consecutive GPUs of `order`; the GPUs past the last whole block are `spare`.
struct Blocks {
  std::vector<std::vector<int>> members;
  std::vector<int> spare;
};

// Blocks of `c` GPUs of `order` taken at `stride`: each window of `c x stride` consecutive GPUs
// gives `stride` blocks, block `i` its GPUs `i, i + stride, ..., i + (c-1) stride`. Stride 1
// keeps each context ring on the closest GPUs; stride `t` is Megatron-LM's order for degree `t`
// (a tensor-parallel group of `t` blocks of one window is `t` consecutive GPUs, and the context
// rings cross them). O(N).
Blocks blocks_of(const std::vector<int>& order, int c, int stride) {
  Blocks out;
  const std::size_t window = static_cast<std::size_t>(c) * static_cast<std::size_t>(stride);
  const std::size_t whole = order.size() / window * window;
  for (std::size_t w = 0; w < whole; w += window) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(stride); ++i) {
      std::vector<int> block;
      for (std::size_t k = 0; k < static_cast<std::size_t>(c); ++k) {
        block.push_back(order[w + i + k * static_cast<std::size_t>(stride)]);
      }
      out.members.push_back(std::move(block));
    }
  }
  out.spare.assign(order.begin() + static_cast<std::ptrdiff_t>(whole), order.end());
  return out;
}

// The slowest ring of the blocks: the smallest bandwidth and largest latency among the edges of
// each block's closed ring. O(N).
std::pair<double, double> slowest_block_ring(const topology::Topology& topology,
                                             const Blocks& blocks) {
  double bandwidth = std::numeric_limits<double>::infinity(), latency = 0;
  for (const std::vector<int>& block : blocks.members) {
    for (std::size_t j = 0; j < block.size(); ++j) {
      const int u = block[j], v = block[(j + 1) % block.size()];
      if (u == v) continue;
      bandwidth = std::min(bandwidth, topology.bandwidth_bytes_per_s(u, v));
      latency = std::max(latency, topology.latency_ms(u, v));
    }
  }
  return {bandwidth, latency};
}

// The topology whose GPUs are the blocks (context_parallel.hpp). O((N/c)^2 c).
topology::Topology reduced_topology(const topology::Topology& topology, const Blocks& blocks) {
  const int n = static_cast<int>(blocks.members.size());
  std::vector<topology::Gpu> gpus;
  gpus.reserve(blocks.members.size());
  for (const std::vector<int>& block : blocks.members) {
    topology::Gpu gpu = topology.gpu(block.front());
    for (const int g : block) {
      gpu.speed = std::min(gpu.speed, topology.gpu(g).speed);
      const auto& memory = topology.gpu(g).memory_bytes;
      if (memory) gpu.memory_bytes = std::min(gpu.memory_bytes.value_or(*memory), *memory);
    }
    gpus.push_back(std::move(gpu));
  }
  topology::DirectLinks links(n);
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const auto& x = blocks.members[static_cast<std::size_t>(a)];
      const auto& y = blocks.members[static_cast<std::size_t>(b)];
      double bandwidth = std::numeric_limits<double>::infinity(), latency = 0;
      for (std::size_t j = 0; j < x.size(); ++j) {
        bandwidth = std::min(bandwidth, topology.bandwidth_bytes_per_s(x[j], y[j]));
        latency = std::max(latency, topology.latency_ms(x[j], y[j]));
      }
      links.set(a, b, bandwidth, latency);
    }
  }
  return topology::Topology::build(topology.name(), std::move(gpus), std::move(links),
                                   "the context-parallel blocks");
}

// The reduced plan's stages on real GPUs: a group of t blocks becomes c tensor-parallel groups,
// the j-th of the j-th GPU of each block (context_parallel.hpp). O(N).
Partition expanded(const Plan& reduced, const Blocks& blocks, int c) {
  Partition out;
  for (const int b : reduced.gpu_order) {
    const auto& block = blocks.members[static_cast<std::size_t>(b)];
    out.gpu_order.insert(out.gpu_order.end(), block.begin(), block.end());
  }
  out.gpu_order.insert(out.gpu_order.end(), blocks.spare.begin(), blocks.spare.end());
  for (const Stage& stage : reduced.stages) {
    Stage real = stage;
    real.context_parallel = c;
    real.gpus.clear();
    for (int i = 0; i < stage.replicas(); ++i) {
      const std::vector<int> group = stage.group(i);
      for (int j = 0; j < c; ++j) {
        for (const int b : group) {
          real.gpus.push_back(
              blocks.members[static_cast<std::size_t>(b)][static_cast<std::size_t>(j)]);
        }
      }
    }
    out.stages.push_back(std::move(real));
  }
  return out;
}

// The faster of two finished plans (the first on ties), or the one that exists.
Finished faster(Finished a, Finished b) {
  if (!b.plan) return a.plan ? std::move(a) : std::move(b);
  if (!a.plan) return b;
  const double x = a.plan->timeline.iteration_ms, y = b.plan->timeline.iteration_ms;
  return y < x && !simulate::times_equal(x, y) ? std::move(b) : std::move(a);
}

// `finished` (the real plan of `partition` under the list policy's default rule) or, where
// strictly faster, the same partition under one of the list policy's other rules: spp's last step
// chose among the rules on the reduced problem, and a plan does not carry its rule, so the real
// plan chooses again, as that step does at c = 1; not where the settings' final plan gets that
// step anyway (`reschedules_final_plan` when choosing them). The backward as `finished` has it.
// O(3) replays of the real plan.
Finished with_other_list_rules(const std::string& planner, const Partition& partition,
                               const Request& real, schedule::Policy policy, Finished finished) {
  const bool later = real.choose_settings && reschedules_final_plan(real, policy);
  if (policy != schedule::Policy::kList || later || !finished.plan) return finished;
  Request other = real;
  if (!finished.plan->schedule.split_backward) other.split_backward = SplitBackward::kNever;
  for (const schedule::ListRule& rule : schedule::other_list_rules()) {
    other.list_rule = rule;
    finished = faster(std::move(finished), try_finish_plan(planner, partition, other, policy));
  }
  return finished;
}

// spp (or another planner) at degree c > 1 through the reduced problem of blocks at `stride`,
// finished on the real one.
Finished plan_at_stride(const Request& request, schedule::Policy policy, int c, int stride,
                        const std::vector<int>& order, const PlanAtOne& plan_at_one) {
  const Blocks blocks = blocks_of(order, c, stride);
  if (blocks.members.empty()) {
    return {std::nullopt, "context-parallel degree " + std::to_string(c) + " needs " +
                              std::to_string(c) + " GPUs, the topology has " +
                              std::to_string(request.topology.size())};
  }
  // The reduced topology is built with dense pair costs (its blocks are not nodes).
  if (blocks.members.size() > static_cast<std::size_t>(topology::kMaxGpus)) {
    return {std::nullopt,
            "spp plans context parallelism over at most " + std::to_string(topology::kMaxGpus) +
                " blocks of c GPUs; degree " + std::to_string(c) + " makes " +
                std::to_string(blocks.members.size()) +
                " (use --planner megatron with --context-parallel " + std::to_string(c) + ")"};
  }
  const topology::Topology topology = reduced_topology(request.topology, blocks);
  const auto [bandwidth, latency] = slowest_block_ring(request.topology, blocks);
  const model::Model model = reduced_model(request.model, c, bandwidth, latency);
  Request reduced = with_inputs(request, model, topology);
  reduced.context_parallel = {1};
  Plan plan;
  try {
    plan = plan_at_one(reduced, policy);
  } catch (const InfeasibleError& error) {
    // The reduced problem's reasons count its blocks as GPUs: said so.
    return {
        std::nullopt,
        "context-parallel degree " + std::to_string(c) + " (the " +
            std::to_string(request.topology.size()) + " GPUs planned as " +
            io::format_count(static_cast<std::int64_t>(blocks.members.size()), "group", "groups") +
            " of " + std::to_string(c) + ", a group counting as one GPU below): " + error.what()};
  }
  Request real = request;
  real.context_parallel = {c};
  const auto chosen = schedule::parse_policy(plan.schedule_policy);
  if (!chosen) throw InternalError("a plan with the unknown policy " + plan.schedule_policy);
  const Partition partition = expanded(plan, blocks, c);
  Finished finished = try_finish_plan(plan.planner, partition, real, *chosen);
  // The reduced search may have kept whole backwards where a split was slower or did not fit
  // (fastest_schedule): the real plan is made with them too, kept where the split plan does not
  // fit or is slower (before 2026-12-07 it was remade with the split alone, and refused where
  // that did not fit: spp planned nothing at --context-parallel 2 --optimizer fully-sharded for
  // Llama 3.1 70B at 32,768 tokens on 64 H100, which the megatron planner plans).
  if (!plan.schedule.split_backward && uses_split_backward(real, *chosen)) {
    Request whole = real;
    whole.split_backward = SplitBackward::kNever;
    finished =
        faster(std::move(finished), try_finish_plan(plan.planner, partition, whole, *chosen));
  }
  finished = with_other_list_rules(plan.planner, partition, real, *chosen, std::move(finished));
  if (finished.plan) {
    // The search's notes speak of the reduced problem's times: said so.
    for (const std::string& note : plan.notes) {
      finished.plan->notes.push_back("c" + std::to_string(c) + " stride " + std::to_string(stride) +
                                     " (reduced problem): " + note);
    }
    finished.plan->warnings = plan.warnings;
  }
  return finished;
}

// Degree c > 1: the reduced problem at stride 1 and at each tensor-parallel degree the request
// may use (Megatron-LM's order for it), the fastest kept. One plan per stride.
Finished plan_at_degree(const Request& request, schedule::Policy policy, int c,
                        const PlanAtOne& plan_at_one) {
  const std::vector<int> order = ordering::mincut_order(request.topology);
  std::vector<int> strides{1};
  for (const int t : candidate_degrees(request)) {
    if (t > 1 && static_cast<long>(t) * c <= request.topology.size()) strides.push_back(t);
  }
  Finished best{std::nullopt, {}};
  for (const int stride : strides) {
    best = faster(std::move(best), plan_at_stride(request, policy, c, stride, order, plan_at_one));
  }
  return best;
}

}  // namespace

model::Model reduced_model(const model::Model& model, int c, double ring_bandwidth_bytes_per_s,
                           double ring_latency_ms) {
  model::Model out = model::at_context_degree(model, c);
  out.transformer.reset();  // the layers are no longer those the description generates
  const double steps = c - 1;
  for (model::Layer& layer : out.layers) {
    const double bytes_at_one = model::ring_step_bytes(layer, 1, c);
    layer.context_parallel.reset();
    if (bytes_at_one <= 0) continue;
    const std::vector<int> degrees =
        layer.tensor_parallel ? layer.tensor_parallel->degrees : std::vector<int>{1};
    std::vector<double> forward, backward, weight, recomputed;
    for (const int t : degrees) {
      const double step = ring_latency_ms + bytes_at_one / t / ring_bandwidth_bytes_per_s * 1e3;
      const double w = model::backward_weight_ms_at(layer, t);
      const double b = model::backward_ms_at(layer, t);
      const double r = model::backward_recompute_ms_at(layer, t);
      forward.push_back(std::max(model::forward_ms_at(layer, t), steps * step));
      backward.push_back(std::max(b - w, 2 * steps * step) + w);
      // A recomputing stage's backward, its recomputed part left out, overlaps the same steps.
      recomputed.push_back(backward.back() - (std::max(b - r - w, 2 * steps * step) + w));
      weight.push_back(w);
    }
    layer.forward_ms = forward.front();
    layer.backward_ms = backward.front();
    layer.backward_weight_ms = weight.front();
    layer.backward_recompute_ms = recomputed.front();
    if (layer.tensor_parallel) {
      layer.tensor_parallel->forward_ms = forward;
      layer.tensor_parallel->backward_ms = backward;
      layer.tensor_parallel->backward_weight_ms = weight;
      layer.tensor_parallel->backward_recompute_ms = recomputed;
    }
  }
  return out;
}

std::optional<std::string> context_degree_refusal(const model::Model& model, int c) {
  if (model::allows_context_degree(model, c)) return std::nullopt;
  return "context-parallel degree " + std::to_string(c) +
         " is not allowed by the model: some layer's context_parallel does not list it (spec "
         "10.1)";
}

namespace {

// "c4: " and what follows, the notes' entry of one degree. Appended piece by piece: `"c" +
// std::string&&` draws a false -Wrestrict from GCC 12 at -O3 (GCC bug 105329). O(1).
std::string degree_entry(int c, const std::string& what) {
  std::string entry = "c";
  entry += std::to_string(c);
  entry += ": ";
  entry += what;
  return entry;
}

}  // namespace

Plan plan_each_context_degree(const Request& request, const PlanAtDegree& plan_at) {
  std::optional<Plan> best;
  std::vector<std::string> tried;
  std::string last_refusal = "no context-parallel degree of --context-parallel gives a plan";
  for (const int c : request.context_parallel) {
    if (auto refused = context_degree_refusal(request.model, c)) {
      tried.push_back(degree_entry(c, "not allowed by the model"));
      last_refusal = std::move(*refused);
      continue;
    }
    Request at_c = request;
    at_c.context_parallel = {c};
    std::optional<Plan> plan;
    try {
      plan = plan_at(at_c);
    } catch (const InfeasibleError& error) {
      tried.push_back(degree_entry(c, error.what()));
      last_refusal = error.what();
      continue;
    }
    tried.push_back(degree_entry(c, io::format_ms(plan->timeline.iteration_ms)));
    if (!best ||
        (plan->timeline.iteration_ms < best->timeline.iteration_ms &&
         !simulate::times_equal(plan->timeline.iteration_ms, best->timeline.iteration_ms))) {
      best = std::move(plan);
    }
  }
  if (!best) throw InfeasibleError(last_refusal);
  best->notes.push_back("context-parallel degrees tried: " + io::format_list(tried, "; "));
  return std::move(*best);
}

Plan plan_context_parallel(const Request& request, schedule::Policy policy,
                           const PlanAtOne& plan_at_one) {
  if (request.context_parallel.size() > 1) {
    return plan_each_context_degree(request, [&](const Request& at_c) {
      return plan_context_parallel(at_c, policy, plan_at_one);
    });
  }
  const int c = request.context_parallel.empty() ? 1 : request.context_parallel.front();
  if (c == 1) return plan_at_one(request, policy);
  if (auto refused = context_degree_refusal(request.model, c)) throw InfeasibleError(*refused);
  Finished finished = plan_at_degree(request, policy, c, plan_at_one);
  if (!finished.plan) throw InfeasibleError(finished.refusal);
  return std::move(*finished.plan);
}

}  // namespace pipeplan::planners
