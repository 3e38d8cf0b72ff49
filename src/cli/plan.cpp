// `pipeplan plan MODEL TOPO [-o PLAN] [--micro-batches M | --global-batch N] [--planner NAME]
// [--schedule POLICY] [--trace FILE] [--report FILE] [--check PLAN]`.

#include <algorithm>
#include <chrono>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/batch_size.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/report/summary.hpp"

namespace pipeplan::cli {
namespace {

struct PlanOptions {
  std::string model;
  std::string topology;
  std::optional<std::string> output;
  std::optional<int> micro_batches;
  std::optional<std::int64_t> global_batch;
  std::string planner = "spp";
  std::optional<std::string> policy;
  std::optional<std::string> check;
  std::optional<std::string> trace;
  std::optional<std::string> report;
  PlanningOptions planning;  // spec 8.4
};

// `a, b, c` for a stage's GPU ids, shortened to the first three and the last beyond five.
std::string id_list(const nlohmann::json& gpus) {
  std::vector<std::string> ids;
  if (gpus.is_array()) {
    for (const auto& id : gpus) ids.push_back(id.is_string() ? id.get<std::string>() : id.dump());
  }
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids.size() > 5 && i == 3) {
      out += ", ... " + ids.back() + " (" + std::to_string(ids.size()) + ")";
      break;
    }
    out += (i ? ", " : "") + ids[i];
  }
  return out.empty() ? "none" : out;
}

// One line saying how the regenerated plan differs from the existing one: planner, schedule
// policy and micro-batches; stage layer ranges and replica counts; the GPUs used or the GPUs
// of each stage; the iteration time; else which other parts changed.
std::string difference(const std::string& existing_text,
                       const nlohmann::ordered_json& fresh_ordered) {
  using nlohmann::json;
  json existing;
  try {
    existing = json::parse(existing_text);
  } catch (const json::exception&) {
    return "the existing file is not JSON";
  }
  if (!existing.is_object()) return "the existing file is not a plan (not a JSON object)";
  const json fresh = json::parse(fresh_ordered.dump());
  auto member = [](const json& object, const char* key) {
    auto it = object.find(key);
    return it == object.end() ? json() : *it;
  };
  auto text = [](const json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
  };
  std::vector<std::string> changes;
  const std::pair<const char*, const char*> settings[] = {
      {"planner", "planner"}, {"schedule_policy", "schedule"}, {"micro_batches", "micro-batches"}};
  for (const auto& [key, name] : settings) {
    const json before = member(existing, key), after = member(fresh, key);
    if (before != after) {
      changes.push_back(std::string(name) + " " + text(before) + " -> " + text(after));
    }
  }

  // Stages: layer ranges and replica counts.
  auto stage_text = [&](const json& stages) {
    std::string out;
    if (!stages.is_array()) return out;
    for (const auto& stage : stages) {
      if (!stage.is_object()) continue;
      out += (out.empty() ? "" : " | ") + member(stage, "first_layer").dump() + "-" +
             member(stage, "last_layer").dump() + " x" +
             std::to_string(member(stage, "gpus").size());
    }
    return out;
  };
  const json old_stages = member(existing, "stages"), new_stages = member(fresh, "stages");
  const std::string before = stage_text(old_stages), after = stage_text(new_stages);
  if (before != after) {
    changes.push_back("stages " + (before.empty() ? "none" : before) + " -> " + after);
  }

  // GPUs: how many are used, else which ones serve each stage.
  auto gpu_lists = [&](const json& stages) {
    std::vector<json> out;
    if (stages.is_array()) {
      for (const auto& stage : stages) {
        out.push_back(stage.is_object() ? member(stage, "gpus") : json());
      }
    }
    return out;
  };
  const auto old_gpus = gpu_lists(old_stages), new_gpus = gpu_lists(new_stages);
  std::size_t old_used = 0, new_used = 0;
  for (const auto& list : old_gpus) old_used += list.is_array() ? list.size() : 0;
  for (const auto& list : new_gpus) new_used += list.is_array() ? list.size() : 0;
  if (old_used != new_used) {
    changes.push_back("GPUs used " + std::to_string(old_used) + " -> " + std::to_string(new_used));
  } else if (old_gpus.size() == new_gpus.size()) {
    std::vector<std::string> moved;
    for (std::size_t s = 0; s < old_gpus.size(); ++s) {
      if (old_gpus[s] != new_gpus[s]) {
        moved.push_back("stage " + std::to_string(s) + " " + id_list(old_gpus[s]) + " -> " +
                        id_list(new_gpus[s]));
      }
    }
    if (!moved.empty()) {
      std::string line = "GPUs of " + moved[0];
      if (moved.size() > 1) line += ", " + moved[1];
      if (moved.size() > 2) line += " and " + std::to_string(moved.size() - 2) + " more stages";
      changes.push_back(line);
    }
  } else {
    std::vector<std::string> old_ids, new_ids;
    for (const auto& list : old_gpus) {
      for (const auto& id : list) old_ids.push_back(text(id));
    }
    for (const auto& list : new_gpus) {
      for (const auto& id : list) new_ids.push_back(text(id));
    }
    std::sort(old_ids.begin(), old_ids.end());
    std::sort(new_ids.begin(), new_ids.end());
    if (old_ids != new_ids) changes.push_back("a different set of GPUs is used");
  }

  const json old_time = member(existing, "iteration_ms"), new_time = member(fresh, "iteration_ms");
  if (old_time != new_time) {
    changes.push_back(
        "iteration " +
        (old_time.is_number() ? report::format_ms(old_time.get<double>()) : text(old_time)) +
        " -> " + report::format_ms(new_time.get<double>()));
  }
  if (changes.empty()) {
    // Same stages, GPUs and time: name the other parts that differ.
    std::vector<std::string> parts;
    for (const auto& [key, value] : fresh.items()) {
      if (member(existing, key.c_str()) != value) {
        parts.push_back(key == "schedule" ? "the schedule" : key);
      }
    }
    for (const auto& [key, value] : existing.items()) {
      if (!fresh.contains(key)) parts.push_back(key + " (not in the new plan)");
    }
    std::string line;
    for (const auto& part : parts) line += (line.empty() ? "" : ", ") + part;
    changes.push_back(line.empty() ? "formatting only (same content)" : line + " changed");
  }
  std::string out;
  for (const auto& change : changes) out += (out.empty() ? "" : "; ") + change;
  return out;
}

