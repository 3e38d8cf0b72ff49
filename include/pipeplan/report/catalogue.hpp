#pragma once
/// \file
/// The GPU catalogue as `pipeplan model gpus` prints it: an aligned table, or JSON with the
/// aliases and sources.

#include <string>
#include <vector>

#include "pipeplan/hardware/gpu_catalogue.hpp"

namespace pipeplan::report {

/// A header line, one line per GPU (name, memory, memory bandwidth, then the dense peak
/// TFLOP/s in fp32, tf32, bf16, fp16 and fp8 to one decimal, `-` where unsupported), and a
/// closing note; columns aligned for names of up to 10 characters. O(GPUs).
std::string gpu_catalogue_table(const std::vector<hardware::GpuType>& gpus);

/// A JSON array, one object per GPU with the keys `name`, `aliases`, `memory_bytes`,
/// `memory_bandwidth_bytes_per_s`, `dense_tflops` (`fp32` .. `fp8`) and `source`, in that
/// order, ending in a newline. O(GPUs).
std::string gpu_catalogue_json(const std::vector<hardware::GpuType>& gpus);

}  // namespace pipeplan::report
