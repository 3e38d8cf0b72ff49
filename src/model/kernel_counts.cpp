// Kernel counts of a transformer's layers and the floor their launches put under each pass
// (docs/transformer-model.md, "Fixed time per kernel"). Every count is one dispatched operation
// of Megatron-LM's layer with its default fusions; each function is O(1).

#include "pipeplan/model/kernel_counts.hpp"

#include <algorithm>
#include <vector>

#include "pipeplan/io/format.hpp"

namespace pipeplan::model {
namespace {

// The parts of a decoder layer and their kernels {forward, I}; the four GEMMs with weights add
// one kernel each to W. docs/transformer-model.md lists the same table.
struct Piece {
  int forward;
  int input_gradient;
};

// Fused LayerNorm or RMSNorm (Apex / Transformer Engine): one kernel each way.
constexpr Piece kNorm = {1, 1};
// A GEMM with weights: the forward, the input-gradient GEMM (W's GEMM is counted apart).
constexpr Piece kGemm = {1, 1};
// A column bias added after the QKV GEMM, and its gradient (a reduction over the tokens).
constexpr Piece kBias = {1, 1};
// Fused bias-dropout-add: one kernel forward; backward the dropout's gradient and the residual
// gradient's sum (and, with biases, the bias gradient's reduction, counted with the biases).
constexpr Piece kDropoutAdd = {1, 2};
// Unfused attention core: Q and K copied to the batched GEMM's layout (2), Q K^T (baddbmm),
// the fused scale-mask-softmax, dropout, P V (bmm), the context permuted back (1); backward
// two GEMMs per product and one kernel for each other forward kernel.
constexpr Piece kCore = {7, 9};
// The same without dropout: PyTorch returns the input of a dropout with p = 0 and launches no
// kernel (ATen's `dropout`), so the attention dropout's kernel each way is gone. The fused
// bias-dropout-add stays one kernel (the add).
constexpr Piece kCoreWithoutDropout = {6, 8};
// Fused attention (FlashAttention): Q, K and V rearranged (3), the fused kernel, the output
// rearranged (1); backward the same five.
constexpr Piece kFlashCore = {5, 5};
// Rotary positions (fused RoPE): one kernel for Q and one for K, each way.
constexpr Piece kRotary = {2, 2};
// Grouped KV heads without fused attention: K and V repeated to every head, and summed back.
constexpr Piece kKvRepeat = {2, 2};

Piece activation(Ffn ffn) {
  // Fused bias-GeLU and fused SwiGLU: one kernel each way; squared ReLU is relu then pow.
  return ffn == Ffn::kRelu2 ? Piece{2, 2} : Piece{1, 1};
}

KernelCounts decoder_counts(const TransformerConfig& config) {
  const bool biases = config.ffn == Ffn::kGelu, rotary = config.ffn != Ffn::kGelu;
  const Piece core = config.dropout ? kCore : kCoreWithoutDropout;  // unfused
  std::vector<Piece> pieces = {kNorm,
                               kGemm,
                               config.flash_attention ? kFlashCore : core,
                               kGemm,
                               kDropoutAdd,
                               kNorm,
                               kGemm,
                               activation(config.ffn),
                               kGemm,
                               kDropoutAdd};
  if (biases) pieces.push_back(kBias);
  if (rotary) pieces.push_back(kRotary);
  if (config.kv_heads < config.heads && !config.flash_attention) pieces.push_back(kKvRepeat);
  KernelCounts counts;
  for (const Piece& piece : pieces) {
    counts.forward += piece.forward;
    counts.backward_input += piece.input_gradient;
  }
  // With biases, the three biases fused into later kernels (projection, MLP up, MLP down) still
  // take a reduction each for their gradients.
  if (biases) counts.backward_input += 3;
  // Selective recomputation runs the unfused attention core's forward again in I.
  if (config.selective_recompute && !config.flash_attention) counts.backward_input += core.forward;
  // Per-operator checkpointing runs the forward's kernels again in I but the fused attention's
  // and the kept matrix multiplications': QKV keeps Q and V and runs K as its own GEMM, SwiGLU's
  // fused gate and up keeps the gate and runs the up, SwiGLU keeps the down projection and
  // squared ReLU its up. Two fewer than the forward either way (14 of 16, 15 of 17).
  if (config.per_op_recompute) counts.backward_input += counts.forward - 2;
  counts.backward_weight = 4;  // the weight-gradient GEMMs of QKV, projection, MLP up, MLP down
  return counts;
}

}  // namespace

KernelCounts transformer_kernel_counts(const TransformerConfig& config, TransformerPart part) {
  const bool positions = config.ffn == Ffn::kGelu;
  switch (part) {
    case TransformerPart::kEmbedding:
      // The row gather and dropout, with learned positions their gather and the add. The whole
      // backward is W: the dropout's gradient, the table's (and the positions') gradient.
      // Without dropout neither dropout kernel runs.
      if (positions) return config.dropout ? KernelCounts{4, 0, 3} : KernelCounts{3, 0, 2};
      return config.dropout ? KernelCounts{2, 0, 2} : KernelCounts{1, 0, 1};
    case TransformerPart::kDecoder:
      return decoder_counts(config);
    case TransformerPart::kOutput:
      // The final norm, the logits GEMM and Megatron-LM's vocabulary-parallel cross-entropy in
      // fp32 (14: cast, max, subtract, the target's mask (3) and masked index (2), gather, masked
      // fill, exp, sum, log, subtract); backward the cross-entropy's gradient (4: softmax copy,
      // one-hot subtract (2), scale), the logits' input gradient and the norm's; W the logits'
      // weight gradient.
      return {1 + 1 + 14, 4 + 1 + 1, 1};
  }
  return {};
}

std::optional<TransformerProblem> check_kernel_overhead(const TransformerConfig& config) {
  const double us = config.kernel_overhead_us;
  if (us >= 0 && us <= kMaxKernelOverheadUs) return std::nullopt;
  return TransformerProblem{"kernel_overhead_us",
                            "must be from 0 to " + io::format_number(kMaxKernelOverheadUs) +
                                " microseconds, got " + io::format_number(us, 10)};
}

double kernel_floor_ms(const TransformerConfig& config, int kernels) {
  return kernels * config.kernel_overhead_us * 1e-3;
}

void apply_kernel_floor(const TransformerConfig& config, TransformerPart part,
                        TransformerLayerCosts& costs) {
  const KernelCounts counts = transformer_kernel_counts(config, part);
  const double input_ms = costs.backward_ms - costs.backward_weight_ms;
  costs.forward_ms = std::max(costs.forward_ms, kernel_floor_ms(config, counts.forward));
  costs.backward_weight_ms =
      std::max(costs.backward_weight_ms, kernel_floor_ms(config, counts.backward_weight));
  costs.backward_ms =
      std::max(input_ms, kernel_floor_ms(config, counts.backward_input)) + costs.backward_weight_ms;
}

namespace {

// Whether the floor sets the time of a pass of `part` at degree `t`.
bool floor_binds(const TransformerConfig& config, TransformerPart part, int t) {
  TransformerConfig roofline = config;
  roofline.kernel_overhead_us = 0;
  const KernelCounts counts = transformer_kernel_counts(config, part);
  const TransformerLayerCosts costs = transformer_layer_costs(roofline, part, t);
  const double input_ms = costs.backward_ms - costs.backward_weight_ms;
  return kernel_floor_ms(config, counts.forward) > costs.forward_ms ||
         kernel_floor_ms(config, counts.backward_input) > input_ms ||
         kernel_floor_ms(config, counts.backward_weight) > costs.backward_weight_ms;
}

}  // namespace

KernelFloorSummary kernel_floor_summary(const TransformerConfig& config) {
  KernelFloorSummary summary;
  summary.largest_degree = config.degrees.empty() ? 1 : config.degrees.back();
  for (TransformerPart part :
       {TransformerPart::kEmbedding, TransformerPart::kDecoder, TransformerPart::kOutput}) {
    const int copies = part == TransformerPart::kDecoder ? config.layers : 1;
    const KernelCounts counts = transformer_kernel_counts(config, part);
    summary.kernels += static_cast<long long>(copies) * (counts.forward + counts.backward());
    summary.forward_ms += copies * kernel_floor_ms(config, counts.forward);
    summary.backward_ms += copies * kernel_floor_ms(config, counts.backward());
    summary.layers += copies;
    if (floor_binds(config, part, 1)) summary.bound_at_one += copies;
    if (floor_binds(config, part, summary.largest_degree)) summary.bound_at_largest += copies;
  }
  return summary;
}

}  // namespace pipeplan::model
