// `pipeplan plan MODEL TOPO [-o PLAN] [--micro-batches M] [--planner NAME] [--schedule POLICY]
// [--check PLAN]`.

#include <chrono>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
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
  std::string planner = "spp";
  std::optional<std::string> policy;
  std::optional<std::string> check;
};

// One line saying how the regenerated plan differs from the existing one.
std::string difference(const std::string& existing_text, const nlohmann::ordered_json& fresh) {
  nlohmann::json existing;
  try {
    existing = nlohmann::json::parse(existing_text);
  } catch (const nlohmann::json::exception&) {
    return "the existing file is not JSON";
  }
  std::vector<std::string> changes;
  auto stage_text = [](const nlohmann::json& stages) {
    std::string out;
    if (!stages.is_array()) return out;
    for (const auto& stage : stages) {
      if (!stage.is_object()) continue;
      out += (out.empty() ? "" : " | ") + stage.value("first_layer", nlohmann::json()).dump() + "-" +
             stage.value("last_layer", nlohmann::json()).dump() + " x" +
             std::to_string(stage.value("gpus", nlohmann::json::array()).size());
    }
    return out;
  };
  const auto fresh_plain = nlohmann::json::parse(fresh.dump());
  const std::string before = existing.is_object() ? stage_text(existing.value("stages", nlohmann::json())) : "";
  const std::string after = stage_text(fresh_plain.at("stages"));
  if (before != after) changes.push_back("stages " + before + " -> " + after);
  if (!existing.is_object() || existing.value("stages", nlohmann::json()) != fresh_plain.at("stages")) {
    if (before == after) changes.push_back("stage GPUs or figures changed");
  }
  const auto old_time = existing.is_object() ? existing.value("iteration_ms", nlohmann::json()) : nlohmann::json();
  const auto new_time = fresh_plain.at("iteration_ms");
  if (old_time != new_time) {
    changes.push_back("iteration " + (old_time.is_number() ? report::format_ms(old_time.get<double>()) : old_time.dump()) +
                      " -> " + report::format_ms(new_time.get<double>()));
  }
  if (changes.empty()) changes.push_back("the schedule or other fields changed");
  std::string out;
  for (const auto& change : changes) out += (out.empty() ? "" : "; ") + change;
  return out;
}

int run_plan(const PlanOptions& options, Context& context) {
  const auto started = std::chrono::steady_clock::now();
  model::Model model = model::read_model(context.read(options.model));
  topology::Topology topology = topology::read_topology(context.read(options.topology));
  const int micro_batches = micro_batch_count(options.micro_batches, model, options.model);
  std::optional<schedule::Policy> policy;
  if (options.policy) policy = schedule::parse_policy(*options.policy);
  const double reading_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  planners::Request request{model, topology, micro_batches};
  Plan plan = planners::make_plan(options.planner, request, policy);
  for (const std::string& note : plan.notes) context.log->debug("{}", note);
  const std::string text = io::dump_json(report::plan_to_json(plan, model, topology));
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  if (options.check) {
    const io::Source existing = context.read(*options.check);
    if (existing.text == text) {
      context.say(*options.check + ": up to date");
      return 0;
    }
    context.err << "pipeplan: " << *options.check << " differs: " << difference(existing.text, report::plan_to_json(plan, model, topology)) << '\n';
    return static_cast<int>(ExitCode::kCheckDiffers);
  }
  context.emit(options.output, text);
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::string phases = "reading " + report::format_ms(reading_ms);
  for (const auto& [phase, ms] : plan.phase_ms) phases += ", " + phase + " " + report::format_ms(ms);
  phases += ", writing " + report::format_ms(total_ms - elapsed_ms);
  context.say(report::plan_summary(plan, model, topology) + "\n  planned in " + report::format_ms(total_ms) +
              " (" + phases + ")");
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand("plan", "Plan pipeline-parallel training of MODEL on TOPO");
  sub->add_option("MODEL", options->model, "Model profile (model.json, - for standard input)")->required();
  sub->add_option("TOPO", options->topology, "Cluster topology (topo.json)")->required();
  sub->add_option("-o,--output", options->output, "Write the plan here instead of standard output");
  sub->add_option("-m,--micro-batches", options->micro_batches, "Micro-batches per iteration (overrides the model's)")
      ->check(CLI::Range(1, kMaxMicroBatches));
  std::string planners;
  for (const auto& name : planners::planner_names()) planners += (planners.empty() ? "" : ", ") + name;
  sub->add_option("-p,--planner", options->planner, "Planner: " + planners + " (default spp)")
      ->check(CLI::IsMember(planners::planner_names()));
  sub->add_option("-s,--schedule", options->policy, "Re-schedule with list, 1f1b or gpipe")
      ->check(CLI::IsMember({"list", "1f1b", "gpipe"}));
  sub->add_option("--check", options->check,
                  "Compare with this existing plan instead of writing: exit 0 if identical, 6 if not");
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_plan(*options, context); };
  });
}

}  // namespace pipeplan::cli
