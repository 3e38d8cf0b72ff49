// `pipeplan compare MODEL TOPO [--micro-batches M] [--format table|json|csv] [--no-timing]
// [-o FILE]`: every planner of the planner table under each policy its row lists, and its
// variants, scored by the same execution model (report::compare_planners), one row each.

#include "pipeplan/report/compare.hpp"

#include <chrono>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::cli {
namespace {

struct CompareOptions {
  std::string model;
  std::string topology;
  std::optional<std::string> output;
  std::optional<int> micro_batches;
  std::string format{report::comparison_format_names().front()};
  bool no_timing = false;
  PlanningOptions planning;  // spec 8.4
};

int run_compare(const CompareOptions& options, Context& context) {
  // compare's megatron rows are every configuration that uses every GPU (issue 35: the options
  // of one configuration were once accepted and ignored).
  for (const auto& [option, given] :
       {std::pair{"--pipeline-parallel", options.planning.pipeline_parallel.has_value()},
        std::pair{"--data-parallel", options.planning.data_parallel.has_value()},
        std::pair{"--first-stage-layers", options.planning.first_stage_layers.has_value()},
        std::pair{"--last-stage-layers", options.planning.last_stage_layers.has_value()},
        std::pair{"--account-for-embedding", options.planning.account_for_embedding},
        std::pair{"--account-for-loss", options.planning.account_for_loss}}) {
    if (given) {
      throw UsageError(std::string(option) +
                       ": compare runs every megatron configuration that uses every GPU; plan "
                       "one configuration with plan --planner megatron");
    }
  }
  context.declare({{"MODEL", options.model}, {"TOPO", options.topology}}, {{"-o", options.output}});
  model::Model model = model::read_model(context.read("MODEL"));
  topology::Topology topology = topology::read_topology(context.read("TOPO"), model.profile_device);
  const int micro_batches = micro_batch_count(options.micro_batches, model, options.model);

  planners::Request request{model, topology, micro_batches};
  apply_planning_options(options.planning, request);
  std::vector<report::CompareRow> rows =
      report::compare_planners(request, [&](const report::CompareRow& row) {
        context.log->debug("{} ({}): {}", row.label(), schedule::policy_name(row.policy),
                           row.plan ? io::format_ms(row.plan->timeline.iteration_ms) : row.error);
      });
  const report::Comparison comparison = report::score_comparison(std::move(rows), topology);

  const std::string text =
      report::comparison_text(comparison, options.format, !options.no_timing, topology);
  // Without any plan the run fails (exit 4): the rows still explain why on standard output,
  // but an output file is left as it was, like every failed run leaves its output.
  const bool to_file = options.output && *options.output != "-";
  const std::optional<std::string> summary = report::comparison_summary(comparison);
  if (summary || !to_file) {
    context.emit("-o", text);
    context.commit();
  }
  if (!summary) {
    const report::CompareRow& first = comparison.rows.front();
    throw InfeasibleError("no planner found a plan that fits; " + first.planner + ": " +
                          first.error);
  }
  context.say(*summary);
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Run every planner on MODEL and TOPO and compare their plans under the same execution model");
  sub->add_option("MODEL", options->model, "Model profile (model.json, - for standard input)")
      ->required();
  sub->add_option("TOPO", options->topology, "Cluster topology (topo.json)")->required();
  sub->add_option("-o,--output", options->output,
                  "Write the comparison here instead of standard output")
      ->check(output_path, "FILE");
  sub->add_option("-m,--micro-batches", options->micro_batches,
                  "Micro-batches per iteration (overrides the model's)")
      ->transform(decimal_integer(1, model::kMaxMicroBatches));
  const std::vector<std::string>& names = report::comparison_format_names();
  std::vector<std::string> described = names;
  described.front() += " (default)";
  sub->add_option("-f,--format", options->format, "Output format: " + io::format_choices(described))
      ->check(CLI::IsMember(names));
  sub->footer([] { return planners_help(true); });
  add_planning_options(*sub, options->planning);
  sub->add_flag(
      "--no-timing", options->no_timing,
      "Leave out the planning-time column, so that the output is byte-for-byte reproducible");
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_compare(*options, context); };
  });
}

}  // namespace pipeplan::cli
