// The GPU catalogue: datasheet figures of datacenter GPUs. O(entries) lookups.

#include "pipeplan/hardware/gpu_catalogue.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

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

// Dense (no structured sparsity) peaks of one GPU generation, TFLOP/s: FP32 (no tensor
// cores), TF32, BF16, FP16, FP8; 0 where unsupported.
struct Peaks {
  double fp32, tf32, bf16, fp16, fp8;
};

constexpr Peaks kVolta{15.7, 0, 0, 125, 0};                    // V100 SXM2
constexpr Peaks kAmpere{19.5, 156, 312, 312, 0};               // A100 SXM
constexpr Peaks kHopper{67, 494.7, 989.4, 989.4, 1978.9};      // H100 SXM, H200, GH200
constexpr Peaks kBlackwell{75, 1100, 2250, 2250, 4500};        // B200 (HGX, 1000 W)
constexpr Peaks kCdna3{163.4, 653.7, 1307.4, 1307.4, 2614.9};  // MI300X

GpuType entry(std::string name, std::vector<std::string> aliases, double memory_bytes,
              double bandwidth_bytes_per_s, const Peaks& peaks, std::string source) {
  return {.name = std::move(name),
          .aliases = std::move(aliases),
          .memory_bytes = memory_bytes,
          .memory_bandwidth_bytes_per_s = bandwidth_bytes_per_s,
          .fp32_tflops = peaks.fp32,
          .tf32_tflops = peaks.tf32,
          .bf16_tflops = peaks.bf16,
          .fp16_tflops = peaks.fp16,
          .fp8_tflops = peaks.fp8,
          .source = std::move(source),
          .measured_bf16_matmul_tflops = 0,
          .measured_fp8_matmul_tflops = 0,
          .measured_matmul_source = {}};
}

// Stas Bekman's "Maximum Achievable Matmul FLOPS" (MAMF) tables, the mean of 100 timed
// iterations of the best shape of a sweep, with the caches flushed between iterations (the
// "v2" tables): A100 SXM 271.2 (torch 2.6.0, CUDA 12.6), H100 SXM 794.5 and 1,402.6 in FP8
// (torch 2.7.0), GH200 828.6 and 1,535.0 (torch 2.6.0, the 900 W 141 GB version), MI300X 668.4
// (ROCm 6.3, tunable ops). V100 and B200 have none.
constexpr const char* kMamfSource =
    "https://github.com/stas00/ml-engineering/tree/master/compute/accelerator"
    "#maximum-achievable-matmul-flops-comparison-table (MAMF, v2 tables)";

GpuType measured(GpuType gpu, double bf16_tflops, double fp8_tflops, std::string note) {
  gpu.measured_bf16_matmul_tflops = bf16_tflops;
  gpu.measured_fp8_matmul_tflops = fp8_tflops;
  gpu.measured_matmul_source = std::string(kMamfSource) + note;
  return gpu;
}

// Memory: the datasheet's "GB" of HBM, which is built of binary-sized stacks, read as GiB;
// B200 is the usable 180 GB of a DGX/HGX B200. NVIDIA's Hopper and Blackwell datasheets quote
// tensor figures with sparsity; the peaks above are half of them.
std::vector<GpuType> make_catalogue() {
  const std::string a100_source =
      "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
      "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (SXM)";
  return {
      entry("V100-32GB", {"V100", "V100-SXM2", "V100-SXM2-32GB"}, 32 * kGiB, 900e9, kVolta,
            "https://images.nvidia.com/content/technologies/volta/pdf/"
            "volta-v100-datasheet-update-us-1165301-r5.pdf (SXM2)"),
      measured(entry("A100-40GB", {"A100-SXM4-40GB"}, 40 * kGiB, 1555e9, kAmpere, a100_source),
               271.2, 0, " (A100 SXM)"),
      measured(
          entry("A100-80GB", {"A100", "A100-SXM4-80GB"}, 80 * kGiB, 2039e9, kAmpere, a100_source),
          271.2, 0, " (A100 SXM)"),
      measured(entry("H100-SXM", {"H100", "H100-SXM5", "H100-SXM5-80GB", "H100-80GB"}, 80 * kGiB,
                     3.35e12, kHopper,
                     "https://resources.nvidia.com/en-us-tensor-core/"
                     "nvidia-tensor-core-gpu-datasheet (H100 SXM; sparse tensor figures halved)"),
               794.5, 1402.6, " (H100 SXM)"),
      // H200 is the H100's GH100 die at the same clocks and 700 W with faster memory; a matmul
      // sweep is compute-bound, so it takes the H100's measurement (none of its own is
      // published).
      measured(entry("H200", {"H200-SXM", "H200-141GB"}, 141 * kGiB, 4.8e12, kHopper,
                     "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM; sparse figures "
                     "halved)"),
               794.5, 1402.6, " (H100 SXM: the same die, clocks and power)"),
      measured(entry("GH200", {"GH200-96GB"}, 96 * kGiB, 4.0e12, kHopper,
                     "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip (GH200 "
                     "with 96 GB HBM3; sparse figures halved)"),
               828.6, 1535.0, " (GH200, the 900 W 141 GB version)"),
      entry("B200", {"B200-SXM", "B200-180GB"}, 180 * kGiB, 8.0e12, kBlackwell,
            "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200 per GPU: the 8-GPU "
            "figures divided by 8, sparse figures halved; 1,440 GB over 8 GPUs)"),
      measured(entry("MI300X", {"MI300X-192GB"}, 192 * kGiB, 5.3e12, kCdna3,
                     "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/"
                     "data-sheets/amd-instinct-mi300x-data-sheet.pdf (dense peaks)"),
               668.4, 0, " (MI300X, ROCm 6.3 with PYTORCH_TUNABLEOP_ENABLED=1)"),
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
  static const std::vector<GpuType> kCatalogue = make_catalogue();
  return kCatalogue;
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

std::optional<double> measured_matmul_fraction(const GpuType& gpu, DType dtype) {
  double measured = 0;
  if (dtype == DType::kBf16 || dtype == DType::kFp16) measured = gpu.measured_bf16_matmul_tflops;
  if (dtype == DType::kFp8) measured = gpu.measured_fp8_matmul_tflops;
  const double peak = peak_flops_per_s(gpu, dtype) / 1e12;
  if (measured <= 0 || peak <= 0) return std::nullopt;
  return std::min(measured / peak, 1.0);
}

double training_peak_flops_per_s(const GpuType& gpu) {
  return (gpu.bf16_tflops > 0 ? gpu.bf16_tflops : gpu.fp16_tflops) * 1e12;
}

}  // namespace pipeplan::hardware
