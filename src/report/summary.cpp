// Human summaries of plans. Linear in the stages and GPUs once the execution figures are made
// (O(layers x degrees)): alike lines are merged run by run, never compared all against all.

#include "pipeplan/report/summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

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

std::string stage_names(const std::vector<int>& stages) {
  if (stages.size() == 1) return "stage " + std::to_string(stages.front());
  const int step = stages[1] - stages[0];
  bool even = true;
  for (std::size_t i = 1; i < stages.size(); ++i) even = even && stages[i] - stages[i - 1] == step;
  if (stages.size() > 4 && even) {
    return step == 1
               ? "stages " + std::to_string(stages.front()) + " to " + std::to_string(stages.back())
               : "stages " + std::to_string(stages[0]) + ", " + std::to_string(stages[1]) +
                     ", ..., " + std::to_string(stages.back());
  }
  std::string out = "stages ";
  for (std::size_t i = 0; i < stages.size(); ++i) {
    if (i > 0) out += i + 1 == stages.size() ? " and " : ", ";
    out += std::to_string(stages[i]);
  }
  return out;
}

namespace {

// Runs of this many alike stages or GPUs, or more, share a line.
constexpr std::size_t kRun = 3;

// The end (past the last) of the run that starts at `first`: as far as `alike(i - 1, i)` holds.
template <class Alike>
std::size_t run_end(std::size_t first, std::size_t size, const Alike& alike) {
  std::size_t last = first + 1;
  while (last < size && alike(last - 1, last)) ++last;
  return last;
}

// The first four of `gpus` and the last: `g0, g1, g2, g3, ... g9`.
std::string gpu_list(const std::vector<int>& gpus, const topology::Topology& topology) {
  std::string out;
  const std::size_t shown = std::min<std::size_t>(gpus.size(), 4);
  for (std::size_t x = 0; x < shown; ++x) out += (x ? ", " : "") + topology.gpu(gpus[x]).id;
  if (gpus.size() > shown) out += ", ... " + topology.gpu(gpus.back()).id;
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

// The summary's first line: stages, GPUs used, micro-batches, planner, schedule and the settings
// the plan states.
std::string plan_header(const Plan& plan, const topology::Topology& topology) {
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
  if (plan.optimizer == Optimizer::kShardedGradients) out += ", sharded gradients (ZeRO-2)";
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
  return out;
}

// A stage's line but for its name, layers and GPUs: ` on 8 GPUs (4 x 2-way tensor parallel)`
// (`shape`) and `, F+B 29.59 ms, allreduce 17.74 ms` (`times`).
struct StageText {
  int layers = 0;
  std::string shape, times;
  [[nodiscard]] bool operator==(const StageText& other) const {
    return layers == other.layers && shape == other.shape && times == other.times;
  }
};

StageText stage_text(const Plan& plan, const Stage& stage, const simulate::StageExecution& e) {
  StageText out;
  out.layers = stage.last_layer - stage.first_layer + 1;
  out.shape =
      " on " + std::to_string(stage.gpus.size()) + " GPU" + (stage.gpus.size() == 1 ? "" : "s");
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
    out.shape += " (" + shape + ")";
  }
  out.times = ", F+B " + format_ms(e.forward_ms + e.backward_ms);
  if (reduces_gradients(stage, plan.optimizer))
    out.times += ", allreduce " + format_ms(e.allreduce_ms);
  return out;
}

// The line of stages [first, last), alike: `stages 1 to 78: layers 2-79 (...), 1 a stage, each
// on 64 GPUs (...) [256 in all: ...], F+B ...`. O(P log P) for the P GPUs its stages list.
std::string run_line(const Plan& plan, const model::Model& model,
                     const topology::Topology& topology, std::size_t first, std::size_t last,
                     const StageText& text) {
  std::vector<int> names, gpus;
  for (std::size_t s = first; s < last; ++s) {
    names.push_back(static_cast<int>(s));
    gpus.insert(gpus.end(), plan.stages[s].gpus.begin(), plan.stages[s].gpus.end());
  }
  std::sort(gpus.begin(), gpus.end());  // in the topology's order, each once
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  return stage_names(names) + ": " +
         layer_range(model, plan.stages[first].first_layer, plan.stages[last - 1].last_layer) +
         ", " + std::to_string(text.layers) + " a stage, each" + text.shape + " [" +
         std::to_string(gpus.size()) + " in all: " + gpu_list(gpus, topology) + "]" + text.times;
}

}  // namespace

