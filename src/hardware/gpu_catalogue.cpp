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
  std::vector<GpuType> gpus;
  gpus.push_back({"V100-32GB", {"V100", "V100-SXM2", "V100-SXM2-32GB"}, 32 * kGiB, 900e9, 15.7, 0,
                  0, 125, 0,
                  "https://images.nvidia.com/content/technologies/volta/pdf/"
                  "volta-v100-datasheet-update-us-1165301-r5.pdf (SXM2)"});
  gpus.push_back({"A100-40GB", {"A100-SXM4-40GB"}, 40 * kGiB, 1555e9, 19.5, 156, 312, 312, 0,
                  "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                  "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (SXM)"});
  gpus.push_back({"A100-80GB", {"A100", "A100-SXM4-80GB"}, 80 * kGiB, 2039e9, 19.5, 156, 312, 312,
                  0,
                  "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                  "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (SXM)"});
  gpus.push_back({"H100-SXM", {"H100", "H100-SXM5", "H100-SXM5-80GB", "H100-80GB"}, 80 * kGiB,
                  3.35e12, 67, 494.7, 989.4, 989.4, 1978.9,
                  "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
                  " (H100 SXM; the datasheet's tensor figures are with sparsity, halved here)"});
  gpus.push_back({"H200", {"H200-SXM", "H200-141GB"}, 141 * kGiB, 4.8e12, 67, 494.7, 989.4, 989.4,
                  1978.9,
                  "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM; sparse figures "
                  "halved)"});
  gpus.push_back({"GH200", {"GH200-96GB"}, 96 * kGiB, 4.0e12, 67, 494.7, 989.4, 989.4, 1978.9,
                  "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip (GH200 "
                  "with 96 GB HBM3; sparse figures halved)"});
  gpus.push_back({"B200", {"B200-SXM", "B200-180GB"}, 180 * kGiB, 8.0e12, 75, 1100, 2250, 2250,
                  4500,
                  "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, per GPU: the 8-GPU "
                  "figures divided by 8, sparse figures halved; 1,440 GB over 8 GPUs)"});
  gpus.push_back({"MI300X", {"MI300X-192GB"}, 192 * kGiB, 5.3e12, 163.4, 653.7, 1307.4, 1307.4,
                  2614.9,
                  "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/"
                  "data-sheets/amd-instinct-mi300x-data-sheet.pdf (dense peaks)"});
  return gpus;
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp8: return "fp8";
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
    case DType::kFp32: return gpu.fp32_tflops * 1e12;
    case DType::kTf32: return gpu.tf32_tflops * 1e12;
    case DType::kBf16: return gpu.bf16_tflops * 1e12;
    case DType::kFp16: return gpu.fp16_tflops * 1e12;
    case DType::kFp8: return gpu.fp8_tflops * 1e12;
  }
  return 0;
}

double training_peak_flops_per_s(const GpuType& gpu) {
  return (gpu.bf16_tflops > 0 ? gpu.bf16_tflops : gpu.fp16_tflops) * 1e12;
}

}  // namespace pipeplan::hardware
