// Human summaries of plans.

#include "pipeplan/report/summary.hpp"

#include <cmath>
#include <cstdio>

#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::report {

using io::format_bytes;
using io::format_ms;
using io::format_number;

std::optional<double> bound_ratio(double value, double bound) {
  if (!(bound > 0)) return std::nullopt;
  const double ratio = value / bound;
  if (!std::isfinite(ratio)) return std::nullopt;
  return ratio;
}

std::string layer_range(const model::Model& model, int first, int last) {
  auto name = [&](int layer) {
    const std::string& n = model.layers[static_cast<std::size_t>(layer)].name;
    return n.empty() ? std::string() : " (" + n + ")";
  };
  if (first == last) return "layer " + std::to_string(first) + name(first);
  return "layers " + std::to_string(first) + "-" + std::to_string(last) +
         (name(first).empty() ? ""
                              : " (" + model.layers[static_cast<std::size_t>(first)].name + " .. " +
                                    model.layers[static_cast<std::size_t>(last)].name + ")");
}

namespace {

std::string gpu_list(const Stage& stage, const topology::Topology& topology) {
  std::string out;
  const std::size_t shown = std::min<std::size_t>(stage.gpus.size(), 4);
  for (std::size_t x = 0; x < shown; ++x) out += (x ? ", " : "") + topology.gpu(stage.gpus[x]).id;
  if (stage.gpus.size() > shown) out += ", ... " + topology.gpu(stage.gpus.back()).id;
  return out;
}

// `1.27x`: always two decimals, so that `1.00x` reads as a ratio and lines align.
std::string ratio(double value, double bound) {
  const std::optional<double> r = bound_ratio(value, bound);
  if (!r) return "n/a";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.2fx", *r);
  return buffer;
}

}  // namespace

std::string plan_summary(const Plan& plan, const model::Model& model,
                         const topology::Topology& topology) {
  // Distinct GPUs: stages may share them (spec 9.2).
  std::vector<bool> serves(static_cast<std::size_t>(topology.size()), false);
  std::size_t used = 0;
  for (const Stage& stage : plan.stages) {
    for (int g : stage.gpus) {
      if (serves[static_cast<std::size_t>(g)]) continue;
      serves[static_cast<std::size_t>(g)] = true;
      ++used;
    }
  }
  std::string out = std::to_string(plan.stages.size()) + " stage" +
                    (plan.stages.size() == 1 ? "" : "s") + " on " + std::to_string(used) + " of " +
                    std::to_string(topology.size()) + " GPUs, " +
                    std::to_string(plan.schedule.micro_batches) + " micro-batches, planner " +
                    plan.planner + ", schedule " + plan.schedule_policy;
  if (plan.optimizer == Optimizer::kSharded) out += ", sharded optimizer";
  if (plan.optimizer == Optimizer::kFullySharded) out += ", fully sharded (FSDP)";
  // The description's flags the planner set otherwise than the model file (settings_choice.hpp).
  if (plan.sequence_parallel) {
    out += std::string(", sequence parallelism ") + (*plan.sequence_parallel ? "on" : "off");
  }
  if (plan.selective_recompute) {
    out += std::string(", selective recomputation ") + (*plan.selective_recompute ? "on" : "off");
  }
  if (plan.schedule.split_backward) out += ", split backward";
  if (virtual_stages(plan.stages) > 1) {
    out += ", up to " + std::to_string(virtual_stages(plan.stages)) + " stages per device";
  }
  const std::vector<simulate::StageExecution> exec =
      simulate::execution(model, topology, plan.stages, plan.optimizer);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    const simulate::StageExecution& e = exec[s];
    out += "\n  stage " + std::to_string(s) + ": " +
           layer_range(model, stage.first_layer, stage.last_layer) + " on " +
           std::to_string(stage.gpus.size()) + " GPU" + (stage.gpus.size() == 1 ? "" : "s");
    // Spec 8: the degree, the replicas and recomputation, named when they are not the v1 ones.
    if (stage.uses_v2_fields()) {
      const int r = stage.replicas();
      std::string shape = stage.tensor_parallel > 1
                              ? std::to_string(r) + " x " + std::to_string(stage.tensor_parallel) +
                                    "-way tensor parallel"
                              : std::to_string(r) + (r == 1 ? " replica" : " replicas");
      if (stage.context_parallel > 1) {
        shape += ", " + std::to_string(stage.context_parallel) + "-way context parallel";
      }
      if (stage.recompute) shape += ", recomputed";
      out += " (" + shape + ")";
    }
    out += " [" + gpu_list(stage, topology) + "], F+B " + format_ms(e.forward_ms + e.backward_ms);
    if (reduces_gradients(stage, plan.optimizer)) out += ", allreduce " + format_ms(e.allreduce_ms);
  }
  out += "\n  iteration " + format_ms(plan.timeline.iteration_ms) + ": " +
         ratio(plan.timeline.iteration_ms, plan.bounds.partition_ms) + " the partition bound (" +
         format_ms(plan.bounds.partition_ms) + "), " +
         ratio(plan.timeline.iteration_ms, plan.bounds.any_plan_ms) + " the any-plan bound (" +
         format_ms(plan.bounds.any_plan_ms) + ")";
  return out;
}

