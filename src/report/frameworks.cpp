// Framework exports (spec 8.4, docs/formats.md "megatron", "deepspeed", "torch-schedule"): the
// arguments of Megatron-LM, the partition of a DeepSpeed PipelineModule and the compute-only
// schedule CSV of torch.distributed.pipelining, for plans whose stages all have the same
// replica count r and tensor-parallel degree t (what these frameworks can run: each runs r
// identical pipelines of S stages, each stage a group of t GPUs).
//
// Spec 9.5: stages that share GPUs (a device) are one pipeline rank; torch-schedule writes all
// their actions on its row (I and W for a split backward), Megatron-LM takes them as virtual
// stages when they follow its interleaving, DeepSpeed refuses them.
//
// Complexity: framework_shape and pipeline_devices O(S log S); megatron_json and
// deepspeed_json O(N + L + S log S) for N GPUs and L layers; torch_schedule_csv O(T + S log S)
// for T compute tasks.

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "export_util.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::report {
namespace {

using detail::model_file;
using detail::plan_file;
using nlohmann::ordered_json;

// `1 replica`, `2 replicas`.
std::string count_of(int n, const std::string& noun) {
  return io::format_count(n, noun, noun + "s");
}

// The number of decoder layers when the model's layers are `embedding`, `decoder0` ..
// `decoder{n-1}`, `output` (as `pipeplan model transformer` writes them, n >= 1); else empty.
std::optional<int> transformer_decoders(const PlanView& view) {
  if (!view.layer_names) return std::nullopt;
  const auto& names = *view.layer_names;
  if (names.size() < 3 || names.front() != "embedding" || names.back() != "output") {
    return std::nullopt;
  }
  for (std::size_t l = 1; l + 1 < names.size(); ++l) {
    if (names[l] != "decoder" + std::to_string(l - 1)) return std::nullopt;
  }
  return static_cast<int>(names.size()) - 2;
}

int layer_count(const Plan& plan) { return plan.stages.back().last_layer + 1; }

// The stages that recompute, by index.
std::vector<int> recomputing_stages(const Plan& plan) {
  std::vector<int> out;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    if (plan.stages[s].recompute) out.push_back(static_cast<int>(s));
  }
  return out;
}

std::string stage_list(const std::vector<int>& stages) {
  std::vector<std::string> parts;
  parts.reserve(stages.size());
  for (int s : stages) parts.push_back(std::to_string(s));
  return (stages.size() == 1 ? "stage " : "stages ") + io::format_list(parts);
}

// The note for a plan in which only some stages recompute; `setting` is how the framework
// recomputes them all.
std::string partial_recompute_note(const Plan& plan, const std::string& framework,
                                   const std::string& setting) {
  return "only " + stage_list(recomputing_stages(plan)) + " of the plan recompute; " + framework +
         " recomputes every stage or none, so " + setting +
         " recomputes every stage: no stage needs more memory than in the plan where its "
         "recomputation memory (its layers' inputs plus one layer's stash) is below its stash, "
         "as for transformer layers, but the backward of the other stages also runs their forward "
         "again; make the plan with --recompute always (or never) to estimate exactly this";
}

std::string schedule_note(const Plan& plan, const std::string& framework) {
  return framework + " runs its own 1F1B schedule on every data-parallel replica, not the plan's " +
         plan.schedule_policy +
         " schedule; make the plan with --schedule 1f1b to estimate the iteration it runs";
}

// The global rank of every used GPU in the order of Megatron-LM and DeepSpeed (tensor
// innermost, then data, then pipeline), which is `rank_order`, and how to launch so that every
// rank lands on the plan's GPU: one contiguous block of ranks per host (as torchrun and the
// deepspeed launcher assign them), local rank k on the host's k-th visible device.
struct Launch {
  ordered_json ranks = ordered_json::array();
  ordered_json launch = ordered_json::object();
  std::vector<std::string> notes;
};

// A GPU's device index (its position among its node's GPUs in topology order), and the nodes
// in topology order. O(N log N).
struct Devices {
  std::vector<int> device;
  std::vector<std::string> node_order;
};

Devices devices_of(const PlanView& view) {
  const std::size_t N = view.gpu_ids.size();
  if (view.gpu_nodes.size() != N) throw InternalError("framework export without the topology");
  std::map<std::string, int> on_node;
  Devices out;
  out.device.assign(N, 0);
  for (std::size_t g = 0; g < N; ++g) {
    const auto [it, added] = on_node.emplace(view.gpu_nodes[g], 0);
    if (added) out.node_order.push_back(view.gpu_nodes[g]);
    out.device[g] = it->second++;
  }
  return out;
}

// Every rank's GPU, host, device and pipeline, data- and tensor-parallel ranks.
ordered_json rank_entries(const PlanView& view, const FrameworkShape& shape,
                          const std::vector<int>& ranks, const Devices& devices) {
  ordered_json out = ordered_json::array();
  // Megatron-LM's order (tp-cp-dp-pp): tensor-parallel ranks vary fastest, then context-parallel
  // ranks (spec 10.2's groups), then data-parallel ranks.
  const int per_replica = shape.context * shape.tensor;
  const int per_stage = shape.data * per_replica;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const int g = ranks[r];
    const int in_stage = static_cast<int>(r) % per_stage;
    ordered_json entry = {{"rank", static_cast<int>(r)},
                          {"gpu", detail::gpu_id(view, g)},
                          {"host", view.gpu_nodes[static_cast<std::size_t>(g)]},
                          {"device", devices.device[static_cast<std::size_t>(g)]},
                          {"pipeline_rank", static_cast<int>(r) / per_stage},
                          {"data_parallel_rank", in_stage / per_replica}};
    if (shape.context > 1) entry["context_parallel_rank"] = in_stage / shape.tensor % shape.context;
    entry["tensor_parallel_rank"] = in_stage % shape.tensor;
    out.push_back(std::move(entry));
  }
  return out;
}

