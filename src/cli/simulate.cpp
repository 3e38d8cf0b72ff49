// `pipeplan simulate PLAN MODEL TOPO [--json]`: replay a plan, check it, print its figures.

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/memory_view.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/report/plan_model.hpp"
#include "pipeplan/report/summary.hpp"
#include "pipeplan/simulate/check.hpp"

namespace pipeplan::cli {
namespace {

struct SimulateOptions {
  std::string plan;
  std::string model;
  std::string topology;
  bool json = false;
};

int run_simulate(const SimulateOptions& options, Context& context) {
  context.declare({{"PLAN", options.plan}, {"MODEL", options.model}, {"TOPO", options.topology}},
                  {{"--json", std::nullopt}});
  model::Model model = model::read_model(context.read("MODEL"));
  topology::Topology topology = topology::read_topology(context.read("TOPO"), model.profile_device);
  const io::Source plan_source = context.read("PLAN");
  model = report::model_for_plan(std::move(model), plan_source);
  simulate::StatedPlan stated = report::read_plan(plan_source, topology);
  Plan plan = simulate::check_plan(stated, model, topology);
  if (options.json) {
    context.emit("--json", io::dump_json(report::simulation_figures(plan, topology)));
    context.commit();
  }
  context.say(options.plan + ": valid; " + report::plan_summary(plan, model, topology) + "\n" +
              report::gpu_summary(plan, topology) + "\n" +
              report::memory_summary(plan, model, topology));
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* sub =
      app.add_subcommand("simulate", "Replay a plan, check every rule, print its figures");
  sub->add_option("PLAN", options->plan, "Plan to check (plan.json, - for standard input)")
      ->required();
  sub->add_option("MODEL", options->model, "Model profile the plan was made for")->required();
  sub->add_option("TOPO", options->topology, "Topology the plan was made for")->required();
  sub->add_flag("--json", options->json, "Print the recomputed figures as JSON on standard output");
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_simulate(*options, context); };
  });
}

}  // namespace pipeplan::cli
