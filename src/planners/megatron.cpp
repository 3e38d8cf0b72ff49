// The fixed-configuration planner (issue 14, part 4): Megatron-LM's own placement for a given
// tensor-parallel degree T, pipeline depth P and data-parallel degree D.
//
// Reference: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
// Using Megatron-LM" (SC21), and Megatron-LM's default rank order (tensor, then data, then
// pipeline: `megatron/core/parallel_state.py`, order "tp-dp-pp" read innermost first): global
// rank `p D T + d T + t` is GPU t of the tensor group of data-parallel copy d of stage p, and
// ranks follow the topology's GPU order (the launcher's host order). Layers are split in equal
// counts; in a model made by `pipeplan model transformer` (layers `embedding`, `decoder0` ..
// `decoderN-1`, `output`) the decoder layers are split evenly and the embedding joins the first
// stage and the output layer and loss the last, as Megatron places them.
//
// Complexity: O(L + N) to build the stages, plus the memory check of O(L D) for the
// recomputation choice; scheduling and replay are `finish_plan`'s.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "pipeplan/error.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/context_parallel.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

// Whether the layers are those `pipeplan model transformer` writes: `embedding`, then
// `decoder0` .. `decoderN-1`, then `output`.
bool transformer_shaped(const model::Model& model) {
  const auto& layers = model.layers;
  if (layers.size() < 3 || layers.front().name != "embedding" || layers.back().name != "output") {
    return false;
  }
  for (std::size_t l = 1; l + 1 < layers.size(); ++l) {
    if (layers[l].name != "decoder" + std::to_string(l - 1)) return false;
  }
  return true;
}

// The first layer of each of `P` stages over `count` layers starting at `offset`: equal counts,
// the first `count mod P` stages one layer more (as torchtitan and DeepSpeed's uniform split
// give leftovers to the early stages; Megatron itself wants `count` divisible by P).
std::vector<int> even_split(int count, int P, int offset) {
  std::vector<int> firsts;
  int next = offset;
  for (int p = 0; p < P; ++p) {
    firsts.push_back(next);
    next += count / P + (p < count % P ? 1 : 0);
  }
  return firsts;
}

// Megatron-LM's layers per pipeline position with `--decoder-first-pipeline-num-layers` and
// `--decoder-last-pipeline-num-layers` (`first`, `last`; `core/transformer/transformer_block.py`,
// `get_num_layers_to_build`): those on positions 0 and P - 1, the other positions an equal share
// of the rest, which must divide evenly, and each position's count divided among its V virtual
// stages, which must divide too. `unit` names the layers in messages. O(P).
std::vector<int> position_layers(const Request& request, int count, int P, int V,
                                 const std::string& unit) {
  const std::optional<int> first = request.first_stage_layers, last = request.last_stage_layers;
  if (P < 2) {
    throw UsageError(std::string(first ? "--first-stage-layers" : "--last-stage-layers") +
                     ": needs --pipeline-parallel 2 or more (a single stage holds every layer)");
  }
  std::string given;
  if (first) given = "--first-stage-layers " + std::to_string(*first);
  if (last) {
    given +=
        std::string(given.empty() ? "" : " and ") + "--last-stage-layers " + std::to_string(*last);
  }
  const int middle_positions = P - (first ? 1 : 0) - (last ? 1 : 0);
  const int rest = count - first.value_or(0) - last.value_or(0);
  if (rest < 0) {
    throw InfeasibleError(given + (first && last ? " ask" : " asks") + " for more than the " +
                          std::to_string(count) + " " + unit);
  }
  const std::string left = given + (first && last ? " leave " : " leaves ") + std::to_string(rest) +
                           " of the " + std::to_string(count) + " " + unit;
  if (rest < middle_positions || (middle_positions == 0 && rest != 0) ||
      (middle_positions > 0 && rest % middle_positions != 0)) {
    throw InfeasibleError(
        left + (middle_positions == 0
                    ? ", and no pipeline stage is left to take them"
                    : " for " + std::to_string(middle_positions) +
                          " other pipeline stages: Megatron-LM needs an equal share of at least "
                          "one for each"));
  }
  std::vector<int> counts(static_cast<std::size_t>(P),
                          middle_positions > 0 ? rest / middle_positions : 0);
  if (first) counts.front() = *first;
  if (last) counts.back() = *last;
  for (int p = 0; p < P; ++p) {
    if (counts[static_cast<std::size_t>(p)] % V != 0) {
      throw InfeasibleError("pipeline stage " + std::to_string(p) + "'s " +
                            std::to_string(counts[static_cast<std::size_t>(p)]) + " " + unit +
                            " (" + given + ") do not divide into its " + std::to_string(V) +
                            " virtual stages");
    }
  }
  return counts;
}

