// Planner registry, the shared last step (schedule, replay, check) and the memory rules the
// baselines share.

#include "pipeplan/planners/planner.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/partition/search.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {

namespace {

// A large count or time in three significant digits: `1.05e+12`, `3.38e+07`.
std::string count_text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

// `1 layer`, `2 layers`.
std::string counted(std::int64_t count, const std::string& one, const std::string& many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

}  // namespace

double planning_steps(std::string_view planner, const Request& request) {
  const double L = static_cast<double>(request.model.layers.size());
  const double N = request.topology.size();
  // Measured on the dev build: pipedream about 2.5e7 of its L^2 N^2 per second, gpipe about
  // 1.3e8 of its N L^2 per second (docs/errors.md, "Limits"); a step is about 40 ns.
  if (planner == "spp") return (N * N + L * N) / 4;
  if (planner == "pipedream") return L * L * N * N;
  if (planner == "gpipe") return N * L * L / 5;
  return L + N;
}

double scheduling_steps(const std::vector<Stage>& stages, int micro_batches, int gpus) {
  const double S = static_cast<double>(stages.size());
  const double M = micro_batches;
  double channels = 0;
  for (std::size_t s = 0; s + 1 < stages.size(); ++s) {
    const double pairs =
        static_cast<double>(stages[s].gpus.size()) * static_cast<double>(stages[s + 1].gpus.size());
    channels += 2 * std::min(pairs, M);
  }
  const double tasks = 4 * S * M - 2 * M;
  return tasks * (gpus + channels);
}

void check_schedule_limit(const std::vector<Stage>& stages, int micro_batches, int gpus) {
  const double steps = scheduling_steps(stages, micro_batches, gpus);
  if (steps > kMaxScheduleSteps) {
    throw InfeasibleError(
        "cannot schedule " + counted(static_cast<std::int64_t>(stages.size()), "stage", "stages") +
        " with " + counted(micro_batches, "micro-batch", "micro-batches") + " on " +
        counted(gpus, "GPU", "GPUs") + ": the scheduler would take about " + count_text(steps) +
        " steps (every task scans every GPU and channel), more than its limit of " +
        count_text(kMaxScheduleSteps) +
        "; use fewer stages or micro-batches (see \"Limits\" in docs/errors.md)");
  }
}

void check_limits(std::string_view planner, const Request& request) {
  const auto& model = request.model;
  const auto& topology = request.topology;
  const std::size_t L = model.layers.size();
  const int N = topology.size();
  const std::int64_t M = request.micro_batches;
  const std::string hint = " (see \"Limits\" in docs/errors.md)";
  if (L > static_cast<std::size_t>(kMaxPlanLayers)) {
    throw InfeasibleError("cannot plan " + std::to_string(L) +
                          " layers: the planners handle at most " + std::to_string(kMaxPlanLayers) +
                          "; merge layers in the profile" + hint);
  }
  if (M < 1) throw InternalError("check_limits: micro_batches must be >= 1");
  // The smallest plan, one stage, has a forward and a backward per micro-batch.
  if (2 * M > kMaxPlanTasks) {
    throw InfeasibleError("cannot plan " + std::to_string(M) +
                          " micro-batches: even one stage makes " + std::to_string(2 * M) +
                          " tasks, and a plan may have at most " + std::to_string(kMaxPlanTasks) +
                          hint);
  }
  const std::string shape = counted(static_cast<std::int64_t>(L), "layer", "layers") + " on " +
                            counted(N, "GPU", "GPUs") + " with " +
                            counted(M, "micro-batch", "micro-batches");
  const double steps = planning_steps(planner, request);
  if (steps > kMaxPlanSteps) {
    throw InfeasibleError("cannot plan " + shape + ": the " + std::string(planner) +
                          " planner would take about " + count_text(steps) +
                          " steps, more than its limit of " + count_text(kMaxPlanSteps) +
                          "; use fewer layers, GPUs or micro-batches" + hint);
  }
  // Times: all the work in series on the slowest GPU, every boundary transfer over the
  // narrowest pair, and the AllReduce of every parameter. Below kMaxPlanTimeMs, every sum the
  // execution model and the planners form stays finite.
  double work_ms = 0, activation_bytes = 0, parameter_bytes = 0;
  for (const model::Layer& layer : model.layers) {
    work_ms += layer.forward_ms + layer.backward_ms;
    activation_bytes += layer.activation_bytes;
    parameter_bytes += layer.parameter_bytes;
  }
  double slowest = std::numeric_limits<double>::infinity();
  for (const topology::Gpu& gpu : topology.gpus()) slowest = std::min(slowest, gpu.speed);
  double narrowest = std::numeric_limits<double>::infinity(), longest_ms = 0;
  for (int u = 0; u < N; ++u) {
    for (int v = u + 1; v < N; ++v) {
      narrowest = std::min(narrowest, topology.bandwidth_bytes_per_s(u, v));
      longest_ms = std::max(longest_ms, topology.latency_ms(u, v));
    }
  }
  const double Md = static_cast<double>(M);
  double serial_ms = Md * work_ms / slowest;
  if (N > 1) {
    serial_ms +=
        2 * Md * (activation_bytes / narrowest * 1e3 + static_cast<double>(L) * longest_ms) +
        2 * (parameter_bytes / narrowest * 1e3 + N * longest_ms);
  }
  if (!(serial_ms <= kMaxPlanTimeMs)) {
    throw InfeasibleError(
        "cannot plan: an iteration could take up to " + count_text(serial_ms) +
        " ms (all work in series on the slowest GPU and the narrowest link), beyond the "
        "planners' range of " +
        count_text(kMaxPlanTimeMs) +
        " ms; check the model's times and the topology's speeds and bandwidths" + hint);
  }
}

void check_task_limit(std::size_t stages, int micro_batches) {
  const auto S = static_cast<std::int64_t>(stages);
  const std::int64_t M = micro_batches;
  const std::int64_t tasks = 4 * S * M - 2 * M;
  if (tasks > kMaxPlanTasks) {
    throw InfeasibleError("cannot schedule " + std::to_string(S) + " stages with " +
                          std::to_string(M) + " micro-batches: that makes " +
                          std::to_string(tasks) + " tasks, and a plan may have at most " +
                          std::to_string(kMaxPlanTasks) +
                          "; use fewer micro-batches (see \"Limits\" in docs/errors.md)");
  }
}

Plan finish_plan(std::string planner, const Partition& partition, const Request& request,
                 schedule::Policy policy) {
  simulate::check_stages(request.model, request.topology, partition.stages);
  check_task_limit(partition.stages.size(), request.micro_batches);
  check_schedule_limit(partition.stages, request.micro_batches, request.topology.size());
  schedule::Scheduled scheduled =
      schedule::make_schedule(request.model, request.topology, partition.stages,
                              request.micro_batches, policy, request.optimizer);
  Plan plan;
  plan.planner = std::move(planner);
  plan.schedule_policy = std::string(schedule::policy_name(policy));
  plan.gpu_order = partition.gpu_order;
  plan.stages = partition.stages;
  plan.optimizer = request.optimizer;
  try {
    plan.timeline = simulate::replay(request.model, request.topology, plan.stages,
                                     scheduled.schedule, request.optimizer);
  } catch (const simulate::ScheduleError& error) {
    throw InternalError(std::string("the ") + plan.schedule_policy +
                        " scheduler made an invalid schedule: " + error.what());
  }
  plan.schedule = std::move(scheduled.schedule);
  if (auto violation = simulate::memory_violation(request.topology, plan.timeline)) {
    throw InfeasibleError("the " + plan.schedule_policy + " schedule of the " + plan.planner +
                          " plan does not fit in memory: " + *violation);
  }
  plan.bounds = simulate::compute_bounds(request.model, request.topology, plan.stages,
                                         request.micro_batches, request.optimizer);
  return plan;
}

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> names{"spp", "gpipe", "pipedream", "uniform",
                                              "data-parallel"};
  return names;
}

