// Summaries of models and topologies for standard error (`validate`, `import pipedream`,
// `model transformer`). Each is linear in the layers, the topology's in the GPU pairs.

#include "pipeplan/report/input_summary.hpp"

#include <algorithm>
#include <limits>

#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/model/kernel_counts.hpp"

namespace pipeplan::report {
namespace {

// A model's per-micro-batch work and sizes, summed (or, for the cut, the largest) over layers.
struct Totals {
  double forward_ms = 0;
  double backward_ms = 0;
  double parameter_bytes = 0;
  double largest_cut_bytes = 0;
};

Totals totals(const model::Model& model) {
  Totals sum;
  for (const model::Layer& layer : model.layers) {
    sum.forward_ms += layer.forward_ms;
    sum.backward_ms += layer.backward_ms;
    sum.parameter_bytes += layer.parameter_bytes;
    sum.largest_cut_bytes = std::max(sum.largest_cut_bytes, layer.activation_bytes);
  }
  return sum;
}

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
            std::to_string(split_layers) + " of " +
            io::format_count(static_cast<std::int64_t>(model.layers.size()), "layer", "layers");
  }
  if (update_ms > 0) line += ", optimizer step " + io::format_ms(update_ms);
  if (model.input_bytes > 0) line += ", input " + io::format_bytes(model.input_bytes);
  line += ", sharded memory factor " + io::format_number(model::sharded_factor(model));
  if (!model.sharded_memory_factor) line += " (default)";
  return line;
}

// For a model generated from a description, what it sets otherwise than Calculon's tables and
// the description's old defaults: `, no dropout, per-operator recomputation, bf16 gradients, GEMMs
// at most 70.9% of the fp8 peak, attention in bf16`.
std::string description_settings_summary(const model::TransformerConfig& config) {
  std::string line = config.dropout ? "" : ", no dropout";
  if (config.per_op_recompute) line += ", per-operator recomputation";
  if (config.cross_entropy == model::CrossEntropy::kTorchFp32)
    line += ", torch's fp32 cross-entropy";
  if (config.gradient_dtype != hardware::DType::kFp32) line += ", bf16 gradients";
  if (config.optimizer_dtype != hardware::DType::kFp32) line += ", bf16 optimizer state";
  if (config.matmul_ceiling < 1) {
    line += ", GEMMs at most " + io::format_number(100 * config.matmul_ceiling, 3) + "% of the " +
            std::string(hardware::dtype_name(config.dtype)) + " peak";
  }
  if (config.attention_dtype) {
    line += ", attention in " + std::string(hardware::dtype_name(*config.attention_dtype));
  }
  return line;
}

// For a model generated from a description, its fixed time (docs/transformer-model.md, "Fixed
// time per kernel"): `, kernel floor 4,350 kernels x 10 us = 43.5 ms per micro-batch (16.5 ms
// forward, 27 ms backward), above the FLOP and byte time on 0 of 98 layers at degree 1 and 0
// at degree 8`.
std::string kernel_floor_summary(const model::Model& model) {
  if (!model.transformer) return "";
  const model::TransformerConfig& config = *model.transformer;
  if (config.kernel_overhead_us <= 0) return ", no kernel floor (kernel_overhead_us 0)";
  const model::KernelFloorSummary floor = model::kernel_floor_summary(config);
  std::string line = ", kernel floor " + io::format_count(floor.kernels, "kernel", "kernels") +
                     " x " + io::format_number(config.kernel_overhead_us) +
                     " us = " + io::format_ms(floor.forward_ms + floor.backward_ms) +
                     " per micro-batch (" + io::format_ms(floor.forward_ms) + " forward, " +
                     io::format_ms(floor.backward_ms) + " backward), above the FLOP and byte " +
                     "time on " + std::to_string(floor.bound_at_one) + " of " +
                     io::format_count(floor.layers, "layer", "layers") + " at degree 1";
  if (floor.largest_degree > 1) {
    line += " and " + std::to_string(floor.bound_at_largest) + " at degree " +
            std::to_string(floor.largest_degree);
  }
  return line;
}