// The first layer of each of the P V stages over `count` layers from `offset`, stage k on
// pipeline position `position[k]`: Megatron-LM's split (position_layers) when the request gives
// the first or the last stage's layers, else even_split. O(P V).
std::vector<int> stage_firsts(const Request& request, int count, int P, int V, int offset,
                              const std::vector<int>& position, const std::string& unit) {
  if (!request.first_stage_layers && !request.last_stage_layers) {
    return even_split(count, P * V, offset);
  }
  const std::vector<int> counts = position_layers(request, count, P, V, unit);
  std::vector<int> firsts;
  int next = offset;
  for (const int p : position) {
    firsts.push_back(next);
    next += counts[static_cast<std::size_t>(p)] / V;
  }
  return firsts;
}

// The layers Megatron-LM splits among the pipeline stages: all of them; in a model made by
// `pipeplan model transformer`, the decoder layers, and the embedding and the output layer only
// where `--account-for-embedding` or `--account-for-loss` counts them as decoder layers
// (`core/transformer/transformer_layer.py`, `get_transformer_layer_offset`: the layer count grows
// by one for each; Megatron-LM refuses them beside the first or last stage's count, and wants
// the count divisible by the P V stages).
struct Splittable {
  int count;         // layers split
  int offset;        // the first of them
  std::string unit;  // what they are, for messages
};

Splittable splittable_layers(const Request& request, int P, int V) {
  const model::Model& model = request.model;
  const int L = static_cast<int>(model.layers.size());
  const bool embedding = request.account_for_embedding, loss = request.account_for_loss;
  const std::string flag = embedding ? "--account-for-embedding" : "--account-for-loss";
  if (!transformer_shaped(model)) {
    if (embedding || loss) {
      throw UsageError(flag +
                       ": needs a model made by `pipeplan model transformer` (layers "
                       "embedding, decoder0 .. decoderN-1, output)");
    }
    return {L, 0, "layers"};
  }
  if (!embedding && !loss) return {L - 2, 1, "decoder layers"};
  if (request.first_stage_layers || request.last_stage_layers) {
    throw UsageError(flag +
                     ": Megatron-LM takes it or --first-stage-layers and "
                     "--last-stage-layers, not both");
  }
  Splittable split{
      L - 2 + (embedding ? 1 : 0) + (loss ? 1 : 0), embedding ? 0 : 1,
      std::string("decoder layers with the ") + (embedding && loss ? "embedding and the loss"
                                                 : embedding       ? "embedding"
                                                                   : "loss")};
  if (split.count % (P * V) != 0) {
    throw InfeasibleError(
        "the " + std::to_string(split.count) + " " + split.unit + " (" + flag +
        (embedding && loss ? " --account-for-loss" : "") + ") do not divide into " +
        (V == 1 ? std::to_string(P) + " pipeline stages"
                : std::to_string(P) + " x " + std::to_string(V) + " virtual stages") +
        ": Megatron-LM needs an equal share for each");
  }
  return split;
}

// The first layer of each of the P V stages, stage k on pipeline position `position[k]`.
// O(L + P V).
std::vector<int> megatron_firsts(const Request& request, int P, int V,
                                 const std::vector<int>& position) {
  const Splittable split = splittable_layers(request, P, V);
  const int stages = P * V;
  if (stages > split.count) {
    throw InfeasibleError(
        (V == 1 ? "pipeline-parallel " + std::to_string(P)
                : std::to_string(P) + " x " + std::to_string(V) + " virtual stages") +
        " is more stages than the " + std::to_string(split.count) + " " + split.unit + " to split");
  }
  std::vector<int> firsts =
      stage_firsts(request, split.count, P, V, split.offset, position, split.unit);
  firsts.front() = 0;  // the embedding, when not split as a layer, joins the first stage
  return firsts;
}