schedule::Policy default_policy(std::string_view planner) {
  if (planner == "spp") return schedule::Policy::kList;
  if (planner == "gpipe") return schedule::Policy::kGpipe;
  return schedule::Policy::kOneFOneB;  // pipedream (PipeDream-Flush), uniform, data-parallel
}

Plan make_plan(std::string_view name, const Request& request,
               std::optional<schedule::Policy> policy) {
  const schedule::Policy chosen = policy.value_or(default_policy(name));
  const auto& names = planner_names();
  if (std::find(names.begin(), names.end(), name) != names.end() || name == "megatron")
    check_limits(name, request);
  if (name == "spp") return plan_spp(request, chosen);
  // The baselines shape their stages by the memory rule of the policy that schedules them, so
  // the partition is made with `chosen`, not with the planner's default.
  using MakePartition = Partition (*)(const Request&, schedule::Policy);
  static constexpr std::pair<std::string_view, MakePartition> kBaselines[] = {
      {"gpipe", gpipe_partition},
      {"pipedream", pipedream_partition},
      {"uniform", uniform_partition},
      {"data-parallel", data_parallel_partition},
      {"megatron", megatron_partition}};
  for (const auto& [baseline, make_partition] : kBaselines) {
    if (name == baseline) {
      return finish_plan(std::string(baseline), make_partition(request, chosen), request, chosen);
    }
  }
  std::string known;
  for (const auto& planner : planner_names()) known += (known.empty() ? "" : ", ") + planner;
  throw UsageError("unknown planner \"" + std::string(name) + "\" (known: " + known + ")");
}

