// The GPU catalogue's table and JSON (`pipeplan model gpus`), the node catalogue's (`pipeplan
// topology types`) and a cluster of catalogue nodes (`pipeplan topology cluster`). All linear
// in the entries.

#include "pipeplan/report/catalogue.hpp"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {
namespace {

// A peak in TFLOP/s to one decimal, `-` for an unsupported format (0).
std::string tflops(double value) {
  if (value <= 0) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

// One table row of the GPU catalogue: the name left-aligned, the figures right-aligned.
std::string table_row(const std::vector<std::string>& cells) {
  char cell[64];
  std::snprintf(cell, sizeof cell, "%-10s", cells.front().c_str());
  std::string row = cell;
  const int widths[] = {10, 12, 8, 8, 8, 8, 8, 10, 9};
  for (std::size_t c = 1; c < cells.size(); ++c) {
    std::snprintf(cell, sizeof cell, " %*s", widths[c - 1], cells[c].c_str());
    row += cell;
  }
  return row + "\n";
}

// The shortest decimal without an exponent that reads back to `value` (`369`, `0.82`, `10`),
// so that a quantity written
// as `"<value> GB/s"` reads to the catalogue's number.
std::string shortest(double value) {
  char buffer[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value &&
        std::string_view(buffer).find('e') == std::string_view::npos) {
      break;
    }
  }
  return buffer;
}

std::string node_row(const std::string& name, const std::string& gpus, const std::string& gpu,
                     const std::string& memory, const std::string& nvlink,
                     const std::string& nvlink_latency, const std::string& nic,
                     const std::string& nic_latency) {
  char row[256];
  std::snprintf(row, sizeof row, "%-17s %4s %-9s %7s %-24s %7s %-22s %7s\n", name.c_str(),
                gpus.c_str(), gpu.c_str(), memory.c_str(), nvlink.c_str(), nvlink_latency.c_str(),
                nic.c_str(), nic_latency.c_str());
  std::string text = row;
  // Trailing blanks of the last column's padding are noise in a terminal.
  while (text.size() > 1 && text[text.size() - 2] == ' ') text.erase(text.size() - 2, 1);
  return text;
}

std::string achievable(const hardware::LinkFigures& figures) {
  return shortest(figures.achievable_gb_per_s()) + " = " + shortest(figures.datasheet_gb_per_s) +
         " x " + shortest(figures.efficiency);
}

nlohmann::ordered_json link_json(const hardware::LinkFigures& figures) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["achievable_gb_per_s"] = io::json_number(figures.achievable_gb_per_s());
  out["datasheet_gb_per_s"] = io::json_number(figures.datasheet_gb_per_s);
  out["efficiency"] = io::json_number(figures.efficiency);
  out["latency_us"] = io::json_number(figures.latency_us);
  out["datasheet"] = figures.datasheet;
  out["datasheet_source"] = figures.datasheet_source;
  out["efficiency_source"] = figures.efficiency_source;
  out["latency_source"] = figures.latency_source;
  return out;
}

}  // namespace

std::string gpu_catalogue_table(const std::vector<hardware::GpuType>& gpus) {
  std::string out = table_row({"gpu", "memory", "bandwidth", "fp32", "tf32", "bf16", "fp16", "fp8",
                               "bf16 meas", "fp8 meas"});
  for (const hardware::GpuType& gpu : gpus) {
    out +=
        table_row({gpu.name, io::format_bytes(gpu.memory_bytes),
                   io::format_bandwidth(gpu.memory_bandwidth_bytes_per_s), tflops(gpu.fp32_tflops),
                   tflops(gpu.tf32_tflops), tflops(gpu.bf16_tflops), tflops(gpu.fp16_tflops),
                   tflops(gpu.fp8_tflops), tflops(gpu.measured_bf16_matmul_tflops),
                   tflops(gpu.measured_fp8_matmul_tflops)});
  }
  out +=
      "Dense peak TFLOP/s per number format (- where unsupported); meas: the largest matrix "
      "multiply measured (- where none is published), which caps model transformer's GEMMs; "
      "sources: model gpus --json.\n";
  return out;
}

