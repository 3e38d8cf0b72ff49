// `pipeplan model transformer ...`: a v2 model.json for a decoder-only transformer, costed
// analytically; `pipeplan model gpus`: the GPU catalogue.

#include "pipeplan/model/model.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/report/catalogue.hpp"
#include "pipeplan/report/input_summary.hpp"

namespace pipeplan::cli {
namespace {

struct TransformerOptions {
  std::string preset;
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn_hidden = 0, sequence = 0, vocab = 0;
  std::string ffn;
  int micro_batch_size = 1;
  std::string dtype = "bf16";
  std::string gpu = "A100-80GB";
  bool sequence_parallel = false, selective_recompute = false, flash_attention = false;
  bool per_op_recompute = false;
  std::string cross_entropy = "megatron";
  std::vector<int> degrees;
  std::string kernel_overhead_us;
  std::string matmul_ceiling;
  std::string dropout;  // on, off, or empty: the preset's published setting (else on)
  std::string gradient_dtype = "fp32", optimizer_dtype = "fp32";
  std::string attention_dtype;  // bf16, fp8, or empty: bf16 when training in fp8, else unset
  std::int64_t micro_batches = 0;
  std::string name;
  std::string output;
  // Which shape options the command line gave (they override the preset's).
  bool given_layers = false, given_hidden = false, given_heads = false, given_kv_heads = false,
       given_ffn_hidden = false, given_sequence = false, given_vocab = false,
       given_micro_batch_size = false;
};

// `--kernel-overhead-us`, `--matmul-ceiling`: a decimal number (digits, an optional fraction),
// else a usage error saying `what` it must be; its range is checked with the rest of the config.
double parse_decimal(const std::string& text, const std::string& option, const std::string& what) {
  const bool digits_only = !text.empty() && text.front() != '.' && text.back() != '.' &&
                           text.find_first_not_of("0123456789.") == std::string::npos &&
                           std::count(text.begin(), text.end(), '.') <= 1;
  if (!digits_only || text.size() > 32) {
    throw UsageError(option + ": must be " + what + ", got \"" + text + "\"");
  }
  return std::stod(text);
}

model::TransformerConfig config_from(const TransformerOptions& options) {
  model::TransformerConfig config;
  if (!options.preset.empty()) {
    const model::TransformerPreset* preset = model::find_transformer_preset(options.preset);
    if (preset == nullptr) {
      std::string names;
      for (const auto& known : model::transformer_presets()) {
        names += (names.empty() ? "" : ", ") + known.name;
      }
      throw UsageError("--preset: unknown preset \"" + options.preset + "\" (known: " + names +
                       ")");
    }
    config = preset->config;
    config.dropout = preset->dropout;  // as the preset's model was trained
  }
  struct Field {
    bool given;
    int value;
    int* target;
    const char* option;
  };
  for (const Field& field :
       {Field{options.given_layers, options.layers, &config.layers, "--layers"},
        Field{options.given_hidden, options.hidden, &config.hidden, "--hidden"},
        Field{options.given_heads, options.heads, &config.heads, "--heads"},
        Field{options.given_kv_heads, options.kv_heads, &config.kv_heads, "--kv-heads"},
        Field{options.given_ffn_hidden, options.ffn_hidden, &config.ffn_hidden, "--ffn-hidden"},
        Field{options.given_sequence, options.sequence, &config.sequence, "--sequence"},
        Field{options.given_vocab, options.vocab, &config.vocab, "--vocab"}}) {
    if (field.given) *field.target = field.value;
    const bool optional = field.target == &config.kv_heads || field.target == &config.ffn_hidden;
    if (!optional && *field.target == 0 && !field.given) {
      throw UsageError(std::string("missing ") + field.option + " (or give --preset)");
    }
  }
  if (options.ffn == "gelu") config.ffn = model::Ffn::kGelu;
  if (options.ffn == "swiglu") config.ffn = model::Ffn::kSwiglu;
  if (options.ffn == "relu2") config.ffn = model::Ffn::kRelu2;
  config.micro_batch_size = options.micro_batch_size;
  // As in a description: a size given is the only one the batch-size search tries.
  config.micro_batch_size_fixed = options.given_micro_batch_size;
  config.dtype = *hardware::parse_dtype(options.dtype);  // CLI11 checked the name
  config.gpu = options.gpu;
  config.sequence_parallel = options.sequence_parallel;
  config.selective_recompute = options.selective_recompute;
  config.per_op_recompute = options.per_op_recompute;
  config.cross_entropy = *model::parse_cross_entropy(options.cross_entropy);  // checked by CLI11
  if (!options.dropout.empty()) config.dropout = options.dropout == "on";
  config.gradient_dtype = *hardware::parse_dtype(options.gradient_dtype);  // CLI11 checked it
  config.optimizer_dtype = *hardware::parse_dtype(options.optimizer_dtype);
  // Transformer Engine's default recipe computes fp8 training's attention in bf16.
  if (!options.attention_dtype.empty()) {
    config.attention_dtype = hardware::parse_dtype(options.attention_dtype);  // CLI11 checked it
  } else if (config.dtype == hardware::DType::kFp8) {
    config.attention_dtype = hardware::DType::kBf16;
  }
  config.flash_attention = options.flash_attention;
  config.degrees = options.degrees;
  if (!options.kernel_overhead_us.empty()) {
    config.kernel_overhead_us = parse_decimal(
        options.kernel_overhead_us, "--kernel-overhead-us",
        "a number of microseconds from 0 to " + io::format_number(model::kMaxKernelOverheadUs));
  }
  config.matmul_ceiling = options.matmul_ceiling.empty()
                              ? model::default_matmul_ceiling(config)
                              : parse_decimal(options.matmul_ceiling, "--matmul-ceiling",
                                              "a fraction of the peak above 0 and at most 1");
  if (!options.name.empty()) config.name = options.name;
  auto [completed, problem] = model::complete_transformer_config(config);
  if (!problem.empty()) throw UsageError(problem);
  return completed;
}

int run_transformer(const TransformerOptions& options, Context& context) {
  const model::TransformerConfig config = config_from(options);
  model::Model model = model::transformer_model(config);
  if (options.micro_batches > 0) model.micro_batches = options.micro_batches;
  context.declare(
      {},
      {{"-o", options.output.empty() ? std::nullopt : std::optional<std::string>(options.output)}});
  context.emit("-o", io::dump_json(model::model_to_json(model)));
  context.commit();  // written before the line that says so: a failed write says only that

  std::string line = report::transformer_summary(model, config);
  if (!options.output.empty() && options.output != "-") line += " -> " + options.output;
  context.say(line);
  return 0;
}

int run_gpus(bool json, Context& context) {
  context.declare({}, {{"standard output", std::nullopt}});
  const auto& catalogue = hardware::gpu_catalogue();
  context.emit("standard output", json ? report::gpu_catalogue_json(catalogue)
                                       : report::gpu_catalogue_table(catalogue));
  return 0;
}

// `model transformer`'s options of how the model is trained and costed: format, GPU, Megatron-LM's
// flags, degrees, the kernel floor and the matmul ceiling.
void add_training_options(CLI::App& transformer, TransformerOptions& options) {
  transformer.add_option("--dtype", options.dtype, "Training number format (default bf16)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16", "fp8"}));
  transformer.add_option("--gpu", options.gpu,
                         "Catalogue GPU the times are for (default A100-80GB; see model gpus)");
  transformer.add_flag("--sequence-parallel", options.sequence_parallel,
                       "Megatron sequence parallelism (norms and dropouts split too)");
  transformer.add_flag("--selective-recompute", options.selective_recompute,
                       "Recompute the attention core in the backward instead of storing it");
  transformer.add_flag("--per-op-recompute", options.per_op_recompute,
                       "torchtitan's per-operator checkpointing: keep the fused attention's and "
                       "every second matmul's outputs, recompute the rest in the backward");
  transformer
      .add_option("--cross-entropy", options.cross_entropy,
                  "The loss: megatron (Megatron-LM's vocabulary-parallel cross-entropy, its "
                  "gradient written over the kept fp32 softmax; the default) or torch-fp32 "
                  "(torch's cross_entropy on fp32 logits, as torchtitan: 8 more bytes per logit "
                  "in its backward)")
      ->check(CLI::IsMember({"megatron", "torch-fp32"}));
  transformer.add_flag("--flash-attention", options.flash_attention,
                       "Fused attention (no sequence x sequence tensors)");
  transformer
      .add_option("--dropout", options.dropout,
                  "Dropout with its stored masks: on or off (default: as the preset's model was "
                  "trained, off for Llama, Qwen, Mistral and Nemotron-4; else on)")
      ->check(CLI::IsMember({"on", "off"}));
  transformer
      .add_option("--gradient-dtype", options.gradient_dtype,
                  "Format of the gradients the optimizer reads: fp32 (Megatron-LM's main "
                  "gradients, the default) or bf16 (reduced in bf16, NeMo's grad_sync_dtype)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  transformer
      .add_option("--optimizer-dtype", options.optimizer_dtype,
                  "Format of the optimizer state: fp32 (two moments and master weights, the "
                  "default) or bf16 (two bf16 moments, no master copy: NeMo's "
                  "distributed_fused_adam with dtype bf16)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  transformer
      .add_option("--attention-dtype", options.attention_dtype,
                  "With --dtype fp8, the format of the attention products: bf16 (Transformer "
                  "Engine's default, the default here) or fp8 (its recipe's fp8_dpa; the "
                  "megatron export then asks for it)")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  transformer
      .add_option("--degrees", options.degrees,
                  "Tensor-parallel degrees, comma-separated, from 1 (default: 1,2,4,8 where they "
                  "divide the heads and the FFN size)")
      ->delimiter(',')
      ->transform(decimal_integer(1, model::kMaxTensorParallelDegree));
  transformer.add_option(
      "--kernel-overhead-us", options.kernel_overhead_us,
      "Fixed time of one kernel launch and dispatch, microseconds (default " +
          io::format_number(model::kDefaultKernelOverheadUs) +
          "; 0: none): each pass of a layer takes at least its kernels times it");
  transformer.add_option(
      "--matmul-ceiling", options.matmul_ceiling,
      "Fraction of the GPU's peak no matrix multiplication exceeds, above 0 and at most 1 "
      "(default: the GPU's measured maximum, model gpus; 1 where none is published)");
}

}  // namespace

void add_model_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("model", "Write model profiles without profiling");
  sub->require_subcommand(1);

