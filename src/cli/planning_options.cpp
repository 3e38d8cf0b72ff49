// The options of spec 8.4 that `plan` and `compare` share: how stages may use tensor
// parallelism, recomputation and a sharded optimizer, and the megatron planner's degrees.

#include <algorithm>
#include <sstream>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::cli {
namespace {

// `1,2,4` (ascending after sorting, no repeats) for `option`; a usage error otherwise.
std::vector<int> degree_list(const std::string& option, const std::string& text) {
  std::vector<int> degrees;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const bool digits =
        !item.empty() && item.size() <= 6 &&
        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    const long value = digits ? std::stol(item) : 0;
    if (!digits || value < 1 || value > model::kMaxTensorParallelDegree) {
      throw UsageError(option + ": expected degrees like 1,2,4 (decimal integers from 1 to " +
                       std::to_string(model::kMaxTensorParallelDegree) + "), got \"" + text + "\"");
    }
    degrees.push_back(static_cast<int>(value));
  }
  if (degrees.empty() || text.back() == ',') {
    throw UsageError(option + ": expected degrees like 1,2,4, got \"" + text + "\"");
  }
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  return degrees;
}

}  // namespace

void add_planning_options(CLI::App& command, PlanningOptions& options) {
  command
      .add_option("--tensor-parallel", options.tensor_parallel,
                  "Tensor-parallel degrees a stage may use, e.g. 1,2,4 (spp; default: every degree "
                  "the model allows); the megatron planner takes one")
      ->type_name("LIST");
  command
      .add_option("--context-parallel", options.context_parallel,
                  "Context-parallel degrees, e.g. 1,2,4: each sequence split over c GPUs (spp "
                  "chooses one for the whole plan; the megatron planner takes one; default 1)")
      ->type_name("LIST");
  command
      .add_option("--recompute", options.recompute,
                  "Activation recomputation: never, always, or auto (the planner chooses per "
                  "stage; the default for models with tensor_parallel or update times, never for "
                  "other profiles)")
      ->check(CLI::IsMember({"never", "always", "auto"}));
  CLI::Option* shard =
      command.add_flag("--shard-optimizer", options.shard_optimizer,
                       "Plan for a sharded optimizer (ZeRO-1: optimizer state divided among a "
                       "stage's replicas); the same as --optimizer sharded");
  command
      .add_option("--optimizer", options.optimizer,
                  "replicated, sharded (ZeRO-1, Megatron-LM's distributed optimizer), "
                  "sharded-gradients (ZeRO-2, torch FSDP's SHARD_GRAD_OP: gradients and "
                  "optimizer state divided among a stage's replicas, the weights gathered for "
                  "each forward and kept through its backward), fully-sharded (ZeRO-3, torch "
                  "FSDP2: weights, gradients and optimizer state divided), or auto (spp's default "
                  "for models with spec 8 fields: the faster of replicated and sharded, and for "
                  "described models fully sharded or sharded-gradients where faster; others: "
                  "replicated)")
      ->check(
          CLI::IsMember({"replicated", "sharded", "sharded-gradients", "fully-sharded", "auto"}))
      ->excludes(shard);
  command
      .add_option("--sequence-parallel", options.sequence_parallel,
                  "A transformer description's Megatron sequence parallelism: on, off, or auto "
                  "(spp's default: the faster; others: as the model file says)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  command
      .add_option("--selective-recompute", options.selective_recompute,
                  "A transformer description's selective recomputation of the attention core: on, "
                  "off, or auto (spp's default: the faster; others: as the model file says)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  command.add_flag("--uniform", options.uniform,
                   "Only plans every framework can run: the same replica count and tensor-parallel "
                   "degree for every stage (Megatron-LM, DeepSpeed, torch.distributed.pipelining)");
  command
      .add_option("--pipeline-parallel", options.pipeline_parallel,
                  "The megatron planner's pipeline depth P")
      ->transform(decimal_integer(1, 1 << 16));
  command
      .add_option("--data-parallel", options.data_parallel,
                  "The megatron planner's data-parallel degree D (default: GPUs / (T P))")
      ->transform(decimal_integer(1, 1 << 16));
  command
      .add_option("--first-stage-layers", options.first_stage_layers,
                  "The megatron planner's layers on its first pipeline stage, the others "
                  "splitting the rest evenly (Megatron-LM's --decoder-first-pipeline-num-layers)")
      ->transform(decimal_integer(1, 1 << 16));
  command
      .add_option("--last-stage-layers", options.last_stage_layers,
                  "The same for the last pipeline stage (--decoder-last-pipeline-num-layers)")
      ->transform(decimal_integer(1, 1 << 16));
  command.add_flag("--account-for-embedding", options.account_for_embedding,
                   "The megatron planner splits the embedding as one more decoder layer "
                   "(Megatron-LM's --account-for-embedding-in-pipeline-split)");
  command.add_flag("--account-for-loss", options.account_for_loss,
                   "The same for the output layer and loss "
                   "(--account-for-loss-in-pipeline-split)");
  command
      .add_option("--split-backward", options.split_backward,
                  "Split backwards into input and weight gradients (I, W): never, or auto (when "
                  "some layer has backward_weight_ms and the schedule uses it; the default)")
      ->check(CLI::IsMember({"never", "auto"}));
  command
      .add_option("--virtual-stages", options.virtual_stages,
                  "Stages per device V for interleaved-1f1b, looped-bfs and gpipe, and for the "
                  "megatron planner (Megatron-LM's virtual pipeline stages; zb-v uses 2)")
      ->transform(decimal_integer(1, planners::kMaxVirtualStages));
}

void check_planner_options(const PlanningOptions& options, std::string_view planner) {
  const planners::PlannerRow& row = planners::find_planner(planner);
  const std::pair<std::string_view, bool> given[] = {
      {"--tensor-parallel", options.tensor_parallel.has_value()},
      {"--context-parallel", options.context_parallel.has_value()},
      {"--recompute", options.recompute.has_value()},
      {"--uniform", options.uniform},
      {"--pipeline-parallel", options.pipeline_parallel.has_value()},
      {"--data-parallel", options.data_parallel.has_value()},
      {"--first-stage-layers", options.first_stage_layers.has_value()},
      {"--last-stage-layers", options.last_stage_layers.has_value()},
      {"--account-for-embedding", options.account_for_embedding},
      {"--account-for-loss", options.account_for_loss}};
  for (const auto& [option, is_given] : given) {
    if (!is_given ||
        std::find(row.options.begin(), row.options.end(), option) != row.options.end()) {
      continue;
    }
    const std::vector<std::string> takers = planners::planners_taking(option);
    throw UsageError(std::string(option) + ": the " + std::string(planner) +
                     " planner does not take it; the " + io::format_list(takers, " and ") +
                     (takers.size() == 1 ? " planner does" : " planners do"));
  }
  if (row.chooses_settings) return;
  const std::pair<std::string_view, const std::optional<std::string>&> choosable[] = {
      {"--optimizer", options.optimizer},
      {"--sequence-parallel", options.sequence_parallel},
      {"--selective-recompute", options.selective_recompute}};
  for (const auto& [option, value] : choosable) {
    if (value != "auto") continue;
    throw UsageError(std::string(option) + " auto: only the spp planner chooses it; the " +
                     std::string(planner) + " planner takes " +
                     (option == "--optimizer"
                          ? "replicated, sharded, sharded-gradients or fully-sharded"
                          : "on or off"));
  }
}

namespace {

// `on` and `off` of a description's flag; empty for `auto` or not given.
std::optional<bool> fixed_flag(const std::optional<std::string>& value) {
  if (!value || *value == "auto") return std::nullopt;
  return *value == "on";
}

}  // namespace

void apply_planning_options(const PlanningOptions& options, planners::Request& request) {
  if (options.tensor_parallel) {
    request.tensor_parallel = degree_list("--tensor-parallel", *options.tensor_parallel);
  }
  if (options.context_parallel) {
    request.context_parallel = degree_list("--context-parallel", *options.context_parallel);
  }
  if (options.recompute) {
    request.recompute = *options.recompute == "never"    ? planners::Recompute::kNever
                        : *options.recompute == "always" ? planners::Recompute::kAlways
                                                         : planners::Recompute::kAuto;
  }
  if (options.shard_optimizer) request.optimizer = Optimizer::kSharded;
  if (options.optimizer && *options.optimizer != "auto") {
    request.optimizer = *parse_optimizer(*options.optimizer);
  }
  request.optimizer_fixed =
      options.shard_optimizer || (options.optimizer && *options.optimizer != "auto");
  request.sequence_parallel = fixed_flag(options.sequence_parallel);
  request.selective_recompute = fixed_flag(options.selective_recompute);
  request.choose_settings = true;  // for the planners that choose (PlannerRow::chooses_settings)
  request.uniform = options.uniform;
  request.pipeline_parallel = options.pipeline_parallel;
  request.data_parallel = options.data_parallel;
  request.first_stage_layers = options.first_stage_layers;
  request.last_stage_layers = options.last_stage_layers;
  request.account_for_embedding = options.account_for_embedding;
  request.account_for_loss = options.account_for_loss;
  if (options.split_backward == "never") request.split_backward = planners::SplitBackward::kNever;
  request.virtual_stages = options.virtual_stages;
}

}  // namespace pipeplan::cli