std::string gpu_catalogue_json(const std::vector<hardware::GpuType>& gpus) {
  std::vector<nlohmann::ordered_json> entries;
  for (const hardware::GpuType& gpu : gpus) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["name"] = gpu.name;
    std::vector<nlohmann::ordered_json> aliases(gpu.aliases.begin(), gpu.aliases.end());
    entry["aliases"] = io::json_array(std::move(aliases));
    entry["memory_bytes"] = io::json_number(gpu.memory_bytes);
    entry["memory_bandwidth_bytes_per_s"] = io::json_number(gpu.memory_bandwidth_bytes_per_s);
    nlohmann::ordered_json peaks = nlohmann::ordered_json::object();
    peaks["fp32"] = io::json_number(gpu.fp32_tflops);
    peaks["tf32"] = io::json_number(gpu.tf32_tflops);
    peaks["bf16"] = io::json_number(gpu.bf16_tflops);
    peaks["fp16"] = io::json_number(gpu.fp16_tflops);
    peaks["fp8"] = io::json_number(gpu.fp8_tflops);
    entry["dense_tflops"] = peaks;
    entry["source"] = gpu.source;
    if (!gpu.measured_matmul_source.empty()) {
      nlohmann::ordered_json measured = nlohmann::ordered_json::object();
      measured["bf16"] = io::json_number(gpu.measured_bf16_matmul_tflops);
      measured["fp8"] = io::json_number(gpu.measured_fp8_matmul_tflops);
      entry["measured_matmul_tflops"] = measured;
      entry["measured_matmul_source"] = gpu.measured_matmul_source;
      // What `model transformer` caps the GEMMs at, per format (the measured fraction).
      nlohmann::ordered_json ceiling = nlohmann::ordered_json::object();
      for (const hardware::DType dtype :
           {hardware::DType::kBf16, hardware::DType::kFp16, hardware::DType::kFp8}) {
        if (const auto fraction = hardware::measured_matmul_fraction(gpu, dtype)) {
          ceiling[std::string(hardware::dtype_name(dtype))] = io::json_number(*fraction);
        }
      }
      entry["matmul_ceiling"] = ceiling;
    }
    entries.push_back(std::move(entry));
  }
  return io::dump_json(io::json_array(std::move(entries)));
}

std::string node_catalogue_table(const std::vector<hardware::NodeType>& types) {
  std::string out = node_row("node", "gpus", "gpu", "memory", "nvlink GB/s", "latency",
                             "nic GB/s per GPU", "latency");
  for (const hardware::NodeType& type : types) {
    out += node_row(type.name, std::to_string(type.gpus), type.gpu_type,
                    io::format_bytes(type.memory_bytes), achievable(type.nvlink),
                    shortest(type.nvlink.latency_us) + " us", achievable(type.nic),
                    shortest(type.nic.latency_us) + " us");
  }
  out +=
      "Achievable bandwidth per GPU and direction = datasheet x efficiency; a topology node "
      "may name a type (docs/topology.md).\nDatasheets:\n";
  std::set<std::string> efficiency_sources;
  std::set<std::string> latency_sources;
  for (const hardware::NodeType& type : types) {
    out += "  " + type.name + ": " + type.nvlink.datasheet + " (" + type.nvlink.datasheet_source +
           "); " + type.nic.datasheet + " (" + type.nic.datasheet_source + ")\n";
  }
  out += "Efficiencies:\n";
  for (const hardware::NodeType& type : types) {
    for (const hardware::LinkFigures* figures : {&type.nvlink, &type.nic}) {
      const std::string line =
          "  " + shortest(figures->efficiency) + ": " + figures->efficiency_source + "\n";
      if (efficiency_sources.insert(line).second) out += line;
    }
  }
  out += "Latencies:\n";
  for (const hardware::NodeType& type : types) {
    for (const hardware::LinkFigures* figures : {&type.nvlink, &type.nic}) {
      const std::string line = "  " + figures->latency_source + "\n";
      if (latency_sources.insert(line).second) out += line;
    }
  }
  return out;
}

std::string node_catalogue_json(const std::vector<hardware::NodeType>& types) {
  std::vector<nlohmann::ordered_json> entries;
  for (const hardware::NodeType& type : types) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["name"] = type.name;
    entry["description"] = type.description;
    entry["gpus"] = type.gpus;
    entry["gpu_type"] = type.gpu_type;
    entry["memory_bytes"] = io::json_number(type.memory_bytes);
    entry["nvlink"] = link_json(type.nvlink);
    entry["nic"] = link_json(type.nic);
    entries.push_back(std::move(entry));
  }
  return io::dump_json(io::json_array(std::move(entries)));
}

std::string cluster_topology_json(const hardware::NodeType& type, std::int64_t nodes) {
  nlohmann::ordered_json topology = nlohmann::ordered_json::object();
  topology["schema"] = topology::kTopologySchema;
  topology["name"] = std::to_string(nodes) + "x " + type.name;
  nlohmann::ordered_json node = nlohmann::ordered_json::object();
  node["name"] = "node";
  node["count"] = nodes;
  node["type"] = type.name;
  topology["nodes"] = io::json_array({node});
  nlohmann::ordered_json network = nlohmann::ordered_json::object();
  network["bandwidth"] = shortest(type.nic.achievable_gb_per_s()) + " GB/s";
  network["latency"] = shortest(type.nic.latency_us) + " us";
  topology["network"] = network;
  return io::dump_json(topology);
}

}  // namespace pipeplan::report