std::string gpu_summary(const Plan& plan, const topology::Topology& topology) {
  std::string out;
  for (int g = 0; g < topology.size(); ++g) {
    const GpuUsage& usage = plan.timeline.gpus[static_cast<std::size_t>(g)];
    if (usage.stages.empty()) continue;
    if (!out.empty()) out += "\n";
    const auto& capacity = topology.gpu(g).memory_bytes;
    std::string stages;
    for (std::size_t k = 0; k < usage.stages.size(); ++k) {
      stages += (k ? ", " : "") + std::to_string(usage.stages[k]);
    }
    out += "  " + topology.gpu(g).id + " (stage" + (usage.stages.size() > 1 ? "s " : " ") + stages +
           "): busy " + format_ms(usage.busy_ms) + ", bubble " +
           format_number(100 * simulate::bubble_fraction(usage, plan.timeline.iteration_ms), 3) +
           "%, peak memory " + format_bytes(usage.peak_memory_bytes) +
           (capacity ? " of " + format_bytes(*capacity) : std::string(" (unlimited)"));
  }
  return out;
}

nlohmann::ordered_json simulation_figures(const Plan& plan, const topology::Topology& topology) {
  using nlohmann::ordered_json;
  ordered_json out = ordered_json::object();
  out["valid"] = true;
  out["planner"] = plan.planner;
  out["schedule_policy"] = plan.schedule_policy;
  out["micro_batches"] = plan.schedule.micro_batches;
  out["iteration_ms"] = plan.timeline.iteration_ms;
  out["bounds"] = {{"any_plan_ms", plan.bounds.any_plan_ms},
                   {"partition_ms", plan.bounds.partition_ms}};
  // 0 when there is no ratio (no bound, or one too small for a finite ratio), never null.
  out["ratio_to_bounds"] = {
      {"any_plan", bound_ratio(plan.timeline.iteration_ms, plan.bounds.any_plan_ms).value_or(0.0)},
      {"partition",
       bound_ratio(plan.timeline.iteration_ms, plan.bounds.partition_ms).value_or(0.0)}};
  std::vector<ordered_json> gpus;  // made JSON once: io::json_array is linear, push_back is not
  for (int g = 0; g < topology.size(); ++g) {
    const GpuUsage& usage = plan.timeline.gpus[static_cast<std::size_t>(g)];
    const auto& capacity = topology.gpu(g).memory_bytes;
    ordered_json entry = ordered_json::object();
    entry["id"] = topology.gpu(g).id;
    // As plan.json's `/gpus` (spec 9.2): `stages`, a list, for a GPU that serves several.
    if (usage.stages.size() > 1) {
      entry["stages"] = usage.stages;
    } else {
      entry["stage"] =
          usage.stages.empty() ? ordered_json(nullptr) : ordered_json(usage.stages.front());
    }
    entry["busy_ms"] = usage.busy_ms;
    entry["bubble_fraction"] =
        !usage.stages.empty()
            ? ordered_json(simulate::bubble_fraction(usage, plan.timeline.iteration_ms))
            : ordered_json(nullptr);
    entry["peak_memory_bytes"] = io::json_number(usage.peak_memory_bytes);
    entry["memory_bytes"] = capacity ? io::json_number(*capacity) : ordered_json(nullptr);
    gpus.push_back(std::move(entry));
  }
  out["gpus"] = io::json_array(std::move(gpus));
  return out;
}

}  // namespace pipeplan::report