int run_plan(const PlanOptions& options, Context& context) {
  const auto started = std::chrono::steady_clock::now();
  // --check writes nothing (it excludes --trace and --report, and -o is not written).
  std::vector<NamedPath> outputs;
  if (!options.check) {
    outputs = {{"-o", options.output}, {"--trace", options.trace}, {"--report", options.report}};
  }
  context.declare(
      {{"MODEL", options.model}, {"TOPO", options.topology}, {"--check", options.check}},
      std::move(outputs));
  model::Model model = model::read_model(context.read("MODEL"));
  topology::Topology topology = topology::read_topology(context.read("TOPO"), model.profile_device);
  // Every input is read before the planning starts.
  std::optional<io::Source> existing;
  if (options.check) existing = context.read("--check");
  std::optional<schedule::Policy> policy;
  if (options.policy) policy = schedule::parse_policy(*options.policy);
  auto make = [&](const model::Model& planned, int micro_batches) {
    planners::Request request{planned, topology, micro_batches};
    apply_planning_options(options.planning, request);
    return planners::make_plan(options.planner, request, policy);
  };
  const int micro_batches =
      options.global_batch ? 0 : micro_batch_count(options.micro_batches, model, options.model);
  const double reading_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  Plan plan;
  if (options.global_batch) {
    planners::GlobalBatchPlan chosen =
        planners::plan_global_batch(model, *options.global_batch, options.model, make);
    model = std::move(chosen.model);
    plan = std::move(chosen.plan);
  } else {
    plan = make(model, micro_batches);
    if (model.transformer) plan.micro_batch_size = model.transformer->micro_batch_size;
  }
  for (const std::string& note : plan.notes) context.log->debug("{}", note);
  for (const std::string& warning : plan.warnings) context.log->warn("{}", warning);
  const std::string text = io::dump_json(report::plan_to_json(plan, model, topology));
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  if (existing) {
    if (existing->text == text) {
      context.say(*options.check + ": up to date");
      return 0;
    }
    context.err << io::printable_line(
                       "pipeplan: " + *options.check + " differs: " +
                       difference(existing->text, report::plan_to_json(plan, model, topology)))
                << '\n';
    return static_cast<int>(ExitCode::kCheckDiffers);
  }
  // Every text is made before anything is written.
  std::string trace, html;
  if (options.trace || options.report) {
    const report::PlanView view = report::make_view(plan, model, topology, options.model);
    if (options.trace) trace = report::export_plan(view, report::ExportFormat::kChromeTrace);
    if (options.report) html = report::export_plan(view, report::ExportFormat::kHtml);
  }
  // All or nothing: the plan, the trace and the report are written together.
  context.emit("-o", text);
  if (options.trace) context.emit("--trace", std::move(trace));
  if (options.report) context.emit("--report", std::move(html));
  context.commit();
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  // Reading and writing are wall time; the planner's phases may run on several threads at once
  // (spp's candidates), so theirs are summed over threads and can add up to more than the total.
  std::string phases = "reading " + report::format_ms(reading_ms) + ", writing " +
                       report::format_ms(total_ms - elapsed_ms);
  std::string planner_phases;
  for (const auto& [phase, ms] : plan.phase_ms) {
    planner_phases += (planner_phases.empty() ? "" : ", ") + phase + " " + report::format_ms(ms);
  }
  if (!planner_phases.empty()) phases += "; " + planner_phases + " summed over threads";
  context.say(report::plan_summary(plan, model, topology) + "\n  planned in " +
              report::format_ms(total_ms) + " (" + phases + ")");
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand("plan", "Plan pipeline-parallel training of MODEL on TOPO");
  sub->add_option("MODEL", options->model, "Model profile (model.json, - for standard input)")
      ->required();
  sub->add_option("TOPO", options->topology, "Cluster topology (topo.json)")->required();
  sub->add_option("-o,--output", options->output, "Write the plan here instead of standard output")
      ->check(output_path, "FILE");
  sub->add_option("-m,--micro-batches", options->micro_batches,
                  "Micro-batches per iteration (overrides the model's)")
      ->transform(decimal_integer(1, kMaxMicroBatches));
  sub->add_option("--global-batch", options->global_batch,
                  "Sequences per iteration: M = N / micro-batch size (a transformer description "
                  "tries every size that divides N and keeps the fastest)")
      ->transform(decimal_integer(1, planners::kMaxGlobalBatch))
      ->excludes("--micro-batches");
  std::vector<std::string> names = planners::planner_names();
  names.emplace_back("megatron");
  std::string planners;
  for (const auto& name : names) planners += (planners.empty() ? "" : ", ") + name;
  sub->add_option("-p,--planner", options->planner, "Planner: " + planners + " (default spp)")
      ->check(CLI::IsMember(names));
  sub->add_option("-s,--schedule", options->policy, "Re-schedule with list, 1f1b or gpipe")
      ->check(CLI::IsMember({"list", "1f1b", "gpipe"}));
  // Files only: standard output carries the plan.
  const auto file_name = [](const std::string& path) {
    return path.empty() || path == "-"
               ? std::string("must name a file (standard output carries the plan)")
               : std::string();
  };
  CLI::Option* trace_option =
      sub->add_option(
             "--trace", options->trace,
             "Also write the plan's Chrome trace (Perfetto, chrome://tracing) to this file")
          ->check(file_name, "FILE");
  CLI::Option* report_option =
      sub->add_option("--report", options->report, "Also write the plan's HTML report to this file")
          ->check(file_name, "FILE");
  sub->add_option(
         "--check", options->check,
         "Compare with this existing plan instead of writing: exit 0 if identical, 6 if not")
      ->excludes(trace_option)
      ->excludes(report_option);
  add_planning_options(*sub, options->planning);
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_plan(*options, context); };
  });
}

}  // namespace pipeplan::cli
