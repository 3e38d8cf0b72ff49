// Analytic costs of a decoder-only transformer: FLOPs (Narayanan et al. 2021, appendix),
// activation memory (Korthikanti et al. 2022, Table 2), operation times with Calculon's
// size-dependent efficiencies (Isaev et al. 2023), the backward's weight-gradient part and the
// memory it keeps (Qi et al. 2023, Table 1). docs/transformer-model.md states every formula.
// O(L x degrees).

#include "pipeplan/model/transformer.hpp"

#include <algorithm>
#include <cmath>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/model/kernel_counts.hpp"

namespace pipeplan::model {
namespace {

using hardware::DType;
using hardware::GpuType;

// Adam's memory traffic per parameter in one step, bytes: it reads the fp32 master weight, the
// gradient and both moments and writes the master weight, both moments and the training copy
// (4 + 2 + 4 + 4 read, 4 + 4 + 4 + 2 written in mixed precision; 16 + 12 in fp32).
constexpr double kAdamBytesPerParameter = 28;

// Token ids are 64-bit integers (Megatron's first-stage `8 s b` term).
constexpr double kTokenIdBytes = 8;

// Calculon's efficiency tables (calculon-ai/calculon, systems/a100_80g.json and
// h100_80g_nvl8.json): matrix operations by GFLOP, memory traffic by MB. A matrix operation's is
// capped at `ceiling`, the fraction of the peak no GEMM exceeds (the GPU's measured maximum).
double matrix_efficiency(double flops, double ceiling) {
  const double gflops = flops / 1e9;
  double tabled = 0.1;
  if (gflops >= 128) {
    tabled = 0.95;
  } else if (gflops >= 16) {
    tabled = 0.9;
  } else if (gflops >= 1) {
    tabled = 0.6;
  }
  return std::min(tabled, ceiling);
}

double memory_efficiency(double bytes) {
  const double megabytes = bytes / 1e6;
  if (megabytes >= 100) return 0.9;
  if (megabytes >= 10) return 0.75;
  if (megabytes >= 1) return 0.6;
  return 0.3;
}

// The shape in doubles, so that no product overflows an int.
struct Shape {
  double b, s, h, a, g, d, f, v, t, vb;
  bool gated;           // SwiGLU: gate and up matrices (3-matrix MLP)
  bool biases;          // GeLU: biases on every linear layer
  bool positions;       // GeLU: a learned position table
  double norm_vectors;  // 2 for LayerNorm (scale and shift), 1 for RMSNorm (scale)
  bool sp, flash, selective, per_op, dropout;
};

Shape shape_of(const TransformerConfig& config, int t) {
  Shape x{};
  x.b = config.micro_batch_size;
  x.s = config.sequence;
  x.h = config.hidden;
  x.a = config.heads;
  x.g = config.kv_heads;
  x.d = x.h / x.a;
  x.f = config.ffn_hidden;
  x.v = config.vocab;
  x.t = t;
  x.vb = hardware::activation_value_bytes(config.dtype);
  // The family: gelu is GPT style, swiglu Llama style, relu2 Nemotron-4 style (2-matrix MLP
  // like gelu, no biases and rotary positions like swiglu, LayerNorm like gelu).
  x.gated = config.ffn == Ffn::kSwiglu;
  x.biases = config.ffn == Ffn::kGelu;
  x.positions = config.ffn == Ffn::kGelu;
  x.norm_vectors = config.ffn == Ffn::kSwiglu ? 1 : 2;
  x.sp = config.sequence_parallel;
  x.flash = config.flash_attention;
  x.selective = config.selective_recompute;
  x.per_op = config.per_op_recompute;
  x.dropout = config.dropout;
  return x;
}

// A matrix multiplication (M x K) by (K x N): its FLOPs and the bytes it reads and writes.
// `attention`: a product of the attention core (Q K^T, P V, or the fused kernel doing both).
struct Op {
  double flops = 0;
  double bytes = 0;
  bool attention = false;
};

Op gemm(double m, double k, double n, double value_bytes) {
  return {2 * m * k * n, value_bytes * (m * k + k * n + m * n)};
}

Op memory_op(double bytes) { return {0, bytes}; }

// The attention products run in `attention_dtype` where the description sets it: fp8 training
// with Transformer Engine's default recipe (`fp8_dpa` off) computes them in BF16, costed as a
// bf16 model costs them, at the BF16 peak under the GPU's measured BF16 maximum
// (docs/transformer-model.md, "Time", FP8). Everything else runs in the training format under
// `matmul_ceiling`.
double ms_of(const GpuType& gpu, const TransformerConfig& config, const std::vector<Op>& ops) {
  double total = 0;
  for (const Op& op : ops) {
    const DType format =
        op.attention ? config.attention_dtype.value_or(config.dtype) : config.dtype;
    const double ceiling = format == config.dtype
                               ? config.matmul_ceiling
                               : hardware::measured_matmul_fraction(gpu, format).value_or(1);
    total += operation_ms(gpu, format, op.flops, op.bytes, ceiling);
  }
  return total;
}

// The attention core (scores, softmax, dropout, weighted values) of one GPU's heads.
std::vector<Op> attention_core_ops(const Shape& x) {
  const double heads = x.a / x.t, kv_heads = x.g / x.t;
  const double scores = x.b * heads * x.s * x.s;  // elements of the s x s matrices
  if (x.flash) {
    // One fused kernel: both products, reading Q, K, V and writing the output once.
    return {{4 * x.b * heads * x.s * x.s * x.d, x.vb * x.b * x.s * x.d * (2 * heads + 2 * kv_heads),
             true}};
  }
  std::vector<Op> ops = {
      {2 * scores * x.d, x.vb * (x.b * x.s * x.d * (heads + kv_heads) + scores), true},  // Q K^T
      memory_op(2 * x.vb * scores),                                                      // softmax
  };
  if (x.dropout) ops.push_back(memory_op((2 * x.vb + 1) * scores));  // dropout and its mask
  ops.push_back(
      {2 * scores * x.d, x.vb * (scores + x.b * x.s * x.d * (kv_heads + heads)), true});  // P V
  return ops;
}

// The four GEMMs of a decoder layer that have weights, in forward order: QKV (column-parallel),
// projection (row-parallel), MLP up (column-parallel; gate and up for SwiGLU), MLP down
// (row-parallel). Each one's weight-gradient GEMM dW = X^T dY multiplies the same three sizes
// (K x M by M x N) and moves as many values, so it has the same FLOPs and bytes: the list is
// both part of the forward and the whole weight-gradient part W of the backward (Qi et al.
// 2023, Table 1: 24 b s h^2 for a GPT block at degree 1).
std::vector<Op> decoder_weight_gemms(const Shape& x) {
  const double tokens = x.b * x.s;
  const double q = x.a * x.d, kv = 2 * x.g * x.d;
  const double up = x.gated ? 2 * x.f : x.f;
  return {gemm(tokens, x.h, (q + kv) / x.t, x.vb), gemm(tokens, q / x.t, x.h, x.vb),
          gemm(tokens, x.h, up / x.t, x.vb), gemm(tokens, x.f / x.t, x.h, x.vb)};
}

// A norm over the rows outside the tensor-parallel regions: reads and writes them.
Op norm_op(const Shape& x) {
  const double tokens = x.b * x.s;
  const double rows = x.sp ? tokens / x.t : tokens;
  return memory_op(2 * x.vb * rows * x.h);
}

// Dropout (with its 1-byte mask) and the residual add: reads two tensors and writes one.
Op residual_op(const Shape& x) {
  const double tokens = x.b * x.s;
  const double rows = x.sp ? tokens / x.t : tokens;
  return memory_op((3 * x.vb + (x.dropout ? 1 : 0)) * rows * x.h);
}

// GeLU, SwiGLU or squared ReLU over the MLP's hidden values.
Op activation_op(const Shape& x) {
  const double up = x.gated ? 2 * x.f : x.f;
  const double tokens = x.b * x.s;
  return memory_op(x.vb * (up + x.f) / x.t * tokens);
}

std::vector<Op> decoder_ops(const Shape& x) {
  const std::vector<Op> weighted = decoder_weight_gemms(x);
  std::vector<Op> ops = {
      norm_op(x),   // input norm
      weighted[0],  // QKV (column-parallel)
  };
  std::vector<Op> core = attention_core_ops(x);
  ops.insert(ops.end(), core.begin(), core.end());
  std::vector<Op> rest = {
      weighted[1],       // projection (row-parallel)
      residual_op(x),    // dropout and residual
      norm_op(x),        // post-attention norm
      weighted[2],       // MLP up (column-parallel)
      activation_op(x),  // GeLU, SwiGLU or squared ReLU
      weighted[3],       // MLP down (row-parallel)
      residual_op(x),    // dropout and residual
  };
  ops.insert(ops.end(), rest.begin(), rest.end());
  return ops;
}

// What torchtitan's per-operator checkpointing runs again in a decoder's backward: every
// operation of the forward but the fused attention and the matrix multiplications whose outputs
// it keeps. Its policy keeps the output of every second `mm` in the block's forward order
// (torchtitan, `_apply_ac_to_transformer_block`: "Saves output of all compute ops, except every
// second mm"), here Q, K, V, projection, then SwiGLU's gate, up, down (kept: Q, V, gate, down)
// or squared ReLU's up, down (kept: Q, V, up). So K, the projection and SwiGLU's up or squared
// ReLU's down are recomputed, with the norms, the activation and the residual adds.
std::vector<Op> per_op_recomputed_ops(const Shape& x) {
  const double tokens = x.b * x.s;
  const Op mlp = x.gated ? gemm(tokens, x.h, x.f / x.t, x.vb)   // SwiGLU's up (w3)
                         : gemm(tokens, x.f / x.t, x.h, x.vb);  // squared ReLU's down
  return {norm_op(x),
          gemm(tokens, x.h, x.g * x.d / x.t, x.vb),  // K
          decoder_weight_gemms(x)[1],                // projection
          residual_op(x),
          norm_op(x),
          activation_op(x),
          mlp,
          residual_op(x)};
}

std::vector<Op> embedding_ops(const Shape& x) {
  const double tokens = x.b * x.s;
  const double rows = x.sp ? tokens / x.t : tokens;
  const double positions = x.positions ? 3 * x.vb * tokens * x.h : 0;      // read, add, write
  std::vector<Op> ops = {memory_op(2 * x.vb * tokens * x.h + positions)};  // gather the rows
  if (x.dropout) ops.push_back(memory_op((2 * x.vb + 1) * rows * x.h));    // dropout
  return ops;
}

// The output layer's one GEMM with weights, the logits (vocabulary-parallel); its weight-gradient
// GEMM has the same sizes (see decoder_weight_gemms).
Op logits_gemm(const Shape& x) { return gemm(x.b * x.s, x.h, x.v / x.t, x.vb); }

std::vector<Op> output_ops(const Shape& x) {
  const double tokens = x.b * x.s;
  return {norm_op(x),                                   // final norm
          logits_gemm(x),                               // logits (vocabulary-parallel)
          memory_op((x.vb + 8) * tokens * x.v / x.t)};  // softmax cross-entropy in fp32
}

double embedding_parameters(const Shape& x) {
  return x.v * x.h / x.t + (x.positions ? x.s * x.h : 0);
}

double output_parameters(const Shape& x) { return x.v * x.h / x.t + x.norm_vectors * x.h; }

double update_ms_of(const TransformerConfig& config, const GpuType& gpu, double parameters) {
  return operation_ms(gpu, config.dtype, 0, kAdamBytesPerParameter * parameters,
                      config.matmul_ceiling);
}

TransformerConfig shape(std::string name, int layers, int hidden, int heads, int kv_heads,
                        int ffn_hidden, int sequence, int vocab, Ffn ffn) {
  TransformerConfig config;
  config.name = std::move(name);
  config.layers = layers;
  config.hidden = hidden;
  config.heads = heads;
  config.kv_heads = kv_heads;
  config.ffn_hidden = ffn_hidden;
  config.sequence = sequence;
  config.vocab = vocab;
  config.ffn = ffn;
  return config;
}

}  // namespace

const std::vector<TransformerPreset>& transformer_presets() {
  // shape(name, L, h, a, g (0: a), F (0: the default), s, V, ffn), source, dropout. Without
  // dropout (false): Llama 3 and 3.1 (no dropout in the architecture; attention_dropout 0.0 in
  // the Hugging Face configs), Qwen2.5 and Mistral Large 2 (attention_dropout 0.0), Nemotron-4
  // ("dropout rate of zero", the 15B report's section 2, which the 340B report follows).
  static const std::vector<TransformerPreset> kPresets = {
      {"gpt3-175b", shape("gpt3-175b", 96, 12288, 96, 0, 0, 2048, 50257, Ffn::kGelu),
       "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1"},
      {"gpt3-13b", shape("gpt3-13b", 40, 5120, 40, 0, 0, 2048, 50257, Ffn::kGelu),
       "Brown et al. 2020, Table 2.1 (d_model 5140 there; 5120 = 40 heads x 128 as Megatron "
       "runs it)"},
      {"mt-nlg-530b", shape("mt-nlg-530b", 105, 20480, 128, 0, 0, 2048, 50257, Ffn::kGelu),
       "Smith et al. 2022, Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B, "
       "section 3"},
      {"llama3-8b", shape("llama3-8b", 32, 4096, 32, 8, 14336, 8192, 128256, Ffn::kSwiglu),
       "Llama Team 2024, The Llama 3 Herd of Models, Table 3", false},
      {"llama3-70b", shape("llama3-70b", 80, 8192, 64, 8, 28672, 8192, 128256, Ffn::kSwiglu),
       "Llama Team 2024, The Llama 3 Herd of Models, Table 3", false},
      {"llama3.1-8b", shape("llama3.1-8b", 32, 4096, 32, 8, 14336, 8192, 128256, Ffn::kSwiglu),
       "meta-llama/Llama-3.1-8B config.json on Hugging Face; sequence 8192: Llama Team 2024, The "
       "Llama 3 Herd of Models, section 3.4.1 (sequences of 8,192 tokens; the long-context stage "
       "of section 3.4.2 then extends them to 128K)",
       false},
      {"llama3.1-70b", shape("llama3.1-70b", 80, 8192, 64, 8, 28672, 8192, 128256, Ffn::kSwiglu),
       "meta-llama/Llama-3.1-70B config.json on Hugging Face; sequence 8192: Llama Team 2024, "
       "section 3.4.1 (then 128K in the long-context stage, section 3.4.2)",
       false},
      {"llama3.1-405b",
       shape("llama3.1-405b", 126, 16384, 128, 8, 53248, 8192, 128256, Ffn::kSwiglu),
       "meta-llama/Llama-3.1-405B config.json on Hugging Face and Llama Team 2024, Table 3; "
       "sequence 8192: section 3.4.1 and Table 4 (then 128K in the long-context stage)",
       false},
      {"qwen2.5-72b", shape("qwen2.5-72b", 80, 8192, 64, 8, 29568, 4096, 152064, Ffn::kSwiglu),
       "Qwen/Qwen2.5-72B config.json on Hugging Face; sequence 4096: Qwen Team 2024, Qwen2.5 "
       "Technical Report, long-context pre-training (4,096 tokens, extended to 32,768 in the "
       "final stage); its biases on Q, K and V (10,240 per layer, < 0.01% of the parameters) "
       "are left out",
       false},
      {"mistral-large-2",
       shape("mistral-large-2", 88, 12288, 96, 8, 28672, 131072, 32768, Ffn::kSwiglu),
       "mistralai/Mistral-Large-Instruct-2407 config.json on Hugging Face; sequence 131072: its "
       "context window (max_position_embeddings), since Mistral AI publishes no pre-training "
       "sequence length",
       false},
      {"nemotron4-15b", shape("nemotron4-15b", 32, 6144, 48, 8, 24576, 4096, 256000, Ffn::kRelu2),
       "Parmar et al. 2024, Nemotron-4 15B Technical Report, Table 1 (FFN 4h, squared ReLU, "
       "no biases, untied embeddings, section 2)",
       false},
      {"nemotron4-340b",
       shape("nemotron4-340b", 96, 18432, 96, 8, 73728, 4096, 256000, Ffn::kRelu2),
       "NVIDIA 2024, Nemotron-4 340B Technical Report, Table 1; nvidia/Nemotron-4-340B-Base "
       "model card (sequence 4096)",
       false},
      {"opt-350m", shape("opt-350m", 24, 1024, 16, 0, 0, 2048, 50272, Ffn::kGelu),
       "Zhang et al. 2022, OPT: Open Pre-trained Transformer Language Models, Table 1"},
      {"opt-1.3b", shape("opt-1.3b", 24, 2048, 32, 0, 0, 2048, 50272, Ffn::kGelu),
       "Zhang et al. 2022, Table 1"},
  };
  return kPresets;
}

const TransformerPreset* find_transformer_preset(std::string_view name) {
  for (const TransformerPreset& preset : transformer_presets()) {
    if (preset.name == name) return &preset;
  }
  return nullptr;
}

namespace {

// A field as the requested spelling writes it: `--kv-heads` or `kv_heads`.
std::string field_name(std::string_view key, FieldSpelling spelling) {
  if (spelling == FieldSpelling::kKey) return std::string(key);
  std::string option = "--" + std::string(key);
  std::replace(option.begin(), option.end(), '_', '-');
  return option;
}

// The shape's integer fields against their bounds, in the order the problems are reported.
std::optional<TransformerProblem> check_sizes(const TransformerConfig& config) {
  struct Bound {
    const char* field;
    int value;
    int max;
  };
  const Bound bounds[] = {
      {"layers", config.layers, kMaxTransformerLayers},
      {"hidden", config.hidden, kMaxTransformerDimension},
      {"heads", config.heads, kMaxTransformerDimension},
      {"sequence", config.sequence, kMaxTransformerDimension},
      {"vocab", config.vocab, kMaxTransformerDimension},
      {"micro_batch_size", config.micro_batch_size, kMaxTransformerMicroBatchSize}};
  for (const Bound& bound : bounds) {
    if (bound.value < 1) return TransformerProblem{bound.field, "must be at least 1"};
  }
  for (const Bound& bound : bounds) {
    if (bound.value > bound.max) {
      return TransformerProblem{bound.field, "must be at most " + std::to_string(bound.max)};
    }
  }
  if (config.kv_heads < 0 || config.kv_heads > kMaxTransformerDimension) {
    return TransformerProblem{"kv_heads",
                              "must be from 1 to " + std::to_string(kMaxTransformerDimension)};
  }
  if (config.ffn_hidden < 0 || config.ffn_hidden > kMaxTransformerDimension) {
    return TransformerProblem{"ffn_hidden",
                              "must be from 1 to " + std::to_string(kMaxTransformerDimension)};
  }
  return std::nullopt;
}

// The degrees: ascending from 1, at most kMaxTransformerDegrees of them, each dividing the head
// counts and the FFN size; or the defaults 1, 2, 4, 8 where they divide.
std::optional<TransformerProblem> complete_degrees(TransformerConfig& config,
                                                   FieldSpelling spelling) {
  auto divides_all = [&](int t) {
    return config.heads % t == 0 && config.kv_heads % t == 0 && config.ffn_hidden % t == 0;
  };
  if (config.degrees.empty()) {
    for (int t : {1, 2, 4, 8}) {
      if (divides_all(t)) config.degrees.push_back(t);
    }
    return std::nullopt;
  }
  if (config.degrees.size() > static_cast<std::size_t>(kMaxTransformerDegrees)) {
    return TransformerProblem{
        "degrees", "must list at most " + std::to_string(kMaxTransformerDegrees) + " degrees"};
  }
  if (config.degrees.front() != 1) {
    return TransformerProblem{"degrees",
                              "must start at 1, got " + std::to_string(config.degrees.front())};
  }
  for (std::size_t i = 1; i < config.degrees.size(); ++i) {
    const int t = config.degrees[i];
    if (t <= config.degrees[i - 1])
      return TransformerProblem{"degrees", "must be strictly ascending"};
    if (t > kMaxTensorParallelDegree) {
      return TransformerProblem{"degrees",
                                "must be at most " + std::to_string(kMaxTensorParallelDegree)};
    }
    if (!divides_all(t)) {
      return TransformerProblem{
          "degrees", std::to_string(t) + " must divide " + field_name("heads", spelling) + ", " +
                         field_name("kv_heads", spelling) + " and " +
                         field_name("ffn_hidden", spelling) + " (" + std::to_string(config.heads) +
                         ", " + std::to_string(config.kv_heads) + ", " +
                         std::to_string(config.ffn_hidden) + ")"};
    }
  }
  return std::nullopt;
}

// Per-operator checkpointing is torchtitan's policy for its bias-free blocks with fused
// attention, and one recomputation policy excludes the other.
std::optional<TransformerProblem> check_per_op_recompute(const TransformerConfig& config,
                                                         FieldSpelling spelling) {
  if (!config.per_op_recompute) return std::nullopt;
  const auto problem = [](std::string message) {
    return TransformerProblem{"per_op_recompute", std::move(message)};
  };
  if (config.selective_recompute) {
    return problem("excludes " + field_name("selective_recompute", spelling) +
                   ": the two are different recomputation policies; choose one");
  }
  if (!config.flash_attention) {
    return problem("needs " + field_name("flash_attention", spelling) +
                   ": the policy keeps the fused attention's output and recomputes nothing of it");
  }
  if (config.ffn == Ffn::kGelu) {
    return problem("needs a layer without biases (" + field_name("ffn", spelling) +
                   " swiglu or relu2): the policy counts matrix multiplications without bias, "
                   "and every linear layer of a gelu model has one");
  }
  return std::nullopt;
}

}  // namespace

std::pair<TransformerConfig, std::optional<TransformerProblem>> check_transformer_config(
    TransformerConfig config, FieldSpelling spelling) {
  auto fail = [&](std::string field, std::string message) {
    return std::make_pair(
        config, std::optional<TransformerProblem>({std::move(field), std::move(message)}));
  };
  if (auto problem = check_sizes(config)) return {config, problem};
  if (config.hidden % config.heads != 0) {
    return fail("heads", "must divide " + field_name("hidden", spelling) + " (" +
                             std::to_string(config.hidden) + "), got " +
                             std::to_string(config.heads));
  }
  if (config.kv_heads == 0) config.kv_heads = config.heads;
  if (config.heads % config.kv_heads != 0) {
    return fail("kv_heads", "must divide " + field_name("heads", spelling) + " (" +
                                std::to_string(config.heads) + "), got " +
                                std::to_string(config.kv_heads));
  }
  if (config.ffn_hidden == 0) {
    if (config.ffn != Ffn::kSwiglu) {
      config.ffn_hidden = 4 * config.hidden;
    } else {
      // Llama's rule: two thirds of 4h, rounded up to a multiple of 256.
      const int two_thirds = static_cast<int>(8LL * config.hidden / 3);
      config.ffn_hidden = (two_thirds + 255) / 256 * 256;
    }
  }
  const GpuType* gpu = hardware::find_gpu(config.gpu);
  if (gpu == nullptr) {
    return fail("gpu",
                "unknown GPU \"" + config.gpu + "\" (known: " + hardware::catalogue_names() + ")");
  }
  config.gpu = gpu->name;
  if (hardware::peak_flops_per_s(*gpu, config.dtype) <= 0) {
    return fail("dtype", gpu->name + " has no " + std::string(hardware::dtype_name(config.dtype)) +
                             " peak in the catalogue");
  }
  if (auto problem = complete_degrees(config, spelling)) return {config, problem};
  if (auto problem = check_kernel_overhead(config)) return {config, problem};
  if (!(config.matmul_ceiling > 0 && config.matmul_ceiling <= 1)) {
    return fail("matmul_ceiling", "must be a fraction of the peak above 0 and at most 1, got " +
                                      io::format_number(config.matmul_ceiling, 10));
  }
  for (const auto& [field, format] : {std::pair{"gradient_dtype", config.gradient_dtype},
                                      std::pair{"optimizer_dtype", config.optimizer_dtype}}) {
    if (format != hardware::DType::kFp32 && config.dtype != hardware::DType::kBf16 &&
        config.dtype != hardware::DType::kFp8) {
      return fail(field, "bf16 needs " + field_name("dtype", spelling) + " bf16 or fp8, got " +
                             std::string(hardware::dtype_name(config.dtype)));
    }
  }
  if (config.attention_dtype && config.dtype != hardware::DType::kFp8) {
    return fail("attention_dtype", "only with " + field_name("dtype", spelling) +
                                       " fp8 (attention runs in the training format), got " +
                                       std::string(hardware::dtype_name(config.dtype)));
  }
  if (auto problem = check_per_op_recompute(config, spelling)) return {config, problem};
  if (config.name.empty()) {
    config.name =
        "transformer-L" + std::to_string(config.layers) + "-h" + std::to_string(config.hidden);
  }
  return {config, std::nullopt};
}

double default_matmul_ceiling(const TransformerConfig& config) {
  const GpuType* gpu = hardware::find_gpu(config.gpu);
  if (gpu == nullptr) return 1;  // check_transformer_config names the unknown GPU
  return hardware::measured_matmul_fraction(*gpu, config.dtype).value_or(1);
}

std::pair<TransformerConfig, std::string> complete_transformer_config(TransformerConfig config) {
  auto [completed, problem] = check_transformer_config(std::move(config), FieldSpelling::kOption);
  if (!problem) return {completed, ""};
  return {completed, field_name(problem->field, FieldSpelling::kOption) + ": " + problem->message};
}

double decoder_forward_flops(const TransformerConfig& config) {
  const Shape x = shape_of(config, 1);
  const double tokens = x.b * x.s;
  const double qkv = 2 * tokens * x.h * (x.a * x.d + 2 * x.g * x.d);
  const double attention = 4 * x.b * x.s * x.s * x.a * x.d;
  const double projection = 2 * tokens * x.a * x.d * x.h;
  const double mlp = (x.gated ? 6 : 4) * tokens * x.h * x.f;
  return qkv + attention + projection + mlp;
}

double decoder_parameters(const TransformerConfig& config, int t) {
  const Shape x = shape_of(config, t);
  const double q = x.a * x.d, kv = 2 * x.g * x.d;
  if (x.gated) {
    // QKV, projection, gate and up, down; two RMSNorm scales.
    return (x.h * (q + kv) + q * x.h + 3 * x.h * x.f) / x.t + 2 * x.h;
  }
  if (!x.biases) {
    // relu2: QKV, projection, up, down without biases; two LayerNorms with scale and shift.
    return (x.h * (q + kv) + q * x.h + 2 * x.h * x.f) / x.t + 4 * x.h;
  }
  // The same with biases (split with their columns; the row-parallel ones whole) and two
  // LayerNorms with scale and shift.
  const double split = x.h * (q + kv) + (q + kv) + q * x.h + 2 * x.h * x.f + x.f;
  return split / x.t + 2 * x.h + 4 * x.h;
}

// The stash under torchtitan's per-operator checkpointing (per_op_recomputed_ops says what it
// keeps): the layer's input, the kept outputs of Q, V, the MLP's first matrix (gate or up) and
// the fused attention (with its fp32 log-sum-exp), and SwiGLU's down projection, whose output on
// each GPU of a tensor-parallel group is the whole partial sum before its reduction. With
// sequence parallelism at t > 1 the policy also keeps the two reduce-scatters' outputs.
double per_op_stash_bytes(const Shape& x) {
  const double sbh = x.s * x.b * x.h, sbf = x.s * x.b * x.f;
  const double replicated = x.vb * sbh * (x.sp && x.t > 1 ? 3 : 1);
  const double split = x.vb * sbh * (2 + x.g / x.a) + x.vb * sbf + 4 * x.a * x.s * x.b;
  const double whole = x.gated ? x.vb * sbh : 0;
  return (x.sp ? replicated / x.t : replicated) + split / x.t + whole;
}

double decoder_stash_bytes(const TransformerConfig& config, int t) {
  const Shape x = shape_of(config, t);
  if (x.per_op) return per_op_stash_bytes(x);
  const double sbh = x.s * x.b * x.h, sbf = x.s * x.b * x.f;
  // Outside the tensor-parallel regions: the two norms' inputs, the inputs of QKV and of the
  // MLP, and the two dropout masks (1 byte each, without dropout none). Split by t only with
  // sequence parallelism.
  const double replicated = 4 * x.vb * sbh + (x.dropout ? 2 * sbh : 0);
  // Inside: Q, K, V (K and V with g of the a heads), the projection's input, and the MLP's
  // activation inputs and output.
  const double split = x.vb * sbh * (2 + 2 * x.g / x.a) + (x.gated ? 3 : 2) * x.vb * sbf;
  // The s x s tensors: softmax output, dropout mask and output (the softmax output alone without
  // dropout); gone with selective recomputation, replaced by the fp32 log-sum-exp with fused
  // attention.
  double scores = (x.dropout ? 2 * x.vb + 1 : x.vb) * x.a * x.s * x.s * x.b;
  if (x.flash) {
    scores = 4 * x.a * x.s * x.b;
  } else if (x.selective) {
    scores = 0;
  }
  return (x.sp ? replicated / x.t : replicated) + split / x.t + scores / x.t;
}

double decoder_weight_stash_bytes(const TransformerConfig& config, int t) {
  const Shape x = shape_of(config, t);
  const double sbh = x.s * x.b * x.h, sbf = x.s * x.b * x.f;
  const double qkv = x.s * x.b * (x.a * x.d + 2 * x.g * x.d), up = x.gated ? 2 * sbf : sbf;
  // What the weight gradients dW = X^T dY of the four GEMMs still read after I: every input X
  // (kept from the stash) and every output gradient dY (made by I, the size of the output).
  // Whole tensors outside the tensor-parallel regions are sequence shards with sequence
  // parallelism, as in the stash (Megatron-LM gathers them again for the weight gradients).
  const double replicated_inputs = 2 * x.vb * sbh;     // QKV's and MLP up's inputs
  const double replicated_gradients = 2 * x.vb * sbh;  // projection's and MLP down's outputs
  const double split_inputs = x.vb * (sbh + sbf);      // projection's and MLP down's inputs
  const double split_gradients = x.vb * (qkv + up);    // QKV's and MLP up's outputs
  const double replicated = replicated_inputs + replicated_gradients;
  return (x.sp ? replicated / x.t : replicated) + (split_inputs + split_gradients) / x.t;
}

double operation_ms(const GpuType& gpu, DType dtype, double flops, double bytes,
                    double matmul_ceiling) {
  double ms = 0;
  if (flops > 0) {
    ms += flops /
          (hardware::peak_flops_per_s(gpu, dtype) * matrix_efficiency(flops, matmul_ceiling)) * 1e3;
  }
  if (bytes > 0) {
    ms += bytes / (gpu.memory_bandwidth_bytes_per_s * memory_efficiency(bytes)) * 1e3;
  }
  return ms;
}

TransformerLayerCosts transformer_layer_costs(const TransformerConfig& config, TransformerPart part,
                                              int t) {
  const GpuType& gpu = *hardware::find_gpu(config.gpu);
  const Shape x = shape_of(config, t);
  const double weight_bytes = x.vb;  // weights in the training format
  const double tokens = x.b * x.s;
  const double rows = x.sp ? tokens / x.t : tokens;
  TransformerLayerCosts costs;
  double parameters = 0;
  switch (part) {
    case TransformerPart::kEmbedding: {
      costs.forward_ms = ms_of(gpu, config, embedding_ops(x));
      costs.backward_ms = 2 * costs.forward_ms;
      parameters = embedding_parameters(x);
      costs.stash_bytes = x.dropout ? rows * x.h : 0;  // the dropout mask
      // The token ids have no gradient: the whole backward serves the table's (and the
      // positions') gradient, and nothing is freed before it ends.
      costs.backward_weight_ms = costs.backward_ms;
      costs.weight_stash_bytes = costs.stash_bytes;
      break;
    }
    case TransformerPart::kDecoder: {
      costs.forward_ms = ms_of(gpu, config, decoder_ops(x));
      costs.backward_ms = 2 * costs.forward_ms;
      if (x.selective && !x.flash) {
        costs.backward_ms += ms_of(gpu, config, attention_core_ops(x));
      }
      if (x.per_op) costs.backward_ms += ms_of(gpu, config, per_op_recomputed_ops(x));
      parameters = decoder_parameters(config, t);
      costs.stash_bytes = decoder_stash_bytes(config, t);
      costs.backward_weight_ms = ms_of(gpu, config, decoder_weight_gemms(x));
      costs.weight_stash_bytes = decoder_weight_stash_bytes(config, t);
      break;
    }
    case TransformerPart::kOutput: {
      costs.forward_ms = ms_of(gpu, config, output_ops(x));
      costs.backward_ms = 2 * costs.forward_ms;
      parameters = output_parameters(x);
      // The norm's and the logits' inputs, and the fp32 logits (Megatron's 4 s b h (1 + V/h)).
      costs.stash_bytes = 2 * x.vb * rows * x.h + 4 * tokens * x.v / x.t;
      costs.backward_weight_ms = ms_of(gpu, config, {logits_gemm(x)});
      // The logits GEMM's input and its output's gradient (in the training format).
      costs.weight_stash_bytes = x.vb * rows * x.h + x.vb * tokens * x.v / x.t;
      // torch's cross_entropy on fp32 logits: its backward allocates the log-softmax's gradient
      // and the logits' (fp32 each) while the kept log-softmax is alive (docs/memory.md).
      if (config.cross_entropy == CrossEntropy::kTorchFp32) {
        costs.backward_working_bytes = 8 * tokens * x.v / x.t;
      }
      break;
    }
  }
  costs.parameter_bytes = parameters * weight_bytes;
  costs.update_ms = update_ms_of(config, gpu, parameters);
  apply_kernel_floor(config, part, costs);  // the launches' floor (kernel_counts.cpp)
  if (x.selective || x.per_op) {
    // What a full recomputation makes redundant: the backward less the same layer's backward
    // without partial recomputation (floors included), within the forward it replays.
    TransformerConfig whole = config;
    whole.selective_recompute = false;
    whole.per_op_recompute = false;
    const double saved = costs.backward_ms - transformer_layer_costs(whole, part, t).backward_ms;
    costs.backward_recompute_ms = std::clamp(saved, 0.0, costs.forward_ms);
  }
  return costs;
}

namespace {

// Largest context-parallel degree `model transformer` lists (Llama 3 405B's long-context stage
// used 16; Megatron-LM runs up to 64 in its published long-sequence recipes).
constexpr int kMaxListedContextDegree = 128;

// The context-parallel degrees of a description (spec 10.1): 1, then the powers of two `c` up to
// kMaxListedContextDegree with the sequence a multiple of `2 c` (Megatron-LM's load-balanced
// causal split gives every rank two chunks of `s / 2c` tokens). O(log s).
std::vector<int> context_degrees(const TransformerConfig& config) {
  std::vector<int> degrees{1};
  for (int c = 2; c <= kMaxListedContextDegree; c *= 2) {
    if (config.sequence % (2 * c) == 0) degrees.push_back(c);
  }
  return degrees;
}

// The keys and values of one micro-batch's whole sequence at t = 1 (spec 10.1): `2 b s g d`
// values of the training format, grouped-query heads counted (`g` key/value heads).
double exchange_bytes(const Shape& x) {
  const double kv_heads = x.g > 0 ? x.g : x.a;
  return 2 * x.vb * x.b * x.s * kv_heads * x.d;
}

}  // namespace

Model transformer_model(const TransformerConfig& config) {
  const Shape x = shape_of(config, 1);
  const std::vector<int> context = context_degrees(config);
  const double boundary_bytes = x.vb * x.b * x.s * x.h;
  const bool mixed = x.vb == 2;
  Model model;
  model.name = config.name;
  model.profile_batch_size = config.micro_batch_size;
  model.profile_device = config.gpu;
  // Megatron-LM's bytes per parameter (docs/memory.md): bf16 (and fp8) weights 2, fp32 main
  // gradients 4, fp32 master weights and two moments 12: 18, 9 per 2-byte weight byte, 6 of them
  // sharded by the distributed optimizer (6 + 12/d). bf16 gradients (`gradient_dtype`) are 2
  // bytes; a bf16 optimizer (`optimizer_dtype`) keeps two bf16 moments and no master copy, 4
  // bytes, all sharded. fp16 keeps fp16 gradients and an fp32 copy in the optimizer: 20
  // (4 + 16/d). fp32: weights, gradients, two moments: 16 (8 + 8/d).
  const bool fp16 = config.dtype == hardware::DType::kFp16;
  const double gradients = config.gradient_dtype == hardware::DType::kFp32 ? 2 : 1;
  const double optimizer = config.optimizer_dtype == hardware::DType::kFp32 ? 6 : 2;
  model.parameter_memory_factor = fp16 ? 10 : mixed ? 1 + gradients + optimizer : 4;
  model.sharded_memory_factor = fp16 ? 8 : mixed ? optimizer : 2;
  model.reserve_bytes = kFrameworkReserveBytes;
  model.input_bytes = kTokenIdBytes * x.b * x.s;
  auto make_layer = [&](std::string name, TransformerPart part, double activation_bytes,
                        int allreduces_forward, int allreduces_backward) {
    Layer layer;
    // Only attention passes keys and values around the context ring; the other layers split
    // over tokens with no exchange.
    layer.context_parallel =
        ContextParallel{context, part == TransformerPart::kDecoder ? exchange_bytes(x) : 0.0};
    layer.name = std::move(name);
    TensorParallel split;
    split.degrees = config.degrees;
    split.allreduce_bytes = boundary_bytes;
    split.allreduces_forward = allreduces_forward;
    split.allreduces_backward = allreduces_backward;
    for (int t : config.degrees) {
      const TransformerLayerCosts costs = transformer_layer_costs(config, part, t);
      split.forward_ms.push_back(costs.forward_ms);
      split.backward_ms.push_back(costs.backward_ms);
      split.parameter_bytes.push_back(costs.parameter_bytes);
      split.stash_bytes.push_back(costs.stash_bytes);
      split.update_ms.push_back(costs.update_ms);
      split.backward_weight_ms.push_back(costs.backward_weight_ms);
      split.weight_stash_bytes.push_back(costs.weight_stash_bytes);
      split.backward_working_bytes.push_back(costs.backward_working_bytes);
      split.backward_recompute_ms.push_back(costs.backward_recompute_ms);
    }
    // Kept only where some degree has one: the working sets are written only then, so that other
    // layers read as before (the recomputed part is never written).
    for (auto* values : {&split.backward_working_bytes, &split.backward_recompute_ms}) {
      if (std::all_of(values->begin(), values->end(), [](double v) { return v == 0; })) {
        values->clear();
      }
    }
    layer.forward_ms = split.forward_ms.front();
    layer.backward_ms = split.backward_ms.front();
    layer.parameter_bytes = split.parameter_bytes.front();
    layer.stash_bytes = split.stash_bytes.front();
    layer.update_ms = split.update_ms.front();
    layer.backward_weight_ms = split.backward_weight_ms.front();
    layer.weight_stash_bytes = split.weight_stash_bytes.front();
    if (!split.backward_working_bytes.empty()) {
      layer.backward_working_bytes = split.backward_working_bytes.front();
    }
    if (!split.backward_recompute_ms.empty()) {
      layer.backward_recompute_ms = split.backward_recompute_ms.front();
    }
    layer.activation_bytes = activation_bytes;
    layer.tensor_parallel = std::move(split);
    return layer;
  };
  // Vocabulary-parallel embedding: one all-reduce of its output in the forward. The output
  // layer: the conjugate, one all-reduce of its input's gradient in the backward.
  model.layers.push_back(
      make_layer("embedding", TransformerPart::kEmbedding, boundary_bytes, 1, 0));
  // A decoder runs 2 all-reduces forward and 2 backward (their conjugates). With sequence
  // parallelism each is a reduce-scatter plus an all-gather, and the backward gathers the two
  // sequence-sharded inputs of the column-parallel GEMMs once more for their weight gradients
  // (Megatron keeps only the shard; Korthikanti et al. 2022 section 4.2.2, Calculon's
  // `seq_par_ag_redo`): two all-gathers, one all-reduce's worth, so 3 backward.
  const int decoder_backward = config.sequence_parallel ? 3 : 2;
  for (int l = 0; l < config.layers; ++l) {
    model.layers.push_back(make_layer("decoder" + std::to_string(l), TransformerPart::kDecoder,
                                      boundary_bytes, 2, decoder_backward));
  }
  model.layers.push_back(make_layer("output", TransformerPart::kOutput, 0, 0, 1));
  model.transformer = config;
  return model;
}

Model transformer_variant(const Model& model, const TransformerSettings& settings) {
  const int b = settings.micro_batch_size.value_or(
      model.transformer ? model.transformer->micro_batch_size : 1);
  if (!model.transformer || b < 1 || b > kMaxTransformerMicroBatchSize) {
    throw InternalError("transformer_variant: no description, or micro-batch size " +
                        std::to_string(b) + " out of range");
  }
  TransformerConfig config = *model.transformer;
  const bool sp = settings.sequence_parallel.value_or(config.sequence_parallel);
  const bool selective = settings.selective_recompute.value_or(config.selective_recompute);
  if (b == config.micro_batch_size && sp == config.sequence_parallel &&
      selective == config.selective_recompute) {
    return model;
  }
  config.micro_batch_size = b;
  config.sequence_parallel = sp;
  config.selective_recompute = selective;
  Model out = transformer_model(config);
  out.name = model.name;
  out.micro_batches = model.micro_batches;
  return out;
}

Model transformer_model_at(const Model& model, int micro_batch_size) {
  return transformer_variant(model, TransformerSettings{micro_batch_size, {}, {}});
}

}  // namespace pipeplan::model
