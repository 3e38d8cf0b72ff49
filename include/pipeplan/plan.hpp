#pragma once
/// \file
/// The central types a newcomer reads first: a plan is stages (contiguous layer ranges on
/// ordered GPU lists), a schedule (the order of work on every GPU and channel), and the
/// timeline the execution model (spec section 3) derives from them.
///
/// GPUs are indices into `topology::Topology::gpus()`; layers are indices into
/// `model::Model::layers`. Times are milliseconds, sizes bytes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pipeplan {

/// One pipeline stage: layers `first_layer..last_layer` (inclusive) on `gpus`, replicated
/// `replicas()` times, each replica a **group** of `context_parallel x tensor_parallel` GPUs (spec
/// 8.2 and 10.2): replica `i` is `gpus[i c t .. i c t + c t - 1]`, made of `c` tensor-parallel
/// groups of `t` consecutive GPUs; its first GPU is the group's **leader** (the GPU compute tasks
/// name and transfers run between). With `c = t = 1` (every v1 plan) each GPU is a replica of its
/// own and the list is the AllReduce ring order.
struct Stage {
  int first_layer = 0;       ///< First layer, 0-based.
  int last_layer = 0;        ///< Last layer, inclusive.
  std::vector<int> gpus;     ///< `r c t` GPUs, group by group, in ring order.
  int tensor_parallel = 1;   ///< t: GPUs per tensor-parallel group (spec 8.2).
  bool recompute = false;    ///< Whether the backward recomputes the forward (spec 8.3).
  int context_parallel = 1;  ///< c: tensor-parallel groups per replica (spec 10.2); one value
                             ///< for every stage of a plan.

  /// GPUs per replica: `c t`.
  [[nodiscard]] int group_size() const {
    const int t = tensor_parallel > 0 ? tensor_parallel : 1;
    return context_parallel > 1 ? context_parallel * t : t;
  }
  /// r: the number of groups (replicas).
  [[nodiscard]] int replicas() const { return static_cast<int>(gpus.size()) / group_size(); }
  /// The leader of replica `i` (`0 <= i < replicas()`).
  [[nodiscard]] int leader(int i) const {
    return gpus[static_cast<std::size_t>(i) * static_cast<std::size_t>(group_size())];
  }
  /// Every group's leader, in replica order (for c = t = 1: `gpus`).
  [[nodiscard]] std::vector<int> leaders() const {
    std::vector<int> out;
    out.reserve(static_cast<std::size_t>(replicas()));
    for (int i = 0; i < replicas(); ++i) out.push_back(leader(i));
    return out;
  }
  /// The GPUs of replica `i`, leader first.
  [[nodiscard]] std::vector<int> group(int i) const {
    const auto size = static_cast<std::size_t>(group_size());
    const auto first =
        gpus.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) * size);
    return {first, first + static_cast<std::ptrdiff_t>(size)};
  }
  /// Data-parallel and context-parallel ranks that hold a copy of the stage's weights: `r c`
  /// (a sharded optimizer's shards, spec 8.3 and 10.3).
  [[nodiscard]] int shards() const { return replicas() * std::max(context_parallel, 1); }
  /// Whether the stage uses a field of spec 8.2 (then the plan is written as v2).
  [[nodiscard]] bool uses_v2_fields() const { return tensor_parallel != 1 || recompute; }
  friend bool operator==(const Stage&, const Stage&) = default;
};

/// A plan's context-parallel degree (spec 10.2): its stages' common `context_parallel`, 1 for no
/// stages.
[[nodiscard]] inline int context_parallel(const std::vector<Stage>& stages) {
  return stages.empty() ? 1 : stages.front().context_parallel;
}

/// The largest number of stages that share one GPU list (a device, spec 9.2): plan.json's
/// `virtual_stages`, 1 when no GPUs are shared. O(S log S) comparisons of GPU lists.
[[nodiscard]] inline int virtual_stages(const std::vector<Stage>& stages) {
  std::map<std::vector<int>, int> per_device;
  int most = 1;
  for (const Stage& stage : stages) most = std::max(most, ++per_device[stage.gpus]);
  return most;
}