  auto options = std::make_shared<TransformerOptions>();
  std::string preset_names;
  for (const auto& preset : model::transformer_presets()) {
    preset_names += (preset_names.empty() ? "" : ", ") + preset.name;
  }
  CLI::App* transformer =
      sub->add_subcommand("transformer",
                          "A decoder-only transformer's v2 model.json, costed analytically "
                          "(docs/transformer-model.md)");
  transformer->add_option("--preset", options->preset, "A published shape: " + preset_names);
  // Integers as `plan` reads them (decimal_integer): decimal digits only, sizes from 1.
  const CLI::Validator size = decimal_integer(1, std::numeric_limits<int>::max());
  CLI::Option* layers =
      transformer->add_option("--layers", options->layers, "Decoder layers")->transform(size);
  CLI::Option* hidden =
      transformer->add_option("--hidden", options->hidden, "Hidden size")->transform(size);
  CLI::Option* heads =
      transformer->add_option("--heads", options->heads, "Attention heads")->transform(size);
  CLI::Option* kv_heads =
      transformer
          ->add_option("--kv-heads", options->kv_heads,
                       "Key/value heads (grouped-query attention; default: --heads)")
          ->transform(size);
  CLI::Option* ffn_hidden =
      transformer
          ->add_option("--ffn-hidden", options->ffn_hidden,
                       "FFN size (default: 4 x hidden for gelu and relu2, Llama's 8/3 x hidden "
                       "rounded up to 256 for swiglu)")
          ->transform(size);
  CLI::Option* sequence =
      transformer->add_option("--sequence", options->sequence, "Sequence length, tokens")
          ->transform(size);
  CLI::Option* vocab =
      transformer->add_option("--vocab", options->vocab, "Vocabulary size")->transform(size);
  transformer
      ->add_option("--ffn", options->ffn,
                   "gelu (GPT/OPT style: biases, LayerNorm, learned positions), swiglu (Llama "
                   "style) or relu2 (Nemotron-4 style: squared ReLU, LayerNorm, rotary "
                   "positions, no biases); default: the preset's, else gelu")
      ->check(CLI::IsMember({"gelu", "swiglu", "relu2"}));
  CLI::Option* micro_batch_size =
      transformer
          ->add_option("--micro-batch-size", options->micro_batch_size,
                       "Sequences per micro-batch (default 1; given, plan --global-batch tries "
                       "only it)")
          ->transform(decimal_integer(1, model::kMaxTransformerMicroBatchSize));
  add_training_options(*transformer, *options);
  transformer
      ->add_option("--micro-batches", options->micro_batches,
                   "Micro-batches per iteration, written into the model")
      ->transform(decimal_integer(1, model::kMaxMicroBatches));
  transformer->add_option("--name", options->name, "Model name (default: the preset's)")
      ->check([](const std::string& value) {
        return value.empty() ? std::string("an empty name names no model") : std::string();
      });
  transformer
      ->add_option("-o,--output", options->output,
                   "Write model.json here (atomically) instead of standard output")
      ->check(output_path, "FILE");
  transformer->callback([=, &action] {
    options->given_layers = layers->count() > 0;
    options->given_hidden = hidden->count() > 0;
    options->given_heads = heads->count() > 0;
    options->given_kv_heads = kv_heads->count() > 0;
    options->given_ffn_hidden = ffn_hidden->count() > 0;
    options->given_sequence = sequence->count() > 0;
    options->given_vocab = vocab->count() > 0;
    options->given_micro_batch_size = micro_batch_size->count() > 0;
    action = [options](Context& context) { return run_transformer(*options, context); };
  });

  auto json = std::make_shared<bool>(false);
  CLI::App* gpus = sub->add_subcommand("gpus", "List the GPU catalogue");
  gpus->add_flag("--json", *json, "Print the catalogue as JSON, with aliases and sources");
  gpus->callback(
      [json, &action] { action = [json](Context& context) { return run_gpus(*json, context); }; });
}

}  // namespace pipeplan::cli
