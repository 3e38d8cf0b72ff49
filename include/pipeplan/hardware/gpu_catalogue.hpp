#pragma once
/// \file
/// A catalogue of datacenter GPUs (issue 16): memory, dense peak throughput per number format and
/// memory bandwidth, each from the vendor's datasheet (docs/transformer-model.md lists the
/// sources). Topologies name an entry in a GPU's `type`; `pipeplan model transformer` costs a
/// model on one.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipeplan::hardware {

/// A number format of the matrix multiplications (and, for the 16-bit ones, of activations).
enum class DType { kFp32, kTf32, kBf16, kFp16, kFp8 };

/// The name used on the command line and in docs: `fp32`, `tf32`, `bf16`, `fp16`, `fp8`.
std::string_view dtype_name(DType dtype);

/// The format named `name` (as `dtype_name` spells it), if any.
std::optional<DType> parse_dtype(std::string_view name);

/// Bytes of one activation value when training in `dtype`: 4 for fp32 and tf32 (tf32 is an
/// fp32 storage format), 2 for bf16, fp16 and fp8 (FP8 training keeps activations, gradients
/// and communication in 16 bits and casts only the matrix-multiply inputs to 8 bits).
double activation_value_bytes(DType dtype);

/// One GPU type.
struct GpuType {
  std::string name;                         ///< Catalogue name, e.g. `A100-80GB`.
  std::vector<std::string> aliases;         ///< Other spellings matched by `find_gpu`.
  double memory_bytes = 0;                  ///< Device memory, bytes.
  double memory_bandwidth_bytes_per_s = 0;  ///< Peak memory bandwidth, bytes/s.
  double fp32_tflops = 0;                   ///< Dense FP32 peak (no tensor cores), TFLOP/s.
  double tf32_tflops = 0;                   ///< Dense TF32 tensor peak, TFLOP/s; 0 if unsupported.
  double bf16_tflops = 0;                   ///< Dense BF16 tensor peak, TFLOP/s; 0 if unsupported.
  double fp16_tflops = 0;                   ///< Dense FP16 tensor peak, TFLOP/s.
  double fp8_tflops = 0;                    ///< Dense FP8 tensor peak, TFLOP/s; 0 if unsupported.
  std::string source;                       ///< Where the numbers come from (a URL).
  /// The largest matrix-multiply throughput measured in BF16 (also read for FP16, which runs
  /// at the same tensor-core rate) and in FP8, TFLOP/s: the "maximum achievable matmul FLOPS"
  /// of a published sweep of shapes; 0 where no measurement is published.
  double measured_bf16_matmul_tflops = 0;
  double measured_fp8_matmul_tflops = 0;
  std::string measured_matmul_source;  ///< Where the measurements come from (empty: none).
};

/// Every catalogue entry, in a fixed order (by vendor and generation).
const std::vector<GpuType>& gpu_catalogue();

/// The entry whose name or one of whose aliases equals `name` once both are reduced to lower
/// case letters and digits (`a100 80gb`, `A100-80GB` and `NVIDIA A100_80GB` match; a leading
/// `nvidia`, `tesla` or `amd` is ignored). nullptr when none does.
const GpuType* find_gpu(std::string_view name);

/// The catalogue names, comma-separated, for messages (`V100-32GB, A100-40GB, ...`).
std::string catalogue_names();

/// Dense peak of `gpu` in `dtype`, FLOP/s; 0 when the GPU does not support the format.
double peak_flops_per_s(const GpuType& gpu, DType dtype);

/// The measured largest matrix-multiply throughput of `gpu` in `dtype` as a fraction of its
/// dense peak in that format (`GpuType::measured_bf16_matmul_tflops` for BF16 and FP16,
/// `measured_fp8_matmul_tflops` for FP8), or nothing where none is published (and for FP32 and
/// TF32). `pipeplan model transformer` caps its GEMM efficiencies at it (`matmul_ceiling`).
std::optional<double> measured_matmul_fraction(const GpuType& gpu, DType dtype);

/// The 16-bit training peak used to relate two GPU types' speeds (topology `type`): BF16, or
/// FP16 where the GPU has no BF16 (V100), in FLOP/s.
double training_peak_flops_per_s(const GpuType& gpu);

}  // namespace pipeplan::hardware