/// Where the optimizer state lives (spec 8.2): whole on every replica, divided among a stage's
/// replicas (ZeRO-1 style), with the gradients too (ZeRO-2, torch FSDP's `SHARD_GRAD_OP`;
/// docs/decisions.md "A data-parallel stage with sharded gradients"), or, with the weights as
/// well, fully sharded (ZeRO-3, torch FSDP2; docs/decisions.md "A fully sharded data-parallel
/// stage").
enum class Optimizer : std::uint8_t { kReplicated, kSharded, kFullySharded, kShardedGradients };

/// plan.json's `optimizer`: `replicated`, `sharded`, `sharded-gradients` or `fully-sharded`.
[[nodiscard]] inline const char* optimizer_name(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSharded:
      return "sharded";
    case Optimizer::kShardedGradients:
      return "sharded-gradients";
    case Optimizer::kFullySharded:
      return "fully-sharded";
    case Optimizer::kReplicated:
      break;
  }
  return "replicated";
}

/// The optimizer `optimizer_name` calls `name`; empty for any other text.
[[nodiscard]] inline std::optional<Optimizer> parse_optimizer(std::string_view name) {
  for (const Optimizer o : {Optimizer::kReplicated, Optimizer::kSharded,
                            Optimizer::kShardedGradients, Optimizer::kFullySharded}) {
    if (name == optimizer_name(o)) return o;
  }
  return std::nullopt;
}

/// Whether `optimizer` divides the gradients among a stage's shards, reduce-scattering each
/// layer's with each backward (ZeRO-2 and ZeRO-3).
[[nodiscard]] inline bool shards_gradients(Optimizer optimizer) {
  return optimizer == Optimizer::kShardedGradients || optimizer == Optimizer::kFullySharded;
}

/// Whether a stage has a gradient AllReduce at the end of the iteration (spec 3, 8.3, 10.3): more
/// than one replica, or a context-parallel group, unless its gradients are sharded (they are
/// reduce-scattered with each backward instead).
[[nodiscard]] inline bool reduces_gradients(const Stage& stage, Optimizer optimizer) {
  return !shards_gradients(optimizer) && stage.shards() > 1;
}

/// What a compute task computes: the forward, the whole backward, or (spec 9.2, a split
/// backward) the backward's input-gradient half `I` or its weight-gradient half `W`. A plan
/// lists either `kBackward` or the pair `kBackwardInput`/`kBackwardWeight`, never both.
enum class Op : std::uint8_t { kForward, kBackward, kBackwardInput, kBackwardWeight };

/// Activation (stage s to s+1) or gradient (stage s+1 to s).
enum class TransferKind : std::uint8_t { kActivation, kGradient };

/// plan.json's `op` of a compute task: `forward`, `backward`, `backward_input` or
/// `backward_weight` (spec 4 and 9.2).
[[nodiscard]] inline const char* op_name(Op op) {
  switch (op) {
    case Op::kForward:
      return "forward";
    case Op::kBackward:
      return "backward";
    case Op::kBackwardInput:
      return "backward_input";
    case Op::kBackwardWeight:
      return "backward_weight";
  }
  return "forward";
}

/// The letter of a compute task in views and torch's schedule grammar: `F`, `B`, `I`, `W`.
[[nodiscard]] inline char op_letter(Op op) {
  switch (op) {
    case Op::kForward:
      return 'F';
    case Op::kBackward:
      return 'B';
    case Op::kBackwardInput:
      return 'I';
    case Op::kBackwardWeight:
      return 'W';
  }
  return 'F';
}

/// The forward, backward or backward half of one micro-batch on one stage.
struct ComputeTask {
  Op op = Op::kForward;
  int stage = 0;
  int micro_batch = 0;
  friend bool operator==(const ComputeTask&, const ComputeTask&) = default;
};

/// A transfer across the boundary after `stage` (its lower stage).
struct TransferTask {
  TransferKind kind = TransferKind::kActivation;
  int stage = 0;
  int micro_batch = 0;
  friend bool operator==(const TransferTask&, const TransferTask&) = default;
};

/// An ordered GPU pair that carries one transfer at a time.
using Channel = std::pair<int, int>;