// Hosts: the blocks of consecutive ranks on one node; `split` names the first node whose ranks
// are not one block (and two of its ranks with others between them).
struct Host {
  std::string node;
  int first_rank = 0;
  std::vector<int> devices;
};
struct Hosts {
  std::vector<Host> blocks;
  std::optional<std::pair<std::string, std::pair<int, int>>> split;
  std::vector<std::string> used_in_topology_order;  // the nodes with ranks, in topology order
};

Hosts hosts_of(const PlanView& view, const std::vector<int>& ranks, const Devices& devices) {
  Hosts out;
  std::map<std::string, int> last_rank;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string& node = view.gpu_nodes[static_cast<std::size_t>(ranks[r])];
    if (out.blocks.empty() || out.blocks.back().node != node) {
      if (last_rank.count(node) && !out.split) {
        out.split = {node, {last_rank[node], static_cast<int>(r)}};
      }
      out.blocks.push_back({node, static_cast<int>(r), {}});
    }
    out.blocks.back().devices.push_back(devices.device[static_cast<std::size_t>(ranks[r])]);
    last_rank[node] = static_cast<int>(r);
  }
  for (const std::string& node : devices.node_order) {
    if (last_rank.count(node)) out.used_in_topology_order.push_back(node);
  }
  return out;
}

// The launch's host list, and the CUDA_VISIBLE_DEVICES settings it needs (when the hosts are
// contiguous).
ordered_json host_list(const Hosts& hosts, std::vector<std::string>& visible_notes) {
  const bool contiguous = !hosts.split.has_value();
  ordered_json out = ordered_json::array();
  for (std::size_t k = 0; k < hosts.blocks.size(); ++k) {
    const Host& host = hosts.blocks[k];
    bool identity = true;
    std::vector<std::string> devices;
    for (std::size_t i = 0; i < host.devices.size(); ++i) {
      identity = identity && host.devices[i] == static_cast<int>(i);
      devices.push_back(std::to_string(host.devices[i]));
    }
    const std::string visible = io::format_list(devices, ",");
    ordered_json entry = ordered_json::object();
    if (contiguous) entry["node_rank"] = static_cast<int>(k);
    entry["host"] = host.node;
    entry["first_rank"] = host.first_rank;
    entry["processes"] = static_cast<int>(host.devices.size());
    entry["cuda_visible_devices"] = identity ? ordered_json(nullptr) : ordered_json(visible);
    out.push_back(std::move(entry));
    if (contiguous && !identity) {
      visible_notes.push_back("CUDA_VISIBLE_DEVICES=" + visible + " on " + host.node);
    }
  }
  return out;
}

// What a launcher must do to put every rank on the plan's GPU, in words.
std::vector<std::string> launch_notes(const Hosts& hosts, const std::vector<std::string>& order,
                                      bool order_matters,
                                      const std::vector<std::string>& visible_notes) {
  std::vector<std::string> notes;
  if (hosts.split) {
    notes.push_back(
        "the plan's placement puts ranks " + std::to_string(hosts.split->second.first) + " and " +
        std::to_string(hosts.split->second.second) + " on host " + hosts.split->first +
        " with ranks of other hosts between them, but torchrun and the deepspeed launcher give "
        "each host one contiguous block of ranks: start every process yourself with the RANK, "
        "LOCAL_RANK and device rank_order lists, or plan on a GPU order that keeps hosts "
        "together");
    return notes;
  }
  if (order_matters) {
    notes.push_back(
        "start the hosts in this order (node rank 0 first), which is not the "
        "topology's: " +
        io::format_list(order));
  }
  if (!visible_notes.empty()) {
    notes.push_back("set " + io::format_list(visible_notes) +
                    ", so that local rank k runs on the plan's k-th GPU of the host");
  }
  if (!order_matters && visible_notes.empty()) {
    notes.push_back(
        "a launch with the hosts in the topology's order, each running its processes on its GPUs "
        "in device order, puts every rank on the plan's GPU");
  }
  return notes;
}

Launch launch_of(const PlanView& view, const FrameworkShape& shape) {
  const Devices devices = devices_of(view);
  const std::vector<int> ranks = rank_order(view);
  Launch out;
  out.ranks = rank_entries(view, shape, ranks, devices);
  const Hosts hosts = hosts_of(view, ranks, devices);
  const bool contiguous = !hosts.split.has_value();
  std::vector<std::string> host_order;
  host_order.reserve(hosts.blocks.size());
  for (const Host& host : hosts.blocks) host_order.push_back(host.node);
  const bool order_matters = contiguous && host_order != hosts.used_in_topology_order;
  std::vector<std::string> visible_notes;
  out.launch["matches_plan"] = contiguous;
  out.launch["host_order_matters"] = order_matters;
  out.launch["hosts"] = host_list(hosts, visible_notes);
  out.notes = launch_notes(hosts, host_order, order_matters, visible_notes);
  return out;
}

// `b * M` when it fits in 64 bits.
std::optional<std::int64_t> global_batch(const PlanView& view) {
  if (!view.batch_size) return std::nullopt;
  std::int64_t product = 0;
  if (__builtin_mul_overflow(*view.batch_size, static_cast<std::int64_t>(view.micro_batches),
                             &product)) {
    return std::nullopt;
  }
  return product;
}

std::string batch_note(const PlanView& view, const std::string& what) {
  if (!view.batch_size) {
    return "the model has no profile.batch_size, so " + what + " are left out: the micro-batch " +
           "size is the batch the model was profiled with, and the global batch is " +
           std::to_string(view.micro_batches) + " micro-batches";
  }
  return "the global batch (" + std::to_string(*view.batch_size) + " x " +
         std::to_string(view.micro_batches) + " samples) does not fit in 64 bits, so " + what +
         " are left out";
}

// A shell word: quoted when it holds anything but letters, digits and `_-.,=/`.
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_-.,=/").find(c) != std::string_view::npos;
  });
  return plain ? word : "'" + word + "'";
}

