#pragma once
/// \file
/// Analytic per-layer costs of a decoder-only transformer (issue 16, docs/transformer-model.md):
/// FLOPs, parameters, activation memory (Korthikanti et al. 2022), tensor-parallel all-reduce
/// bytes and times on a catalogue GPU (Calculon-style efficiencies), the backward's
/// weight-gradient part and its memory (Qi et al. 2023), turned into a v3 model profile with
/// per-degree values (spec 8.1, 9.1).

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer_config.hpp"

namespace pipeplan::model {

/// A named, published configuration.
struct TransformerPreset {
  std::string name;          ///< e.g. `gpt3-175b`.
  TransformerConfig config;  ///< Its shape (training options at their defaults).
  std::string source;        ///< Where the shape is published.
  /// Whether the model trains with dropout, as published: `pipeplan model transformer` sets
  /// the description's `dropout` from it; a description naming the preset without the key keeps
  /// dropout on, as every description did before the key.
  bool dropout = true;
};

/// Every preset, in a fixed order.
const std::vector<TransformerPreset>& transformer_presets();

/// The preset named `name`, or nullptr.
const TransformerPreset* find_transformer_preset(std::string_view name);

/// Most decoder layers a description may have (`--layers`, `transformer.layers`): far beyond any
/// published model, and a bound on the size of the profile generated from it.
inline constexpr int kMaxTransformerLayers = 1 << 16;

/// Largest hidden size, FFN size, head count, sequence length and vocabulary of a description:
/// 2^24, so that `4 h` and every other size stays an `int` and every count a finite double.
inline constexpr int kMaxTransformerDimension = 1 << 24;

/// Largest micro-batch size of a description: 2^20 sequences.
inline constexpr int kMaxTransformerMicroBatchSize = 1 << 20;

/// The framework reserve of a generated model (`Model::reserve_bytes`): 2 GiB per GPU, the CUDA
/// context with its loaded kernels (about 0.5 GiB) and NCCL's buffers (about 1.5 GiB); the
/// measurements behind both are in docs/memory.md.
inline constexpr double kFrameworkReserveBytes = 2.0 * 1024 * 1024 * 1024;

/// Most tensor-parallel degrees a description may list (each is one entry of every per-degree
/// array of every layer).
inline constexpr int kMaxTransformerDegrees = 16;

/// How a problem names the fields of a description: as the options of `pipeplan model
/// transformer` (`--kv-heads`) or as the keys of a model file's `transformer` object
/// (`kv_heads`).
enum class FieldSpelling { kOption, kKey };

/// The first problem of a description: the field it is about, spelled as a key (`kv_heads`),
/// and what is wrong, naming other fields in the requested spelling (`must divide --heads (32),
/// got 3` or `must divide heads (32), got 3`).
struct TransformerProblem {
  std::string field;
  std::string message;
};

/// `config` with its defaults filled in (`kv_heads`, `ffn_hidden`, `degrees`, `name`, the GPU's
/// catalogue name), or its first problem. Checks every bound above, that `heads` divides
/// `hidden` and `kv_heads` divides `heads`, the GPU and its peak in `dtype`, and the degrees.
std::pair<TransformerConfig, std::optional<TransformerProblem>> check_transformer_config(
    TransformerConfig config, FieldSpelling spelling);

/// The `matmul_ceiling` `pipeplan model transformer` gives `config` unless told otherwise: its
/// GPU's measured largest matmul throughput in its format as a fraction of the peak
/// (`hardware::measured_matmul_fraction`), or 1 where the catalogue has no measurement.
double default_matmul_ceiling(const TransformerConfig& config);

/// `check_transformer_config` with option spelling, the problem as one message naming the option
/// (`--heads: must divide --hidden (4096), got 3`); the second member is empty on success.
std::pair<TransformerConfig, std::string> complete_transformer_config(TransformerConfig config);

/// Forward FLOPs of one decoder layer for one micro-batch: `2 b s h (h + 2 g d)` (QKV, d = h/a),
/// `4 b s^2 h` (scores and attention over values), `2 b s h^2` (output projection), `4 b s h F`
/// (GeLU or squared-ReLU MLP) or `6 b s h F` (SwiGLU). With a = g and F = 4h this is
/// 24 b s h^2 + 4 b s^2 h.
double decoder_forward_flops(const TransformerConfig& config);

/// Parameters of one decoder layer held by one GPU at tensor-parallel degree `t`: the split
/// matrices (and their biases) divided by t, norms and the row-parallel biases whole.
double decoder_parameters(const TransformerConfig& config, int t);

/// Activation bytes one GPU stashes for one decoder layer per micro-batch at degree `t`
/// (Korthikanti et al. 2022, Table 2, generalised to F, grouped KV heads, SwiGLU and squared
/// ReLU).
double decoder_stash_bytes(const TransformerConfig& config, int t);

/// Bytes one GPU still holds for one decoder layer per micro-batch after the backward's input
/// gradient `I`, until its weight gradient `W` ends (spec 9.1) at degree `t`: the inputs and
/// the output gradients of the four GEMMs with weights. It equals `decoder_stash_bytes` less the
/// two 1-byte dropout masks and the s x s tensors (`32 s b h` for a GPT block at degree 1).
double decoder_weight_stash_bytes(const TransformerConfig& config, int t);

/// The figures of the embedding, one decoder layer and the output layer at degree `t`.
struct TransformerLayerCosts {
  double forward_ms = 0;              ///< Per-GPU forward, ms on the config's GPU.
  double backward_ms = 0;             ///< Per-GPU backward, ms.
  double parameter_bytes = 0;         ///< Per-GPU weights in the training format, bytes.
  double stash_bytes = 0;             ///< Per-GPU stash per micro-batch, bytes.
  double update_ms = 0;               ///< Per-GPU Adam step, ms.
  double backward_weight_ms = 0;      ///< The weight-gradient part `W` of `backward_ms`, ms.
  double weight_stash_bytes = 0;      ///< Per-GPU bytes held from `I` to the end of `W`.
  double backward_working_bytes = 0;  ///< Per-GPU bytes held during the backward only.
  /// The part of `backward_ms` that recomputes forward work (selective or per-operator
  /// recomputation): what the backward saves when the stage recomputes its whole forward first,
  /// as Megatron-LM's `--recompute-granularity full` replaces selective (model::Layer).
  double backward_recompute_ms = 0;
};

/// Which part of the model.
enum class TransformerPart { kEmbedding, kDecoder, kOutput };

/// The costs of `part` at degree `t` for a completed config (`complete_transformer_config`).
TransformerLayerCosts transformer_layer_costs(const TransformerConfig& config, TransformerPart part,
                                              int t);

/// Time of one operation on `gpu`, ms: `flops / (peak x matrix efficiency(flops))` plus
/// `bytes / (bandwidth x memory efficiency(bytes))` (Calculon's "no overlap" mode), the matrix
/// efficiency capped at `matmul_ceiling` (`TransformerConfig::matmul_ceiling`; 1: no cap).
double operation_ms(const hardware::GpuType& gpu, hardware::DType dtype, double flops, double bytes,
                    double matmul_ceiling);

/// The v3 model profile of a completed config: `embedding`, `decoder0` ... `decoder{L-1}`,
/// `output`, each with `tensor_parallel` over the config's degrees, `update_ms`,
/// `backward_weight_ms` and `weight_stash_bytes`, `input_bytes`
/// (the token ids, 8 bytes each), `parameter_memory_factor` and `sharded_memory_factor` of
/// mixed-precision Adam, `profile` = micro-batch size and GPU, and `transformer` = `config`.
Model transformer_model(const TransformerConfig& config);

/// The settings of a transformer description a planner may choose (issue 33 item 8): each one
/// given replaces the description's; an empty one keeps it.
struct TransformerSettings {
  std::optional<int> micro_batch_size;      ///< Sequences per micro-batch.
  std::optional<bool> sequence_parallel;    ///< Megatron-LM's `--sequence-parallel`.
  std::optional<bool> selective_recompute;  ///< `--recompute-granularity selective`.
};

/// A model read from a transformer description (`model.transformer` set) regenerated with
/// `settings` (a micro-batch size from 1 to `kMaxTransformerMicroBatchSize`): its name and
/// `micro_batches` kept, the description's fields set to the settings given. The model itself
/// (not regenerated) when every setting given equals the description's. `InternalError` for a
/// model without a description or a size out of range. O(layers x degrees).
Model transformer_variant(const Model& model, const TransformerSettings& settings);

/// `transformer_variant` at micro-batch size `b`.
Model transformer_model_at(const Model& model, int micro_batch_size);

}  // namespace pipeplan::model
