// The HTML report: one self-contained page (inline CSS and SVG; no scripts, no network, no
// external fonts) with the Gantt chart, the stage table and the per-GPU figures. O(T).

#include <algorithm>

#include "export_util.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/simulate/simulator.hpp"
#include "pipeplan/version.hpp"

namespace pipeplan::report {

using io::format_bytes;
using io::format_ms;
using io::format_number;

namespace {

using detail::xml_escape;

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Verdana, Arial, Helvetica, sans-serif; color: #222; margin: 24px; }
h1 { font-size: 20px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 28px 0 8px 0; }
p.figures { margin: 0 0 16px 0; }
figure { margin: 0; overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.unused td { color: #888; }
.bar { width: 120px; height: 10px; background: #e4e4e4; display: inline-block; vertical-align: middle; }
.bar span { display: block; height: 10px; background: #4c78a8; }
.bar span.memory { background: #54a24b; }
.bar span.over { background: #d62728; }
footer { margin-top: 28px; font-size: 11px; color: #777; }
)";

std::string percent(double fraction) { return format_number(100 * fraction, 3) + "%"; }

std::string bar(double fraction, const char* css_class = nullptr) {
  const double clamped = std::clamp(fraction, 0.0, 1.0);
  return "<span class=\"bar\"><span" +
         (css_class ? std::string(" class=\"") + css_class + "\"" : std::string()) +
         " style=\"width: " + detail::coordinate(100 * clamped) + "%\"></span></span>";
}

std::string layer_text(const PlanView& view, const Stage& stage) {
  std::string out =
      stage.first_layer == stage.last_layer
          ? std::to_string(stage.first_layer)
          : std::to_string(stage.first_layer) + "-" + std::to_string(stage.last_layer);
  if (view.layer_names) {
    const auto& names = *view.layer_names;
    const std::string& first = names[static_cast<std::size_t>(stage.first_layer)];
    const std::string& last = names[static_cast<std::size_t>(stage.last_layer)];
    if (!first.empty() && !last.empty()) {
      out += " (" + (stage.first_layer == stage.last_layer ? first : first + " .. " + last) + ")";
    }
  }
  return out;
}

// The stages' table; a v2 plan adds each stage's degrees, recomputation and optimizer step.
std::string stages_table(const PlanView& view) {
  const Plan& plan = view.plan;
  const bool v2 = is_v2_plan(plan);
  std::string out;
  out +=
      "<h2>Stages</h2>\n<table class=\"stages\">\n<tr><th>stage</th><th>layers</th><th>GPUs</th>";
  if (v2) out += "<th class=\"n\">replicas x t</th><th>recompute</th>";
  out +=
      "<th class=\"n\">forward</th><th class=\"n\">backward</th><th class=\"n\">boundary</th>"
      "<th class=\"n\">parameters</th><th class=\"n\">AllReduce</th>";
  if (v2) out += "<th class=\"n\">optimizer step</th>";
  out += "</tr>\n";
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    const StageFigures& f = view.stage_figures[s];
    std::string gpus;
    for (std::size_t k = 0; k < stage.gpus.size(); ++k) {
      // In a v2 plan the groups are separated by semicolons.
      const char* separator =
          k == 0 ? ""
                 : (v2 && k % static_cast<std::size_t>(stage.tensor_parallel) == 0 ? "; " : ", ");
      gpus += separator + xml_escape(detail::gpu_id(view, stage.gpus[k]));
    }
    std::string degrees;
    if (v2) {
      degrees = "<td class=\"n\">" + std::to_string(stage.replicas()) + " x " +
                std::to_string(stage.tensor_parallel) + "</td><td>" +
                (stage.recompute ? "yes" : "no") + "</td>";
    }
    std::string update;
    if (v2) {
      update = "-";
      for (const TimedUpdate& e : plan.timeline.updates) {
        if (e.stage == static_cast<int>(s)) {
          update = format_ms(e.end_ms - e.start_ms);
          break;
        }
      }
      update = "<td class=\"n\">" + update + "</td>";
    }
    out +=
        "<tr><td>" + std::to_string(s) + "</td><td>" + xml_escape(layer_text(view, stage)) +
        "</td><td>" + std::to_string(stage.gpus.size()) + ": " + gpus + "</td>" + degrees +
        "<td class=\"n\">" + format_ms(f.forward_ms) + "</td><td class=\"n\">" +
        format_ms(f.backward_ms) + "</td><td class=\"n\">" +
        (s + 1 < plan.stages.size() ? format_bytes(f.boundary_bytes) : std::string("-")) +
        "</td><td class=\"n\">" + format_bytes(f.parameter_bytes) + "</td><td class=\"n\">" +
        (reduces_gradients(stage, plan.optimizer) ? format_ms(f.allreduce_ms) : std::string("-")) +
        "</td>" + update + "</tr>\n";
  }
  out +=
      "</table>\n<p>Forward and backward are per micro-batch at speed 1.0; boundary is what "
      "crosses to the next "
      "stage per micro-batch, each way.</p>\n";
  if (v2) {
    out +=
        "<p>Each replica is a tensor-parallel group of t GPUs, its first GPU the leader that "
        "the chart's row names. Forward, backward and parameters are per GPU at the stage's "
        "degree, without tensor-parallel all-reduces and recomputation (the chart's strips "
        "show their shares of each task); the optimizer is " +
        std::string(plan.optimizer == Optimizer::kSharded ? "sharded among replicas"
                    : plan.optimizer == Optimizer::kShardedGradients
                        ? "sharded among replicas, with the gradients"
                    : plan.optimizer == Optimizer::kFullySharded
                        ? "fully sharded among replicas, with the weights and gradients"
                        : "replicated") +
        ".</p>\n";
  }
  if (plan.schedule.split_backward) {
    out +=
        "<p>The backward is split into its input-gradient half I and its weight-gradient half W "
        "(the backward column is their sum); the chart draws them in colours of their own.</p>\n";
  }
  if (shares_devices(plan)) {
    out += "<p>Stages with the same GPUs share them as one device, up to " +
           std::to_string(virtual_stages(plan.stages)) +
           " stages per device, running their tasks one at a time; the chart draws each stage "
           "of a device in a shade of its own (virtual stage 0, 1, ...).</p>\n";
  }
  return out;
}

// The GPUs' table, in rank order, then the unused ones.
std::string gpus_table(const PlanView& view) {
  const Plan& plan = view.plan;
  const double iteration = plan.timeline.iteration_ms;
  const bool v2 = is_v2_plan(plan);
  std::string out;
  out +=
      "<h2>GPUs</h2>\n<table class=\"gpus\">\n<tr><th class=\"n\">rank</th><th>GPU</th><th "
      "class=\"n\">stage" +
      std::string(shares_devices(plan) ? "s" : "") + "</th>" +
      std::string(v2 ? "<th>group</th>" : "") +
      "<th class=\"n\">busy</th><th>utilisation</th><th class=\"n\">bubble</th><th "
      "class=\"n\">peak memory</th>"
      "<th class=\"n\">capacity</th><th>memory used</th></tr>\n";
  const std::vector<int> ranks = rank_order(view);
  // Every stage of a GPU (several when stages share it, spec 9.2), from the plan's stages.
  const std::vector<std::vector<int>> stages = stages_per_gpu(view);
  // Per GPU in a v2 plan: its group (replica) and whether it leads it.
  std::vector<std::string> group_cell(view.gpu_ids.size());
  if (v2) {
    for (const Stage& stage : plan.stages) {
      for (std::size_t k = 0; k < stage.gpus.size(); ++k) {
        const auto t = static_cast<std::size_t>(stage.tensor_parallel);
        group_cell[static_cast<std::size_t>(stage.gpus[k])] =
            "<td>" + std::to_string(k / t) + (k % t == 0 ? " (leader)" : "") + "</td>";
      }
    }
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const int g = ranks[r];
    const GpuUsage& usage = plan.timeline.gpus[static_cast<std::size_t>(g)];
    const double utilisation = iteration > 0 ? usage.busy_ms / iteration : 0;
    const auto& capacity = view.memory_bytes[static_cast<std::size_t>(g)];
    std::string memory_cells;
    if (capacity && *capacity > 0) {
      const double fraction = usage.peak_memory_bytes / *capacity;
      memory_cells = "<td class=\"n\">" + format_bytes(*capacity) + "</td><td>" +
                     bar(fraction, fraction > 1 ? "over" : "memory") + " " + percent(fraction) +
                     "</td>";
    } else {
      memory_cells = "<td class=\"n\">" +
                     (capacity ? format_bytes(*capacity) : std::string("unlimited")) +
                     "</td><td></td>";
    }
    out += "<tr><td class=\"n\">" + std::to_string(r) + "</td><td>" +
           xml_escape(detail::gpu_id(view, g)) + "</td><td class=\"n\">" +
           detail::stage_list(stages[static_cast<std::size_t>(g)]) + "</td>" +
           group_cell[static_cast<std::size_t>(g)] + "<td class=\"n\">" + format_ms(usage.busy_ms) +
           "</td><td>" + bar(utilisation) + " " + percent(utilisation) + "</td><td class=\"n\">" +
           percent(simulate::bubble_fraction(usage, iteration)) + "</td><td class=\"n\">" +
           format_bytes(usage.peak_memory_bytes) + "</td>" + memory_cells + "</tr>\n";
  }
  for (std::size_t g = 0; g < view.gpu_ids.size(); ++g) {
    if (!stages[g].empty()) continue;
    const auto& capacity = view.memory_bytes[g];
    out += "<tr class=\"unused\"><td class=\"n\">-</td><td>" + xml_escape(view.gpu_ids[g]) +
           "</td><td class=\"n\">unused</td>" + std::string(v2 ? "<td></td>" : "") +
           "<td class=\"n\">-</td><td></td><td "
           "class=\"n\">-</td><td class=\"n\">-</td>"
           "<td class=\"n\">" +
           (capacity ? format_bytes(*capacity) : std::string("unlimited")) +
           "</td><td></td></tr>\n";
  }
  out +=
      "</table>\n<p>Utilisation is busy time over the iteration; the bubble is the rest. Peak "
      "memory counts the "
      "static bytes (parameters, gradients, optimizer state) and the stashed activations.</p>\n";
  return out;
}

}  // namespace

std::string html_report(const PlanView& view) {
  const Plan& plan = view.plan;
  const std::string title = detail::plan_title(view);
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out +=
      "<title>" + xml_escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  out += "<h1>" + xml_escape(title) + "</h1>\n";
  out += "<p class=\"figures\">" + xml_escape(detail::iteration_text(view)) + "; planner " +
         xml_escape(plan.planner) + ", schedule " + xml_escape(plan.schedule_policy) + ", " +
         std::to_string(view.micro_batches) + " micro-batches.</p>\n";
  out += "<figure>\n" + svg_gantt(view) + "</figure>\n";
  out += stages_table(view);
  out += gpus_table(view);
  out += std::string("<footer>pipeplan ") + kVersion + "</footer>\n</body>\n</html>\n";
  return out;
}

}  // namespace pipeplan::report
