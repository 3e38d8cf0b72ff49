#pragma once
/// \file
/// The central types a newcomer reads first: a plan is stages (contiguous layer ranges on
/// ordered GPU lists), a schedule (the order of work on every GPU and channel), and the
/// timeline the execution model (spec section 3) derives from them.
///
/// GPUs are indices into `topology::Topology::gpus()`; layers are indices into
/// `model::Model::layers`. Times are milliseconds, sizes bytes.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipeplan {

/// One pipeline stage: layers `first_layer..last_layer` (inclusive) replicated on `gpus`,
/// whose order is the AllReduce ring order.
struct Stage {
  int first_layer = 0;    ///< First layer, 0-based.
  int last_layer = 0;     ///< Last layer, inclusive.
  std::vector<int> gpus;  ///< Replicas, at least one, in ring order.
};

/// Forward or backward.
enum class Op : std::uint8_t { kForward, kBackward };

/// Activation (stage s to s+1) or gradient (stage s+1 to s).
enum class TransferKind : std::uint8_t { kActivation, kGradient };

/// The forward or backward of one micro-batch on one stage.
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
  int micro_batches = 0;                                       ///< M.
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

/// What the execution model says about one GPU.
struct GpuUsage {
  std::optional<int> stage;      ///< The stage it serves; empty when unused.
  double busy_ms = 0;            ///< Sum of its forward and backward durations.
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
  std::vector<GpuUsage> gpus;              ///< Per topology GPU.
};

/// A complete plan: what `plan.json` holds.
struct Plan {
  std::string planner;                ///< e.g. `spp`, `gpipe`.
  std::string schedule_policy;        ///< `list`, `1f1b` or `gpipe`.
  std::vector<int> gpu_order;         ///< Every GPU once, in the order the planner considered them.
  std::vector<Stage> stages;          ///< Cover every layer once, in order.
  Schedule schedule;                  ///< The decisions.
  Timeline timeline;                  ///< Their consequences.
  Bounds bounds;                      ///< Lower bounds for comparison.
  std::vector<std::string> notes;     ///< How the planner got here (candidates tried, estimates),
                                      ///< for `--verbose`; not part of plan.json.
  std::vector<std::string> warnings;  ///< What the user should know about the plan's quality
                                      ///< (a heuristic used at scale); shown unless `--quiet`.
  /// Time spent per planning phase (`ordering`, `dp`, `scheduling`), ms of CPU work summed
  /// over candidates that may have run in parallel; not part of plan.json.
  std::vector<std::pair<std::string, double>> phase_ms;
};

}  // namespace pipeplan
