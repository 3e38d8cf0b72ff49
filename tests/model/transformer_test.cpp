// The transformer cost model against hand-computed counts for two configurations
// (docs/transformer-model.md), and the v3 model it writes. The configurations here leave the
// kernel floor out (`kernel_overhead_us` 0), so that the times are the FLOP and byte times
// alone; tests/model/kernel_counts_test.cpp tests the floor.

#include "pipeplan/model/transformer.hpp"

#include <gtest/gtest.h>

#include "pipeplan/io/json.hpp"

namespace pipeplan::model {
namespace {

// A: GPT style. b = 2, s = 16, h = 64, a = g = 4 (d = 16), F = 256, V = 100, bf16 (e = 2).
TransformerConfig gpt_style() {
  TransformerConfig config;
  config.layers = 2;
  config.hidden = 64;
  config.heads = 4;
  config.ffn_hidden = 256;
  config.sequence = 16;
  config.vocab = 100;
  config.micro_batch_size = 2;
  config.kernel_overhead_us = 0;
  auto [completed, problem] = complete_transformer_config(config);
  EXPECT_EQ(problem, "");
  return completed;
}

// B: Llama style. b = 1, s = 32, h = 128, a = 8, g = 2 (d = 16), F = 384, V = 1000, SwiGLU.
TransformerConfig llama_style() {
  TransformerConfig config;
  config.layers = 1;
  config.hidden = 128;
  config.heads = 8;
  config.kv_heads = 2;
  config.ffn_hidden = 384;
  config.sequence = 32;
  config.vocab = 1000;
  config.ffn = Ffn::kSwiglu;
  config.kernel_overhead_us = 0;
  auto [completed, problem] = complete_transformer_config(config);
  EXPECT_EQ(problem, "");
  return completed;
}

// C: Nemotron-4 style. b = 1, s = 32, h = 128, a = 8, g = 2 (d = 16), F = 512, V = 1000,
// squared ReLU (2-matrix MLP, no biases, LayerNorm, rotary positions).
TransformerConfig nemotron_style() {
  TransformerConfig config;
  config.layers = 1;
  config.hidden = 128;
  config.heads = 8;
  config.kv_heads = 2;
  config.sequence = 32;
  config.vocab = 1000;
  config.ffn = Ffn::kRelu2;
  config.kernel_overhead_us = 0;
  auto [completed, problem] = complete_transformer_config(config);
  EXPECT_EQ(problem, "");
  return completed;
}

TEST(TransformerTest, ForwardFlopsOfADecoderLayer) {
  // A: 24 b s h^2 + 4 b s^2 h = 24*2*16*64*64 + 4*2*16*16*64.
  EXPECT_EQ(decoder_forward_flops(gpt_style()), 3145728.0 + 131072.0);
  // B: QKV 2*32*128*(128 + 2*2*16) + scores and values 4*32*32*8*16 + projection
  // 2*32*128*128 + SwiGLU 6*32*128*384.
  EXPECT_EQ(decoder_forward_flops(llama_style()), 1572864.0 + 524288.0 + 1048576.0 + 9437184.0);
  // C: as B, with the 2-matrix MLP 4*32*128*512.
  EXPECT_EQ(decoder_forward_flops(nemotron_style()), 1572864.0 + 524288.0 + 1048576.0 + 8388608.0);
}

TEST(TransformerTest, ParametersOfADecoderLayer) {
  // A at t = 1: 12 h^2 + 13 h.
  EXPECT_EQ(decoder_parameters(gpt_style(), 1), 12.0 * 64 * 64 + 13 * 64);
  // A at t = 2: (QKV 64*192 + 192, projection 64*64, MLP 2*64*256 + 256) / 2, then the
  // row-parallel biases (2*64) and two LayerNorms (4*64) whole.
  EXPECT_EQ(decoder_parameters(gpt_style(), 2), (12288.0 + 192 + 4096 + 32768 + 256) / 2 + 384);
  // B: QKV 128*192, projection 128*128, gate/up/down 3*128*384, two RMSNorms 2*128.
  EXPECT_EQ(decoder_parameters(llama_style(), 1), 24576.0 + 16384 + 147456 + 256);
  EXPECT_EQ(decoder_parameters(llama_style(), 2), (24576.0 + 16384 + 147456) / 2 + 256);
  // C: QKV 128*192, projection 128*128, up and down 2*128*512, no biases; two LayerNorms with
  // scale and shift 4*128, whole at every degree.
  EXPECT_EQ(decoder_parameters(nemotron_style(), 1), 24576.0 + 16384 + 131072 + 512);
  EXPECT_EQ(decoder_parameters(nemotron_style(), 2), (24576.0 + 16384 + 131072) / 2 + 512);
}

TEST(TransformerTest, ActivationMemoryFollowsKorthikanti) {
  TransformerConfig a = gpt_style();
  const double sbh = 16.0 * 2 * 64;
  // Table 2: s b h (34 + 5 a s / h) without parallelism; 5 a s / h = 5.
  EXPECT_EQ(decoder_stash_bytes(a, 1), sbh * (34 + 5));
  // Tensor parallel: s b h (10 + 24/t + 5 a s / (h t)).
  EXPECT_EQ(decoder_stash_bytes(a, 2), sbh * (10 + 12 + 2.5));
  a.sequence_parallel = true;  // s b h (34 + 5 a s / h) / t
  EXPECT_EQ(decoder_stash_bytes(a, 2), sbh * (34 + 5) / 2);
  a.selective_recompute = true;  // 34 s b h / t
  EXPECT_EQ(decoder_stash_bytes(a, 2), sbh * 34 / 2);
  a.sequence_parallel = false;  // s b h (10 + 24/t)
  EXPECT_EQ(decoder_stash_bytes(a, 2), sbh * (10 + 12));
  a.flash_attention = true;  // the s x s tensors give way to a fp32 log-sum-exp: 4 a s b / t
  EXPECT_EQ(decoder_stash_bytes(a, 2), sbh * (10 + 12) + 4.0 * 4 * 16 * 2 / 2);
  // B: outside the split regions 4 e sbh + 2 sbh; inside e sbh (2 + 2 g/a) + 3 e s b F;
  // scores (2e + 1) a s^2 b.
  const double sbh_b = 32.0 * 128, sbf_b = 32.0 * 384;
  const double outside = 8 * sbh_b + 2 * sbh_b, inside = 2 * sbh_b * 2.5 + 6 * sbf_b;
  const double scores = 5.0 * 8 * 32 * 32;
  EXPECT_EQ(decoder_stash_bytes(llama_style(), 1), outside + inside + scores);
  EXPECT_EQ(decoder_stash_bytes(llama_style(), 2), outside + inside / 2 + scores / 2);
  // C: GeLU's form: the squared ReLU's input and the down projection's input, 2 e s b F.
  const double sbf_c = 32.0 * 512;
  const double inside_c = 2 * sbh_b * 2.5 + 4 * sbf_c;
  EXPECT_EQ(decoder_stash_bytes(nemotron_style(), 1), outside + inside_c + scores);
  EXPECT_EQ(decoder_stash_bytes(nemotron_style(), 2), outside + inside_c / 2 + scores / 2);
  // After I: inputs 4 e sbh outside, e sbh + e sbf inside; output gradients QKV e s b (a d + 2 g d)
  // and MLP up e s b F.
  EXPECT_EQ(decoder_weight_stash_bytes(nemotron_style(), 2),
            8 * sbh_b + (2 * sbh_b + 2 * sbf_c + 2 * 32.0 * 192 + 2 * sbf_c) / 2);
}

TEST(TransformerTest, CompletesDefaults) {
  TransformerConfig config = gpt_style();
  EXPECT_EQ(config.kv_heads, 4);
  EXPECT_EQ(config.degrees, (std::vector<int>{1, 2, 4}));  // 8 does not divide 4 heads
  EXPECT_EQ(config.name, "transformer-L2-h64");
  EXPECT_EQ(llama_style().degrees, (std::vector<int>{1, 2}));  // 4 does not divide 2 KV heads
  TransformerConfig llama2;
  llama2.layers = 32;
  llama2.hidden = 4096;
  llama2.heads = 32;
  llama2.sequence = 4096;
  llama2.vocab = 32000;
  llama2.ffn = Ffn::kSwiglu;
  // Llama's rule: 8h/3 = 10922, rounded up to a multiple of 256 (Llama 2 7B's 11008).
  EXPECT_EQ(complete_transformer_config(llama2).first.ffn_hidden, 11008);
  llama2.ffn = Ffn::kGelu;
  EXPECT_EQ(complete_transformer_config(llama2).first.ffn_hidden, 4 * 4096);
  llama2.ffn = Ffn::kRelu2;  // Nemotron-4's 4h
  EXPECT_EQ(complete_transformer_config(llama2).first.ffn_hidden, 4 * 4096);
  EXPECT_EQ(nemotron_style().ffn_hidden, 512);
}

TEST(TransformerTest, BytesOfTheNemotronStyleModel) {
  const TransformerConfig config = nemotron_style();
  const Model model = transformer_model(config);
  ASSERT_EQ(model.layers.size(), 3u);
  // No learned positions: embedding V h / t; LayerNorm: output V h / t + 2h (2-byte weights).
  EXPECT_EQ(parameter_bytes_at(model.layers[0], 2), 2 * (1000.0 * 128 / 2));
  EXPECT_EQ(parameter_bytes_at(model.layers[2], 2), 2 * (1000.0 * 128 / 2 + 2 * 128));
  EXPECT_EQ(model.layers[1].parameter_bytes, 2 * decoder_parameters(config, 1));
  // The embedding gathers its rows (2 e n h) and applies dropout, adding no positions: the
  // same forward as the Llama style's, whose embedding differs only in nothing it reads.
  TransformerConfig llama = config;
  llama.ffn = Ffn::kSwiglu;
  EXPECT_EQ(transformer_layer_costs(config, TransformerPart::kEmbedding, 1).forward_ms,
            transformer_layer_costs(llama, TransformerPart::kEmbedding, 1).forward_ms);
  TransformerConfig gpt = config;
  gpt.ffn = Ffn::kGelu;
  EXPECT_LT(transformer_layer_costs(config, TransformerPart::kEmbedding, 1).forward_ms,
            transformer_layer_costs(gpt, TransformerPart::kEmbedding, 1).forward_ms);
}

// Llama, Qwen, Mistral and Nemotron-4 train without dropout: no 1-byte masks (2 s b h per
// decoder, s b h on the embedding), the softmax output alone of the s x s tensors, and no
// dropout traffic in the time.
TEST(TransformerTest, WithoutDropoutNoMasksAreStored) {
  TransformerConfig a = gpt_style();
  a.dropout = false;
  const double sbh = 16.0 * 2 * 64;
  // Table 2 less the masks: s b h (34 - 2 + (5 - 3) a s / h); a s / h = 1, scores 2 a s^2 b.
  EXPECT_EQ(decoder_stash_bytes(a, 1), sbh * (32 + 2));
  a.sequence_parallel = true;
  a.selective_recompute = true;  // 32 s b h / t
  EXPECT_EQ(decoder_stash_bytes(a, 2), sbh * 32 / 2);
  // The weight stash holds no mask either way.
  TransformerConfig with_masks = a;
  with_masks.dropout = true;
  EXPECT_EQ(decoder_weight_stash_bytes(a, 2), decoder_weight_stash_bytes(with_masks, 2));
  // The embedding stores nothing; its forward is the gather alone.
  TransformerConfig llama = llama_style();
  llama.dropout = false;
  const Model model = transformer_model(llama);
  EXPECT_EQ(stash_bytes_at(model.layers[0], 2), 0);
  // Each residual add moves 3 e r h bytes instead of (3 e + 1) r h, and the unfused core drops
  // its dropout's (2 e + 1) b a s^2: the forward is shorter by exactly those operations' time.
  const hardware::GpuType& a100 = *hardware::find_gpu("A100-80GB");
  const TransformerConfig with = llama_style();
  const double tokens = 1.0 * 32, h = 128, scores = 1.0 * 8 * 32 * 32;
  const double removed = 2 * (operation_ms(a100, hardware::DType::kBf16, 0, 7 * tokens * h, 1) -
                              operation_ms(a100, hardware::DType::kBf16, 0, 6 * tokens * h, 1)) +
                         operation_ms(a100, hardware::DType::kBf16, 0, 5 * scores, 1);
  EXPECT_NEAR(transformer_layer_costs(with, TransformerPart::kDecoder, 1).forward_ms -
                  transformer_layer_costs(llama, TransformerPart::kDecoder, 1).forward_ms,
              removed, 1e-12);
  EXPECT_GT(removed, 0);
}

TEST(TransformerTest, BytesOfTheLlamaStyleModel) {
  const TransformerConfig config = llama_style();
  const Model model = transformer_model(config);
  ASSERT_EQ(model.layers.size(), 3u);
  // One all-reduce and one boundary: b s h values of 2 bytes; token ids: 8 bytes each.
  EXPECT_EQ(model.layers[1].tensor_parallel->allreduce_bytes, 2.0 * 1 * 32 * 128);
  EXPECT_EQ(model.layers[1].activation_bytes, 2.0 * 1 * 32 * 128);
  EXPECT_EQ(model.input_bytes, 8.0 * 32);
  // No learned positions, RMSNorm: embedding V h / t, output V h / t + h (2-byte weights).
  EXPECT_EQ(parameter_bytes_at(model.layers[0], 2), 2 * (1000.0 * 128 / 2));
  EXPECT_EQ(parameter_bytes_at(model.layers[2], 2), 2 * (1000.0 * 128 / 2 + 128));
  EXPECT_EQ(model.layers[1].parameter_bytes, 2 * decoder_parameters(config, 1));
  // The embedding keeps its 1-byte dropout mask; with sequence parallelism split by t.
  EXPECT_EQ(stash_bytes_at(model.layers[0], 2), 32.0 * 128);
  TransformerConfig parallel = config;
  parallel.sequence_parallel = true;
  EXPECT_EQ(stash_bytes_at(transformer_model(parallel).layers[0], 2), 32.0 * 128 / 2);
}

TEST(TransformerTest, RejectsInconsistentShapes) {
  TransformerConfig config = gpt_style();
  config.heads = 3;
  EXPECT_EQ(complete_transformer_config(config).second,
            "--heads: must divide --hidden (64), got 3");
  config = gpt_style();
  config.kv_heads = 3;
  EXPECT_EQ(complete_transformer_config(config).second,
            "--kv-heads: must divide --heads (4), got 3");
  config = gpt_style();
  config.layers = 0;
  EXPECT_EQ(complete_transformer_config(config).second, "--layers: must be at least 1");
  config = gpt_style();
  config.gpu = "TPU";
  EXPECT_EQ(complete_transformer_config(config).second,
            "--gpu: unknown GPU \"TPU\" (known: V100-32GB, A100-40GB, A100-80GB, H100-SXM, "
            "H200, GH200, B200, MI300X)");
  config = gpt_style();
  config.gpu = "V100";
  EXPECT_EQ(complete_transformer_config(config).second,
            "--dtype: V100-32GB has no bf16 peak in the catalogue");
  config.dtype = hardware::DType::kFp16;
  EXPECT_EQ(complete_transformer_config(config).second, "");
  EXPECT_EQ(complete_transformer_config(config).first.gpu, "V100-32GB");
  config = gpt_style();
  config.degrees = {1, 8};
  EXPECT_EQ(complete_transformer_config(config).second,
            "--degrees: 8 must divide --heads, --kv-heads and --ffn-hidden (4, 4, 256)");
  config.degrees = {2, 4};
  EXPECT_EQ(complete_transformer_config(config).second, "--degrees: must start at 1, got 2");
  config.degrees = {1, 2, 2};
  EXPECT_EQ(complete_transformer_config(config).second, "--degrees: must be strictly ascending");
}

TEST(TransformerTest, OperationTimeUsesCalculonEfficiencies) {
  const hardware::GpuType& a100 = *hardware::find_gpu("A100-80GB");
  using hardware::DType;
  // 2 TFLOP (>= 128 GFLOP: 95 %) at 312 TFLOP/s; 1 GB (>= 100 MB: 90 %) at 2039 GB/s.
  EXPECT_DOUBLE_EQ(operation_ms(a100, DType::kBf16, 2e12, 0, 1), 2e12 / (312e12 * 0.95) * 1e3);
  EXPECT_DOUBLE_EQ(operation_ms(a100, DType::kBf16, 0, 1e9, 1), 1e9 / (2039e9 * 0.9) * 1e3);
  // 0.5 GFLOP (below 1 GFLOP: 10 %) and 0.5 MB (below 1 MB: 30 %), added.
  EXPECT_DOUBLE_EQ(operation_ms(a100, DType::kBf16, 0.5e9, 0.5e6, 1),
                   0.5e9 / (312e12 * 0.1) * 1e3 + 0.5e6 / (2039e9 * 0.3) * 1e3);
  EXPECT_DOUBLE_EQ(operation_ms(a100, DType::kTf32, 20e9, 0, 1), 20e9 / (156e12 * 0.9) * 1e3);
}

TEST(TransformerTest, MatmulCeilingCapsEveryTierAboveIt) {
  const hardware::GpuType& h100 = *hardware::find_gpu("H100-SXM");
  using hardware::DType;
  const double c = 794.5 / 989.4;  // the H100's measured BF16 maximum
  // 2 TFLOP (tabled 95 %) and 20 GFLOP (tabled 90 %) run at the ceiling; 2 GFLOP (60 %) and
  // 0.5 GFLOP (10 %) are below it and keep their tables; memory traffic is not capped.
  EXPECT_DOUBLE_EQ(operation_ms(h100, DType::kBf16, 2e12, 0, c), 2e12 / (989.4e12 * c) * 1e3);
  EXPECT_DOUBLE_EQ(operation_ms(h100, DType::kBf16, 20e9, 0, c), 20e9 / (989.4e12 * c) * 1e3);
  EXPECT_DOUBLE_EQ(operation_ms(h100, DType::kBf16, 2e9, 0, c), 2e9 / (989.4e12 * 0.6) * 1e3);
  EXPECT_DOUBLE_EQ(operation_ms(h100, DType::kBf16, 0.5e9, 1e9, c),
                   0.5e9 / (989.4e12 * 0.1) * 1e3 + 1e9 / (3.35e12 * 0.9) * 1e3);
  // A ceiling of 1 is the tables alone.
  EXPECT_DOUBLE_EQ(operation_ms(h100, DType::kBf16, 2e12, 0, 1), 2e12 / (989.4e12 * 0.95) * 1e3);
}

TEST(TransformerTest, MeasuredMatmulFractionsComeFromTheCatalogue) {
  using hardware::DType;
  using hardware::measured_matmul_fraction;
  const hardware::GpuType& h100 = *hardware::find_gpu("H100");
  EXPECT_DOUBLE_EQ(*measured_matmul_fraction(h100, DType::kBf16), 794.5 / 989.4);
  EXPECT_DOUBLE_EQ(*measured_matmul_fraction(h100, DType::kFp16), 794.5 / 989.4);
  EXPECT_DOUBLE_EQ(*measured_matmul_fraction(h100, DType::kFp8), 1402.6 / 1978.9);
  EXPECT_FALSE(measured_matmul_fraction(h100, DType::kTf32));
  EXPECT_FALSE(measured_matmul_fraction(h100, DType::kFp32));
  EXPECT_DOUBLE_EQ(*measured_matmul_fraction(*hardware::find_gpu("A100-40GB"), DType::kBf16),
                   271.2 / 312);
  EXPECT_DOUBLE_EQ(*measured_matmul_fraction(*hardware::find_gpu("H200"), DType::kBf16),
                   794.5 / 989.4);
  EXPECT_FALSE(measured_matmul_fraction(*hardware::find_gpu("V100"), DType::kFp16));
  EXPECT_FALSE(measured_matmul_fraction(*hardware::find_gpu("B200"), DType::kBf16));
  EXPECT_FALSE(measured_matmul_fraction(*hardware::find_gpu("A100"), DType::kFp8));  // no FP8

  TransformerConfig config = gpt_style();
  config.gpu = "H100";
  EXPECT_DOUBLE_EQ(default_matmul_ceiling(config), 794.5 / 989.4);
  config.dtype = DType::kTf32;
  EXPECT_EQ(default_matmul_ceiling(config), 1);
  config.gpu = "no-such-gpu";
  EXPECT_EQ(default_matmul_ceiling(config), 1);
}

TEST(TransformerTest, MatmulCeilingSlowsOnlyTheCappedGemms) {
  // GPT-3 175B's decoder at t = 8 on an A100: its GEMMs are above 16 GFLOP, so a ceiling below
  // 90 % slows the forward; a ceiling of 0.95 or more changes nothing.
  TransformerConfig config =
      complete_transformer_config(find_transformer_preset("gpt3-175b")->config).first;
  const double free_ms = transformer_layer_costs(config, TransformerPart::kDecoder, 8).forward_ms;
  config.matmul_ceiling = 0.95;
  EXPECT_EQ(transformer_layer_costs(config, TransformerPart::kDecoder, 8).forward_ms, free_ms);
  config.matmul_ceiling = 271.2 / 312;
  const double capped_ms = transformer_layer_costs(config, TransformerPart::kDecoder, 8).forward_ms;
  EXPECT_GT(capped_ms, free_ms);
  EXPECT_LT(capped_ms, free_ms * 0.95 / (271.2 / 312));  // memory-bound parts are not slowed
}

TEST(TransformerTest, ALayerTakesTheTimeOfItsOperations) {
  // Config A at t = 1, every operation of docs/transformer-model.md's table counted by hand:
  // n = b s = 32 tokens, h = 64, a = g = 4, d = 16, F = 256, V = 100, e = 2 bytes; the s x s
  // tensors hold b a s^2 = 2048 values. {FLOPs, bytes read and written}.
  const std::vector<std::pair<double, double>> decoder = {
      {0, 2 * 2 * 32 * 64},                                        // input norm
      {2.0 * 32 * 64 * 192, 2 * (32 * 64 + 64 * 192 + 32 * 192)},  // QKV
      {2.0 * 2 * 4 * 256 * 16, 2 * (2 * 16 * 16 * 8 + 2048)},      // scores Q K^T
      {0, 2 * 2 * 2048},                                           // softmax
      {0, 5 * 2048},                                               // dropout with its 1-byte mask
      {2.0 * 2 * 4 * 256 * 16, 2 * (2048 + 2 * 16 * 16 * 8)},      // P V
      {2.0 * 32 * 64 * 64, 2 * (32 * 64 + 64 * 64 + 32 * 64)},     // projection
      {0, 7 * 32 * 64},                                            // dropout and residual
      {0, 2 * 2 * 32 * 64},                                        // post-attention norm
      {2.0 * 32 * 64 * 256, 2 * (32 * 64 + 64 * 256 + 32 * 256)},  // MLP up
      {0, 2 * 32 * 512},                                           // GeLU: reads F, writes F
      {2.0 * 32 * 256 * 64, 2 * (32 * 256 + 256 * 64 + 32 * 64)},  // MLP down
      {0, 7 * 32 * 64}};                                           // dropout and residual
  const std::vector<std::pair<double, double>> output = {
      {0, 2 * 2 * 32 * 64},                                        // final norm
      {2.0 * 32 * 64 * 100, 2 * (32 * 64 + 64 * 100 + 32 * 100)},  // logits
      {0, 10 * 32 * 100}};  // softmax cross-entropy: the logits and fp32 values
  const hardware::GpuType& a100 = *hardware::find_gpu("A100-80GB");
  auto total_ms = [&](const std::vector<std::pair<double, double>>& ops) {
    double ms = 0, flops = 0;
    for (const auto& [f, bytes] : ops) {
      ms += operation_ms(a100, hardware::DType::kBf16, f, bytes, 1);
      flops += f;
    }
    return std::make_pair(ms, flops);
  };
  const TransformerConfig config = gpt_style();
  const auto [decoder_ms, decoder_flops] = total_ms(decoder);
  EXPECT_EQ(decoder_flops, decoder_forward_flops(config));  // the same 24 b s h^2 + 4 b s^2 h
  const TransformerLayerCosts layer = transformer_layer_costs(config, TransformerPart::kDecoder, 1);
  EXPECT_NEAR(layer.forward_ms, decoder_ms, 1e-12 * decoder_ms);
  // Every operation here is below 1 GFLOP and 1 MB: 10 % of the peak, 30 % of the bandwidth.
  EXPECT_NEAR(decoder_ms, decoder_flops / (312e12 * 0.1) * 1e3 + 284672.0 / (2039e9 * 0.3) * 1e3,
              1e-12 * decoder_ms);
  const TransformerLayerCosts last = transformer_layer_costs(config, TransformerPart::kOutput, 1);
  EXPECT_NEAR(last.forward_ms, total_ms(output).first, 1e-12 * last.forward_ms);
  EXPECT_EQ(last.backward_ms, 2 * last.forward_ms);
}

// FP8 training runs the linear layers' GEMMs in FP8 and the attention core in BF16 (Transformer
// Engine's default, `fp8_dpa` off; `attention_dtype` bf16): config A in fp8 on an H100 takes its
// QKV, projection and MLP GEMMs at the FP8 peak and its two attention products at the BF16 peak,
// each at 10 % (every operation is below 1 GFLOP), the memory-bound operations as in bf16 (e = 2
// either way).
TEST(TransformerTest, Fp8TrainingRunsTheAttentionCoreInBf16) {
  using hardware::DType;
  TransformerConfig config = gpt_style();
  config.gpu = "H100-SXM";
  config.dtype = DType::kFp8;
  config.attention_dtype = DType::kBf16;  // what `model transformer --dtype fp8` writes
  config.matmul_ceiling = default_matmul_ceiling(config);  // 0.709: no operation reaches it
  const double gemm_flops = 2.0 * 32 * 64 * (192 + 64 + 256 + 256);  // QKV, projection, MLP
  const double attention_flops = 2 * (2.0 * 2 * 4 * 256 * 16);       // Q K^T and P V
  const double bytes = 284672;  // every operation's reads and writes, as in bf16
  const double expected = gemm_flops / (1978.9e12 * 0.1) * 1e3 +
                          attention_flops / (989.4e12 * 0.1) * 1e3 + bytes / (3.35e12 * 0.3) * 1e3;
  const double fp8_ms = transformer_layer_costs(config, TransformerPart::kDecoder, 1).forward_ms;
  EXPECT_NEAR(fp8_ms, expected, 1e-12 * expected);
  // With the attention in fp8 (Megatron-LM's --fp8-dot-product-attention) its two products run
  // at the FP8 peak too.
  config.attention_dtype = DType::kFp8;
  EXPECT_NEAR(transformer_layer_costs(config, TransformerPart::kDecoder, 1).forward_ms,
              expected - attention_flops / (989.4e12 * 0.1) * 1e3 +
                  attention_flops / (1978.9e12 * 0.1) * 1e3,
              1e-12 * expected);
  // The same layer in bf16 differs by its GEMMs alone.
  config.attention_dtype.reset();
  config.dtype = DType::kBf16;
  config.matmul_ceiling = default_matmul_ceiling(config);
  const double bf16_ms = transformer_layer_costs(config, TransformerPart::kDecoder, 1).forward_ms;
  EXPECT_NEAR(bf16_ms - fp8_ms,
              gemm_flops / (989.4e12 * 0.1) * 1e3 - gemm_flops / (1978.9e12 * 0.1) * 1e3,
              1e-9 * bf16_ms);
  // GPT-3 175B at t = 8 with fused attention, where the ceilings bind (the QKV GEMM is above 128
  // GFLOP): the forward in fp8 and in bf16 still differ by the four weighted GEMMs alone, the
  // weight-gradient part W (backward_weight_ms) of each, so the attention core takes the same time
  // in both, capped at the BF16 maximum.
  TransformerConfig big =
      complete_transformer_config(find_transformer_preset("gpt3-175b")->config).first;
  big.gpu = "H100-SXM";
  big.flash_attention = true;
  big.kernel_overhead_us = 0;
  const auto costs = [&](DType dtype) {
    big.dtype = dtype;
    big.attention_dtype = dtype == DType::kFp8 ? std::optional(DType::kBf16) : std::nullopt;
    big.matmul_ceiling = default_matmul_ceiling(big);
    return transformer_layer_costs(big, TransformerPart::kDecoder, 8);
  };
  const TransformerLayerCosts big_bf16 = costs(DType::kBf16), big_fp8 = costs(DType::kFp8);
  EXPECT_NEAR(big_bf16.forward_ms - big_fp8.forward_ms,
              big_bf16.backward_weight_ms - big_fp8.backward_weight_ms, 1e-9 * big_bf16.forward_ms);
  EXPECT_GT(big_bf16.backward_weight_ms, 1.5 * big_fp8.backward_weight_ms);  // the GEMMs are FP8
}

TEST(TransformerTest, LayerTimesAndUpdate) {
  const TransformerConfig config = gpt_style();
  const TransformerLayerCosts one = transformer_layer_costs(config, TransformerPart::kDecoder, 1);
  const TransformerLayerCosts two = transformer_layer_costs(config, TransformerPart::kDecoder, 2);
  EXPECT_EQ(one.backward_ms, 2 * one.forward_ms);
  EXPECT_LT(two.forward_ms, one.forward_ms);
  EXPECT_EQ(one.parameter_bytes, 2 * decoder_parameters(config, 1));
  EXPECT_EQ(two.stash_bytes, decoder_stash_bytes(config, 2));
  // Adam: 28 bytes per parameter (1,399,552 bytes: at least 1 MB, 60 % of 2039 GB/s).
  EXPECT_DOUBLE_EQ(one.update_ms, 28 * 49984.0 / (2039e9 * 0.6) * 1e3);
  TransformerConfig selective = config;
  selective.selective_recompute = true;
  const TransformerLayerCosts recomputing =
      transformer_layer_costs(selective, TransformerPart::kDecoder, 1);
  EXPECT_EQ(recomputing.forward_ms, one.forward_ms);
  EXPECT_GT(recomputing.backward_ms, one.backward_ms);
  // The embedding: V h / t rows plus s h learned positions; the output layer V h / t + 2h.
  EXPECT_EQ(transformer_layer_costs(config, TransformerPart::kEmbedding, 2).parameter_bytes,
            2 * (100.0 * 64 / 2 + 16 * 64));
  EXPECT_EQ(transformer_layer_costs(config, TransformerPart::kOutput, 1).parameter_bytes,
            2 * (100.0 * 64 + 2 * 64));
  // The output layer stashes its inputs and the fp32 logits: 2 e s b h + 4 s b V / t.
  EXPECT_EQ(transformer_layer_costs(config, TransformerPart::kOutput, 2).stash_bytes,
            4.0 * 2048 + 4.0 * 32 * 100 / 2);
}

TEST(TransformerTest, WritesAV3ModelThatReadsBack) {
  const TransformerConfig config = gpt_style();
  const Model model = transformer_model(config);
  ASSERT_EQ(model.layers.size(), 4u);
  EXPECT_EQ(model.layers[0].name, "embedding");
  EXPECT_EQ(model.layers[1].name, "decoder0");
  EXPECT_EQ(model.layers[3].name, "output");
  EXPECT_EQ(model.parameter_memory_factor, 9);
  EXPECT_EQ(model.sharded_memory_factor, 6);
  EXPECT_EQ(model.reserve_bytes, kFrameworkReserveBytes);
  EXPECT_EQ(model.input_bytes, 8.0 * 2 * 16);
  EXPECT_EQ(model.profile_device, "A100-80GB");
  EXPECT_EQ(model.profile_batch_size, 2);
  const Layer& decoder = model.layers[1];
  EXPECT_EQ(decoder.activation_bytes, 2.0 * 2 * 16 * 64);  // e b s h
  EXPECT_EQ(model.layers[3].activation_bytes, 0);
  ASSERT_TRUE(decoder.tensor_parallel.has_value());
  EXPECT_EQ(decoder.tensor_parallel->allreduce_bytes, 2.0 * 2 * 16 * 64);
  EXPECT_EQ(model.layers[0].tensor_parallel->allreduces_forward, 1);
  EXPECT_EQ(model.layers[0].tensor_parallel->allreduces_backward, 0);
  EXPECT_EQ(model.layers[3].tensor_parallel->allreduces_backward, 1);
  EXPECT_EQ(decoder.tensor_parallel->allreduces_backward, 2);
  // With sequence parallelism the backward gathers the sharded GEMM inputs again: 2 all-gathers,
  // one more all-reduce's worth of bytes.
  TransformerConfig sequence_parallel = config;
  sequence_parallel.sequence_parallel = true;
  const Model sp = transformer_model(sequence_parallel);
  EXPECT_EQ(sp.layers[1].tensor_parallel->allreduces_forward, 2);
  EXPECT_EQ(sp.layers[1].tensor_parallel->allreduces_backward, 3);
  EXPECT_EQ(sp.layers[0].tensor_parallel->allreduces_backward, 0);
  EXPECT_EQ(decoder.tensor_parallel->degrees, config.degrees);
  EXPECT_EQ(parameter_bytes_at(decoder, 4), 2 * decoder_parameters(config, 4));
  EXPECT_EQ(stash_bytes_at(decoder, 2), decoder_stash_bytes(config, 2));
  const std::string text = io::dump_json(model_to_json(model));
  const Model again = read_model(io::source_from_text("m.json", text));
  EXPECT_EQ(io::dump_json(model_to_json(again)), text);
  // The split backward's fields (spec 9.1) make it v3.
  EXPECT_EQ(model_to_json(model)["schema"], "pipeplan/model/v3");
  // fp32 keeps weights, gradients and two moments: factor 4, of which 2 shardable.
  TransformerConfig fp32 = config;
  fp32.dtype = hardware::DType::kFp32;
  EXPECT_EQ(transformer_model(fp32).parameter_memory_factor, 4);
  EXPECT_EQ(transformer_model(fp32).sharded_memory_factor, 2);
  EXPECT_EQ(transformer_model(fp32).layers[1].parameter_bytes, 4 * decoder_parameters(config, 1));
}

// Megatron-LM's bytes per parameter (Megatron Core's distributed optimizer guide): bf16 weights
// with fp32 main gradients 18 (6 + 12/d sharded), fp16 weights and gradients 20 (4 + 16/d),
// fp32 16 (8 + 8/d); in units of the weights' own bytes. The old figures (16 bytes for 16-bit
// training, factor 8) left out the fp32 gradient buffer.
TEST(TransformerTest, MemoryFactorsAreMegatronsBytesPerParameter) {
  auto factors = [](hardware::DType dtype) {
    TransformerConfig config = gpt_style();
    config.dtype = dtype;
    const Model model = transformer_model(config);
    const double weight_bytes =
        dtype == hardware::DType::kFp32 || dtype == hardware::DType::kTf32 ? 4.0 : 2.0;
    return std::make_pair(model.parameter_memory_factor * weight_bytes,
                          *model.sharded_memory_factor * weight_bytes);
  };
  EXPECT_EQ(factors(hardware::DType::kBf16), std::make_pair(18.0, 12.0));
  EXPECT_EQ(factors(hardware::DType::kFp8), std::make_pair(18.0, 12.0));
  EXPECT_EQ(factors(hardware::DType::kFp16), std::make_pair(20.0, 16.0));
  EXPECT_EQ(factors(hardware::DType::kFp32), std::make_pair(16.0, 8.0));
  EXPECT_EQ(factors(hardware::DType::kTf32), std::make_pair(16.0, 8.0));
  // Every generated model carries the framework reserve, 2 GiB, and writes it.
  const Model model = transformer_model(gpt_style());
  EXPECT_EQ(model.reserve_bytes, 2147483648.0);
  EXPECT_EQ(model_to_json(model)["reserve_bytes"], 2147483648.0);
}

// bf16 gradients (Megatron-LM's --grad-reduce-in-bf16: 16 bytes, 4 + 12/d) and a bf16 optimizer
// (NeMo's distributed_fused_adam with dtype bf16: two 2-byte moments and no master copy, with
// bf16 gradients 8 bytes, 4 + 4/d).
TEST(TransformerTest, Bf16GradientsAndOptimizerStateTakeTheirBytes) {
  auto factors = [](hardware::DType dtype, hardware::DType gradients, hardware::DType optimizer) {
    TransformerConfig config = gpt_style();
    config.dtype = dtype;
    config.gradient_dtype = gradients;
    config.optimizer_dtype = optimizer;
    const Model model = transformer_model(config);
    return std::make_pair(model.parameter_memory_factor * 2, *model.sharded_memory_factor * 2);
  };
  using hardware::DType;
  EXPECT_EQ(factors(DType::kBf16, DType::kBf16, DType::kFp32), std::make_pair(16.0, 12.0));
  EXPECT_EQ(factors(DType::kBf16, DType::kFp32, DType::kBf16), std::make_pair(10.0, 4.0));
  EXPECT_EQ(factors(DType::kBf16, DType::kBf16, DType::kBf16), std::make_pair(8.0, 4.0));
  EXPECT_EQ(factors(DType::kFp8, DType::kBf16, DType::kBf16), std::make_pair(8.0, 4.0));
  // Only when training in bf16 or fp8: fp16 training keeps fp16 gradients and an fp32 copy.
  TransformerConfig fp16 = gpt_style();
  fp16.dtype = DType::kFp16;
  fp16.optimizer_dtype = DType::kBf16;
  const auto [unused, problem] = check_transformer_config(fp16, FieldSpelling::kOption);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "optimizer_dtype");
  EXPECT_EQ(problem->message, "bf16 needs --dtype bf16 or fp8, got fp16");
}

TEST(TransformerTest, WeightGradientPartIsTheWeightedGemms) {
  // Config A (n = b s = 32 tokens, h = 64, a = g = 4, F = 256, V = 100, e = 2): the four GEMMs
  // with weights, whose weight-gradient GEMMs dW = X^T dY have the same sizes.
  // {FLOPs, bytes}; at t = 2 the column-parallel ones have N / 2, the row-parallel ones K / 2.
  auto gemms = [](double t) {
    return std::vector<std::pair<double, double>>{
        {2.0 * 32 * 64 * 192 / t, 2 * (32 * 64 + 64 * 192 / t + 32 * 192 / t)},   // QKV
        {2.0 * 32 * 64 * 64 / t, 2 * (32 * 64 / t + 64 * 64 / t + 32 * 64)},      // projection
        {2.0 * 32 * 64 * 256 / t, 2 * (32 * 64 + 64 * 256 / t + 32 * 256 / t)},   // MLP up
        {2.0 * 32 * 256 * 64 / t, 2 * (32 * 256 / t + 256 * 64 / t + 32 * 64)}};  // MLP down
  };
  const hardware::GpuType& a100 = *hardware::find_gpu("A100-80GB");
  auto total = [&](const std::vector<std::pair<double, double>>& ops) {
    double ms = 0, flops = 0;
    for (const auto& [f, bytes] : ops) {
      ms += operation_ms(a100, hardware::DType::kBf16, f, bytes, 1);
      flops += f;
    }
    return std::make_pair(ms, flops);
  };
  // Qi et al. 2023, Table 1: 24 b s h^2 = 24 * 2 * 16 * 64^2 FLOPs at degree 1.
  EXPECT_EQ(total(gemms(1)).second, 3145728.0);
  const TransformerConfig config = gpt_style();
  for (int t : {1, 2}) {
    const TransformerLayerCosts layer =
        transformer_layer_costs(config, TransformerPart::kDecoder, t);
    const double w = total(gemms(t)).first;
    EXPECT_NEAR(layer.backward_weight_ms, w, 1e-12 * w) << t;
    EXPECT_LT(layer.backward_weight_ms, layer.forward_ms) << t;  // I is the larger half
  }
  // Every GEMM here is below 1 GFLOP and 1 MB: 10 % of 312 TFLOP/s, 30 % of 2039 GB/s.
  const double bytes =
      2.0 * (2048 + 12288 + 6144 + 2048 + 4096 + 2048 + 2048 + 16384 + 8192 + 8192 + 16384 + 2048);
  EXPECT_NEAR(total(gemms(1)).first,
              3145728.0 / (312e12 * 0.1) * 1e3 + bytes / (2039e9 * 0.3) * 1e3, 1e-9);
  // Selective recomputation adds to I only.
  TransformerConfig selective = config;
  selective.selective_recompute = true;
  EXPECT_EQ(transformer_layer_costs(selective, TransformerPart::kDecoder, 1).backward_weight_ms,
            transformer_layer_costs(config, TransformerPart::kDecoder, 1).backward_weight_ms);
  // The output layer: the logits GEMM n x h x V/t. The embedding: its whole backward (the token
  // ids have no gradient).
  const TransformerLayerCosts last = transformer_layer_costs(config, TransformerPart::kOutput, 2);
  const double logits = total({{2.0 * 32 * 64 * 50, 2 * (32 * 64 + 64 * 50 + 32 * 50)}}).first;
  EXPECT_NEAR(last.backward_weight_ms, logits, 1e-12 * logits);
  const TransformerLayerCosts first =
      transformer_layer_costs(config, TransformerPart::kEmbedding, 2);
  EXPECT_EQ(first.backward_weight_ms, first.backward_ms);
  EXPECT_GT(first.backward_weight_ms, 0);
}

// Megatron-LM's full recomputation replaces selective: a stage that recomputes its whole forward
// does not recompute the attention core again inside its backward. The part it skips is the
// backward less the same layer's without selective recomputation, at every degree, kernel floor
// included; nothing without selective recomputation, with fused attention (nothing recomputed),
// or outside the decoders. The model carries it per degree, divides it by c, and never writes it.
TEST(TransformerTest, AFullRecomputationSkipsWhatSelectiveRecomputes) {
  TransformerConfig off = gpt_style();
  for (const double overhead : {0.0, 40.0}) {  // roofline, then the kernel floor binding
    off.kernel_overhead_us = overhead;
    TransformerConfig on = off;
    on.selective_recompute = true;
    for (const int t : off.degrees) {
      const TransformerLayerCosts with = transformer_layer_costs(on, TransformerPart::kDecoder, t);
      const TransformerLayerCosts without =
          transformer_layer_costs(off, TransformerPart::kDecoder, t);
      EXPECT_EQ(with.backward_recompute_ms, with.backward_ms - without.backward_ms) << t;
      EXPECT_GT(with.backward_recompute_ms, 0) << t;
      EXPECT_LE(with.backward_recompute_ms, with.forward_ms) << t;
      EXPECT_EQ(without.backward_recompute_ms, 0) << t;
      for (const TransformerPart part : {TransformerPart::kEmbedding, TransformerPart::kOutput}) {
        EXPECT_EQ(transformer_layer_costs(on, part, t).backward_recompute_ms, 0) << t;
      }
    }
  }
  off.kernel_overhead_us = 0;
  TransformerConfig on = off;
  on.selective_recompute = true;
  TransformerConfig flash = on;
  flash.flash_attention = true;
  EXPECT_EQ(transformer_layer_costs(flash, TransformerPart::kDecoder, 1).backward_recompute_ms, 0);
  const Model model = transformer_model(on);
  const Layer& decoder = model.layers[1];
  for (const int t : on.degrees) {
    EXPECT_EQ(backward_recompute_ms_at(decoder, t),
              transformer_layer_costs(on, TransformerPart::kDecoder, t).backward_recompute_ms)
        << t;
  }
  EXPECT_EQ(backward_recompute_ms_at(model.layers[0], 2), 0);
  const StageCost cost = stage_cost(model, 0, 3, 2);
  EXPECT_DOUBLE_EQ(cost.backward_recompute_ms, 2 * backward_recompute_ms_at(decoder, 2));
  EXPECT_EQ(cost.own_backward_ms(false), cost.backward_ms);
  EXPECT_EQ(cost.own_backward_ms(true), cost.backward_ms - cost.backward_recompute_ms);
  const Model halves = at_context_degree(model, 2);
  EXPECT_EQ(backward_recompute_ms_at(halves.layers[1], 2),
            backward_recompute_ms_at(decoder, 2) / 2);
  EXPECT_EQ(model_to_json(model).dump().find("recompute_ms"), std::string::npos);
}

TEST(TransformerTest, WeightStashIsTheGemmInputsAndOutputGradients) {
  TransformerConfig a = gpt_style();
  const double sbh = 16.0 * 2 * 64;
  // t = 1, in e-byte values of s b h: inputs QKV 1, projection 1, MLP up 1, MLP down 4 (F = 4h);
  // output gradients QKV 3, projection 1, MLP up 4, MLP down 1: 16 values, 32 s b h bytes
  // (Korthikanti's 34 s b h less the two 1-byte dropout masks; no s x s tensor).
  EXPECT_EQ(decoder_weight_stash_bytes(a, 1), 32 * sbh);
  // t = 2: QKV's and MLP up's inputs, projection's and MLP down's output gradients whole (8 s b h),
  // the rest (24 s b h) split.
  EXPECT_EQ(decoder_weight_stash_bytes(a, 2), (8 + 24.0 / 2) * sbh);
  a.sequence_parallel = true;  // everything split
  EXPECT_EQ(decoder_weight_stash_bytes(a, 2), 32 * sbh / 2);
  a.flash_attention = true;  // the attention core keeps nothing W needs
  a.selective_recompute = true;
  EXPECT_EQ(decoder_weight_stash_bytes(a, 2), 32 * sbh / 2);
  // B (SwiGLU, g = 2 of a = 8; s b h = 4096, s b F = 12288, e = 2): QKV's and MLP up's inputs and
  // projection's and MLP down's output gradients 4 e s b h; projection's input e s b h and MLP
  // down's e s b F; QKV's output gradient e s b (h + 2 g d) = 1.5 e s b h, MLP up's (gate and up)
  // 2 e s b F.
  const double whole = 4 * 2 * 4096.0;
  const double split = 2 * 4096.0 + 2 * 12288.0 + 1.5 * 2 * 4096 + 2 * 2 * 12288.0;
  EXPECT_EQ(decoder_weight_stash_bytes(llama_style(), 1), whole + split);
  EXPECT_EQ(decoder_weight_stash_bytes(llama_style(), 2), whole + split / 2);
  // The output layer: the logits' input e s b h and their gradient e s b V / t.
  EXPECT_EQ(transformer_layer_costs(gpt_style(), TransformerPart::kOutput, 2).weight_stash_bytes,
            2.0 * 2048 + 2.0 * 32 * 100 / 2);
  // The embedding frees nothing before its weight gradient: its stash.
  const TransformerLayerCosts first =
      transformer_layer_costs(gpt_style(), TransformerPart::kEmbedding, 1);
  EXPECT_EQ(first.weight_stash_bytes, first.stash_bytes);
}

TEST(TransformerTest, ModelCarriesTheSplitBackwardPerDegree) {
  const TransformerConfig config = gpt_style();
  const Model model = transformer_model(config);
  for (const Layer& layer : model.layers) {
    ASSERT_EQ(layer.tensor_parallel->backward_weight_ms.size(), config.degrees.size());
    for (std::size_t k = 0; k < config.degrees.size(); ++k) {
      const int t = config.degrees[k];
      const TransformerPart part = layer.name == "embedding" ? TransformerPart::kEmbedding
                                   : layer.name == "output"  ? TransformerPart::kOutput
                                                             : TransformerPart::kDecoder;
      const TransformerLayerCosts costs = transformer_layer_costs(config, part, t);
      EXPECT_EQ(backward_weight_ms_at(layer, t), costs.backward_weight_ms) << layer.name << t;
      EXPECT_EQ(weight_stash_bytes_at(layer, t), costs.weight_stash_bytes) << layer.name << t;
      // The existing figures stay those of the costs.
      EXPECT_EQ(backward_ms_at(layer, t), costs.backward_ms) << layer.name << t;
      EXPECT_EQ(stash_bytes_at(layer, t), costs.stash_bytes) << layer.name << t;
    }
  }
  EXPECT_EQ(model.layers[1].backward_weight_ms,
            transformer_layer_costs(config, TransformerPart::kDecoder, 1).backward_weight_ms);
  EXPECT_EQ(model.layers[1].weight_stash_bytes, decoder_weight_stash_bytes(config, 1));
  EXPECT_TRUE(has_weight_gradients(model));
}

TEST(TransformerTest, PresetsArePublishedShapes) {
  const TransformerPreset* gpt3 = find_transformer_preset("gpt3-175b");
  ASSERT_NE(gpt3, nullptr);
  const TransformerConfig config = complete_transformer_config(gpt3->config).first;
  // About 175 billion parameters: 96 layers of 12 h^2 + 13 h, embeddings and output layer.
  double parameters = 0;
  for (TransformerPart part : {TransformerPart::kEmbedding, TransformerPart::kOutput}) {
    parameters += transformer_layer_costs(config, part, 1).parameter_bytes / 2;
  }
  parameters += 96 * decoder_parameters(config, 1);
  EXPECT_NEAR(parameters / 1e9, 175.2, 0.1);
  EXPECT_EQ(find_transformer_preset("llama3-70b")->config.kv_heads, 8);
  EXPECT_EQ(find_transformer_preset("nemotron4-340b")->config.ffn, Ffn::kRelu2);
  EXPECT_EQ(find_transformer_preset("nonesuch"), nullptr);
  for (const TransformerPreset& preset : transformer_presets()) {
    EXPECT_EQ(complete_transformer_config(preset.config).second, "") << preset.name;
  }
}

// Issue 33: the presets of the models trained today hold their published parameter counts
// (the model's own figure, in billions), counted from the generated model's parameter bytes at
// degree 1 over the 2 bytes of a bf16 weight. Within 1%: the cost model leaves out Qwen2.5's
// Q, K and V biases, and a published figure is rounded.
TEST(TransformerTest, PresetsHoldTheirPublishedParameterCounts) {
  const std::pair<const char*, double> published[] = {
      {"llama3.1-8b", 8.0},      // Llama Team 2024, Table 3: 8B (8.03B on its model card)
      {"llama3.1-70b", 70.6},    // meta-llama/Llama-3.1-70B model card: 70.6B
      {"llama3.1-405b", 405},    // Llama Team 2024: 405B
      {"qwen2.5-72b", 72.7},     // Qwen/Qwen2.5-72B model card: 72.7B
      {"mistral-large-2", 123},  // Mistral AI, Mistral Large 2 announcement: 123B
      // Parmar et al. 2024, section 2: 3.2B embedding and 12.5B non-embedding parameters (the
      // name's "15B" rounds them down).
      {"nemotron4-15b", 15.7},
      {"nemotron4-340b", 340},  // NVIDIA 2024: 340B (9.4B embedding, 331.6B non-embedding)
  };
  for (const auto& [name, billions] : published) {
    const TransformerPreset* preset = find_transformer_preset(name);
    ASSERT_NE(preset, nullptr) << name;
    const TransformerConfig config = complete_transformer_config(preset->config).first;
    const Model model = transformer_model(config);
    double bytes = 0;
    for (const Layer& layer : model.layers) bytes += layer.parameter_bytes;
    const double parameters = bytes / 2;  // bf16 weights
    EXPECT_NEAR(parameters / 1e9 / billions, 1.0, 0.01) << name << ": " << parameters / 1e9;
  }
  // Each one plans with no other option: complete, and its FFN family as published.
  for (const char* name :
       {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "qwen2.5-72b", "mistral-large-2"}) {
    EXPECT_EQ(find_transformer_preset(name)->config.ffn, Ffn::kSwiglu) << name;
  }
  EXPECT_EQ(find_transformer_preset("nemotron4-15b")->config.ffn, Ffn::kRelu2);
  EXPECT_EQ(find_transformer_preset("llama3.1-405b")->config.sequence, 8192);
}

}  // namespace
}  // namespace pipeplan::model
