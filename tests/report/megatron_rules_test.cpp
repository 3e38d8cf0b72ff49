// The megatron export against what Megatron-LM's own argument parser accepts: every flag it
// writes is one Megatron-LM defines, with a value where it takes one, and no combination that
// `validate_args` refuses. The rules were read from NVIDIA/Megatron-LM
// megatron/training/arguments.py at 000c4ac24f61159c138b0975def722c65245983c (`_add_*_args` and
// `validate_args`) and megatron/core/transformer/pipeline_parallel_layer_layout.py (the layout
// grammar). Megatron-LM cannot run here, so this is the check that stands for its parser; the
// plans are real megatron-planner plans of a Llama-shaped model over a grid of configurations.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::report {
namespace {

using nlohmann::ordered_json;

// Megatron-LM's flags the export may write: true where the flag takes a value, false for a
// store_true (or store_false) flag.
const std::map<std::string, bool>& megatron_lm_flags() {
  static const std::map<std::string, bool> flags = {
      {"--attention-backend", true},
      {"--attention-dropout", true},
      {"--bf16", false},
      {"--ckpt-format", true},
      {"--context-parallel-size", true},
      {"--disable-bias-linear", false},
      {"--ffn-hidden-size", true},
      {"--fp16", false},
      {"--fp8-dot-product-attention", false},
      {"--fp8-format", true},
      {"--global-batch-size", true},
      {"--grad-reduce-in-bf16", false},
      {"--group-query-attention", false},
      {"--hidden-dropout", true},
      {"--hidden-size", true},
      {"--max-position-embeddings", true},
      {"--micro-batch-size", true},
      {"--normalization", true},
      {"--num-attention-heads", true},
      {"--num-layers", true},
      {"--num-query-groups", true},
      {"--no-gradient-accumulation-fusion", false},
      {"--num-virtual-stages-per-pipeline-rank", true},
      {"--pipeline-model-parallel-layout", true},
      {"--pipeline-model-parallel-size", true},
      {"--position-embedding-type", true},
      {"--recompute-granularity", true},
      {"--recompute-method", true},
      {"--recompute-num-layers", true},
      {"--seq-length", true},
      {"--sequence-parallel", false},
      {"--squared-relu", false},
      {"--swiglu", false},
      {"--tensor-model-parallel-size", true},
      {"--untie-embeddings-and-output-weights", false},
      {"--use-distributed-optimizer", false},
      {"--use-torch-fsdp2", false},
  };
  return flags;
}

// The `choices=` of the flags that have them.
const std::map<std::string, std::set<std::string>>& megatron_lm_choices() {
  static const std::map<std::string, std::set<std::string>> choices = {
      {"--attention-backend", {"flash", "fused", "unfused", "local", "auto"}},
      {"--ckpt-format", {"torch", "torch_dist", "zarr", "torch_dcp", "fsdp_dtensor"}},
      {"--fp8-format", {"e4m3", "hybrid"}},
      {"--normalization", {"LayerNorm", "RMSNorm"}},
      {"--position-embedding-type", {"learned_absolute", "rope", "mrope", "relative", "none"}},
      {"--recompute-granularity", {"full", "selective"}},
      {"--recompute-method", {"uniform", "block"}},
  };
  return choices;
}

// Megatron-LM's layout grammar: stages split at `|`, `x*n` repeats one symbol, only E, L, t and m;
// E first and L last, once each. The stages' symbols, or nullopt where Megatron-LM refuses it.
std::optional<std::vector<std::string>> layout_stages(const std::string& layout) {
  std::vector<std::string> stages{""};
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const char c = layout[i];
    if (c == '|') {
      stages.emplace_back();
    } else if (c == '*') {
      std::size_t end = i + 1;
      while (end < layout.size() && std::isdigit(static_cast<unsigned char>(layout[end]))) ++end;
      if (end == i + 1 || stages.back().empty()) return std::nullopt;
      const int times = std::stoi(layout.substr(i + 1, end - i - 1));
      const char symbol = stages.back().back();
      stages.back().append(static_cast<std::size_t>(times - 1), symbol);
      i = end - 1;
    } else if (std::string_view("ELtm").find(c) != std::string_view::npos) {
      stages.back() += c;
    } else if (c != ',') {
      return std::nullopt;
    }
  }
  return stages;
}