// Megatron-LM's layout of the stages: `E`, `t*n`, `L` per stage, `|` between stages.
std::string megatron_layout(const Plan& plan, int layers) {
  std::vector<std::string> parts;
  for (const Stage& stage : plan.stages) {
    std::string part = stage.first_layer == 0 ? "E" : "";
    const int decoders =
        std::max(0, std::min(stage.last_layer, layers - 2) - std::max(stage.first_layer, 1) + 1);
    if (decoders == 1) part += "t";
    if (decoders > 1) part += "t*" + std::to_string(decoders);
    if (stage.last_layer == layers - 1) part += "L";
    parts.push_back(part);
  }
  return io::format_list(parts, "|");
}

// The first stage that runs on the GPUs of an earlier stage (spec 9.2), with that stage.
std::optional<std::pair<int, int>> first_shared_stage(const Plan& plan) {
  const PipelineDevices devices = pipeline_devices(plan);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const int first = devices.stages[static_cast<std::size_t>(devices.of_stage[s])].front();
    if (first != static_cast<int>(s)) return std::pair{static_cast<int>(s), first};
  }
  return std::nullopt;
}

// Spec 9.5: a framework that runs whole backwards refuses a plan with a split one.
void refuse_split_backward(const PlanView& view, const std::string& framework) {
  if (!view.plan.schedule.split_backward) return;
  throw InputError(plan_file(view), "/split_backward",
                   "the plan splits every backward into its input-gradient and weight-gradient "
                   "halves (I and W), and " +
                       framework + " runs whole backwards: make the plan with --schedule 1f1b");
}

// Spec 9.5: a framework without Qi et al.'s zero-bubble schedules refuses a `zb-*` plan.
void refuse_zero_bubble(const PlanView& view, const std::string& framework) {
  const std::string& policy = view.plan.schedule_policy;
  if (policy.rfind("zb-", 0) != 0) return;
  throw InputError(plan_file(view), "/schedule_policy",
                   "the plan's " + policy + " schedule is a zero-bubble schedule, which " +
                       framework + " does not run: make the plan with --schedule 1f1b");
}

// Spec 9.5: a framework that runs one stage per pipeline rank refuses stages that share GPUs.
void refuse_shared_gpus(const PlanView& view, const std::string& framework) {
  const auto shared = first_shared_stage(view.plan);
  if (!shared) return;
  throw InputError(plan_file(view), "/stages/" + std::to_string(shared->first) + "/gpus",
                   "stage " + std::to_string(shared->first) + " runs on the GPUs of stage " +
                       std::to_string(shared->second) + ", and " + framework +
                       " runs one stage per pipeline rank: make the plan with --schedule 1f1b");
}

// Megatron-LM's optimizers keep master weights (fp32, or fp16 with --main-params-dtype): a model
// whose optimizer keeps none (`optimizer_dtype` bf16, NeMo's distributed_fused_adam with dtype
// bf16) would need more memory than the plan counts.
void refuse_bf16_optimizer(const PlanView& view) {
  if (!view.transformer || view.transformer->optimizer_dtype == hardware::DType::kFp32) return;
  throw InputError(model_file(view), "/transformer/optimizer_dtype",
                   "the model's optimizer keeps bf16 moments and no master weights, and "
                   "Megatron-LM's keeps master weights (--main-params-dtype fp32 or fp16): "
                   "describe the model with --optimizer-dtype fp32");
}

// Megatron-LM's interleaving (frameworks.md 2.3): with P pipeline ranks, stage s runs on rank
// s mod P, every rank holding the same number of stages, and each replica's micro-batches
// come in groups of P. Anything else is refused, naming the schedules that give it.
void check_megatron_interleaving(const PlanView& view, const FrameworkShape& shape) {
  const Plan& plan = view.plan;
  const PipelineDevices devices = pipeline_devices(plan);
  const int P = shape.pipeline;
  const int S = static_cast<int>(plan.stages.size());
  const std::string fix = ": make the plan with --schedule 1f1b or interleaved-1f1b";
  if (P < 2) {
    // core/parallel_state.py: "pipeline-model-parallel size should be greater than 1 with
    // interleaved schedule".
    std::string message = "the plan's ";
    message += std::to_string(S);
    message +=
        " stages share one pipeline rank, and Megatron-LM runs virtual stages only on "
        "two pipeline ranks or more: make the plan with --schedule 1f1b";
    throw InputError(plan_file(view), "/stages", message);
  }
  for (int s = 0; s < S; ++s) {
    const int device = devices.of_stage[static_cast<std::size_t>(s)];
    if (device == s % P) continue;
    throw InputError(plan_file(view), "/stages/" + std::to_string(s) + "/gpus",
                     "stage " + std::to_string(s) + " runs on the GPUs of stage " +
                         std::to_string(devices.stages[static_cast<std::size_t>(device)].front()) +
                         ", but Megatron-LM runs stage i on pipeline rank i mod " +
                         std::to_string(P) + " (the plan's " + std::to_string(P) +
                         " pipeline ranks, numbered by their first stage), so stage " +
                         std::to_string(s) + " belongs on rank " + std::to_string(s % P) + fix);
  }
  if (S % P != 0) {
    throw InputError(plan_file(view), "/stages",
                     "the plan's " + std::to_string(S) + " stages do not divide evenly among its " +
                         std::to_string(P) +
                         " pipeline ranks, and Megatron-LM gives every rank the same number of "
                         "virtual stages" +
                         fix);
  }
  const int per_replica = view.micro_batches / shape.data;
  if (per_replica % P != 0) {
    throw InputError(plan_file(view), "/micro_batches",
                     "Megatron-LM's interleaved schedule runs each data-parallel replica's "
                     "micro-batches in groups of its " +
                         std::to_string(P) + " pipeline ranks, and " + std::to_string(per_replica) +
                         " is not a multiple of " + std::to_string(P) +
                         ": make the plan with a multiple of " + std::to_string(P * shape.data) +
                         " micro-batches");
  }
}

