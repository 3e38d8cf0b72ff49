#pragma once
/// \file
/// The fixed time of a transformer's layers (issue 33, item 5; docs/transformer-model.md, "Fixed
/// time per kernel"): how many kernels one GPU launches for one micro-batch of each layer, in the
/// forward, the backward's input-gradient part `I` and its weight-gradient part `W` (spec 9.1),
/// and the floor that many launches put under each pass's FLOP and byte time.

#include <optional>

#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/model/transformer_config.hpp"

namespace pipeplan::model {

/// Kernels one GPU launches for one micro-batch of a layer. The same at every tensor-parallel
/// degree and with or without sequence parallelism: each GPU runs every kernel of the layer on
/// its share (the collectives are the execution model's, not counted here).
struct KernelCounts {
  int forward = 0;          ///< The forward (a recomputed forward launches as many).
  int backward_input = 0;   ///< `I`, with selective recomputation's recomputed attention core.
  int backward_weight = 0;  ///< `W`: the weight-gradient GEMMs (the embedding: its backward).
  [[nodiscard]] int backward() const { return backward_input + backward_weight; }
};

/// The kernels of `part` for a completed config: its family (`ffn`), fused attention, grouped
/// KV heads and selective recomputation decide them (the table of docs/transformer-model.md).
/// O(1).
KernelCounts transformer_kernel_counts(const TransformerConfig& config, TransformerPart part);

/// The problem of `config.kernel_overhead_us` outside 0 to `kMaxKernelOverheadUs` (or not a
/// number), if any. O(1).
std::optional<TransformerProblem> check_kernel_overhead(const TransformerConfig& config);

/// `kernels x config.kernel_overhead_us`, in ms. O(1).
double kernel_floor_ms(const TransformerConfig& config, int kernels);

/// Puts the floor under `costs` (their FLOP and byte times): forward = max(forward, F x f),
/// `W` = max(W, W_k x f), `I` = max(I, I_k x f) and backward = I + W, with f the figure per
/// kernel. A pass is launched by the CPU while the GPU runs it, so it takes the longer of the
/// two. O(1).
void apply_kernel_floor(const TransformerConfig& config, TransformerPart part,
                        TransformerLayerCosts& costs);

/// What `validate` says of a model generated from a description: the fixed time per micro-batch
/// summed over the layers (the same at every degree), and on how many layers it is above the
/// FLOP and byte time of a pass (forward, `I` or `W`) at degree 1 and at the largest degree.
struct KernelFloorSummary {
  long long kernels = 0;     ///< Kernels of one micro-batch's forward and backward.
  double forward_ms = 0;     ///< Their fixed time in the forwards.
  double backward_ms = 0;    ///< In the backwards.
  int layers = 0;            ///< Layers of the model.
  int bound_at_one = 0;      ///< Layers where the floor sets a pass's time at degree 1.
  int largest_degree = 1;    ///< The config's largest tensor-parallel degree.
  int bound_at_largest = 0;  ///< Layers where it does at that degree.
};

/// The summary of a completed `config`'s model. O(degrees) (the decoders are alike).
KernelFloorSummary kernel_floor_summary(const TransformerConfig& config);

}  // namespace pipeplan::model