// Why Megatron-LM would refuse the export `out` (its arguments and environment), or "".
std::string megatron_lm_refusal(const ordered_json& out) {
  std::map<std::string, std::string> given;  // flag -> value ("" for store_true)
  const std::vector<std::string> args = out.at("arguments").get<std::vector<std::string>>();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string name = args[i];
    const auto flag = megatron_lm_flags().find(name);
    if (flag == megatron_lm_flags().end()) return "unrecognized arguments: " + name;
    if (given.count(name) != 0) return "given twice: " + name;
    std::string value;
    if (flag->second) {
      if (i + 1 == args.size() || args[i + 1].rfind("--", 0) == 0) return name + ": no value";
      value = args[++i];
      const auto choices = megatron_lm_choices().find(name);
      if (choices != megatron_lm_choices().end() && choices->second.count(value) == 0) {
        return name + ": invalid choice " + value;
      }
    }
    given[name] = value;
  }
  const auto has = [&](const std::string& flag) { return given.count(flag) != 0; };
  const auto number = [&](const std::string& flag, int otherwise) {
    return has(flag) ? std::stoi(given.at(flag)) : otherwise;
  };
  const int t = number("--tensor-model-parallel-size", 1);
  const int p = number("--pipeline-model-parallel-size", 1);
  const int c = number("--context-parallel-size", 1);
  const int world = out.at("world_size").get<int>();
  if (world % (t * p * c) != 0) return "world size not a multiple of t p c";
  const int d = world / (t * p * c);
  if (has("--global-batch-size") &&
      number("--global-batch-size", 0) % (number("--micro-batch-size", 1) * d) != 0) {
    return "global batch not a multiple of micro-batch size x data-parallel size";
  }
  if (int(has("--num-virtual-stages-per-pipeline-rank")) +
          int(has("--pipeline-model-parallel-layout")) >
      1) {
    return "No more than one of the following arguments can be set at the same time";
  }
  const int layers = number("--num-layers", 0);
  int vpp = number("--num-virtual-stages-per-pipeline-rank", 1);
  if (has("--pipeline-model-parallel-layout")) {
    const auto stages = layout_stages(given.at("--pipeline-model-parallel-layout"));
    if (!stages) return "layout: not Megatron-LM's grammar";
    if (stages->size() % static_cast<std::size_t>(p) != 0) return "layout: stages % PP";
    const std::string all = std::accumulate(stages->begin(), stages->end(), std::string());
    if (std::count(all.begin(), all.end(), 't') != layers) return "layout: t != num_layers";
    if (all.front() != 'E' || all.back() != 'L' || std::count(all.begin(), all.end(), 'E') != 1 ||
        std::count(all.begin(), all.end(), 'L') != 1) {
      return "layout: E first and L last, once each";
    }
    vpp = static_cast<int>(stages->size()) / p;
  } else if (layers % (p * vpp) != 0) {
    return "Number of layers should be divisible by the pipeline-model-parallel size";
  }
  if (vpp > 1 && p < 2) return "a virtual pipeline needs pipeline-model-parallel size > 1";
  if (given.count("--recompute-granularity") != 0 &&
      given.at("--recompute-granularity") == "selective" && has("--recompute-method")) {
    return "recompute method is not yet supported for selective recomputing granularity";
  }
  if (has("--fp16") && has("--bf16")) return "fp16 and bf16";
  if (has("--squared-relu") && has("--swiglu")) return "squared relu and swiglu";
  if (has("--num-query-groups") && !has("--group-query-attention")) {
    return "--num-query-groups without --group-query-attention is ignored";
  }
  if (has("--sequence-parallel") && t == 1) return "sequence parallelism turned off at t = 1";
  const int sequence = number("--seq-length", 0);
  if (c > 1 && sequence % (2 * c) != 0) return "seq_length % (2 x context_parallel_size)";
  if (number("--max-position-embeddings", sequence) < sequence) return "positions < sequence";
  const auto environment = out.at("environment").get<std::vector<std::string>>();
  const bool one_connection =
      std::count(environment.begin(), environment.end(), "CUDA_DEVICE_MAX_CONNECTIONS=1") == 1;
  if (has("--use-torch-fsdp2")) {
    if (p != 1) return "--use-torch-fsdp2 is not supported with pipeline parallelism";
    if (has("--use-distributed-optimizer")) {
      return "--use-torch-fsdp2 is not supported with MCore's distributed optimizer";
    }
    if (!has("--no-gradient-accumulation-fusion")) {
      return "--use-torch-fsdp2 is not supported with gradient accumulation fusion";
    }
    const std::string format = has("--ckpt-format") ? given.at("--ckpt-format") : "torch_dist";
    if (format != "torch_dist" && format != "torch_dcp") {
      return "--use-torch-fsdp2 requires --ckpt-format torch_dist or torch_dcp";
    }
    if (!has("--untie-embeddings-and-output-weights")) {
      return "--use-torch-fsdp2 requires --untie-embeddings-and-output-weights";
    }
    if (has("--fp16")) return "--use-torch-fsdp2 not supported with fp16 yet";
    if (one_connection)
      return "FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one";
    return "";  // tensor or context parallelism beside FSDP2: a warning only
  }
  if ((t > 1 || c > 1) && !one_connection) return "CUDA_DEVICE_MAX_CONNECTIONS must be 1";
  return "";
}

