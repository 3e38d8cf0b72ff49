#pragma once
/// \file
/// The model profile (spec section 1): a chain of layers with per-micro-batch forward and
/// backward times at GPU speed 1.0, boundary activation sizes, parameter and stash sizes.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/io/files.hpp"

namespace pipeplan::model {

/// The schema string of a model file.
inline constexpr const char* kModelSchema = "pipeplan/model/v1";

/// Most micro-batches per iteration accepted anywhere (`micro_batches` in a model file, the
/// `--micro-batches` flags): 2^20. Whether a plan with that many can be made is the planner's
/// call (`planners::check_limits`); this bound keeps every count of tasks in 64-bit range.
inline constexpr std::int64_t kMaxMicroBatches = std::int64_t{1} << 20;

/// Largest sum over all layers of forward_ms + backward_ms, of parameter_bytes (times the
/// parameter memory factor), of stash_bytes and of activation_bytes. The execution model
/// multiplies these by up to 2^20 micro-batches, divides times by speeds down to 1e-6 and
/// bytes by bandwidths down to 1 bit/s, and exports microseconds: below 1e290 every figure
/// pipeplan derives and writes stays finite (about 1e308 is the largest double).
inline constexpr double kMaxTotal = 1e290;

/// One layer of the chain.
struct Layer {
  std::string name;             ///< Optional (empty when absent); unique when given.
  double forward_ms = 0;        ///< Forward time of one micro-batch at speed 1.0, ms.
  double backward_ms = 0;       ///< Backward time of one micro-batch at speed 1.0, ms.
  double activation_bytes = 0;  ///< Bytes crossing a stage boundary placed after this layer.
  double parameter_bytes = 0;   ///< Size of the layer's weights, bytes.
  double stash_bytes = 0;       ///< Activation memory kept per in-flight micro-batch, bytes.
};

/// A model profile.
struct Model {
  std::string name;                                ///< Empty when absent.
  std::optional<std::int64_t> micro_batches;       ///< M per iteration, if the file gives it.
  std::optional<std::int64_t> profile_batch_size;  ///< Informational: profiled micro-batch size.
  std::optional<std::string> profile_device;       ///< Informational: profiled device.
  double parameter_memory_factor = 4;              ///< Static bytes per parameter byte.
  std::vector<Layer> layers;                       ///< At least one, in execution order.
};

/// Reads and validates a `model.json` (spec section 1). Throws `InputError` naming the file
/// and JSON pointer of the first problem. Beyond the spec: `micro_batches` is at most
/// `kMaxMicroBatches`; the sums over all layers of forward plus backward time, of stash and of
/// activation bytes, and the factor times the sum of parameter bytes are at most `kMaxTotal`;
/// -0 reads as 0.
Model read_model(const io::Source& source);

/// The model as `model.json` (schema v1). Optional fields that are absent stay absent;
/// `stash_bytes` is written only when it differs from `activation_bytes`.
nlohmann::ordered_json model_to_json(const Model& model);

/// Sum of forward plus backward time over all layers, ms at speed 1.0.
double total_compute_ms(const Model& model);

}  // namespace pipeplan::model