/// The decisions of a schedule (spec section 3): the order of compute tasks on every GPU and
/// of transfers on every channel. The GPU that runs a micro-batch of a stage is the one whose
/// order holds its forward.
struct Schedule {
  int micro_batches = 0;        ///< M.
  bool split_backward = false;  ///< Whether every backward is split into `I` and `W` (spec 9.2).
  std::vector<std::vector<ComputeTask>> gpu_order;             ///< Per topology GPU.
  std::map<Channel, std::vector<TransferTask>> channel_order;  ///< Per channel in use.
};

/// A compute task with its place and times.
struct TimedCompute {
  int gpu = 0;
  ComputeTask task;
  double start_ms = 0;
  double end_ms = 0;
};

/// A transfer with its endpoints, size and times.
struct TimedTransfer {
  int from = 0;
  int to = 0;
  TransferTask task;
  double bytes = 0;
  double start_ms = 0;
  double end_ms = 0;
};

/// A stage's gradient AllReduce.
struct TimedAllReduce {
  int stage = 0;
  double bytes = 0;
  double start_ms = 0;
  double end_ms = 0;
};

/// The optimizer step of one group of a stage (spec 8.3), on the group's GPUs, named by its leader.
struct TimedUpdate {
  int stage = 0;
  int gpu = 0;  ///< The group's leader.
  double start_ms = 0;
  double end_ms = 0;
};

/// What the execution model says about one GPU.
struct GpuUsage {
  std::vector<int> stages;       ///< The stages it serves, ascending: one, several when stages
                                 ///< share it (spec 9.2), none when unused.
  double busy_ms = 0;            ///< Sum of its compute durations (F, B, I and W).
  double peak_memory_bytes = 0;  ///< Static bytes plus peak stash; 0 when unused.
};

/// Lower bounds on the iteration time (spec section 3).
struct Bounds {
  double any_plan_ms = 0;   ///< Valid for every plan on these inputs.
  double partition_ms = 0;  ///< Valid for every schedule of this plan's stages and GPUs.
};

/// Every start and end, as the execution model derives them from a schedule.
struct Timeline {
  double iteration_ms = 0;                 ///< End of the last task, AllReduces included.
  std::vector<TimedCompute> compute;       ///< Sorted by start, then GPU, then GPU order.
  std::vector<TimedTransfer> transfers;    ///< Sorted by start, then channel, then order.
  std::vector<TimedAllReduce> allreduces;  ///< One per replicated stage, by stage.
  std::vector<TimedUpdate> updates;        ///< Optimizer steps (spec 8.3), by stage, then group;
                                           ///< empty when no layer has an update time.
  std::vector<GpuUsage> gpus;              ///< Per topology GPU.
};

/// A complete plan: what `plan.json` holds.
struct Plan {
  std::string planner;          ///< e.g. `spp`, `gpipe`.
  std::string schedule_policy;  ///< A `schedule::Policy`'s name: `list`, `1f1b`, ...
  std::vector<int> gpu_order;   ///< Every GPU once, in the order the planner considered them.
  std::vector<Stage> stages;    ///< Cover every layer once, in order; two stages have disjoint
                                ///< or identical `gpus` (a device, spec 9.2).
  Optimizer optimizer = Optimizer::kReplicated;  ///< Spec 8.2.
  /// Sequences per micro-batch, when known: from a transformer description or `--global-batch`
  /// (the batch-size search's choice); written as `micro_batch_size` only then.
  std::optional<std::int64_t> micro_batch_size;
  /// A transformer description's sequence parallelism and selective recomputation, when the
  /// planner chose them other than the model file says (spp's knob search, or `--sequence-parallel
  /// on|off` and `--selective-recompute on|off`); written as `sequence_parallel` and
  /// `selective_recompute` only then. The plan is costed with the description so changed
  /// (model::transformer_variant).
  std::optional<bool> sequence_parallel;
  std::optional<bool> selective_recompute;
  Schedule schedule;                  ///< The decisions.
  Timeline timeline;                  ///< Their consequences.
  Bounds bounds;                      ///< Lower bounds for comparison.
  std::vector<std::string> notes;     ///< How the planner got here (candidates tried, estimates),
                                      ///< for `--verbose`; not part of plan.json.
  std::vector<std::string> warnings;  ///< What the user should know about the plan's quality
                                      ///< (a heuristic used at scale); shown unless `--quiet`.
};

}  // namespace pipeplan
