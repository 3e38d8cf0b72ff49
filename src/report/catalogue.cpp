// The GPU catalogue's table and JSON (`pipeplan model gpus`). Both linear in the entries.

#include "pipeplan/report/catalogue.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"

namespace pipeplan::report {
namespace {

// A peak in TFLOP/s to one decimal, `-` for an unsupported format (0).
std::string tflops(double value) {
  if (value <= 0) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

// One table row: the name left-aligned, the eight figures right-aligned.
std::string table_row(const std::string& name, const std::string& memory,
                      const std::string& bandwidth, const std::string& fp32,
                      const std::string& tf32, const std::string& bf16, const std::string& fp16,
                      const std::string& fp8) {
  char row[160];
  std::snprintf(row, sizeof row, "%-10s %10s %12s %8s %8s %8s %8s %8s\n", name.c_str(),
                memory.c_str(), bandwidth.c_str(), fp32.c_str(), tf32.c_str(), bf16.c_str(),
                fp16.c_str(), fp8.c_str());
  return row;
}

}  // namespace

std::string gpu_catalogue_table(const std::vector<hardware::GpuType>& gpus) {
  std::string out = table_row("gpu", "memory", "bandwidth", "fp32", "tf32", "bf16", "fp16", "fp8");
  for (const hardware::GpuType& gpu : gpus) {
    out += table_row(gpu.name, io::format_bytes(gpu.memory_bytes),
                     io::format_bandwidth(gpu.memory_bandwidth_bytes_per_s),
                     tflops(gpu.fp32_tflops), tflops(gpu.tf32_tflops), tflops(gpu.bf16_tflops),
                     tflops(gpu.fp16_tflops), tflops(gpu.fp8_tflops));
  }
  out +=
      "Dense peak TFLOP/s per number format (- where unsupported); sources: model gpus "
      "--json.\n";
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
    entries.push_back(std::move(entry));
  }
  return io::dump_json(io::json_array(std::move(entries)));
}

}  // namespace pipeplan::report