using Executions = std::vector<simulate::StageExecution>;

// The one context-parallel degree of a megatron request (spec 10.4), which the model allows.
int megatron_context_degree(const Request& request) {
  if (request.context_parallel.empty()) return 1;
  if (request.context_parallel.size() != 1) {
    throw UsageError(
        "--context-parallel: the megatron planner plans one configuration: give one degree");
  }
  const int C = request.context_parallel.front();
  if (auto refused = context_degree_refusal(request.model, C)) throw InfeasibleError(*refused);
  return C;
}

// Whether every group of every stage (`exec`: their execution figures) holds what `policy`
// keeps in flight. O(S + N).
bool fits(const Request& request, const std::vector<Stage>& stages, const Executions& exec,
          schedule::Policy policy) {
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const long stashes = peak_stashes(stages, static_cast<int>(s), request.micro_batches, policy);
    const auto& e = exec[s];
    for (const auto& group : e.groups) {
      if (simulate::max_in_flight(e.static_bytes + e.transient_bytes + e.device_bytes(),
                                  e.stash_bytes, group.capacity_bytes, stashes) < stashes) {
        return false;
      }
    }
  }
  return true;
}

// megatron_estimate from the stages' execution figures. O(S + N).
double estimate_of(const Request& request, const Executions& exec) {
  const std::size_t S = exec.size();
  std::vector<double> slowest(S, 0);
  for (std::size_t s = 0; s < S; ++s) {
    for (const simulate::GroupExecution& group : exec[s].groups)
      slowest[s] = std::max(slowest[s], group.work_ms);
  }
  // A micro-batch holds its stash on stage s from F(m,s) to B(m,s), at least its round trip
  // through stages s..S-1. A group that holds only k < ceil(M / r) micro-batches (memory) runs
  // them in ceil(ceil(M / r) / k) waves of at least one round trip each.
  double bottleneck = 0, round_trip = 0, waves = 0, allreduce = 0;
  for (std::size_t s = S; s-- > 0;) {
    const simulate::StageExecution& e = exec[s];
    round_trip += slowest[s];
    const double replicas = static_cast<double>(std::max<std::size_t>(e.groups.size(), 1));
    const double share = request.micro_batches / replicas;
    bottleneck = std::max(bottleneck, slowest[s] * share);
    allreduce = std::max(allreduce, e.allreduce_ms);
    const auto wanted = static_cast<long>(std::ceil(share));
    for (const simulate::GroupExecution& group : e.groups) {
      const long slots =
          simulate::max_in_flight(e.static_bytes + e.transient_bytes + e.device_bytes(),
                                  e.stash_bytes, group.capacity_bytes, wanted);
      if (slots < 1) return std::numeric_limits<double>::infinity();
      if (slots < wanted) {
        const long rounds = (wanted + slots - 1) / slots;  // ceil(wanted / slots)
        waves = std::max(waves, static_cast<double>(rounds) * round_trip);
      }
    }
  }
  return std::max(bottleneck + round_trip, waves) + allreduce;
}

}  // namespace

std::vector<Request> megatron_configurations(const Request& request,
                                             const std::vector<int>& degrees) {
  std::vector<Request> out;
  const auto& layers = request.model.layers;
  if (!model::has_tensor_parallel_layers(request.model)) return out;
  const int N = request.topology.size();
  const int L = static_cast<int>(layers.size());
  // Each context-parallel degree of the request the model allows, in the order given: one is
  // kept; a list (spp's choice) gives the configurations at each of its degrees, so that spp's
  // variants and compare's rows are Megatron-LM's at every degree the user allows (before
  // 2026-12-07 a list left them at 1).
  std::vector<int> context{1};
  if (!request.context_parallel.empty()) context = request.context_parallel;
  for (const int C : context) {
    if (context.size() > 1 && !model::allows_context_degree(request.model, C)) continue;
    for (const int t : degrees) {
      for (int P = 1; P <= L && static_cast<long>(t) * P * C <= N; ++P) {
        const long per_copy = static_cast<long>(t) * P * C;
        if (N % per_copy != 0) continue;
        Request fixed = request;
        fixed.tensor_parallel = {t};
        if (context.size() > 1) fixed.context_parallel = {C};
        fixed.pipeline_parallel = P;
        fixed.data_parallel = static_cast<int>(N / per_copy);
        out.push_back(std::move(fixed));
      }
    }
  }
  return out;
}