// The checker itself refuses what Megatron-LM refuses (each mistake the export once made, or
// could make).
TEST(MegatronLmRulesTest, TheCheckerRefusesWhatMegatronLmRefuses) {
  const ordered_json good = {
      {"world_size", 8},
      {"arguments",
       {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
        "--context-parallel-size", "2", "--num-layers", "4", "--seq-length", "8",
        "--max-position-embeddings", "8", "--micro-batch-size", "1", "--global-batch-size", "4",
        "--pipeline-model-parallel-layout", "Et|t|t|tL", "--bf16"}},
      {"environment", {"CUDA_DEVICE_MAX_CONNECTIONS=1"}}};
  EXPECT_EQ(megatron_lm_refusal(good), "");
  ordered_json both = good;
  both["arguments"].push_back("--num-virtual-stages-per-pipeline-rank");
  both["arguments"].push_back("2");
  EXPECT_EQ(megatron_lm_refusal(both),
            "No more than one of the following arguments can be set at the same time");
  ordered_json no_connection = good;
  no_connection["environment"] = ordered_json::array();
  EXPECT_EQ(megatron_lm_refusal(no_connection), "CUDA_DEVICE_MAX_CONNECTIONS must be 1");
  ordered_json elided = good;
  elided["arguments"][17] = "Et|...|tL";
  EXPECT_EQ(megatron_lm_refusal(elided), "layout: not Megatron-LM's grammar");
  ordered_json unknown = good;
  unknown["arguments"].push_back("--account-for-embedding");
  EXPECT_EQ(megatron_lm_refusal(unknown), "unrecognized arguments: --account-for-embedding");
  ordered_json selective = good;
  for (const char* word : {"--recompute-granularity", "selective", "--recompute-method", "uniform"})
    selective["arguments"].push_back(word);
  EXPECT_EQ(megatron_lm_refusal(selective),
            "recompute method is not yet supported for selective recomputing granularity");
  // torch FSDP2: pipeline size 1, its flags, and not one CUDA connection.
  const ordered_json fsdp = {
      {"world_size", 8},
      {"arguments",
       {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "1", "--num-layers",
        "4", "--seq-length", "8", "--max-position-embeddings", "8", "--bf16",
        "--untie-embeddings-and-output-weights", "--use-torch-fsdp2",
        "--no-gradient-accumulation-fusion", "--ckpt-format", "torch_dist"}},
      {"environment", ordered_json::array()}};
  EXPECT_EQ(megatron_lm_refusal(fsdp), "");
  ordered_json piped = fsdp;
  piped["arguments"][3] = "2";
  EXPECT_EQ(megatron_lm_refusal(piped),
            "--use-torch-fsdp2 is not supported with pipeline parallelism");
  ordered_json fused = fsdp;
  fused["arguments"].erase(fused["arguments"].begin() + 13);
  EXPECT_EQ(megatron_lm_refusal(fused),
            "--use-torch-fsdp2 is not supported with gradient accumulation fusion");
  ordered_json connected = fsdp;
  connected["environment"] = {"CUDA_DEVICE_MAX_CONNECTIONS=1"};
  EXPECT_EQ(megatron_lm_refusal(connected),
            "FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one");
  ordered_json distributed = fsdp;
  distributed["arguments"].push_back("--use-distributed-optimizer");
  EXPECT_EQ(megatron_lm_refusal(distributed),
            "--use-torch-fsdp2 is not supported with MCore's distributed optimizer");
}

// A Llama-shaped model (grouped-query attention, SwiGLU) small enough to plan quickly; with
// `ffn` GELU, GPT's feed-forward and tied embedding and output weights.
model::Model llama_shaped(int layers, bool selective, model::Ffn ffn = model::Ffn::kSwiglu) {
  model::TransformerConfig config;
  config.layers = layers;
  config.hidden = 512;
  config.heads = 8;
  config.kv_heads = 2;
  config.sequence = 1024;
  config.vocab = 32000;
  config.ffn = ffn;
  config.sequence_parallel = true;
  config.flash_attention = true;
  config.selective_recompute = selective;
  config.dropout = false;
  config.gradient_dtype = hardware::DType::kBf16;
  return testing::described_model(config);
}

