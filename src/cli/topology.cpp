// `pipeplan topology cluster --type T --nodes N`: a topology of catalogue nodes; `pipeplan
// topology types`: the node catalogue.

#include "pipeplan/topology/topology.hpp"

#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/hardware/node_catalogue.hpp"
#include "pipeplan/report/catalogue.hpp"

namespace pipeplan::cli {
namespace {

struct ClusterOptions {
  std::string type;
  std::int64_t nodes = 1;
  std::string output;
};

int run_cluster(const ClusterOptions& options, Context& context) {
  const hardware::NodeType& type = *hardware::find_node_type(options.type);  // CLI11 checked it
  if (options.nodes * type.gpus > topology::kMaxNodeGpus) {
    throw UsageError("--nodes: " + std::to_string(options.nodes) + " nodes of " + type.name +
                     " make " + std::to_string(options.nodes * type.gpus) +
                     " GPUs; pipeplan handles at most " + std::to_string(topology::kMaxNodeGpus));
  }
  context.declare(
      {},
      {{"-o", options.output.empty() ? std::nullopt : std::optional<std::string>(options.output)}});
  context.emit("-o", report::cluster_topology_json(type, options.nodes));
  context.commit();  // written before the line that says so: a failed write says only that
  std::string line = "topology: " + std::to_string(options.nodes) + " x " + type.name + " (" +
                     std::to_string(options.nodes * type.gpus) + " " + type.gpu_type + ")";
  if (!options.output.empty() && options.output != "-") line += " -> " + options.output;
  context.say(line);
  return 0;
}

int run_types(bool json, Context& context) {
  context.declare({}, {{"standard output", std::nullopt}});
  const auto& catalogue = hardware::node_catalogue();
  context.emit("standard output", json ? report::node_catalogue_json(catalogue)
                                       : report::node_catalogue_table(catalogue));
  return 0;
}

}  // namespace

void add_topology_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("topology", "Write topologies of catalogue nodes");
  sub->require_subcommand(1);

  std::vector<std::string> names;
  for (const hardware::NodeType& type : hardware::node_catalogue()) names.push_back(type.name);
  auto options = std::make_shared<ClusterOptions>();
  CLI::App* cluster = sub->add_subcommand(
      "cluster", "A topology of identical catalogue nodes joined by their NICs (docs/topology.md)");
  cluster->add_option("--type", options->type, "Node type (see topology types)")
      ->required()
      ->check(CLI::IsMember(names));
  cluster->add_option("--nodes", options->nodes, "Number of nodes (default 1)")
      ->transform(decimal_integer(1, topology::kMaxNodeGpus));
  cluster
      ->add_option("-o,--output", options->output,
                   "Write topo.json here (atomically) instead of standard output")
      ->check(output_path, "FILE");
  cluster->callback([options, &action] {
    action = [options](Context& context) { return run_cluster(*options, context); };
  });

  auto json = std::make_shared<bool>(false);
  CLI::App* types = sub->add_subcommand("types", "List the node catalogue");
  types->add_flag("--json", *json, "Print the catalogue as JSON");
  types->callback(
      [json, &action] { action = [json](Context& context) { return run_types(*json, context); }; });
}

}  // namespace pipeplan::cli
