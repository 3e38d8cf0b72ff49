// torchtitan's per-operator checkpointing (`per_op_recompute`, docs/transformer-model.md): the
// stash and the recomputed operations counted by hand for a Llama-style and a Nemotron-style
// layer, the kernels it launches again, and the description's field with its problems.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/description.hpp"
#include "pipeplan/model/kernel_counts.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::model {
namespace {

// b = 1, s = 32, h = 128, a = 8, g = 2 (d = 16), V = 1000, bf16 (e = 2) on an A100-80GB, with
// dropout (its masks recomputed, not kept), fused attention and no kernel floor. SwiGLU with
// F = 384, or squared ReLU with F = 4h = 512.
TransformerConfig per_op(Ffn ffn) {
  TransformerConfig config;
  config.layers = 1;
  config.hidden = 128;
  config.heads = 8;
  config.kv_heads = 2;
  config.ffn_hidden = ffn == Ffn::kSwiglu ? 384 : 0;
  config.sequence = 32;
  config.vocab = 1000;
  config.ffn = ffn;
  config.flash_attention = true;
  config.per_op_recompute = true;
  config.kernel_overhead_us = 0;
  auto [completed, problem] = complete_transformer_config(config);
  EXPECT_EQ(problem, "");
  return completed;
}

TransformerConfig without_per_op(TransformerConfig config) {
  config.per_op_recompute = false;
  return config;
}

TEST(PerOpRecompute, KeepsTheAttentionAndEverySecondMatmul) {
  // s b h = 4096 values, s b F = 12288 (SwiGLU), 2 bytes each.
  const TransformerConfig llama = per_op(Ffn::kSwiglu);
  // Input 8192 + Q 8192 + V 2048 + attention output 8192 + its fp32 log-sum-exp 4 a s b = 1024
  // + gate 24576 + down projection 8192.
  EXPECT_EQ(decoder_stash_bytes(llama, 1), 60416.0);
  // Against Korthikanti's count with fused attention: 2 e s b h norms' and QKV's and MLP's
  // inputs, Q K V, the projection's input, 3 e s b F, the two dropout masks, the log-sum-exp.
  EXPECT_EQ(decoder_stash_bytes(without_per_op(llama), 1),
            4.0 * 2 * 4096 + 2.0 * 4096 * 2.5 + 3.0 * 2 * 12288 + 2.0 * 4096 + 1024);
  // t = 2: Q, V, the attention, the gate divided; the input whole; the down projection's
  // partial sum whole on each GPU.
  EXPECT_EQ(decoder_stash_bytes(llama, 2), 8192 + (8192 + 2048 + 8192 + 1024 + 24576) / 2.0 + 8192);
  // With sequence parallelism the input and the two reduce-scatters' outputs, split by t.
  TransformerConfig parallel = llama;
  parallel.sequence_parallel = true;
  EXPECT_EQ(decoder_stash_bytes(parallel, 2),
            3 * 8192 / 2.0 + (8192 + 2048 + 8192 + 1024 + 24576) / 2.0 + 8192);
  // Squared ReLU (F = 512, s b F = 16384) keeps its up projection, not its down.
  const TransformerConfig nemotron = per_op(Ffn::kRelu2);
  EXPECT_EQ(decoder_stash_bytes(nemotron, 1), 8192 + 8192 + 2048 + 8192 + 1024 + 32768.0);
  // The weight gradients still read every GEMM's input and output gradient.
  EXPECT_EQ(decoder_weight_stash_bytes(llama, 1),
            decoder_weight_stash_bytes(without_per_op(llama), 1));
}

TEST(PerOpRecompute, TheBackwardRunsTheOtherOperationsAgain) {
  // n = 32 tokens, {FLOPs, bytes} of each recomputed operation at t = 1.
  const std::vector<std::pair<double, double>> swiglu = {
      {0, 2 * 2 * 32 * 128},                                          // input norm
      {2.0 * 32 * 128 * 32, 2 * (32 * 128 + 128 * 32 + 32 * 32)},     // K (g d = 32 columns)
      {2.0 * 32 * 128 * 128, 2 * (32 * 128 + 128 * 128 + 32 * 128)},  // projection
      {0, 7 * 32 * 128},                                              // dropout and residual
      {0, 2 * 2 * 32 * 128},                                          // post-attention norm
      {0, 2 * 32 * (2 * 384 + 384)},                                  // SwiGLU
      {2.0 * 32 * 128 * 384, 2 * (32 * 128 + 128 * 384 + 32 * 384)},  // up (w3)
      {0, 7 * 32 * 128}};                                             // dropout and residual
  std::vector<std::pair<double, double>> relu2 = swiglu;
  relu2[5] = {0, 2 * 32 * (512 + 512)};                                      // squared ReLU
  relu2[6] = {2.0 * 32 * 512 * 128, 2 * (32 * 512 + 512 * 128 + 32 * 128)};  // down
  const hardware::GpuType& a100 = *hardware::find_gpu("A100-80GB");
  for (const auto& [ffn, ops] : {std::pair{Ffn::kSwiglu, swiglu}, std::pair{Ffn::kRelu2, relu2}}) {
    double ms = 0;
    for (const auto& [flops, bytes] : ops) {
      ms += operation_ms(a100, hardware::DType::kBf16, flops, bytes, 1);
    }
    const TransformerConfig config = per_op(ffn);
    const auto layer = transformer_layer_costs(config, TransformerPart::kDecoder, 1);
    const auto plain =
        transformer_layer_costs(without_per_op(config), TransformerPart::kDecoder, 1);
    EXPECT_EQ(layer.forward_ms, plain.forward_ms);
    EXPECT_NEAR(layer.backward_ms, plain.backward_ms + ms, 1e-12 * layer.backward_ms);
    EXPECT_EQ(layer.backward_weight_ms, plain.backward_weight_ms);  // recomputed in I
  }
}

TEST(PerOpRecompute, LaunchesTheForwardsKernelsButTwoAgain) {
  // Fused attention: SwiGLU 16 forward and 18 in I, squared ReLU 17 and 19 (the table); per
  // operator they launch 14 and 15 of their forward kernels again in I.
  TransformerConfig llama = per_op(Ffn::kSwiglu);
  const KernelCounts swiglu = transformer_kernel_counts(llama, TransformerPart::kDecoder);
  EXPECT_EQ(swiglu.forward, 16);
  EXPECT_EQ(swiglu.backward_input, 18 + 14);
  EXPECT_EQ(swiglu.backward_weight, 4);
  const KernelCounts relu2 =
      transformer_kernel_counts(per_op(Ffn::kRelu2), TransformerPart::kDecoder);
  EXPECT_EQ(relu2.forward, 17);
  EXPECT_EQ(relu2.backward_input, 19 + 15);
}

std::string problem_of(TransformerConfig config) {
  return complete_transformer_config(std::move(config)).second;
}

TEST(PerOpRecompute, NamesEveryCombinationItRefuses) {
  TransformerConfig config = per_op(Ffn::kSwiglu);
  config.selective_recompute = true;
  EXPECT_EQ(problem_of(config),
            "--per-op-recompute: excludes --selective-recompute: the two are different "
            "recomputation policies; choose one");
  config = per_op(Ffn::kSwiglu);
  config.flash_attention = false;
  EXPECT_EQ(problem_of(config),
            "--per-op-recompute: needs --flash-attention: the policy keeps the fused attention's "
            "output and recomputes nothing of it");
  config = per_op(Ffn::kSwiglu);
  config.ffn = Ffn::kGelu;
  EXPECT_EQ(problem_of(config),
            "--per-op-recompute: needs a layer without biases (--ffn swiglu or relu2): the policy "
            "counts matrix multiplications without bias, and every linear layer of a gelu model "
            "has one");
}

Model read(const std::string& text) { return read_model(io::source_from_text("m.json", text)); }

TEST(PerOpRecompute, IsADescriptionFieldWrittenOnlyWhenOn) {
  const Model model = read(R"({"transformer": {"preset": "llama3.1-8b", "sequence": 64,
      "flash_attention": true, "per_op_recompute": true}})");
  ASSERT_TRUE(model.transformer.has_value());
  EXPECT_TRUE(model.transformer->per_op_recompute);
  EXPECT_EQ(description_to_json(*model.transformer).value("per_op_recompute", false), true);
  EXPECT_FALSE(
      description_to_json(without_per_op(*model.transformer)).contains("per_op_recompute"));
  EXPECT_EQ(model.layers[1].stash_bytes, decoder_stash_bytes(*model.transformer, 1));
  try {
    read(R"({"transformer": {"preset": "llama3.1-8b", "per_op_recompute": true}})");
    ADD_FAILURE() << "read a per-operator description without fused attention";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              "m.json: /transformer/per_op_recompute: needs flash_attention: the policy keeps the "
              "fused attention's output and recomputes nothing of it");
  }
}

// A stage that recomputes its whole forward (torchtitan's full activation checkpointing)
// replaces per-operator checkpointing: its backward skips the operators per_op recomputes.
TEST(PerOpRecompute, AFullRecomputationSkipsWhatPerOpRecomputes) {
  for (const Ffn ffn : {Ffn::kSwiglu, Ffn::kRelu2}) {
    const TransformerConfig config = per_op(ffn);
    const TransformerLayerCosts with =
        transformer_layer_costs(config, TransformerPart::kDecoder, 1);
    const TransformerLayerCosts without =
        transformer_layer_costs(without_per_op(config), TransformerPart::kDecoder, 1);
    EXPECT_GT(with.backward_recompute_ms, 0);
    EXPECT_EQ(with.backward_recompute_ms, with.backward_ms - without.backward_ms);
    EXPECT_LE(with.backward_recompute_ms, with.forward_ms);
  }
}

}  // namespace
}  // namespace pipeplan::model