// Every configuration of 8 GPUs the megatron planner makes of 6 and 8 decoders (t, p, V, c, the
// embedding and loss as layers, recomputation, optimizer) exports arguments Megatron-LM accepts.
// The megatron planner's plan of configuration `k` of a grid of 192 on 8 GPUs (t 1 or 2, p 1, 2
// or 4, V 1 or 2, c 1 or 2, the embedding and loss as layers or not, full recomputation or none;
// a sharded optimizer at t 2 in the first half, fully sharded in the second), exported; nothing
// where the planner or the export refuses it.
std::optional<ordered_json> grid_export(const model::Model& model,
                                        const topology::Topology& topology, int k) {
  constexpr int kPipelines[] = {1, 2, 4};
  planners::Request request{model, topology, 16};
  const int t = 1 + k % 2;
  request.tensor_parallel = {t};
  request.pipeline_parallel = kPipelines[k / 2 % 3];
  request.virtual_stages = 1 + k / 6 % 2;
  request.context_parallel = {1 + k / 12 % 2};
  request.account_for_embedding = request.account_for_loss = k / 24 % 2 == 1;
  request.recompute = k / 48 % 2 == 1 ? planners::Recompute::kAlways : planners::Recompute::kNever;
  request.optimizer = k / 96 % 2 == 1 ? Optimizer::kFullySharded
                      : t == 2        ? Optimizer::kSharded
                                      : Optimizer::kReplicated;
  try {
    return megatron_json(make_view(planners::make_plan("megatron", request), model, topology));
  } catch (const Error&) {
    return std::nullopt;  // a configuration Megatron-LM (or the planner) refuses
  }
}

TEST(MegatronLmRulesTest, EveryMegatronPlanExportsArgumentsMegatronLmAccepts) {
  const topology::Topology topology = testing::uniform_topology(8, 50e9, 0.002);
  int exported = 0;
  std::set<std::string> seen;
  for (const auto& [layers, selective] : {std::pair{6, false}, {8, true}, {8, false}}) {
    const model::Model model = llama_shaped(layers, selective);
    for (int k = 0; k < 192; ++k) {
      const std::optional<ordered_json> out = grid_export(model, topology, k);
      if (!out) continue;
      EXPECT_EQ(megatron_lm_refusal(*out), "") << out->at("command_line");
      for (const auto& arg : out->at("arguments")) seen.insert(arg.get<std::string>());
      ++exported;
    }
  }
  // The grid reaches the flags that matter: a layout, virtual stages, context parallelism, both
  // kinds of recomputation.
  EXPECT_GT(exported, 40);
  for (const char* flag :
       {"--pipeline-model-parallel-layout", "--num-virtual-stages-per-pipeline-rank",
        "--context-parallel-size", "--sequence-parallel", "--group-query-attention", "selective",
        "full", "--use-distributed-optimizer", "--grad-reduce-in-bf16", "--use-torch-fsdp2"}) {
    EXPECT_EQ(seen.count(flag), 1u) << flag;
  }
}

// The message and exit code of an export that must refuse, or "exported" when it did not.
std::string export_refusal(const std::function<ordered_json(const PlanView&)>& writer,
                           const Plan& plan, const model::Model& model,
                           const topology::Topology& topology) {
  try {
    (void)writer(make_view(plan, model, topology));
  } catch (const InputError& error) {
    return std::to_string(static_cast<int>(error.code())) + " " + error.what();
  }
  return "exported";
}