// What Megatron-LM runs of the plan's schedule, when it is not the plan's.
std::optional<std::string> megatron_schedule_note(const Plan& plan, const FrameworkShape& shape) {
  const std::string& policy = plan.schedule_policy;
  if (shape.virtual_stages == 1) {
    if (policy == "1f1b" || policy == "interleaved-1f1b") return std::nullopt;
    return schedule_note(plan, "Megatron-LM");
  }
  if (policy == "interleaved-1f1b") return std::nullopt;
  return "Megatron-LM runs its interleaved 1F1B schedule (micro-batch groups of " +
         std::to_string(shape.pipeline) + ") on every data-parallel replica, not the plan's " +
         policy +
         " schedule; make the plan with --schedule interleaved-1f1b to estimate the iteration it "
         "runs";
}

// Megatron-LM's layer arguments: `--num-layers` and, for an uneven split, the layout, for a
// model shaped like `pipeplan model transformer`'s; else a note.
struct LayerArguments {
  std::optional<int> decoders;
  std::optional<std::string> layout;
};

LayerArguments megatron_layers(const PlanView& view, std::vector<std::string>& arguments,
                               std::vector<std::string>& notes) {
  const Plan& plan = view.plan;
  LayerArguments out;
  out.decoders = transformer_decoders(view);
  if (out.decoders) {
    arguments.insert(arguments.end(), {"--num-layers", std::to_string(*out.decoders)});
    // Megatron-LM's default split: the decoders evenly, the embedding on the first stage and the
    // loss on the last (always where a plan's contiguous stages put them). Anything else needs
    // the layout, whose stages are in Megatron-LM's order (stage i = vpp_rank P + pp_rank),
    // which is the plan's.
    const std::string candidate = megatron_layout(plan, layer_count(plan));
    std::set<std::string> shapes;
    for (const Stage& stage : plan.stages) {
      const int n = std::max(0, std::min(stage.last_layer, layer_count(plan) - 2) -
                                    std::max(stage.first_layer, 1) + 1);
      shapes.insert(std::to_string(n));
      if (n == 0) {
        notes.push_back("stage " + std::to_string(&stage - plan.stages.data()) +
                        " holds no decoder layer; Megatron-LM issue #1852 reports deadlocks "
                        "with some layouts that have such stages");
      }
    }
    if (shapes.size() > 1) out.layout = candidate;
  } else {
    std::vector<std::string> sizes;
    sizes.reserve(plan.stages.size());
    for (const Stage& stage : plan.stages) {
      sizes.push_back(std::to_string(stage.last_layer - stage.first_layer + 1));
    }
    notes.push_back(
        "the model's layers are not embedding, decoder0 .. decoderN-1, output (the names "
        "pipeplan model transformer writes), so neither --num-layers nor a layout is written: "
        "Megatron-LM builds its own GPT layers and splits them evenly, while this plan's stages "
        "hold " +
        io::format_list(sizes) + " of the profile's layers");
  }
  return out;
}

// Megatron-LM's model and training arguments for a model with a transformer description: its
// shape in the architecture family the costs assume (docs/transformer-model.md), the number
// format, and the options the estimate assumed (bf16 gradients, no dropout, sequence parallelism,
// fused attention). The vocabulary comes from Megatron-LM's tokenizer, so a note gives it.
void megatron_model_arguments(const model::TransformerConfig& config, int tensor,
                              std::vector<std::string>& arguments,
                              std::vector<std::string>& notes) {
  const auto text = [](int value) { return std::to_string(value); };
  arguments.insert(arguments.end(), {"--hidden-size", text(config.hidden), "--num-attention-heads",
                                     text(config.heads), "--ffn-hidden-size",
                                     text(config.ffn_hidden), "--seq-length", text(config.sequence),
                                     "--max-position-embeddings", text(config.sequence)});
  if (config.kv_heads != config.heads) {
    arguments.insert(arguments.end(),
                     {"--group-query-attention", "--num-query-groups", text(config.kv_heads)});
  }
  if (config.ffn == model::Ffn::kSwiglu) {
    arguments.insert(arguments.end(),
                     {"--swiglu", "--normalization", "RMSNorm", "--position-embedding-type", "rope",
                      "--disable-bias-linear", "--untie-embeddings-and-output-weights"});
  } else if (config.ffn == model::Ffn::kRelu2) {
    arguments.insert(arguments.end(),
                     {"--squared-relu", "--normalization", "LayerNorm", "--position-embedding-type",
                      "rope", "--disable-bias-linear", "--untie-embeddings-and-output-weights"});
  }
  switch (config.dtype) {
    case hardware::DType::kBf16:
      arguments.emplace_back("--bf16");
      break;
    case hardware::DType::kFp16:
      arguments.emplace_back("--fp16");
      break;
    case hardware::DType::kFp8:
      arguments.insert(arguments.end(), {"--bf16", "--fp8-format", "hybrid"});
      // Megatron-LM computes the attention in bf16 unless told (Transformer Engine's fp8_dpa).
      if (config.attention_dtype == hardware::DType::kFp8) {
        arguments.emplace_back("--fp8-dot-product-attention");
      }
      break;
    case hardware::DType::kFp32:
    case hardware::DType::kTf32:
      break;
  }
  // Megatron-LM reduces and keeps fp32 main gradients unless told otherwise.
  if (config.gradient_dtype == hardware::DType::kBf16)
    arguments.emplace_back("--grad-reduce-in-bf16");
  // Megatron-LM's dropouts default to 0.1: a model trained without them says so.
  if (!config.dropout) {
    arguments.insert(arguments.end(), {"--attention-dropout", "0.0", "--hidden-dropout", "0.0"});
  }
  // At degree 1 sequence parallelism changes nothing, and Megatron-LM turns it off with a warning.
  if (config.sequence_parallel && tensor > 1) arguments.emplace_back("--sequence-parallel");
  if (config.flash_attention) arguments.insert(arguments.end(), {"--attention-backend", "flash"});
  notes.push_back("Megatron-LM takes the vocabulary from its tokenizer; the estimate assumed " +
                  text(config.vocab) +
                  " entries (with --tokenizer-type NullTokenizer, pass --vocab-size " +
                  text(config.vocab) + ")");
}