// The pair bandwidths' range, `, pair bandwidth 12.5 GB/s to 25 GB/s`; nothing for one GPU.
// O(N^2) over the pairs; O(N) for a node-cost topology, whose pairs take only the network's
// bandwidth (two nodes or more) and those of its nodes of two GPUs or more.
std::string bandwidth_range(const topology::Topology& topology) {
  const int n = topology.size();
  if (n <= 1) return "";
  double slowest = std::numeric_limits<double>::infinity(), fastest = 0;
  auto count = [&](double bandwidth) {
    slowest = std::min(slowest, bandwidth);
    fastest = std::max(fastest, bandwidth);
  };
  if (topology.costs_by_node()) {
    std::vector<int> gpus_of_node(static_cast<std::size_t>(topology.node_count()), 0);
    for (int g = 0; g < n; ++g) ++gpus_of_node[static_cast<std::size_t>(topology.node_of(g))];
    if (topology.node_count() >= 2) count(topology.network_cost().bandwidth_bytes_per_s);
    for (int k = 0; k < topology.node_count(); ++k) {
      if (gpus_of_node[static_cast<std::size_t>(k)] >= 2)
        count(topology.node_cost(k).bandwidth_bytes_per_s);
    }
    return ", pair bandwidth " +
           range(io::format_bandwidth(slowest), io::format_bandwidth(fastest));
  }
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) {
      const double bandwidth = topology.bandwidth_bytes_per_s(u, v);
      slowest = std::min(slowest, bandwidth);
      fastest = std::max(fastest, bandwidth);
    }
  }
  return ", pair bandwidth " + range(io::format_bandwidth(slowest), io::format_bandwidth(fastest));
}

}  // namespace

std::string model_summary(const std::string& file, const model::Model& model) {
  const Totals sum = totals(model);
  std::string line =
      file + ": model" + quoted_name(model.name) + ", " +
      io::format_count(static_cast<std::int64_t>(model.layers.size()), "layer", "layers") +
      ", forward " + io::format_ms(sum.forward_ms) + " and backward " +
      io::format_ms(sum.backward_ms) + " per micro-batch, " +
      io::format_bytes(sum.parameter_bytes) + " of parameters";
  if (model.micro_batches) {
    line += ", " + io::format_count(*model.micro_batches, "micro-batch", "micro-batches");
  }
  if (model::uses_v2_fields(model)) line += v2_summary(model);
  line += kernel_floor_summary(model);
  return model.transformer ? line + description_settings_summary(*model.transformer) : line;
}

std::string topology_summary(const std::string& file, const topology::Topology& topology) {
  std::string line = file + ": topology" + quoted_name(topology.name()) + ", " +
                     io::format_count(topology.size(), "GPU", "GPUs") + " on " +
                     io::format_count(topology.node_count(), "node", "nodes") +
                     bandwidth_range(topology);
  double slow = std::numeric_limits<double>::infinity(), fast = 0;
  double least = std::numeric_limits<double>::infinity(), most = 0;
  bool any_unlimited = false, any_limited = false;
  for (const topology::Gpu& gpu : topology.gpus()) {
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
  if (!any_limited) return line + "unlimited";
  return line + range(io::format_bytes(least),
                      any_unlimited ? std::string("unlimited") : io::format_bytes(most));
}

std::string transformer_summary(const model::Model& model, const model::TransformerConfig& config) {
  const Totals sum = totals(model);
  std::string degrees;
  for (int t : config.degrees) degrees += (degrees.empty() ? "" : ", ") + std::to_string(t);
  return "model \"" + model.name + "\": " + std::to_string(config.layers) + " decoder layers, " +
         io::format_bytes(sum.parameter_bytes) + " of " +
         std::string(hardware::dtype_name(config.dtype)) + " weights, forward " +
         io::format_ms(sum.forward_ms) + " and backward " + io::format_ms(sum.backward_ms) +
         " per micro-batch of " + std::to_string(config.micro_batch_size) + " on one " +
         config.gpu + ", tensor-parallel degrees " + degrees + description_settings_summary(config);
}

std::string import_summary(const std::string& file, const model::Model& model,
                           std::int64_t batch_size, std::optional<std::int64_t> micro_batches) {
  const Totals sum = totals(model);
  std::string line = file + ": imported " + std::to_string(model.layers.size()) + " layers";
  if (!model.name.empty()) line += " as model \"" + model.name + "\"";
  line += ", forward " + io::format_ms(sum.forward_ms) + " and backward " +
          io::format_ms(sum.backward_ms) + " per micro-batch of " + std::to_string(batch_size) +
          ", " + io::format_bytes(sum.parameter_bytes) + " of parameters, largest cut " +
          io::format_bytes(sum.largest_cut_bytes);
  if (micro_batches) line += ", " + std::to_string(*micro_batches) + " micro-batches";
  return line;
}

}  // namespace pipeplan::report