std::string plan_summary(const Plan& plan, const model::Model& model,
                         const topology::Topology& topology) {
  std::string out = plan_header(plan, topology);
  const std::vector<simulate::StageExecution> exec =
      simulate::execution(model, topology, plan.stages, plan.optimizer);
  std::vector<StageText> texts;
  texts.reserve(plan.stages.size());
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    texts.push_back(stage_text(plan, plan.stages[s], exec[s]));
  }
  const auto alike = [&](std::size_t a, std::size_t b) { return texts[a] == texts[b]; };
  for (std::size_t first = 0; first < texts.size();) {
    const std::size_t last = run_end(first, texts.size(), alike);
    if (last - first >= kRun) {
      out += "\n  " + run_line(plan, model, topology, first, last, texts[first]);
    } else {
      for (std::size_t s = first; s < last; ++s) {
        const Stage& stage = plan.stages[s];
        out += "\n  stage " + std::to_string(s) + ": " +
               layer_range(model, stage.first_layer, stage.last_layer) + texts[s].shape + " [" +
               gpu_list(stage.gpus, topology) + "]" + texts[s].times;
      }
    }
    first = last;
  }
  out += "\n  iteration " + format_ms(plan.timeline.iteration_ms) + ": " +
         ratio(plan.timeline.iteration_ms, plan.bounds.partition_ms) + " the partition bound (" +
         format_ms(plan.bounds.partition_ms) + "), " +
         ratio(plan.timeline.iteration_ms, plan.bounds.any_plan_ms) + " the any-plan bound (" +
         format_ms(plan.bounds.any_plan_ms) + ")";
  return out;
}

std::string gpu_summary(const Plan& plan, const topology::Topology& topology) {
  // Each used GPU's stages (`stage 3`, `stages 0 and 4`) and figures (`: busy ...`). O(G + S).
  std::vector<int> used;
  std::vector<std::pair<std::string, std::string>> texts;
  for (int g = 0; g < topology.size(); ++g) {
    const GpuUsage& usage = plan.timeline.gpus[static_cast<std::size_t>(g)];
    if (usage.stages.empty()) continue;
    const auto& capacity = topology.gpu(g).memory_bytes;
    used.push_back(g);
    texts.emplace_back(
        stage_names(usage.stages),
        "): busy " + format_ms(usage.busy_ms) + ", bubble " +
            format_number(100 * simulate::bubble_fraction(usage, plan.timeline.iteration_ms), 3) +
            "%, peak memory " + format_bytes(usage.peak_memory_bytes) +
            (capacity ? " of " + format_bytes(*capacity) : std::string(" (unlimited)")));
  }
  const auto alike = [&](std::size_t a, std::size_t b) {
    return used[b] == used[a] + 1 && texts[a] == texts[b];
  };
  std::string out;
  for (std::size_t first = 0; first < used.size();) {
    const std::size_t last = run_end(first, used.size(), alike);
    if (last - first >= kRun) {
      out += std::string(out.empty() ? "" : "\n") + "  " + topology.gpu(used[first]).id + " .. " +
             topology.gpu(used[last - 1]).id + " (" + std::to_string(last - first) +
             " GPUs, each " + texts[first].first + texts[first].second;
    } else {
      for (std::size_t k = first; k < last; ++k) {
        out += std::string(out.empty() ? "" : "\n") + "  " + topology.gpu(used[k]).id + " (" +
               texts[k].first + texts[k].second;
      }
    }
    first = last;
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