// torchtitan's per-operator checkpointing is a torch.utils.checkpoint policy that `framework`
// has no setting for (Megatron-LM's selective recomputation keeps other tensors; DeepSpeed's
// pipeline checkpoints whole layers): refused (exit 3), since the plan's times and memory are
// those of the policy.
void refuse_per_op_recompute(const PlanView& view, const std::string& framework) {
  if (!view.transformer || !view.transformer->per_op_recompute) return;
  throw InputError(model_file(view), "/transformer/per_op_recompute",
                   "the model recomputes per operator (torchtitan's selective activation "
                   "checkpointing), which " +
                       framework +
                       " has no setting for: describe the model without --per-op-recompute");
}

// A plan with sharded gradients and whole weights (ZeRO-2, docs/decisions.md) for a framework
// without that mode beside pipeline parallelism: Megatron-LM's options shard the optimizer state
// (--use-distributed-optimizer, ZeRO-1) or everything (--use-torch-fsdp2, ZeRO-3), and
// deepspeed/runtime/pipe/engine.py asserts `zero_optimization_stage() < 2`. Exit 3.
void refuse_sharded_gradients(const PlanView& view, const std::string& framework,
                              const std::string& modes) {
  if (view.plan.optimizer != Optimizer::kShardedGradients) return;
  throw InputError(plan_file(view), "/optimizer",
                   "the plan shards the gradients and keeps the weights whole (ZeRO-2), which " +
                       framework + " does not run: it runs " + modes +
                       "; make the plan with --optimizer sharded");
}

// Megatron-LM's recomputation arguments: full recomputation of every layer when some stage of
// the plan recomputes (a note when not all do), else selective recomputation of the attention
// core when the description assumed it. Returns the export's `recompute` field.
const char* megatron_recompute_arguments(const PlanView& view, std::vector<std::string>& arguments,
                                         std::vector<std::string>& notes) {
  const Plan& plan = view.plan;
  const std::vector<int> recomputing = recomputing_stages(plan);
  if (recomputing.empty()) {
    if (!view.transformer || !view.transformer->selective_recompute) return "none";
    arguments.insert(arguments.end(), {"--recompute-granularity", "selective"});
    return "selective";
  }
  arguments.insert(arguments.end(), {"--recompute-granularity", "full", "--recompute-method",
                                     "uniform", "--recompute-num-layers", "1"});
  if (recomputing.size() == plan.stages.size()) return "all";
  notes.push_back(partial_recompute_note(plan, "Megatron-LM", "--recompute-granularity full"));
  return "some";
}

// DeepSpeed's precision settings for the number format the estimate assumed: it trains in fp32
// unless its configuration enables bf16 or fp16; FP8 GEMMs come from the layers (Transformer
// Engine), not from the configuration, so an FP8 description gets bf16 and a note.
void deepspeed_precision(const model::TransformerConfig& config, ordered_json& out,
                         std::vector<std::string>& notes) {
  switch (config.dtype) {
    case hardware::DType::kBf16:
      out["bf16"] = {{"enabled", true}};
      break;
    case hardware::DType::kFp16:
      out["fp16"] = {{"enabled", true}};
      break;
    case hardware::DType::kFp8:
      out["bf16"] = {{"enabled", true}};
      notes.push_back(
          "the estimate assumed FP8 matrix multiplications, which DeepSpeed's configuration "
          "cannot enable: the layers must run them (Transformer Engine's), the rest in bf16");
      break;
    case hardware::DType::kFp32:
    case hardware::DType::kTf32:
      break;
  }
}

// What Megatron-LM's process needs in its environment, as `NAME=value`: tensor or context
// parallelism on GPUs before Blackwell needs one CUDA connection (Megatron-LM's validate_args
// asserts it for `tensor_model_parallel_size > 1 or context_parallel_size > 1`), except under
// torch FSDP2, which asserts the opposite and only warns about the combination.
std::vector<std::string> megatron_environment(const FrameworkShape& shape, Optimizer optimizer) {
  if (optimizer == Optimizer::kFullySharded) return {};
  if (shape.tensor > 1 || shape.context > 1) return {"CUDA_DEVICE_MAX_CONNECTIONS=1"};
  return {};
}

// A fully sharded plan runs in Megatron-LM as torch FSDP2 (`--use-torch-fsdp2`), whose
// validate_args (000c4ac) asserts pipeline size 1, no distributed optimizer, no gradient
// accumulation fusion, a torch_dist or torch_dcp checkpoint format, untied embedding and output
// weights and no fp16. Refuses (exit 3) what it cannot run; adds the flags it needs.
void megatron_fsdp_arguments(const PlanView& view, const FrameworkShape& shape,
                             std::vector<std::string>& arguments, std::vector<std::string>& notes) {
  if (view.plan.optimizer != Optimizer::kFullySharded) return;
  if (shape.pipeline > 1) {
    throw InputError(plan_file(view), "/optimizer",
                     "the plan is fully sharded, which Megatron-LM runs as torch FSDP2, and "
                     "Megatron-LM refuses --use-torch-fsdp2 with pipeline parallelism: make the "
                     "plan with --pipeline-parallel 1, or with --optimizer sharded");
  }
  if (view.transformer && view.transformer->dtype == hardware::DType::kFp16) {
    throw InputError(
        model_file(view), "/transformer/dtype",
        "the model trains in fp16, and Megatron-LM refuses --use-torch-fsdp2 with "
        "fp16: describe the model with --dtype bf16, or plan with --optimizer sharded");
  }
  if (view.transformer && view.transformer->ffn == model::Ffn::kGelu) {
    throw InputError(model_file(view), "/transformer/ffn",
                     "the model ties its embedding and output weights (Megatron-LM's GPT), and "
                     "Megatron-LM's --use-torch-fsdp2 requires "
                     "--untie-embeddings-and-output-weights: plan with --optimizer sharded");
  }
  arguments.insert(arguments.end(), {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
                                     "--ckpt-format", "torch_dist"});
  if (!view.transformer) {
    arguments.emplace_back("--untie-embeddings-and-output-weights");
    notes.emplace_back(
        "Megatron-LM's --use-torch-fsdp2 requires untied embedding and output weights: the "
        "model's profile must have been measured so");
  }
  notes.emplace_back(
      "torch FSDP2 needs PyTorch 2.4 or later, and CUDA_DEVICE_MAX_CONNECTIONS other than 1");
}

}  // namespace

