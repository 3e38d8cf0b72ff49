// `pipeplan plan MODEL TOPO [-o PLAN] [--micro-batches M | --global-batch N] [--planner NAME]
// [--schedule POLICY] [--trace FILE] [--report FILE] [--check PLAN]`.

#include <algorithm>
#include <chrono>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/planners/batch_size.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/planners/settings_choice.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/memory_view.hpp"
#include "pipeplan/report/plan_diff.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/report/summary.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::cli {
namespace {

struct PlanOptions {
  std::string model;
  std::string topology;
  std::optional<std::string> output;
  std::optional<int> micro_batches;
  std::optional<std::int64_t> global_batch;
  std::string planner{planners::planner_table().front().name};
  std::optional<std::string> policy;
  std::optional<std::string> check;
  std::optional<std::string> trace;
  std::optional<std::string> report;
  PlanningOptions planning;  // spec 8.4
};

// `--virtual-stages V` where spp would drop it (spec 9.5: it sets the stages per device of the
// fixed multi-stage policies and of the megatron planner): under `list` (its default, one stage
// per device) or `auto` (which chooses V). `compare` applies it to the rows that use it instead.
// (`zb-v` with another V than its two is the planners' refusal, planners::make_plan.)
void check_virtual_stages(const PlanOptions& options) {
  const int V = options.planning.virtual_stages.value_or(1);
  const std::string option = "--virtual-stages " + std::to_string(V);
  const std::string list(schedule::policy_name(schedule::Policy::kList));
  const bool own = options.policy.value_or(list) == list || options.policy == "auto";
  if (options.planner != "spp" || V == 1 || !own) return;
  std::vector<std::string> several;
  for (const schedule::PolicyRow& row : schedule::policy_table()) {
    if (row.fixed && row.device_stages == schedule::DeviceStages::kAny) {
      several.emplace_back(row.name);
    }
  }
  throw UsageError(option + ": spp's --schedule list keeps one stage per device and --schedule " +
                   "auto chooses the stages per device; give a schedule that runs " +
                   std::to_string(V) + " (--schedule " + io::format_choices(several) +
                   "), or --planner megatron");
}

// The option combinations `plan` refuses before reading any input: a planning option the
// planner would drop, `--schedule auto` with another planner than spp, and `--virtual-stages`
// where spp would drop it (usage errors).
void check_option_combinations(const PlanOptions& options) {
  check_planner_options(options.planning, options.planner);
  if (options.policy == "auto" && options.planner != "spp") {
    throw UsageError("--schedule auto: only the spp planner searches the schedules (the " +
                     options.planner + " planner takes one of " + schedule::policy_names_text() +
                     ")");
  }
  check_virtual_stages(options);
}

// The batch-size search's planning of one size: a size the planner refuses (Megatron-LM's
// equal shares per replica, planners::refusal) is one that did not plan, so the search goes on
// with the others.
template <typename RequestFor, typename Make>
auto skipping_refusals(const std::string& planner, RequestFor request_for, Make make) {
  return [planner, request_for, make](const model::Model& planned, int micro_batches) {
    if (auto why = planners::refusal(planner, request_for(planned, micro_batches))) {
      throw InfeasibleError(*why);
    }
    return make(planned, micro_batches);
  };
}

// `reading 1 ms, writing 2 ms; DP 3 ms (2 runs), ... summed over threads`. Reading and writing
// (making the plan's text as it is written) are wall time; the planner's phases are CPU time,
// timed on `clock` over all it tried (every micro-batch size, setting, degree, order and
// schedule), and may run on several threads at once (spp's candidates), so theirs are summed over
// threads and can add up to more than the total.
std::string phase_times(const planners::PhaseClock& clock, double reading_ms, double writing_ms) {
  std::string phases =
      "reading " + io::format_ms(reading_ms) + ", writing " + io::format_ms(writing_ms);
  std::string planner_phases;
  for (const planners::PhaseClock::Total& total : clock.totals()) {
    planner_phases += (planner_phases.empty() ? "" : ", ") + total.phase + " " +
                      io::format_ms(total.ms) + " (" + io::format_count(total.runs, "run", "runs") +
                      ")";
  }
  if (!planner_phases.empty()) phases += "; " + planner_phases + " summed over threads";
  return phases;
}

int run_plan(const PlanOptions& options, Context& context) {
  const auto started = std::chrono::steady_clock::now();
  check_option_combinations(options);
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
  const bool schedule_auto = options.policy == "auto";
  planners::PhaseClock clock;
  auto request_for = [&](const model::Model& planned, int micro_batches) {
    planners::Request request{planned, topology, micro_batches};
    apply_planning_options(options.planning, request);
    request.schedule_auto = schedule_auto;
    request.clock = &clock;
    return request;
  };
  auto make = [&](const model::Model& planned, int micro_batches) {
    return planners::make_plan(options.planner, request_for(planned, micro_batches), policy);
  };
  // The batch-size search ranks the sizes by Megatron-shaped estimates, under the schedule
  // the planner will use, and plans the most promising (planners::kBatchSizePlans, within
  // planners::kBatchSizeWork of micro-batches x GPUs).
  auto estimate = [&](const model::Model& planned, int micro_batches) {
    return planners::estimate_for_planner(
        options.planner, request_for(planned, micro_batches),
        policy.value_or(planners::default_policy(options.planner)));
  };
  const int micro_batches =
      options.global_batch ? 0 : micro_batch_count(options.micro_batches, model, options.model);
  const double reading_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  Plan plan;
  if (options.global_batch) {
    planners::GlobalBatchPlan chosen = planners::plan_global_batch(
        model, *options.global_batch, options.model,
        skipping_refusals(options.planner, request_for, make), estimate, topology.size());
    model = std::move(chosen.model);
    plan = std::move(chosen.plan);
  } else {
    plan = make(model, micro_batches);
    if (model.transformer) plan.micro_batch_size = model.transformer->micro_batch_size;
  }
  // The description as the plan was made for it (the flags spp chose): what plan.json's figures
  // and the summary are computed with.
  if (model.transformer) model = model::transformer_variant(model, planners::settings_of(plan));
  for (const std::string& note : plan.notes) context.log->debug("{}", note);
  for (const std::string& warning : plan.warnings) context.log->warn("{}", warning);
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  if (existing) {
    if (existing->text == report::plan_json_text(plan, model, topology)) {
      context.say(*options.check + ": up to date");
      return 0;
    }
    context.err << io::printable_line(
                       "pipeplan: " + *options.check + " differs: " +
                       report::plan_difference(existing->text,
                                               report::plan_to_json(plan, model, topology)))
                << '\n';
    return static_cast<int>(ExitCode::kCheckDiffers);
  }
  // Every text but the plan's is made before anything is written; the plan's, which can be
  // hundreds of MB, is made as it is written (into a temporary file, renamed only once whole).
  std::string trace, html;
  if (options.trace || options.report) {
    const report::PlanView view = report::make_view(plan, model, topology, options.model);
    if (options.trace) trace = report::export_plan(view, report::ExportFormat::kChromeTrace);
    if (options.report) html = report::export_plan(view, report::ExportFormat::kHtml);
  }
  // All or nothing: the plan, the trace and the report are written together.
  context.emit("-o", [&](const io::TextSink& sink) {
    report::write_plan_json(plan, model, topology, sink);
  });
  if (options.trace) context.emit("--trace", std::move(trace));
  if (options.report) context.emit("--report", std::move(html));
  context.commit();
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  const std::string phases = phase_times(clock, reading_ms, total_ms - elapsed_ms);
  // The memory breakdown for models with a framework reserve (described transformers): a
  // profile's summary stays as it was (docs/memory.md); `simulate` prints it for every plan.
  const std::string memory =
      model.reserve_bytes > 0 ? "\n" + report::memory_summary(plan, model, topology) : "";
  context.say(report::plan_summary(plan, model, topology) + memory + "\n  planned in " +
              io::format_ms(total_ms) + " (" + phases + ")");
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
      ->transform(decimal_integer(1, model::kMaxMicroBatches));
  sub->add_option("--global-batch", options->global_batch,
                  "Sequences per iteration: M = N / micro-batch size (a transformer description "
                  "tries every size that divides N and keeps the fastest)")
      ->transform(decimal_integer(1, planners::kMaxGlobalBatch))
      ->excludes("--micro-batches");
  sub->add_option(
         "-p,--planner", options->planner,
         "Planner: " + planners::planner_names_text() + " (default " + options->planner + ")")
      ->check(CLI::IsMember(planners::planner_names()));
  sub->footer([] { return planners_help(false) + "\n" + schedules_help(); });
  std::vector<std::string> schedules = schedule::policy_names();
  schedules.emplace_back("auto");
  sub->add_option("-s,--schedule", options->policy,
                  "Re-schedule with " + schedule::policy_names_text() +
                      ", or auto (spp: the fastest per candidate)")
      ->check(CLI::IsMember(schedules));
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
