// Planner registry, the shared last step (schedule, replay, check) and the memory rules the
// baselines share.

#include "pipeplan/planners/planner.hpp"

#include <algorithm>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {

Plan finish_plan(std::string planner, const Partition& partition, const Request& request,
                 schedule::Policy policy) {
  simulate::check_stages(request.model, request.topology, partition.stages);
  schedule::Scheduled scheduled = schedule::make_schedule(
      request.model, request.topology, partition.stages, request.micro_batches, policy);
  Plan plan;
  plan.planner = std::move(planner);
  plan.schedule_policy = std::string(schedule::policy_name(policy));
  plan.gpu_order = partition.gpu_order;
  plan.stages = partition.stages;
  try {
    plan.timeline =
        simulate::replay(request.model, request.topology, plan.stages, scheduled.schedule);
  } catch (const simulate::ScheduleError& error) {
    throw InternalError(std::string("the ") + plan.schedule_policy +
                        " scheduler made an invalid schedule: " + error.what());
  }
  plan.schedule = std::move(scheduled.schedule);
  if (auto violation = simulate::memory_violation(request.topology, plan.timeline)) {
    throw InfeasibleError("the " + plan.schedule_policy + " schedule of the " + plan.planner +
                          " plan does not fit in memory: " + *violation);
  }
  plan.bounds =
      simulate::compute_bounds(request.model, request.topology, plan.stages, request.micro_batches);
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
  if (name == "spp") return plan_spp(request, chosen);
  // The baselines shape their stages by the memory rule of the policy that schedules them, so
  // the partition is made with `chosen`, not with the planner's default.
  using MakePartition = Partition (*)(const Request&, schedule::Policy);
  static constexpr std::pair<std::string_view, MakePartition> kBaselines[] = {
      {"gpipe", gpipe_partition},
      {"pipedream", pipedream_partition},
      {"uniform", uniform_partition},
      {"data-parallel", data_parallel_partition}};
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
  const long r = static_cast<long>(stages[static_cast<std::size_t>(s)].gpus.size());
  switch (policy) {
    case schedule::Policy::kGpipe:
      return (micro_batches + r - 1) / r;
    case schedule::Policy::kOneFOneB:
      return (schedule::one_f_one_b_warmup(stages, s, micro_batches) + r - 1) / r;
    case schedule::Policy::kList:
      return 1;
  }
  return micro_batches;
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
    if (*gpu.memory_bytes > largest) {
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
  return "the model needs at least " + report::format_bytes(static_total) + " (" +
         report::format_number(model.parameter_memory_factor) +
         " x parameters + one stash per layer) spread over contiguous runs of GPUs; the " +
         std::to_string(topology.size()) + " GPUs have " + report::format_bytes(total_memory) +
         (unlimited ? " plus unlimited ones that cannot take the rest in order" : " in total");
}

}  // namespace pipeplan::planners