FrameworkShape framework_shape(const PlanView& view, std::string_view framework) {
  const std::vector<Stage>& stages = view.plan.stages;
  if (stages.empty()) throw InternalError("a plan without stages");
  const Stage& first = stages.front();
  const std::string why = "; " + std::string(framework) +
                          " runs every stage with the same data-parallel and tensor-parallel "
                          "degrees: make the plan with --uniform";
  for (std::size_t s = 1; s < stages.size(); ++s) {
    const std::string where = "/stages/" + std::to_string(s);
    const std::string name = "stage " + std::to_string(s);
    if (stages[s].tensor_parallel != first.tensor_parallel) {
      throw InputError(plan_file(view), where + "/tensor_parallel",
                       name + " has tensor-parallel degree " +
                           std::to_string(stages[s].tensor_parallel) + " but stage 0 has " +
                           std::to_string(first.tensor_parallel) + why);
    }
    if (stages[s].replicas() != first.replicas()) {
      throw InputError(plan_file(view), where + "/gpus",
                       name + " has " + count_of(stages[s].replicas(), "replica") +
                           " but stage 0 has " + std::to_string(first.replicas()) + why);
    }
  }
  const int r = first.replicas();
  const int devices = static_cast<int>(pipeline_devices(view.plan).stages.size());
  if (!partition::shares_equally(view.micro_batches, r)) {
    throw InputError(plan_file(view), "/micro_batches",
                     std::string(framework) + " gives each of the " + std::to_string(r) +
                         " data-parallel replicas the same number of micro-batches, and " +
                         std::to_string(view.micro_batches) + " is not a multiple of " +
                         std::to_string(r) + ": make the plan with a multiple of " +
                         std::to_string(r) + " micro-batches");
  }
  return {devices, r, first.tensor_parallel, virtual_stages(stages), first.context_parallel};
}

PipelineDevices pipeline_devices(const Plan& plan) {
  PipelineDevices out;
  std::map<std::vector<int>, int> index;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const auto [it, added] =
        index.emplace(plan.stages[s].gpus, static_cast<int>(out.stages.size()));
    if (added) out.stages.emplace_back();
    out.stages[static_cast<std::size_t>(it->second)].push_back(static_cast<int>(s));
    out.of_stage.push_back(it->second);
  }
  return out;
}

ordered_json megatron_json(const PlanView& view) {
  const Plan& plan = view.plan;
  refuse_split_backward(view, "Megatron-LM");
  refuse_zero_bubble(view, "Megatron-LM");
  refuse_bf16_optimizer(view);
  refuse_per_op_recompute(view, "Megatron-LM");
  refuse_sharded_gradients(view, "Megatron-LM",
                           "ZeRO-1 (its distributed optimizer) and, without pipeline parallelism, "
                           "ZeRO-3 (torch FSDP2)");
  const FrameworkShape shape = framework_shape(view, "Megatron-LM");
  if (shape.virtual_stages > 1) check_megatron_interleaving(view, shape);
  std::vector<std::string> notes;
  std::vector<std::string> arguments = {
      "--tensor-model-parallel-size", std::to_string(shape.tensor),
      "--pipeline-model-parallel-size", std::to_string(shape.pipeline)};
  if (shape.context > 1) {
    arguments.insert(arguments.end(), {"--context-parallel-size", std::to_string(shape.context)});
  }
  const auto [decoders, layout] = megatron_layers(view, arguments, notes);
  // A layout states the virtual stages by its stage count, and Megatron-LM's validate_args
  // refuses it beside --num-virtual-stages-per-pipeline-rank ("No more than one of the following
  // arguments can be set at the same time").
  if (shape.virtual_stages > 1 && !layout) {
    arguments.insert(arguments.begin() + 4, {"--num-virtual-stages-per-pipeline-rank",
                                             std::to_string(shape.virtual_stages)});
  }

  const std::optional<std::int64_t> global = global_batch(view);
  if (global) {
    arguments.insert(arguments.end(), {"--micro-batch-size", std::to_string(*view.batch_size),
                                       "--global-batch-size", std::to_string(*global)});
  } else {
    notes.push_back(batch_note(view, "--micro-batch-size and --global-batch-size"));
  }
  if (layout) {
    arguments.insert(arguments.end(), {"--pipeline-model-parallel-layout", *layout});
    notes.push_back(
        "Megatron-LM calls --pipeline-model-parallel-layout experimental; it needs a version "
        "that has it (megatron/core/transformer/pipeline_parallel_layer_layout.py)");
  }
  if (view.transformer) {
    megatron_model_arguments(*view.transformer, shape.tensor, arguments, notes);
  }
  const char* recompute = megatron_recompute_arguments(view, arguments, notes);
  if (plan.optimizer == Optimizer::kSharded) arguments.emplace_back("--use-distributed-optimizer");
  megatron_fsdp_arguments(view, shape, arguments, notes);
  if (auto note = megatron_schedule_note(plan, shape)) notes.push_back(std::move(*note));

  Launch launch = launch_of(view, shape);
  notes.insert(notes.end(), launch.notes.begin(), launch.notes.end());
  std::vector<std::string> words;
  words.reserve(arguments.size());
  for (const std::string& a : arguments) words.push_back(shell_word(a));

  ordered_json out = ordered_json::object();
  out["format"] = "megatron-lm";
  out["tensor_model_parallel_size"] = shape.tensor;
  out["pipeline_model_parallel_size"] = shape.pipeline;
  if (shape.virtual_stages > 1) out["num_virtual_stages_per_pipeline_rank"] = shape.virtual_stages;
  if (shape.context > 1) out["context_parallel_size"] = shape.context;
  out["data_parallel_size"] = shape.data;
  out["world_size"] = shape.pipeline * shape.data * shape.context * shape.tensor;
  out["num_layers"] = decoders ? ordered_json(*decoders) : ordered_json(nullptr);
  out["pipeline_model_parallel_layout"] = layout ? ordered_json(*layout) : ordered_json(nullptr);
  out["micro_batches"] = view.micro_batches;
  out["micro_batches_per_replica"] = view.micro_batches / shape.data;
  out["micro_batch_size"] = global ? ordered_json(*view.batch_size) : ordered_json(nullptr);
  out["global_batch_size"] = global ? ordered_json(*global) : ordered_json(nullptr);
  out["recompute"] = recompute;
  out["distributed_optimizer"] = plan.optimizer == Optimizer::kSharded;
  if (plan.optimizer == Optimizer::kFullySharded) out["torch_fsdp2"] = true;
  out["arguments"] = arguments;
  out["environment"] = megatron_environment(shape, plan.optimizer);
  out["command_line"] = io::format_list(words, " ");
  out["rank_order"] = std::move(launch.ranks);
  out["launch"] = std::move(launch.launch);
  out["notes"] = notes;
  return out;
}