std::optional<std::string> megatron_refusal(const Request& request) {
  if (request.tensor_parallel.size() != 1 || !request.pipeline_parallel) return std::nullopt;
  // Megatron-LM refuses a virtual pipeline on one pipeline stage ("pipeline-model-parallel size
  // should be greater than 1 with interleaved schedule", core/parallel_state.py).
  if (*request.pipeline_parallel == 1 && request.virtual_stages.value_or(1) > 1) {
    return "--virtual-stages " + std::to_string(*request.virtual_stages) +
           ": Megatron-LM interleaves only with --pipeline-parallel 2 or more";
  }
  const long context = request.context_parallel.size() == 1 ? request.context_parallel.front() : 1;
  const long per_copy = static_cast<long>(request.tensor_parallel.front()) *
                        std::max(*request.pipeline_parallel, 1) * std::max(context, 1L);
  if (per_copy < 1) return std::nullopt;
  const long D =
      request.data_parallel ? *request.data_parallel : request.topology.size() / per_copy;
  if (D < 1 || partition::shares_equally(request.micro_batches, D)) return std::nullopt;
  const std::string m = std::to_string(request.micro_batches), d = std::to_string(D);
  return "--micro-batches " + m + ": Megatron-LM gives each of the " + d +
         " data-parallel replicas the same number of micro-batches, and " + m +
         " is not a multiple of " + d + "; give a multiple of " + d + " micro-batches" +
         (request.data_parallel ? ", or a --data-parallel that divides " + m
                                : ", or --data-parallel D with D dividing " + m);
}

Partition megatron_partition(const Request& request, schedule::Policy policy) {
  const model::Model& model = request.model;
  const int N = request.topology.size();
  const int L = static_cast<int>(model.layers.size());
  if (request.tensor_parallel.size() != 1 || !request.pipeline_parallel) {
    throw UsageError(
        "the megatron planner plans one configuration: give --tensor-parallel T (one degree) "
        "and --pipeline-parallel P, optionally --data-parallel D");
  }
  const int T = request.tensor_parallel.front();
  const int P = *request.pipeline_parallel;
  const int C = megatron_context_degree(request);
  if (T < 1 || P < 1 || (request.data_parallel && *request.data_parallel < 1)) {
    throw UsageError("--tensor-parallel, --pipeline-parallel and --data-parallel must be >= 1");
  }
  const long per_copy = static_cast<long>(T) * P * C;
  const long D = request.data_parallel ? *request.data_parallel : N / per_copy;
  if (D < 1 || D * per_copy > N) {
    std::string configuration =
        "tensor-parallel " + std::to_string(T) + " x pipeline-parallel " + std::to_string(P);
    if (C > 1) configuration += " x context-parallel " + std::to_string(C);
    if (request.data_parallel) configuration += " x data-parallel " + std::to_string(D);
    throw InfeasibleError(configuration + " needs " + std::to_string(std::max(D, 1L) * per_copy) +
                          " GPUs, the topology has " + std::to_string(N));
  }
  // Megatron-LM's virtual pipeline (spec 9.5): P V stages, stage k on pipeline position k mod P
  // (zb-v: the V of schedule::placed_stage, stages p and 2P-1-p on position p).
  const int V = virtual_stages_of(request, policy);
  const int stages = P * V;
  std::vector<int> position(static_cast<std::size_t>(stages));  // stage k's pipeline position
  for (int p = 0; p < P; ++p) {
    for (int c = 0; c < V; ++c) {
      position[static_cast<std::size_t>(schedule::placed_stage(policy, P, p, c))] = p;
    }
  }
  const std::vector<int> firsts = megatron_firsts(request, P, V, position);
  Partition partition;
  partition.gpu_order.resize(static_cast<std::size_t>(N));
  for (int g = 0; g < N; ++g) partition.gpu_order[static_cast<std::size_t>(g)] = g;
  for (int k = 0; k < stages; ++k) {
    const int p = position[static_cast<std::size_t>(k)];
    Stage stage;
    stage.first_layer = firsts[static_cast<std::size_t>(k)];
    stage.last_layer = k + 1 < stages ? firsts[static_cast<std::size_t>(k) + 1] - 1 : L - 1;
    // Megatron-LM's rank order tp-cp-dp-pp: stage p's D replicas of C groups of T GPUs.
    const long width = D * C * T;
    for (long g = p * width; g < (p + 1) * width; ++g) stage.gpus.push_back(static_cast<int>(g));
    stage.tensor_parallel = T;
    stage.context_parallel = C;
    if (!model::stage_allows_degree(model, stage.first_layer, stage.last_layer, T)) {
      throw InfeasibleError("stage " + std::to_string(k) + " (layers " +
                            std::to_string(stage.first_layer) + "-" +
                            std::to_string(stage.last_layer) +
                            ") cannot run at tensor-parallel degree " + std::to_string(T) +
                            ": every layer with tensor_parallel must list it, and at least one "
                            "must have tensor_parallel (spec 8.1)");
    }
    partition.stages.push_back(std::move(stage));
  }
  // Megatron's recomputation is one setting for the whole model: always, never, or (auto) as
  // Megatron-LM would set it for its own 1F1B schedule, only when the plan does not fit without
  // it there; or when it does not fit under `policy` (GPipe keeps more in flight). Under the list
  // schedule, which fits whatever holds one micro-batch, the configuration stays the one
  // Megatron-LM runs instead of one that stalls for memory (GPT-3 175B at t8 p8 on 64 GPUs: 435 s
  // without recomputation, 370 s with it).
  const Recompute recompute = effective_recompute(request);
  bool all = recompute == Recompute::kAlways;
  if (recompute == Recompute::kAuto && V > 1) {
    // Several stages per device: whether the plan fits without recomputation, by its replay.
    all = !try_finish_plan("megatron", partition, request, policy).plan;
  } else if (recompute == Recompute::kAuto) {
    const Executions exec =
        simulate::execution(model, request.topology, partition.stages, request.optimizer);
    all = !fits(request, partition.stages, exec, schedule::Policy::kOneFOneB) ||
          !fits(request, partition.stages, exec, policy);
  }
  for (Stage& stage : partition.stages) stage.recompute = all;
  return partition;
}

