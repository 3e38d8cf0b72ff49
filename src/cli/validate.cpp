// `pipeplan validate MODEL [TOPO]`: check inputs and summarise them on standard error.

#include "commands.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/report/input_summary.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::cli {
namespace {

struct ValidateOptions {
  std::string model;
  std::string topology;
};

int run_validate(const ValidateOptions& options, Context& context) {
  context.declare(
      {{"MODEL", options.model},
       {"TOPO",
        options.topology.empty() ? std::nullopt : std::optional<std::string>(options.topology)}},
      {});
  io::Source model_source = context.read("MODEL");
  model::Model model = model::read_model(model_source);
  context.say(report::model_summary(model_source.name, model));
  if (!options.topology.empty()) {
    io::Source topology_source = context.read("TOPO");
    topology::Topology topo = topology::read_topology(topology_source, model.profile_device);
    context.say(report::topology_summary(topology_source.name, topo));
  }
  return 0;
}

}  // namespace

void add_validate_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* sub =
      app.add_subcommand("validate", "Check a model (and a topology) and summarise them");
  sub->add_option("MODEL", options->model, "Model profile (model.json, - for standard input)")
      ->required();
  sub->add_option("TOPO", options->topology, "Cluster topology (topo.json, - for standard input)");
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_validate(*options, context); };
  });
}

}  // namespace pipeplan::cli