long peak_stashes(const std::vector<Stage>& stages, int s, int micro_batches,
                  schedule::Policy policy) {
  const long r = stages[static_cast<std::size_t>(s)].replicas();
  const long warmup = policy == schedule::Policy::kOneFOneB
                          ? schedule::one_f_one_b_warmup(stages, s, micro_batches)
                          : 0;
  return schedule::stashes_per_replica(policy, micro_batches, r, warmup);
}

namespace {

// The GPU of `stage` that holds the fewest stashes beside its static bytes (ties: the first in
// the stage's order), and how many it holds, at most `limit`.
std::pair<int, long> tightest_gpu(const model::Model& model, const topology::Topology& topology,
                                  const Stage& stage, long limit) {
  double parameters = 0, stash = 0;
  for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
    parameters += model.layers[static_cast<std::size_t>(l)].parameter_bytes;
    stash += model.layers[static_cast<std::size_t>(l)].stash_bytes;
  }
  const double static_bytes = model.parameter_memory_factor * parameters;
  int tightest = stage.gpus.front();
  long fewest = limit;
  for (int g : stage.gpus) {
    const long fit =
        simulate::max_in_flight(static_bytes, stash, topology.gpu(g).memory_bytes, limit);
    if (fit < fewest) {
      fewest = fit;
      tightest = g;
    }
  }
  return {tightest, fewest};
}

}  // namespace

bool stage_fits(const model::Model& model, const topology::Topology& topology, const Stage& stage,
                long stashes) {
  return tightest_gpu(model, topology, stage, stashes).second >= stashes;
}

