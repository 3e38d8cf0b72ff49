#pragma once
/// \file
/// The model profile (spec sections 1 and 8.1): a chain of layers with per-micro-batch forward
/// and backward times at GPU speed 1.0, boundary activation sizes, parameter and stash sizes;
/// optionally, per layer, how it splits over a tensor-parallel group and its optimizer step.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/transformer_config.hpp"

namespace pipeplan::model {

/// The schema string of a model file without any field of spec section 8.
inline constexpr const char* kModelSchema = "pipeplan/model/v1";
/// The schema string of a model file that may use the fields of spec section 8.1. Readers accept
/// either string whatever the file uses; the writer writes this one only when a field needs it.
inline constexpr const char* kModelSchemaV2 = "pipeplan/model/v2";
/// The schema string of a model file that may use the fields of spec section 9.1 (readers accept
/// any of the three; the writer writes it only when a field of 9.1 needs it).
inline constexpr const char* kModelSchemaV3 = "pipeplan/model/v3";

/// Most micro-batches per iteration accepted anywhere (`micro_batches` in a model file, the
/// `--micro-batches` flags): 2^20. Whether a plan with that many can be made is the planner's
/// call (`planners::check_limits`); this bound keeps every count of tasks in 64-bit range.
inline constexpr std::int64_t kMaxMicroBatches = std::int64_t{1} << 20;

/// Largest tensor-parallel degree a model file may list: 2^16, beyond any GPU count a topology
/// may have (`topology::kMaxGpus`), so a degree is never the reason a plan is out of reach.
inline constexpr int kMaxTensorParallelDegree = 1 << 16;

/// Most all-reduces a layer may run per forward or backward (`allreduces_forward`,
/// `allreduces_backward`): 2^10, far above Megatron's 2.
inline constexpr int kMaxAllreducesPerPass = 1 << 10;

/// How a layer splits over a tensor-parallel group of `t` GPUs (spec 8.1). The per-degree arrays
/// are empty when the file leaves them out (the value at degree t is then the layer's own field
/// divided by t), else aligned with `degrees`, entry 0 (degree 1) equal to the layer's field.
struct TensorParallel {
  std::vector<int> degrees;             ///< Allowed t: strictly ascending, starting at 1.
  double allreduce_bytes = 0;           ///< Size of one tensor-parallel all-reduce, bytes.
  int allreduces_forward = 2;           ///< All-reduces in one split forward.
  int allreduces_backward = 2;          ///< All-reduces in one split backward.
  std::vector<double> forward_ms;       ///< Per-GPU forward at each degree, ms at speed 1.0.
  std::vector<double> backward_ms;      ///< Per-GPU backward at each degree, ms at speed 1.0.
  std::vector<double> parameter_bytes;  ///< Per-GPU weights at each degree, bytes.
  std::vector<double> stash_bytes;      ///< Per-GPU stash at each degree, bytes.
  std::vector<double> update_ms;        ///< Per-GPU optimizer step at each degree, ms at speed 1.
  std::vector<double> backward_weight_ms;      ///< Per-GPU weight-gradient part of the backward at
                                               ///< each degree, ms at speed 1.0 (spec 9.1).
  std::vector<double> weight_stash_bytes;      ///< Per-GPU bytes held from I to W at each degree.
  std::vector<double> backward_working_bytes;  ///< Per-GPU working set of the backward at each
                                               ///< degree (docs/formats.md).
  std::vector<double> backward_recompute_ms;   ///< `Layer::backward_recompute_ms` at each degree
                                               ///< (never in a file; empty: none at any degree).
};

/// How a layer splits over a context-parallel group of `c` GPUs (spec 10.1): each GPU holds `S/c`
/// of the sequence's tokens and passes its attention's keys and values around the group's ring.
struct ContextParallel {
  std::vector<int> degrees;   ///< Allowed c: strictly ascending, starting at 1.
  double exchange_bytes = 0;  ///< Keys and values of one micro-batch's whole sequence at t = 1.
};

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
  double update_ms = 0;         ///< Optimizer step for the layer's weights at speed 1.0, ms.
  /// The weight-gradient part `W` of `backward_ms` (spec 9.1), at most `backward_ms`; the rest
  /// is the input gradient `I`.
  double backward_weight_ms = 0;
  /// What a micro-batch holds after its `I` until its `W` ends (spec 9.1); absent means
  /// `stash_bytes`.
  std::optional<double> weight_stash_bytes;
  /// Bytes the layer's backward allocates beyond its stash and frees when it ends (the input
  /// gradient's part when the backward is split), such as an unfused loss's gradient buffers
  /// (docs/formats.md, docs/memory.md); 0 (absent) for every profile and earlier description.
  double backward_working_bytes = 0;
  /// The part of `backward_ms` that recomputes forward work (selective or per-operator
  /// recomputation of a transformer description, docs/decisions.md): a stage that recomputes its
  /// whole forward before its backward does not run it again. Never in a model file (0 for
  /// profiles): `transformer_model` derives it from the description. At most `backward_ms` minus
  /// `backward_weight_ms`, and at most `forward_ms`.
  double backward_recompute_ms = 0;
  std::optional<TensorParallel> tensor_parallel;  ///< Absent: the layer is never split.
  /// Absent: the layer allows any context-parallel degree, with no exchange (spec 10.1).
  std::optional<ContextParallel> context_parallel;
};

