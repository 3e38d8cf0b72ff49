#pragma once
/// \file
/// The execution model of spec section 3, implemented once: stage sums, AllReduce times,
/// the replay of a schedule into a timeline (every start and end, per-GPU busy time and peak
/// memory) and the two lower bounds. Every planner, scheduler and command uses it.

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/error.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/simulate/task_graph.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::simulate {

/// A schedule or stage list that breaks a rule of spec sections 3 and 4. Its message names
/// the rule and the task involved. Exit code 3 when it comes from a user's plan; planners
/// treat it as a bug.
class ScheduleError : public Error {
 public:
  explicit ScheduleError(const std::string& message) : Error(ExitCode::kInvalidInput, message) {}
  ScheduleError(const std::string& message, ComputeTask task)
      : Error(ExitCode::kInvalidInput, message), compute(task) {}
  ScheduleError(const std::string& message, TransferTask task)
      : Error(ExitCode::kInvalidInput, message), transfer(task) {}

  std::optional<ComputeTask> compute;    ///< The compute task involved, if any.
  std::optional<TransferTask> transfer;  ///< The transfer involved, if any.
};

/// Two times are equal when they differ by at most 1e-9 relative plus 1e-9 ms (spec 4). An
/// infinite or NaN time equals only itself (an infinite one; NaN equals nothing): the
/// relative tolerance of an infinite time would otherwise accept every other time.
[[nodiscard]] inline bool times_equal(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return a == b;
  double scale = a < 0 ? -a : a;
  double other = b < 0 ? -b : b;
  if (other > scale) scale = other;
  double difference = a - b;
  if (difference < 0) difference = -difference;
  return difference <= 1e-9 * scale + 1e-9;
}

/// The profiled sums of one stage (at speed 1.0): per-GPU sums at the stage's tensor-parallel
/// degree (spec 8.2), which at t = 1 are the layers' own fields.
struct StageProfile {
  double forward_ms = 0;       ///< F_s.
  double backward_ms = 0;      ///< B_s.
  double parameter_bytes = 0;  ///< W_s.
  double stash_bytes = 0;      ///< Y_s.
  double boundary_bytes = 0;   ///< A_s; 0 for the last stage.
};

/// Sums stage `s` of `stages` directly over its layers (not by prefix differences, so that
/// every caller gets bit-identical values). O(layers of the stage).
StageProfile stage_profile(const model::Model& model, const std::vector<Stage>& stages, int s);

/// Ring AllReduce time of `r` GPUs for `bytes` with slowest ring bandwidth `beta` (bytes/s)
/// and largest ring latency `lambda_ms`: `2 (r-1)/r * bytes / beta + 2 (r-1) * lambda`.
double ring_allreduce_ms(int r, double bytes, double beta_bytes_per_s, double lambda_ms);

/// `count` ring all-gathers (or reduce-scatters) over `n` GPUs moving `bytes` per GPU in all,
/// half of `ring_allreduce_ms`: `(n-1)/n * bytes / beta + (n-1) * lambda * count`; 0 for n <= 1
/// (full sharding's per-layer collectives, docs/decisions.md).
double ring_all_gather_ms(double n, double bytes, double beta_bytes_per_s, double lambda_ms,
                          double count = 1);

/// Ring AllReduce time over `gpus` in ring order for `bytes` (spec section 3):
/// `2 (r-1)/r * bytes / beta + 2 (r-1) * lambda`; 0 for a single GPU. O(r).
double allreduce_ms(const topology::Topology& topology, const std::vector<int>& gpus, double bytes);

/// Checks that `stages` is a valid partition and placement: at least one stage, contiguous
/// layer ranges covering every layer once in order, at least one GPU each, a tensor-parallel
/// degree t >= 1 that the stage's layers allow (spec 8.1) and a GPU count that is a multiple
/// of t, every GPU an existing index used by at most one stage, except that stages may share
/// an identical GPU list of the same degree (a device, spec 9.2). Throws `ScheduleError`.
/// O(N + sum of the stages' GPU counts), N the topology's GPUs.
void check_stages(const model::Model& model, const topology::Topology& topology,
                  const std::vector<Stage>& stages);

/// What a replay lists: the whole timeline, or every time and peak of it without its task lists
/// (`Timeline::compute` and `transfers` left empty), for a search that compares candidates and
/// keeps few: their sort is about half of the replay's time at 16,384 GPUs.
enum class Listing : std::uint8_t { kTasks, kTimesOnly };

/// Replays `schedule` (spec sections 3 and 8.3): every task starts at the earliest time its
/// dependencies and the task before it on the same group (named by its leader) or channel
/// allow; AllReduces start when the stage's last backward ends, update tasks when its AllReduce
/// (or, with one replica, its last backward) ends. Also computes per-GPU busy time and peak
/// memory under `optimizer`. Throws `ScheduleError` when a task is missing, repeated, on the
/// wrong GPU (not a leader of its stage) or channel, or the orders deadlock.
/// When the GPU orders list fewer than 2 S M compute tasks, the first missing one is reported
/// before anything is sized by S M, so memory follows the tasks listed, whatever
/// `schedule.micro_batches` claims. Requires `check_stages` to hold. O(T log T) for T tasks
/// (the sort of the output); O(T) with `Listing::kTimesOnly`.
Timeline replay(const model::Model& model, const topology::Topology& topology,
                const std::vector<Stage>& stages, const Schedule& schedule,
                Optimizer optimizer = Optimizer::kReplicated, Listing listing = Listing::kTasks);

/// The first GPU whose peak memory exceeds its capacity (1e-9 relative slack), as a message
/// naming it, its peak and its capacity; empty when all fit.
std::optional<std::string> memory_violation(const topology::Topology& topology,
                                            const Timeline& timeline);

/// Most stashes a GPU of `capacity_bytes` holds beside `static_bytes`, counted exactly as the
/// replay does (peak <= capacity * (1 + 1e-9)); at most `limit`; 0 when not even one fits.
/// No capacity: `limit`. No stash: `limit`.
long max_in_flight(double static_bytes, double stash_bytes, std::optional<double> capacity_bytes,
                   long limit);

/// `any_plan_ms` and `partition_ms` of spec sections 3, 8.3 and 9.3 (with shared GPUs,
/// `partition_ms` is the largest sum of the steady-state terms `L_s` over a device's stages). O(L D
/// + S + sum of r_s r_{s+1}
/// + N) for D degrees per layer.
/// With a split backward the drain term `D_s` is the stage's AllReduce alone: a stage's last
/// task may be a `W`, which nothing waits for, so section 3's chain of backwards after it is no
/// bound (docs/decisions.md).
Bounds compute_bounds(const model::Model& model, const topology::Topology& topology,
                      const std::vector<Stage>& stages, int micro_batches,
                      Optimizer optimizer = Optimizer::kReplicated, bool split_backward = false);

/// Fraction of the iteration a used GPU spends idle: 1 - busy / iteration (0 for an empty
/// iteration).
double bubble_fraction(const GpuUsage& usage, double iteration_ms);

}  // namespace pipeplan::simulate
