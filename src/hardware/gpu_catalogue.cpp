// The GPU catalogue: datasheet figures of datacenter GPUs. O(entries) lookups.

#include "pipeplan/hardware/gpu_catalogue.hpp"

#include <array>
#include <cctype>

namespace pipeplan::hardware {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Lower-case letters and digits only, without a leading vendor or product-line word.
std::string normalise(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0) out += static_cast<char>(std::tolower(byte));
  }
  for (std::string_view prefix : {"nvidia", "tesla", "amd", "instinct"}) {
    if (out.size() > prefix.size() && out.compare(0, prefix.size(), prefix) == 0) {
      out.erase(0, prefix.size());
    }
  }
  return out;
}

// Dense (no structured sparsity) peaks. Memory: the datasheet's "GB" of HBM, which is built of
// binary-sized stacks, read as GiB, except where the datasheet gives the usable size.
std::vector<GpuType> make_catalogue() {
  const std::string kA100Source =
      "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
      "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (SXM)";
  return {
      {.name = "V100-32GB",
       .aliases = {"V100", "V100-SXM2", "V100-SXM2-32GB"},
       .memory_bytes = 32 * kGiB,
       .memory_bandwidth_bytes_per_s = 900e9,
       .fp32_tflops = 15.7,
       .tf32_tflops = 0,
       .bf16_tflops = 0,
       .fp16_tflops = 125,
       .fp8_tflops = 0,
       .source = "https://images.nvidia.com/content/technologies/volta/pdf/"
                 "volta-v100-datasheet-update-us-1165301-r5.pdf (SXM2)"},
      {.name = "A100-40GB",
       .aliases = {"A100-SXM4-40GB"},
       .memory_bytes = 40 * kGiB,
       .memory_bandwidth_bytes_per_s = 1555e9,
       .fp32_tflops = 19.5,
       .tf32_tflops = 156,
       .bf16_tflops = 312,
       .fp16_tflops = 312,
       .fp8_tflops = 0,
       .source = kA100Source},
      {.name = "A100-80GB",
       .aliases = {"A100", "A100-SXM4-80GB"},
       .memory_bytes = 80 * kGiB,
       .memory_bandwidth_bytes_per_s = 2039e9,
       .fp32_tflops = 19.5,
       .tf32_tflops = 156,
       .bf16_tflops = 312,
       .fp16_tflops = 312,
       .fp8_tflops = 0,
       .source = kA100Source},
      {.name = "H100-SXM",
       .aliases = {"H100", "H100-SXM5", "H100-SXM5-80GB", "H100-80GB"},
       .memory_bytes = 80 * kGiB,
       .memory_bandwidth_bytes_per_s = 3.35e12,
       .fp32_tflops = 67,
       .tf32_tflops = 494.7,
       .bf16_tflops = 989.4,
       .fp16_tflops = 989.4,
       .fp8_tflops = 1978.9,
       .source =
           "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (H100 "
           "SXM; the datasheet's tensor figures are with sparsity, halved here)"},
      {.name = "H200",
       .aliases = {"H200-SXM", "H200-141GB"},
       .memory_bytes = 141 * kGiB,
       .memory_bandwidth_bytes_per_s = 4.8e12,
       .fp32_tflops = 67,
       .tf32_tflops = 494.7,
       .bf16_tflops = 989.4,
       .fp16_tflops = 989.4,
       .fp8_tflops = 1978.9,
       .source =
           "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM; sparse figures halved)"},
      {.name = "GH200",
       .aliases = {"GH200-96GB"},
       .memory_bytes = 96 * kGiB,
       .memory_bandwidth_bytes_per_s = 4.0e12,
       .fp32_tflops = 67,
       .tf32_tflops = 494.7,
       .bf16_tflops = 989.4,
       .fp16_tflops = 989.4,
       .fp8_tflops = 1978.9,
       .source =
           "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip (GH200 with 96 "
           "GB HBM3; sparse figures halved)"},
      {.name = "B200",
       .aliases = {"B200-SXM", "B200-180GB"},
       .memory_bytes = 180 * kGiB,
       .memory_bandwidth_bytes_per_s = 8.0e12,
       .fp32_tflops = 75,
       .tf32_tflops = 1100,
       .bf16_tflops = 2250,
       .fp16_tflops = 2250,
       .fp8_tflops = 4500,
       .source =
           "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, per GPU: the 8-GPU figures "
           "divided by 8, sparse figures halved; 1,440 GB over 8 GPUs)"},
      {.name = "MI300X",
       .aliases = {"MI300X-192GB"},
       .memory_bytes = 192 * kGiB,
       .memory_bandwidth_bytes_per_s = 5.3e12,
       .fp32_tflops = 163.4,
       .tf32_tflops = 653.7,
       .bf16_tflops = 1307.4,
       .fp16_tflops = 1307.4,
       .fp8_tflops = 2614.9,
       .source = "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/"
                 "amd-instinct-mi300x-data-sheet.pdf (dense peaks)"},
  };
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return "fp32";
    case DType::kTf32:
      return "tf32";
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kFp8:
      return "fp8";
  }
  return "fp32";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType dtype : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16, DType::kFp8}) {
    if (dtype_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

double activation_value_bytes(DType dtype) {
  return dtype == DType::kFp32 || dtype == DType::kTf32 ? 4 : 2;
}

const std::vector<GpuType>& gpu_catalogue() {
  static const std::vector<GpuType> catalogue = make_catalogue();
  return catalogue;
}

const GpuType* find_gpu(std::string_view name) {
  const std::string wanted = normalise(name);
  if (wanted.empty()) return nullptr;
  for (const GpuType& gpu : gpu_catalogue()) {
    if (normalise(gpu.name) == wanted) return &gpu;
    for (const std::string& alias : gpu.aliases) {
      if (normalise(alias) == wanted) return &gpu;
    }
  }
  return nullptr;
}

std::string catalogue_names() {
  std::string out;
  for (const GpuType& gpu : gpu_catalogue()) {
    if (!out.empty()) out += ", ";
    out += gpu.name;
  }
  return out;
}

double peak_flops_per_s(const GpuType& gpu, DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return gpu.fp32_tflops * 1e12;
    case DType::kTf32:
      return gpu.tf32_tflops * 1e12;
    case DType::kBf16:
      return gpu.bf16_tflops * 1e12;
    case DType::kFp16:
      return gpu.fp16_tflops * 1e12;
    case DType::kFp8:
      return gpu.fp8_tflops * 1e12;
  }
  return 0;
}

double training_peak_flops_per_s(const GpuType& gpu) {
  return (gpu.bf16_tflops > 0 ? gpu.bf16_tflops : gpu.fp16_tflops) * 1e12;
}

}  // namespace pipeplan::hardware