/// A model profile.
struct Model {
  std::string name;                                ///< Empty when absent.
  std::optional<std::int64_t> micro_batches;       ///< M per iteration, if the file gives it.
  std::optional<std::int64_t> profile_batch_size;  ///< Informational: profiled micro-batch size.
  std::optional<std::string> profile_device;       ///< Profiled device (a catalogue GPU names
                                                   ///< the speed 1.0 of topology `type`s).
  double parameter_memory_factor = 4;              ///< Static bytes per parameter byte.
  /// The part of `parameter_memory_factor` a sharded optimizer divides among a stage's
  /// replicas; absent means `max(0, parameter_memory_factor - 2)` (see `sharded_factor`).
  std::optional<double> sharded_memory_factor;
  double input_bytes = 0;  ///< One micro-batch's input to layer 0, bytes.
  /// The framework reserve: bytes every used GPU holds besides the plan's weights, optimizer
  /// state and activations (CUDA context, NCCL buffers; docs/memory.md), counted once per GPU in
  /// its peak. 0 (absent) for profiles; `model transformer` writes kFrameworkReserveBytes.
  double reserve_bytes = 0;
  std::vector<Layer> layers;  ///< At least one, in execution order.
  /// The completed transformer description the layers were generated from, when the file gave
  /// `transformer` (then the layers are those of its `micro_batch_size`, and the batch-size
  /// search regenerates them for other sizes).
  std::optional<TransformerConfig> transformer;
};

/// Reads and validates a `model.json` (spec sections 1, 8.1 and 9.1; schema v1, v2 or v3), or a
/// model given by its transformer description (`"transformer": {...}`, docs/formats.md): the
/// description is completed and its layers generated (`transformer_model`); the file holds
/// either no profile or exactly the one generated (`check_written_profile`). Throws `InputError`
/// naming the file and JSON pointer of the first problem. Beyond the spec: `micro_batches` is at
/// most `kMaxMicroBatches`, degrees at most `kMaxTensorParallelDegree`, all-reduce counts at most
/// `kMaxAllreducesPerPass`; the sums over all layers of forward plus backward time, of stash,
/// activation and update, and the factor times the sum of parameter bytes are at most `kMaxTotal`
/// (each layer counted at its largest per-degree value); at every degree a layer's weight-gradient
/// part is at most its backward and its weight stash at most its stash, defaults included; -0 reads
/// as 0. O(layers x degrees).
Model read_model(const io::Source& source);

/// The model as `model.json`: schema v1 when no field of spec 8.1 or 9.1 is used (byte for byte
/// what earlier versions wrote), v2 when only fields of 8.1 are, else v3. A model with a
/// transformer description is written as the description and its generated layers, which
/// `read_model` reads back to the same model. Optional fields that are absent
/// stay absent; `stash_bytes` is written only when it differs from `activation_bytes`,
/// `update_ms`, `backward_weight_ms` and `input_bytes` only when not 0, `weight_stash_bytes` only
/// when given, the all-reduce counts only when not 2.
nlohmann::ordered_json model_to_json(const Model& model);

/// Sum of forward plus backward time over all layers, ms at speed 1.0.
double total_compute_ms(const Model& model);

/// Whether the model uses any field of spec 8.1 (then it is written with schema v2).
bool uses_v2_fields(const Model& model);

/// `sharded_memory_factor`, or its default `max(0, parameter_memory_factor - 2)`.
double sharded_factor(const Model& model);

/// The parts of `parameter_memory_factor` per parameter byte: the weights (1), the gradients
/// (the unsharded rest, `phi - phi_sh - 1`) and the optimizer state (`phi_sh`). A factor below 1
/// is all weights.
struct FactorSplit {
  double weights = 1;
  double gradients = 1;
  double optimizer = 2;
};

/// `parameter_memory_factor` split as `FactorSplit` says. O(1).
FactorSplit factor_split(const Model& model);

/// Whether the model uses any field of spec 9.1 or 10.1 (then it is written with schema v3).
bool uses_v3_fields(const Model& model);