std::optional<std::string> memory_shortfall(const model::Model& model,
                                            const topology::Topology& topology, const Stage& stage,
                                            int s, long stashes) {
  const auto [gpu, fit] = tightest_gpu(model, topology, stage, stashes);
  if (fit >= stashes) return std::nullopt;
  double parameters = 0, stash = 0;
  for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
    parameters += model.layers[static_cast<std::size_t>(l)].parameter_bytes;
    stash += model.layers[static_cast<std::size_t>(l)].stash_bytes;
  }
  const double need =
      model.parameter_memory_factor * parameters + static_cast<double>(stashes) * stash;
  const std::string layers =
      stage.first_layer == stage.last_layer
          ? "layer " + std::to_string(stage.first_layer)
          : "layers " + std::to_string(stage.first_layer) + "-" + std::to_string(stage.last_layer);
  return "stage " + std::to_string(s) + " (" + layers + ") needs " + report::format_bytes(need) +
         " (" + report::format_number(model.parameter_memory_factor) + " x parameters + " +
         std::to_string(stashes) + (stashes == 1 ? " stash" : " stashes") + ") but GPU \"" +
         topology.gpu(gpu).id + "\" has " + report::format_bytes(*topology.gpu(gpu).memory_bytes);
}

std::string infeasibility_message(const Request& request) {
  return "no placement fits in GPU memory: " + infeasibility_reason(request);
}

std::string infeasibility_reason(const Request& request) {
  const auto& model = request.model;
  const auto& topology = request.topology;
  double largest = 0;
  std::string largest_gpu;
  double total_memory = 0;
  bool unlimited = false;
  for (const auto& gpu : topology.gpus()) {
    if (!gpu.memory_bytes) {
      unlimited = true;
      continue;
    }
    total_memory += *gpu.memory_bytes;
    // The first GPU counts as the largest so far even with 0 bytes: the message names a GPU.
    if (largest_gpu.empty() || *gpu.memory_bytes > largest) {
      largest = *gpu.memory_bytes;
      largest_gpu = gpu.id;
    }
  }
  double worst = 0;
  std::size_t worst_layer = 0;
  double static_total = 0;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const auto& layer = model.layers[l];
    const double need = model.parameter_memory_factor * layer.parameter_bytes + layer.stash_bytes;
    static_total += model.parameter_memory_factor * layer.parameter_bytes + layer.stash_bytes;
    if (need > worst) {
      worst = need;
      worst_layer = l;
    }
  }
  const std::string layer_name = model.layers[worst_layer].name.empty()
                                     ? "layer " + std::to_string(worst_layer)
                                     : "layer " + std::to_string(worst_layer) + " (\"" +
                                           model.layers[worst_layer].name + "\")";
  if (!unlimited && worst > largest) {
    return layer_name + " alone needs " + report::format_bytes(worst) + " (" +
           report::format_number(model.parameter_memory_factor) +
           " x parameters + one stash) but the largest GPU, \"" + largest_gpu + "\", has " +
           report::format_bytes(largest);
  }
  // Packed in input order, one stage per GPU, each GPU holding as many layers as fit beside
  // one stash (optimal for contiguous packing along an order): how many GPUs that takes.
  std::vector<int> order(static_cast<std::size_t>(topology.size()));
  std::iota(order.begin(), order.end(), 0);
  int needed = 0;
  partition::greedy_packing(model, topology, order, 1, std::numeric_limits<int>::max(), &needed);
  if (!unlimited && needed > topology.size()) {
    return "packed in order with one micro-batch in flight (" +
           report::format_number(model.parameter_memory_factor) +
           " x parameters + one stash per layer, " + report::format_bytes(static_total) +
           " in all), the layers need " + std::to_string(needed) + " GPUs and there are " +
           std::to_string(topology.size()) + " (" + report::format_bytes(total_memory) +
           " in total)";
  }
  return "the model needs at least " + report::format_bytes(static_total) + " (" +
         report::format_number(model.parameter_memory_factor) +
         " x parameters + one stash per layer) spread over contiguous runs of GPUs; the " +
         std::to_string(topology.size()) + " GPUs have " + report::format_bytes(total_memory) +
         (unlimited ? " plus unlimited ones that cannot take the rest in order" : " in total");
}

}  // namespace pipeplan::planners
