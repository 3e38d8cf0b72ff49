// Planner registry and the shared last step (schedule, replay, check).

#include "pipeplan/planners/planner.hpp"

#include <algorithm>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {

Plan finish_plan(std::string planner, const Partition& partition, const Request& request,
                 schedule::Policy policy) {
  simulate::check_stages(request.model, request.topology, partition.stages);
  schedule::Scheduled scheduled = schedule::make_schedule(request.model, request.topology,
                                                          partition.stages, request.micro_batches, policy);
  Plan plan;
  plan.planner = std::move(planner);
  plan.schedule_policy = std::string(schedule::policy_name(policy));
  plan.gpu_order = partition.gpu_order;
  plan.stages = partition.stages;
  try {
    plan.timeline = simulate::replay(request.model, request.topology, plan.stages, scheduled.schedule);
  } catch (const simulate::ScheduleError& error) {
    throw InternalError(std::string("the ") + plan.schedule_policy + " scheduler made an invalid schedule: " + error.what());
  }
  plan.schedule = std::move(scheduled.schedule);
  if (auto violation = simulate::memory_violation(request.topology, plan.timeline)) {
    throw InfeasibleError("the " + plan.schedule_policy + " schedule of the " + plan.planner +
                          " plan does not fit in memory: " + *violation);
  }
  plan.bounds = simulate::compute_bounds(request.model, request.topology, plan.stages, request.micro_batches);
  return plan;
}

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> names{"spp"};
  return names;
}

schedule::Policy default_policy(std::string_view planner) {
  (void)planner;
  return schedule::Policy::kList;
}

Plan make_plan(std::string_view name, const Request& request, std::optional<schedule::Policy> policy) {
  const schedule::Policy chosen = policy.value_or(default_policy(name));
  if (name == "spp") return plan_spp(request, chosen);
  std::string known;
  for (const auto& planner : planner_names()) known += (known.empty() ? "" : ", ") + planner;
  throw UsageError("unknown planner \"" + std::string(name) + "\" (known: " + known + ")");
}

std::string infeasibility_message(const Request& request) {
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
                                     : "layer " + std::to_string(worst_layer) + " (\"" + model.layers[worst_layer].name + "\")";
  if (!unlimited && worst > largest) {
    return "no placement fits in GPU memory: " + layer_name + " alone needs " +
           report::format_bytes(worst) + " (" + report::format_number(model.parameter_memory_factor) +
           " x parameters + one stash) but the largest GPU, \"" + largest_gpu + "\", has " +
           report::format_bytes(largest);
  }
  return "no placement fits in GPU memory: the model needs at least " + report::format_bytes(static_total) +
         " (" + report::format_number(model.parameter_memory_factor) +
         " x parameters + one stash per layer) spread over contiguous runs of GPUs; the " +
         std::to_string(topology.size()) + " GPUs have " + report::format_bytes(total_memory) +
         (unlimited ? " plus unlimited ones that cannot take the rest in order" : " in total");
}

}  // namespace pipeplan::planners