/// Whether some layer has a weight-gradient part above 0 at some degree: a split backward
/// (spec 9.5's `--split-backward auto`) can use it. O(L x degrees).
bool has_weight_gradients(const Model& model);

/// Whether some layer has an optimizer step above 0 at some degree (spec 8.3: then every stage
/// runs update tasks).
bool has_updates(const Model& model);

/// Whether some layer has a backward working set above 0 at some degree. O(L x degrees).
bool has_backward_working_bytes(const Model& model);

/// Whether some layer has `tensor_parallel` (spec 8.1): the model can be split by tensor
/// parallelism, and Megatron-LM's configurations apply to it. O(L).
bool has_tensor_parallel_layers(const Model& model);

// ---- Per-GPU values at a tensor-parallel degree (spec 8.1): the one definition that the
// simulator, the bounds and the planners share. `t` is the degree of the stage that holds the
// layer; it must be one the stage allows (`stage_allows_degree`). A layer without
// `tensor_parallel` runs whole at any degree; a layer with it must list `t` (else
// `InternalError`: a planner or a plan reader let through a degree the stage does not allow).

/// Whether the layer is split at stage degree `t`: it has `tensor_parallel` and `t > 1`. Only a
/// split layer runs tensor-parallel all-reduces.
bool is_split(const Layer& layer, int t);
/// Per-GPU forward time at degree `t`, ms at speed 1.0, all-reduces excluded.
double forward_ms_at(const Layer& layer, int t);
/// Per-GPU backward time at degree `t`, ms at speed 1.0, all-reduces excluded.
double backward_ms_at(const Layer& layer, int t);
/// Per-GPU weights at degree `t`, bytes.
double parameter_bytes_at(const Layer& layer, int t);
/// Per-GPU stash per in-flight micro-batch at degree `t`, bytes.
double stash_bytes_at(const Layer& layer, int t);
/// Per-GPU optimizer step at degree `t`, ms at speed 1.0 (before division among shards).
double update_ms_at(const Layer& layer, int t);
/// Per-GPU weight-gradient part of the backward at degree `t` (spec 9.1), ms at speed 1.0: the
/// per-degree array's entry, else `backward_weight_ms / t` for a split layer, else
/// `backward_weight_ms`.
double backward_weight_ms_at(const Layer& layer, int t);
/// Per-GPU bytes a micro-batch holds from its `I` to its `W` at degree `t` (spec 9.1): the
/// per-degree array's entry, else `weight_stash_bytes / t` for a split layer, else
/// `weight_stash_bytes`; absent fields fall back to `stash_bytes_at(layer, t)`.
double weight_stash_bytes_at(const Layer& layer, int t);
/// Per-GPU recomputed forward work inside the backward at degree `t` (`backward_recompute_ms`):
/// the per-degree array's entry, else `backward_recompute_ms / t` for a split layer, else
/// `backward_recompute_ms`.
double backward_recompute_ms_at(const Layer& layer, int t);
/// Per-GPU working set of the layer's backward at degree `t`: the per-degree array's entry, else
/// `backward_working_bytes / t` for a split layer, else `backward_working_bytes`.
double backward_working_bytes_at(const Layer& layer, int t);
/// What a GPU holds while the layer's backward (or its `I`) runs, beyond the stage's stashes:
/// its working set, plus its own stash when the stage recomputes (recomputed layer by layer,
/// spec 8.3). A stage's transient is the largest of its layers'. O(degrees).
double backward_transient_bytes_at(const Layer& layer, int t, bool recompute);
/// Tensor-parallel all-reduces in one forward at degree `t` (0 when not split).
int allreduces_forward_at(const Layer& layer, int t);
/// Tensor-parallel all-reduces in one backward at degree `t` (0 when not split).
int allreduces_backward_at(const Layer& layer, int t);
/// Bytes of one tensor-parallel all-reduce (0 when the layer has no `tensor_parallel`).
double allreduce_bytes(const Layer& layer);

/// Whether a stage of layers `first..last` (inclusive, valid indices) may run at degree `t`
/// (spec 8.1): `t = 1` always; `t > 1` when at least one of its layers has `tensor_parallel` and
/// every layer that has it lists `t`.
bool stage_allows_degree(const Model& model, int first, int last, int t);

/// Every degree `stage_allows_degree` accepts for layers `first..last`, ascending (always
/// starting with 1). O(layers x degrees).
std::vector<int> stage_degrees(const Model& model, int first, int last);

