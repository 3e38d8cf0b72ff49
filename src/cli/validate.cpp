// `pipeplan validate MODEL [TOPO]`: check inputs and summarise them.

#include <algorithm>
#include <limits>

#include "commands.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::cli {
namespace {

struct ValidateOptions {
  std::string model;
  std::string topology;
};

std::string quoted_name(const std::string& name) { return name.empty() ? "" : " \"" + name + "\""; }

int run_validate(const ValidateOptions& options, Context& context) {
  using report::format_bandwidth;
  using report::format_bytes;
  using report::format_ms;
  model::Model model = model::read_model(context.read(options.model));
  double forward_ms = 0, backward_ms = 0, parameter_bytes = 0;
  for (const auto& layer : model.layers) {
    forward_ms += layer.forward_ms;
    backward_ms += layer.backward_ms;
    parameter_bytes += layer.parameter_bytes;
  }
  std::string line = options.model + ": model" + quoted_name(model.name) + ", " +
                     std::to_string(model.layers.size()) + " layers, forward " +
                     format_ms(forward_ms) + " and backward " + format_ms(backward_ms) +
                     " per micro-batch, " + format_bytes(parameter_bytes) + " of parameters";
  if (model.micro_batches) line += ", " + std::to_string(*model.micro_batches) + " micro-batches";
  context.say(line);

  if (!options.topology.empty()) {
    topology::Topology topo = topology::read_topology(context.read(options.topology));
    double slowest = std::numeric_limits<double>::infinity(), fastest = 0;
    for (int u = 0; u < topo.size(); ++u) {
      for (int v = u + 1; v < topo.size(); ++v) {
        double bandwidth = topo.bandwidth_bytes_per_s(u, v);
        slowest = std::min(slowest, bandwidth);
        fastest = std::max(fastest, bandwidth);
      }
    }
    std::string summary = options.topology + ": topology" + quoted_name(topo.name()) + ", " +
                          std::to_string(topo.size()) + " GPUs on " +
                          std::to_string(topo.node_count()) + " nodes";
    if (topo.size() > 1) {
      summary += ", pair bandwidth " + format_bandwidth(slowest) + " to " + format_bandwidth(fastest);
    }
    context.say(summary);
  }
  return 0;
}

}  // namespace

void add_validate_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand("validate", "Check a model (and a topology) and summarise them");
  sub->add_option("MODEL", options->model, "Model profile (model.json, - for standard input)")
      ->required();
  sub->add_option("TOPO", options->topology, "Cluster topology (topo.json)");
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_validate(*options, context); };
  });
}

}  // namespace pipeplan::cli