ordered_json deepspeed_json(const PlanView& view) {
  const Plan& plan = view.plan;
  refuse_split_backward(view, "DeepSpeed");
  refuse_shared_gpus(view, "DeepSpeed");
  refuse_per_op_recompute(view, "DeepSpeed");
  refuse_sharded_gradients(view, "DeepSpeed's pipeline engine", "ZeRO stage 0 or 1 only");
  if (plan.optimizer == Optimizer::kFullySharded) {
    // deepspeed/runtime/pipe/engine.py asserts `zero_optimization_stage() < 2` ("ZeRO-2 and
    // ZeRO-3 are incompatible with pipeline parallelism").
    throw InputError(plan_file(view), "/optimizer",
                     "the plan is fully sharded (ZeRO-3), and DeepSpeed's pipeline engine runs "
                     "ZeRO stage 0 or 1 only: make the plan with --optimizer sharded");
  }
  const FrameworkShape shape = framework_shape(view, "DeepSpeed");
  std::vector<std::string> notes;
  ordered_json parts = ordered_json::array();
  ordered_json stages = ordered_json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    parts.push_back(stage.first_layer);
    ordered_json names = nullptr;
    if (view.layer_names) {
      names = ordered_json::array();
      for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
        const std::string& name = (*view.layer_names)[static_cast<std::size_t>(l)];
        names.push_back(name.empty() ? ordered_json(nullptr) : ordered_json(name));
      }
    }
    ordered_json gpus = ordered_json::array();
    for (int g : stage.gpus) gpus.push_back(detail::gpu_id(view, g));
    stages.push_back({{"stage", static_cast<int>(s)},
                      {"first_layer", stage.first_layer},
                      {"last_layer", stage.last_layer},
                      {"layer_names", std::move(names)},
                      {"gpus", std::move(gpus)}});
  }
  parts.push_back(layer_count(plan));

  ordered_json topology = ordered_json::object();
  if (shape.tensor == 1) {
    topology["class"] = "PipeDataParallelTopology";
    topology["num_pp"] = shape.pipeline;
    topology["num_dp"] = shape.data;
  } else {
    topology["class"] = "PipeModelDataParallelTopology";
    topology["num_pp"] = shape.pipeline;
    topology["num_mp"] = shape.tensor;
    topology["num_dp"] = shape.data;
    notes.push_back(
        "DeepSpeed itself splits no layer over a tensor-parallel group: the layers must come "
        "from a tensor-parallel library such as Megatron-DeepSpeed, which passes this topology "
        "and its model-parallel unit");
  }

  const std::vector<int> recomputing = recomputing_stages(plan);
  if (!recomputing.empty() && recomputing.size() != plan.stages.size()) {
    notes.push_back(partial_recompute_note(plan, "DeepSpeed", "activation_checkpoint_interval 1"));
  }
  ordered_json config = ordered_json::object();
  const std::optional<std::int64_t> global = global_batch(view);
  if (global) {
    config["train_batch_size"] = *global;
    config["train_micro_batch_size_per_gpu"] = *view.batch_size;
  } else {
    notes.push_back(batch_note(view, "train_batch_size and train_micro_batch_size_per_gpu"));
  }
  config["gradient_accumulation_steps"] = view.micro_batches / shape.data;
  if (view.transformer) deepspeed_precision(*view.transformer, config, notes);
  if (plan.optimizer == Optimizer::kSharded) config["zero_optimization"] = {{"stage", 1}};
  if (plan.schedule_policy != "1f1b") notes.push_back(schedule_note(plan, "DeepSpeed"));

  Launch launch = launch_of(view, shape);
  notes.insert(notes.end(), launch.notes.begin(), launch.notes.end());
  ordered_json out = ordered_json::object();
  out["format"] = "deepspeed";
  out["num_stages"] = shape.pipeline;
  out["parts"] = std::move(parts);
  out["pipeline_parallel_size"] = shape.pipeline;
  out["data_parallel_size"] = shape.data;
  out["model_parallel_size"] = shape.tensor;
  out["topology"] = std::move(topology);
  out["activation_checkpoint_interval"] = recomputing.empty() ? 0 : 1;
  out["config"] = std::move(config);
  out["stages"] = std::move(stages);
  out["rank_order"] = std::move(launch.ranks);
  out["launch"] = std::move(launch.launch);
  out["notes"] = notes;
  return out;
}