/// The per-GPU figures of a stage of layers `first..last` at degree `t` (which the stage must
/// allow), at speed 1.0. Tensor-parallel all-reduce time depends on the group's ring: with `beta`
/// its smallest bandwidth and `lambda` its largest latency, the all-reduces of one forward take
/// `2 (t-1)/t * forward_allreduce_bytes / beta + 2 (t-1) * lambda * forward_allreduces` (spec
/// 8.3 summed over the layers), and the same with the backward figures.
struct StageCost {
  double forward_ms = 0;                     ///< Sum of `forward_ms_at`, ms.
  double backward_ms = 0;                    ///< Sum of `backward_ms_at`, ms.
  double parameter_bytes = 0;                ///< W_s: sum of `parameter_bytes_at`, bytes.
  double max_parameter_bytes = 0;            ///< Largest `parameter_bytes_at` of one layer, bytes.
  double stash_bytes = 0;                    ///< Y_s: sum of `stash_bytes_at`, bytes.
  double max_stash_bytes = 0;                ///< Largest `stash_bytes_at` of one layer, bytes.
  double max_transient_bytes = 0;            ///< Largest `backward_transient_bytes_at`, bytes.
  double max_recompute_transient_bytes = 0;  ///< The same when the stage recomputes, bytes.
  double update_ms = 0;                      ///< Sum of `update_ms_at`, ms.
  double backward_weight_ms = 0;             ///< Sum of `backward_weight_ms_at`, ms (spec 9.3).
  double backward_recompute_ms = 0;          ///< Sum of `backward_recompute_ms_at`, ms.
  double weight_stash_bytes = 0;             ///< Yw_s: sum of `weight_stash_bytes_at`, bytes.
  /// Sum of the layers' inputs (the `activation_bytes` of the layer before each, `input_bytes`
  /// for layer 0).
  double recompute_input_bytes = 0;
  double forward_allreduce_bytes = 0;    ///< Sum over split layers of count x bytes, forward.
  std::int64_t forward_allreduces = 0;   ///< All-reduces of one forward.
  double backward_allreduce_bytes = 0;   ///< Sum over split layers of count x bytes, backward.
  std::int64_t backward_allreduces = 0;  ///< All-reduces of one backward.

  /// What each GPU holds during each `B` (or `I`) only: the largest layer's transient.
  [[nodiscard]] double transient_bytes(bool recompute) const {
    return recompute ? max_recompute_transient_bytes : max_transient_bytes;
  }
  /// The backward's own compute, ms at speed 1.0: `backward_ms`, less the forward work it
  /// recomputes when the stage recomputes its whole forward first (spec 8.3 adds that forward).
  [[nodiscard]] double own_backward_ms(bool recompute) const {
    return recompute ? backward_ms - backward_recompute_ms : backward_ms;
  }
};

/// `StageCost` of layers `first..last` at degree `t`. O(layers x degrees).
StageCost stage_cost(const Model& model, int first, int last, int t);

// ---- Context parallelism (spec section 10). The division rule lives in `at_context_degree`:
// every consumer that needs per-GPU values at a context-parallel degree `c > 1` reads them from
// the divided model, so sections 8 and 9's per-degree functions above stay the one definition.

/// Largest context-parallel degree a model file or `--context-parallel` may name: as for tensor
/// parallelism, beyond any GPU count, so a degree is never the reason a plan is out of reach.
inline constexpr int kMaxContextParallelDegree = kMaxTensorParallelDegree;

/// Whether every layer allows context-parallel degree `c` (spec 10.2): a layer without
/// `context_parallel` allows any `c >= 1`, one with it the degrees it lists. O(L log degrees).
bool allows_context_degree(const Model& model, int c);

/// Whether some layer has `context_parallel` (spec 10.1). O(L).
bool has_context_parallel_layers(const Model& model);

/// The model as a GPU of a context-parallel group of `c` sees it (spec 10.1): every per-GPU
/// time and byte count of sections 8 and 9 divided by `c` (forward, backward and its weight and
/// recomputed parts, stash and weight stash, the tensor-parallel all-reduce bytes, each per-degree
/// array's entries, every layer's `activation_bytes` and `input_bytes`); parameters and update
/// times whole; `exchange_bytes` kept as given (a ring step's size is `exchange_bytes / (c t)`,
/// `ring_step_bytes`). `c = 1` returns the model unchanged. `c` must be allowed
/// (`allows_context_degree`; else `InternalError`). O(L x degrees).
Model at_context_degree(const Model& model, int c);

/// What one ring step of layer `layer` passes at tensor-parallel degree `t` and context-parallel
/// degree `c` (spec 10.1): `exchange_bytes / (c t)`, 0 without `context_parallel` or when
/// `c = 1`.
double ring_step_bytes(const Layer& layer, int t, int c);

}  // namespace pipeplan::model