std::vector<Request> megatron_candidates(const Request& request,
                                         const partition::StageChoices& choices) {
  std::vector<Request> out;
  const int most_stages = max_stages_within_task_limit(request.micro_batches);
  for (Request& fixed : megatron_configurations(request, choices.degrees)) {
    if (*fixed.pipeline_parallel > most_stages) continue;  // a plan of more tasks than allowed
    for (const Recompute setting : {Recompute::kNever, Recompute::kAlways}) {
      const bool allowed = setting == Recompute::kNever
                               ? !choices.must_recompute
                               : choices.may_recompute || choices.must_recompute;
      if (!allowed) continue;
      fixed.recompute = setting;
      out.push_back(fixed);
    }
  }
  return out;
}

double megatron_estimate(const Request& request, const std::vector<Stage>& stages,
                         Optimizer optimizer) {
  return estimate_of(request,
                     simulate::execution(request.model, request.topology, stages, optimizer));
}

double estimate_iteration_ms(const Request& request, schedule::Policy policy) {
  const partition::StageChoices choices = stage_choices(request);
  std::vector<Request> configurations;
  if (request.tensor_parallel.size() == 1 && request.pipeline_parallel) {
    if (megatron_refusal(request)) return std::numeric_limits<double>::infinity();
    configurations.push_back(request);
  } else {
    configurations = megatron_candidates(request, choices);
  }
  double best = std::numeric_limits<double>::infinity();
  for (const Request& fixed : configurations) {
    try {
      const Partition partition = megatron_partition(fixed, policy);
      // megatron_partition shapes without refusing what does not fit (finish_plan does).
      const Executions exec =
          simulate::execution(fixed.model, fixed.topology, partition.stages, choices.optimizer);
      if (!fits(fixed, partition.stages, exec, policy)) continue;
      best = std::min(best, estimate_of(fixed, exec));
    } catch (const InfeasibleError&) {  // a configuration the GPUs or the layers do not allow
    } catch (const UsageError&) {
    }
  }
  return best;
}

}  // namespace pipeplan::planners
