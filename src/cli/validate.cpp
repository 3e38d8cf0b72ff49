// `pipeplan validate MODEL [TOPO]`: check inputs and summarise them on standard error.

#include <algorithm>
#include <limits>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::cli {
namespace {

struct ValidateOptions {
  std::string model;
  std::string topology;
};

// ` "name"` (empty when there is none), whole, with control characters escaped.
std::string quoted_name(const std::string& name) {
  if (name.empty()) return "";
  std::string out = " \"";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      static const char* const kHex = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// "a" when both ends format alike, else "a to b".
std::string range(const std::string& low, const std::string& high) {
  return low == high ? low : low + " to " + high;
}

// The fields of spec 8.1, for a model that uses any: `, tensor-parallel up to degree 8 on 98 of
// 98 layers, optimizer step 12.5 ms, input 16 KiB, sharded memory factor 6`.
std::string v2_summary(const model::Model& model) {
  std::size_t split_layers = 0;
  int largest_degree = 1;
  double update_ms = 0;
  for (const model::Layer& layer : model.layers) {
    update_ms += layer.update_ms;
    if (!layer.tensor_parallel) continue;
    ++split_layers;
    largest_degree = std::max(largest_degree, layer.tensor_parallel->degrees.back());
  }
  std::string line;
  if (split_layers > 0) {
    line += ", tensor-parallel up to degree " + std::to_string(largest_degree) + " on " +
            std::to_string(split_layers) + " of " + std::to_string(model.layers.size()) +
            (model.layers.size() == 1 ? " layer" : " layers");
  }
  if (update_ms > 0) line += ", optimizer step " + io::format_ms(update_ms);
  if (model.input_bytes > 0) line += ", input " + io::format_bytes(model.input_bytes);
  line += ", sharded memory factor " + io::format_number(model::sharded_factor(model));
  if (!model.sharded_memory_factor) line += " (default)";
  return line;
}

// `model.json: model "bert-24", 24 layers, forward 45.6 ms and backward 91.2 ms per
// micro-batch, 1.2 GiB of parameters, 16 micro-batches`
std::string model_summary(const std::string& file, const model::Model& model) {
  double forward_ms = 0, backward_ms = 0, parameter_bytes = 0;
  for (const auto& layer : model.layers) {
    forward_ms += layer.forward_ms;
    backward_ms += layer.backward_ms;
    parameter_bytes += layer.parameter_bytes;
  }
  std::size_t layers = model.layers.size();
  std::string line = file + ": model" + quoted_name(model.name) + ", " + std::to_string(layers) +
                     (layers == 1 ? " layer" : " layers") + ", forward " +
                     io::format_ms(forward_ms) + " and backward " + io::format_ms(backward_ms) +
                     " per micro-batch, " + io::format_bytes(parameter_bytes) + " of parameters";
  if (model.micro_batches) {
    line += ", " + std::to_string(*model.micro_batches) +
            (*model.micro_batches == 1 ? " micro-batch" : " micro-batches");
  }
  if (model::uses_v2_fields(model)) line += v2_summary(model);
  return line;
}

// `topo.json: topology "2x DGX-1", 16 GPUs on 2 nodes, pair bandwidth 12.5 GB/s to 25 GB/s,
// speed 1, memory 32 GiB`
std::string topology_summary(const std::string& file, const topology::Topology& topo) {
  const int n = topo.size();
  std::string line = file + ": topology" + quoted_name(topo.name()) + ", " + std::to_string(n) +
                     (n == 1 ? " GPU" : " GPUs") + " on " + std::to_string(topo.node_count()) +
                     (topo.node_count() == 1 ? " node" : " nodes");
  if (n > 1) {
    double slowest = std::numeric_limits<double>::infinity(), fastest = 0;
    for (int u = 0; u < n; ++u) {
      for (int v = u + 1; v < n; ++v) {
        double bandwidth = topo.bandwidth_bytes_per_s(u, v);
        slowest = std::min(slowest, bandwidth);
        fastest = std::max(fastest, bandwidth);
      }
    }
    line +=
        ", pair bandwidth " + range(io::format_bandwidth(slowest), io::format_bandwidth(fastest));
  }
  double slow = std::numeric_limits<double>::infinity(), fast = 0;
  double least = std::numeric_limits<double>::infinity(), most = 0;
  bool any_unlimited = false, any_limited = false;
  for (const topology::Gpu& gpu : topo.gpus()) {
    slow = std::min(slow, gpu.speed);
    fast = std::max(fast, gpu.speed);
    if (gpu.memory_bytes) {
      any_limited = true;
      least = std::min(least, *gpu.memory_bytes);
      most = std::max(most, *gpu.memory_bytes);
    } else {
      any_unlimited = true;
    }
  }
  line += ", speed " + range(io::format_number(slow), io::format_number(fast));
  line += ", memory ";
  if (!any_limited) {
    line += "unlimited";
  } else {
    line += range(io::format_bytes(least),
                  any_unlimited ? std::string("unlimited") : io::format_bytes(most));
  }
  return line;
}

int run_validate(const ValidateOptions& options, Context& context) {
  context.declare(
      {{"MODEL", options.model},
       {"TOPO",
        options.topology.empty() ? std::nullopt : std::optional<std::string>(options.topology)}},
      {});
  io::Source model_source = context.read("MODEL");
  model::Model model = model::read_model(model_source);
  context.say(model_summary(model_source.name, model));
  if (!options.topology.empty()) {
    io::Source topology_source = context.read("TOPO");
    topology::Topology topo = topology::read_topology(topology_source, model.profile_device);
    context.say(topology_summary(topology_source.name, topo));
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