namespace {

// The number of every micro-batch in its replica's pipeline (0..M/r-1 in ascending order),
// after checking that each keeps to one replica index on every stage and that every replica
// runs M/r of them; `why` ends the messages. O(T).
std::vector<int> replica_numbering(const PlanView& view, const FrameworkShape& shape,
                                   const std::string& why) {
  const Plan& plan = view.plan;
  const int S = static_cast<int>(plan.stages.size());
  const int R = shape.data;
  const int M = view.micro_batches;
  const std::string file = plan_file(view);
  // The replica of every micro-batch, from stage 0; every stage must agree. A device's order
  // holds the tasks of all its stages; each stage counts its own.
  std::vector<int> replica(static_cast<std::size_t>(M), -1);
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < R; ++i) {
      const int leader = plan.stages[static_cast<std::size_t>(s)].leader(i);
      for (const ComputeTask& task : plan.schedule.gpu_order[static_cast<std::size_t>(leader)]) {
        if (task.op != Op::kForward || task.stage != s) continue;
        int& known = replica[static_cast<std::size_t>(task.micro_batch)];
        if (s == 0) {
          known = i;
        } else if (known != i) {
          throw InputError(file, "/schedule/compute",
                           "micro-batch " + std::to_string(task.micro_batch) + " runs on replica " +
                               std::to_string(known) + " of stage 0 but on replica " +
                               std::to_string(i) + " of stage " + std::to_string(s) +
                               ", so it keeps to no one pipeline" + why);
        }
      }
    }
  }
  std::vector<int> local(static_cast<std::size_t>(M), 0);
  std::vector<int> count(static_cast<std::size_t>(R), 0);
  for (int m = 0; m < M; ++m) {
    const int i = replica[static_cast<std::size_t>(m)];
    if (i < 0) throw InternalError("torch-schedule: a micro-batch without a forward");
    local[static_cast<std::size_t>(m)] = count[static_cast<std::size_t>(i)]++;
  }
  for (int i = 0; i < R; ++i) {
    if (count[static_cast<std::size_t>(i)] != M / R) {
      throw InputError(file, "/schedule/compute",
                       "replica " + std::to_string(i) + " runs " +
                           std::to_string(count[static_cast<std::size_t>(i)]) + " of the " +
                           std::to_string(M) + " micro-batches, not " + std::to_string(M / R) +
                           why);
    }
  }
  return local;
}

// Whether the plan needs torch 2.6's grammar: `I`/`W` actions or several stages per rank.
bool needs_torch_2_6(const Plan& plan) {
  return plan.schedule.split_backward || virtual_stages(plan.stages) > 1;
}

}  // namespace

std::string torch_schedule_csv(const PlanView& view) {
  const Plan& plan = view.plan;
  const FrameworkShape shape = framework_shape(view, "torch.distributed.pipelining");
  const int R = shape.data;
  const std::string file = plan_file(view);
  const std::string why = "; torch.distributed.pipelining runs " + std::to_string(R) +
                          " copies of one pipeline schedule side by side (make the plan with "
                          "--schedule 1f1b)";
  const std::vector<int> local = replica_numbering(view, shape, why);
  auto action = [&](const ComputeTask& task) {
    return std::to_string(task.stage) + op_letter(task.op) +
           std::to_string(local[static_cast<std::size_t>(task.micro_batch)]);
  };
  // One row per device (pipeline rank): the order of its first stage's groups, which run the
  // tasks of all its stages.
  std::string out;
  for (const std::vector<int>& stages : pipeline_devices(plan).stages) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(stages.front())];
    auto order_of = [&](int i) -> const std::vector<ComputeTask>& {
      return plan.schedule.gpu_order[static_cast<std::size_t>(stage.leader(i))];
    };
    std::vector<std::string> row;
    for (const ComputeTask& task : order_of(0)) row.push_back(action(task));
    for (int i = 1; i < R; ++i) {
      const std::vector<ComputeTask>& other = order_of(i);
      for (std::size_t k = 0; k < other.size() && k < row.size(); ++k) {
        if (action(other[k]) != row[k]) {
          throw InputError(file, "/schedule/compute",
                           "replica " + std::to_string(i) + " of " + stage_list(stages) +
                               " runs its micro-batches in another order than replica 0 (task " +
                               std::to_string(k) + " is " + action(other[k]) + ", not " + row[k] +
                               ")" + why);
        }
      }
    }
    out += io::format_list(row, ",") + "\n";
  }
  return out;
}

std::vector<std::string> torch_schedule_notes(const PlanView& view) {
  const Plan& plan = view.plan;
  const PipelineDevices devices = pipeline_devices(plan);
  std::vector<std::string> notes;
  if (needs_torch_2_6(plan)) {
    notes.push_back(
        "the schedule follows the grammar of torch 2.6 and later (torch.distributed.pipelining): "
        "F the forward, " +
        std::string(plan.schedule.split_backward
                        ? "I and W the input-gradient and weight-gradient halves "
                          "of the backward"
                        : "B the full backward (its meaning since PyTorch PR "
                          "#138886)") +
        (devices.stages.size() < plan.stages.size() ? ", several stages per rank" : "") +
        "; earlier releases read it differently or not at all");
  } else {
    notes.push_back(
        "the schedule follows the grammar of torch 2.5 and later (torch.distributed.pipelining): "
        "F the forward, B the full backward");
  }
  notes.push_back(
      "run it with _PipelineScheduleRuntime and _load_csv(path, format=\"compute_only\"), which "
      "inserts the sends and receives (torchtitan: pipeline_parallel_schedule_csv with "
      "pipeline_parallel_schedule _PipelineScheduleRuntime); PipelineScheduleMulti's own step "
      "would pair them by column, and the rows are not aligned in time");
  if (devices.stages.size() < plan.stages.size()) {
    std::vector<std::string> ranks;
    for (std::size_t d = 0; d < devices.stages.size(); ++d) {
      ranks.push_back("rank " + std::to_string(d) + " " + stage_list(devices.stages[d]));
    }
    notes.push_back(
        "each rank builds a PipelineStage for every stage of its row, with the "
        "global stage index and num_stages=" +
        std::to_string(plan.stages.size()) + ": " + io::format_list(ranks, "; "));
  }
  return notes;
}

std::vector<std::string> export_notes(const PlanView& view, ExportFormat format) {
  if (format == ExportFormat::kTorchSchedule) return torch_schedule_notes(view);
  return {};
}

}  // namespace pipeplan::report
