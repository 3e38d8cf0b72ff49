#pragma once
/// \file
/// The description of a decoder-only transformer (issue 16): its shape and how it is trained.
/// `pipeplan model transformer` reads it from options, a `model.json` from a `"transformer"`
/// object (docs/formats.md); `model/transformer.hpp` turns it into per-layer costs.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/hardware/gpu_catalogue.hpp"

namespace pipeplan::model {

/// The default fixed time of one kernel, microseconds: the CPU-side launch and framework
/// dispatch of one operation in eager PyTorch, "between 5-20 microseconds" (Meta's Holistic
/// Trace Analysis, `cuda_kernel_launch_stats`), taken at its geometric middle
/// (docs/transformer-model.md, "Fixed time per kernel").
inline constexpr double kDefaultKernelOverheadUs = 10;

/// Largest fixed time per kernel a description may give, microseconds (one second).
inline constexpr double kMaxKernelOverheadUs = 1e6;

/// The feed-forward block, which also fixes the architecture family: `kGelu` is GPT/OPT style
/// (a 2-matrix MLP, biases, LayerNorm, learned position embeddings), `kSwiglu` Llama style (a
/// gated 3-matrix MLP, no biases, RMSNorm, rotary positions without parameters), `kRelu2`
/// Nemotron-4 style (a 2-matrix MLP with squared ReLU, no biases, LayerNorm, rotary positions).
enum class Ffn { kGelu, kSwiglu, kRelu2 };

/// How the loss is computed over the logits (docs/memory.md, "The loss's working set").
/// `kMegatron`: Megatron-LM's vocabulary-parallel cross-entropy, which keeps the fp32 softmax and
/// writes the gradient over it (the default, and every description written before the key).
/// `kTorchFp32`: `torch.nn.functional.cross_entropy` on the logits cast to fp32, as torchtitan
/// and Hugging Face Transformers compute it: its backward holds the gradients of the fp32
/// log-softmax and of the fp32 logits beside the kept log-softmax, 8 bytes per logit more.
enum class CrossEntropy { kMegatron, kTorchFp32 };

/// The spelling of a `CrossEntropy` in files and options: "megatron" or "torch-fp32".
inline std::string_view cross_entropy_name(CrossEntropy loss) {
  return loss == CrossEntropy::kTorchFp32 ? "torch-fp32" : "megatron";
}

/// The `CrossEntropy` spelled `text`, or nothing.
inline std::optional<CrossEntropy> parse_cross_entropy(std::string_view text) {
  for (CrossEntropy loss : {CrossEntropy::kMegatron, CrossEntropy::kTorchFp32}) {
    if (text == cross_entropy_name(loss)) return loss;
  }
  return std::nullopt;
}

/// A decoder-only transformer and how it is trained.
struct TransformerConfig {
  std::string name;          ///< Model name written to the profile (empty: generated).
  int layers = 0;            ///< L, decoder layers (>= 1).
  int hidden = 0;            ///< h, hidden size (>= 1, a multiple of `heads`).
  int heads = 0;             ///< a, attention heads (>= 1).
  int kv_heads = 0;          ///< g, key/value heads (0: `heads`, i.e. no grouping).
  int ffn_hidden = 0;        ///< F, FFN size (0: Llama's rounding for SwiGLU, else 4h).
  int sequence = 0;          ///< s, sequence length, tokens (>= 1).
  int vocab = 0;             ///< V, vocabulary size (>= 1).
  Ffn ffn = Ffn::kGelu;      ///< FFN kind and architecture family.
  int micro_batch_size = 1;  ///< b, sequences per micro-batch (>= 1).
  /// Whether the description set `micro_batch_size` (then the batch-size search tries only it).
  bool micro_batch_size_fixed = false;
  hardware::DType dtype = hardware::DType::kBf16;  ///< Training number format.
  std::string gpu = "A100-80GB";                   ///< Catalogue GPU that speed 1.0 stands for.
  bool sequence_parallel = false;    ///< Megatron sequence parallelism (Korthikanti et al.).
  bool selective_recompute = false;  ///< Recompute the attention core in the backward.
  bool flash_attention = false;      ///< Fused attention: no s x s tensors stored or moved.
  /// torchtitan's per-operator selective activation checkpointing (`[activation_checkpoint]
  /// mode = "selective"`, `selective_ac_option = "op"`): a decoder keeps its input and the
  /// outputs of the fused attention and of every second matrix multiplication (Q, V, the MLP's
  /// first; SwiGLU's down projection) and recomputes the rest in its backward. Needs
  /// `flash_attention` and a bias-free layer; excludes `selective_recompute`.
  bool per_op_recompute = false;
  CrossEntropy cross_entropy = CrossEntropy::kMegatron;  ///< The loss (`cross_entropy`).
  /// Dropout after the attention, after each residual branch and on the embedding, with its
  /// 1-byte masks stored. On in a description without the key (every one written before it);
  /// Llama, Qwen, Mistral and Nemotron-4 train without it (their presets' `dropout`).
  bool dropout = true;
  std::vector<int> degrees;  ///< Tensor-parallel degrees (empty: 1, 2, 4, 8 where valid).
  /// Fixed time of one kernel (launch and dispatch), microseconds; 0 leaves the floor out.
  double kernel_overhead_us = kDefaultKernelOverheadUs;
  /// The fraction of the GPU's peak that no matrix multiplication exceeds (0 < c <= 1): every
  /// GEMM runs at `min(Calculon's efficiency, c)`. 1 (a description without the key, as every
  /// one written before it) leaves Calculon's tables alone; `pipeplan model transformer` gives
  /// the GPU's measured maximum (`hardware::measured_matmul_fraction`) unless told otherwise.
  double matmul_ceiling = 1;
  /// The number format of the gradients the optimizer reads (`gradient_dtype`): fp32, Megatron-
  /// LM's main gradients (the default, and every description written before the key), or bf16
  /// (Megatron-LM's `--grad-reduce-in-bf16`, NeMo's `grad_sync_dtype: bf16`). bf16 only when
  /// training in bf16 or fp8.
  hardware::DType gradient_dtype = hardware::DType::kFp32;
  /// The number format of the optimizer's state (`optimizer_dtype`): fp32, Adam's two moments
  /// and fp32 master weights (the default), or bf16, the two moments in bf16 and no master
  /// copy, the optimizer updating the bf16 weights (NeMo's `distributed_fused_adam` with `dtype:
  /// bf16`). bf16 only when training in bf16 or fp8.
  hardware::DType optimizer_dtype = hardware::DType::kFp32;
  /// The number format of the attention products (`Q K^T`, `P V`, or the fused kernel) when
  /// training in fp8 (`attention_dtype`): bf16, Transformer Engine's default (its recipes'
  /// `fp8_dpa` off; what `pipeplan model transformer` writes for fp8), or fp8 (Megatron-LM's
  /// `--fp8-dot-product-attention`). Unset: the training format, as a description without the
  /// key reads (every one written before it). Only with `dtype` fp8.
  std::optional<hardware::DType> attention_dtype;
};

}  // namespace pipeplan::model
