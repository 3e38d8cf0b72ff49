// `pipeplan export PLAN --format chrome-trace|svg|html|ranks|torch-split|torch-schedule|megatron|
// deepspeed [-o FILE] [--model MODEL --topology TOPO]`: timeline views and launcher and framework
// formats of a plan.
//
// With the model and topology, the plan is first checked in full (simulate::check_plan), so an
// export never shows an invalid plan; without them, the plan file is read on its own
// (report::read_plan_view), which suffices for the timeline views and torch-schedule. ranks,
// torch-split, megatron and deepspeed need the layer names (and the batch size and hosts), so they
// need the model (and with it the topology, to check the plan).

#include "pipeplan/report/export.hpp"

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/report/plan_model.hpp"
#include "pipeplan/simulate/check.hpp"

namespace pipeplan::cli {
namespace {

struct ExportOptions {
  std::string plan;
  std::string format;
  std::optional<std::string> output;
  std::optional<std::string> model;
  std::optional<std::string> topology;
};

int run_export(const ExportOptions& options, Context& context) {
  const auto format = report::parse_export_format(options.format);
  if (!format) throw UsageError("unknown export format \"" + options.format + "\"");
  if (options.model.has_value() != options.topology.has_value()) {
    throw UsageError(
        "--model and --topology go together: give both to check the plan against them, or neither");
  }
  if (report::export_needs_model(*format) && !options.model) {
    throw UsageError("--format " + options.format +
                     " needs --model and --topology (the layer names come from the model)");
  }
  context.declare(
      {{"PLAN", options.plan}, {"--model", options.model}, {"--topology", options.topology}},
      {{"-o", options.output}});
  report::PlanView view;
  if (options.model) {
    model::Model model = model::read_model(context.read("--model"));
    const topology::Topology topology =
        topology::read_topology(context.read("--topology"), model.profile_device);
    const io::Source plan_source = context.read("PLAN");
    model = report::model_for_plan(std::move(model), plan_source);
    const Plan plan =
        simulate::check_plan(report::read_plan(plan_source, topology), model, topology);
    view = report::make_view(plan, model, topology, *options.model);
    view.plan_file = plan_source.name;
  } else {
    view = report::read_plan_view(context.read("PLAN"));
  }
  const std::string text = report::export_plan(view, *format);
  context.emit("-o", text);
  context.commit();
  if (options.output && *options.output != "-") {
    context.say(options.plan + ": " + options.format + " written to " + *options.output);
  }
  // What a CSV cannot say (torch-schedule: the torch release and class that read it).
  for (const std::string& note : report::export_notes(view, *format)) context.say(note);
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* sub = app.add_subcommand(
      "export", "Export a plan as a timeline view, for a launcher or for a training framework");
  sub->add_option("PLAN", options->plan, "Plan to export (plan.json, - for standard input)")
      ->required();
  sub->add_option(
         "-f,--format", options->format,
         "chrome-trace (Perfetto, chrome://tracing), svg (Gantt chart), html (report), ranks "
         "(per-rank operations for a launcher), torch-split and torch-schedule "
         "(torch.distributed.pipelining split points and schedule CSV), megatron (Megatron-LM "
         "arguments) or deepspeed (PipelineModule parts)")
      ->required()
      ->check(CLI::IsMember(report::export_format_names()));
  sub->add_option("-o,--output", options->output, "Write here instead of standard output")
      ->check(output_path, "FILE");
  sub->add_option(
      "--model", options->model,
      "Model the plan was made for: check the plan first; needed for ranks, torch-split, "
      "megatron and deepspeed");
  sub->add_option("--topology", options->topology, "Topology the plan was made for (with --model)");
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_export(*options, context); };
  });
}

}  // namespace pipeplan::cli