// A fully sharded plan: Megatron-LM runs it as torch FSDP2 without pipeline parallelism and
// refuses it with (exit 3, naming the way out); DeepSpeed's pipeline engine refuses ZeRO-3.
TEST(MegatronLmRulesTest, AFullyShardedPlanIsTorchFsdp2WithoutPipelineParallelism) {
  const topology::Topology topology = testing::uniform_topology(8, 50e9, 0.002);
  const model::Model model = llama_shaped(8, false);
  planners::Request request{model, topology, 16};
  request.tensor_parallel = {2};
  request.pipeline_parallel = 1;
  request.optimizer = Optimizer::kFullySharded;
  const Plan flat = planners::make_plan("megatron", request);
  const ordered_json out = megatron_json(make_view(flat, model, topology));
  EXPECT_EQ(out.at("torch_fsdp2"), true);
  EXPECT_EQ(out.at("distributed_optimizer"), false);
  EXPECT_TRUE(out.at("environment").empty());
  EXPECT_EQ(megatron_lm_refusal(out), "");
  EXPECT_EQ(export_refusal(deepspeed_json, flat, model, topology),
            "3 plan: /optimizer: the plan is fully sharded (ZeRO-3), and DeepSpeed's pipeline "
            "engine runs ZeRO stage 0 or 1 only: make the plan with --optimizer sharded");
  // A GPT model ties its embedding and output weights, which torch FSDP2 in Megatron-LM does
  // not take: refused, naming the model's field.
  const model::Model tied = llama_shaped(8, false, model::Ffn::kGelu);
  const planners::Request tied_request = planners::with_inputs(request, tied, topology);
  EXPECT_EQ(
      export_refusal(megatron_json, planners::make_plan("megatron", tied_request), tied, topology),
      "3 model: /transformer/ffn: the model ties its embedding and output weights "
      "(Megatron-LM's GPT), and Megatron-LM's --use-torch-fsdp2 requires "
      "--untie-embeddings-and-output-weights: plan with --optimizer sharded");
  request.pipeline_parallel = 2;
  EXPECT_EQ(
      export_refusal(megatron_json, planners::make_plan("megatron", request), model, topology),
      "3 plan: /optimizer: the plan is fully sharded, which Megatron-LM runs as torch "
      "FSDP2, and Megatron-LM refuses --use-torch-fsdp2 with pipeline parallelism: make "
      "the plan with --pipeline-parallel 1, or with --optimizer sharded");
}

// torchtitan's per-operator checkpointing has no Megatron-LM or DeepSpeed setting: both exports
// refuse a plan of such a model (exit 3, naming the model's field), whatever the plan recomputes.
// FP8 training: Megatron-LM computes the attention in bf16 unless `--fp8-dot-product-attention`
// (Transformer Engine's fp8_dpa), so the export asks for it exactly where the model ran its
// attention in fp8 (`attention_dtype`), and Megatron-LM accepts both.
TEST(MegatronLmRulesTest, Fp8AttentionIsAskedForOnlyWhereTheModelRunsIt) {
  const topology::Topology topology = testing::uniform_topology(8, 50e9, 0.002);
  model::TransformerConfig config = *llama_shaped(8, false).transformer;
  config.gpu = "H100-SXM";
  config.dtype = hardware::DType::kFp8;
  for (const hardware::DType attention : {hardware::DType::kBf16, hardware::DType::kFp8}) {
    config.attention_dtype = attention;
    const model::Model model = testing::described_model(config);
    planners::Request request{model, topology, 16};
    request.tensor_parallel = {2};
    request.pipeline_parallel = 2;
    const ordered_json out =
        megatron_json(make_view(planners::make_plan("megatron", request), model, topology));
    EXPECT_EQ(megatron_lm_refusal(out), "") << out.at("command_line");
    const auto& arguments = out.at("arguments");
    const auto has = [&](const char* flag) {
      return std::find(arguments.begin(), arguments.end(), flag) != arguments.end();
    };
    EXPECT_TRUE(has("--fp8-format"));
    EXPECT_EQ(has("--fp8-dot-product-attention"), attention == hardware::DType::kFp8);
  }
}

TEST(MegatronLmRulesTest, PerOperatorCheckpointingIsTorchtitansOnly) {
  const topology::Topology topology = testing::uniform_topology(8, 50e9, 0.002);
  model::TransformerConfig config = *llama_shaped(8, false).transformer;
  config.per_op_recompute = true;
  const model::Model model = testing::described_model(config);
  planners::Request request{model, topology, 16};
  request.tensor_parallel = {2};
  request.pipeline_parallel = 2;
  const std::string refusal =
      "3 model: /transformer/per_op_recompute: the model recomputes per operator (torchtitan's "
      "selective activation checkpointing), which %s has no setting for: describe the model "
      "without --per-op-recompute";
  auto expected = [&](const std::string& framework) {
    std::string text = refusal;
    return text.replace(text.find("%s"), 2, framework);
  };
  for (const auto recompute : {planners::Recompute::kNever, planners::Recompute::kAlways}) {
    request.recompute = recompute;
    const Plan plan = planners::make_plan("megatron", request);
    EXPECT_EQ(export_refusal(megatron_json, plan, model, topology), expected("Megatron-LM"));
    EXPECT_EQ(export_refusal(deepspeed_json, plan, model, topology), expected("DeepSpeed"));
  }
}

}  // namespace
}  // namespace pipeplan::report
