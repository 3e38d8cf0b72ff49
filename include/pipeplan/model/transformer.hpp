#pragma once
/// \file
/// Analytic per-layer costs of a decoder-only transformer (issue 16, docs/transformer-model.md):
/// FLOPs, parameters, activation memory (Korthikanti et al. 2022), tensor-parallel all-reduce
/// bytes and times on a catalogue GPU (Calculon-style efficiencies), turned into a v2 model
/// profile with per-degree values (spec 8.1).

#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/model/model.hpp"

namespace pipeplan::model {

/// The feed-forward block, which also fixes the architecture family: `kGelu` is GPT/OPT style
/// (a 2-matrix MLP, biases, LayerNorm, learned position embeddings), `kSwiglu` Llama style (a
/// gated 3-matrix MLP, no biases, RMSNorm, rotary positions without parameters).
enum class Ffn { kGelu, kSwiglu };

/// A decoder-only transformer and how it is trained.
struct TransformerConfig {
  std::string name;          ///< Model name written to the profile (empty: generated).
  int layers = 0;            ///< L, decoder layers (>= 1).
  int hidden = 0;            ///< h, hidden size (>= 1, a multiple of `heads`).
  int heads = 0;             ///< a, attention heads (>= 1).
  int kv_heads = 0;          ///< g, key/value heads (0: `heads`, i.e. no grouping).
  int ffn_hidden = 0;        ///< F, FFN size (0: 4h for GeLU, Llama's rounding for SwiGLU).
  int sequence = 0;          ///< s, sequence length, tokens (>= 1).
  int vocab = 0;             ///< V, vocabulary size (>= 1).
  Ffn ffn = Ffn::kGelu;      ///< FFN kind and architecture family.
  int micro_batch_size = 1;  ///< b, sequences per micro-batch (>= 1).
  hardware::DType dtype = hardware::DType::kBf16;  ///< Training number format.
  std::string gpu = "A100-80GB";                   ///< Catalogue GPU that speed 1.0 stands for.
  bool sequence_parallel = false;    ///< Megatron sequence parallelism (Korthikanti et al.).
  bool selective_recompute = false;  ///< Recompute the attention core in the backward.
  bool flash_attention = false;      ///< Fused attention: no s x s tensors stored or moved.
  std::vector<int> degrees;          ///< Tensor-parallel degrees (empty: 1, 2, 4, 8 where valid).
};

/// A named, published configuration.
struct TransformerPreset {
  std::string name;          ///< e.g. `gpt3-175b`.
  TransformerConfig config;  ///< Its shape (training options at their defaults).
  std::string source;        ///< Where the shape is published.
};

/// Every preset, in a fixed order.
const std::vector<TransformerPreset>& transformer_presets();

/// The preset named `name`, or nullptr.
const TransformerPreset* find_transformer_preset(std::string_view name);

/// `config` with its defaults filled in (`kv_heads`, `ffn_hidden`, `degrees`, `name`), or the
/// first problem as a message naming the option (`--heads: must divide --hidden (4096), got 3`).
/// The second member is empty on success.
std::pair<TransformerConfig, std::string> complete_transformer_config(TransformerConfig config);

/// Forward FLOPs of one decoder layer for one micro-batch: `2 b s h (h + 2 g d)` (QKV, d = h/a),
/// `4 b s^2 h` (scores and attention over values), `2 b s h^2` (output projection), `4 b s h F`
/// (GeLU MLP) or `6 b s h F` (SwiGLU). With a = g and F = 4h this is 24 b s h^2 + 4 b s^2 h.
double decoder_forward_flops(const TransformerConfig& config);

/// Parameters of one decoder layer held by one GPU at tensor-parallel degree `t`: the split
/// matrices (and their biases) divided by t, norms and the row-parallel biases whole.
double decoder_parameters(const TransformerConfig& config, int t);

/// Activation bytes one GPU stashes for one decoder layer per micro-batch at degree `t`
/// (Korthikanti et al. 2022, Table 2, generalised to F, grouped KV heads and SwiGLU).
double decoder_stash_bytes(const TransformerConfig& config, int t);

/// The figures of the embedding, one decoder layer and the output layer at degree `t`.
struct TransformerLayerCosts {
  double forward_ms = 0;       ///< Per-GPU forward, ms on the config's GPU.
  double backward_ms = 0;      ///< Per-GPU backward, ms.
  double parameter_bytes = 0;  ///< Per-GPU weights in the training format, bytes.
  double stash_bytes = 0;      ///< Per-GPU stash per micro-batch, bytes.
  double update_ms = 0;        ///< Per-GPU Adam step, ms.
};

/// Which part of the model.
enum class TransformerPart { kEmbedding, kDecoder, kOutput };

/// The costs of `part` at degree `t` for a completed config (`complete_transformer_config`).
TransformerLayerCosts transformer_layer_costs(const TransformerConfig& config, TransformerPart part,
                                              int t);

/// Time of one operation on `gpu`, ms: `flops / (peak x matrix efficiency(flops))` plus
/// `bytes / (bandwidth x memory efficiency(bytes))` (Calculon's "no overlap" mode).
double operation_ms(const hardware::GpuType& gpu, hardware::DType dtype, double flops,
                    double bytes);

/// The v2 model profile of a completed config: `embedding`, `decoder0` ... `decoder{L-1}`,
/// `output`, each with `tensor_parallel` over the config's degrees, `update_ms`, `input_bytes`
/// (the token ids, 8 bytes each), `parameter_memory_factor` and `sharded_memory_factor` of
/// mixed-precision Adam, `profile` = micro-batch size and GPU.
Model transformer_model(const TransformerConfig& config);

}  // namespace pipeplan::model
