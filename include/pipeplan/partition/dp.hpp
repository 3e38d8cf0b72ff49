#pragma once
/// \file
/// Step 2 of the planner: partition the layers into stages and place each stage on a
/// contiguous run of the GPU order, replicated `r >= 1` times, by an exact dynamic program
/// over (layer suffix, GPU-order suffix). The objective is stated in docs/algorithms.md and
/// implemented once, directly, by `objective` (the brute-force tests compare against it).

#include <cstddef>
#include <optional>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/partition/search_constants.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::partition {

/// The objective's parts for one plan, in ms. `total_ms = latency_ms + excess_ms + tail_ms`.
struct Objective {
  double latency_ms = 0;  ///< One micro-batch's round trip: sum of stage F+B at the fastest
                          ///< replica plus both transfers of every boundary.
  double excess_ms = 0;   ///< Steady state of the slowest stage or boundary beyond one micro-batch.
  double tail_ms = 0;     ///< AllReduce time not hidden behind the drain of earlier stages.
  double total_ms = 0;    ///< The estimate the DP minimises.
};

/// A DP solution.
struct Solution {
  std::vector<Stage> stages;  ///< Runs of the order, in order; unused GPUs are the order's tail.
  Objective objective;
  int grid_unit = 1;    ///< GPUs per unit of the grid the DP ran on (1: every position).
  int grid_blocks = 0;  ///< Layer blocks of that grid (the layer count: every boundary).
};

/// Whether `replicas` data-parallel replicas can each take the same number of `micro_batches`,
/// as Megatron-LM, DeepSpeed and torch.distributed.pipelining give them (issue 34): the rule of
/// `--uniform` plans, the megatron planner and the framework exports. O(1).
inline bool shares_equally(long micro_batches, long replicas) {
  return replicas >= 1 && micro_batches % replicas == 0;
}

/// The per-stage choices of spec 8.4 that the DP searches over, besides layers and runs.
struct StageChoices {
  std::vector<int> degrees{1};  ///< Tensor-parallel degrees a stage may take, ascending; a
                                ///< stage takes one its layers allow (model::stage_allows_degree).
  bool may_recompute = false;   ///< A stage may recompute (`--recompute auto`).
  bool must_recompute = false;  ///< Every stage recomputes (`--recompute always`).
  Optimizer optimizer = Optimizer::kReplicated;  ///< Static memory and optimizer steps.
  /// Every stage with the same run length and degree (`--uniform`, spec 8.4): the plans
  /// Megatron-LM, DeepSpeed and torch.distributed.pipelining can run.
  bool uniform = false;
  /// When > 0 (a user's `--uniform`: the micro-batches), the replayed search's shapes keep to
  /// replica counts that share them equally (`shares_equally`, via `ShapeLimits`). The DP itself
  /// still proposes every count: its plans are the search's starts (`with_equal_shares`).
  int equal_shares_of = 0;
};

/// What the DP assumes of the schedule that will run its plan.
struct ScheduleModel {
  /// Micro-batch m runs on replica m mod r (the fixed 1F1B and GPipe orders) instead of the
  /// best split over the replicas' speeds (the list scheduler).
  bool round_robin = false;
  /// Stashes every replica must be able to hold (at most its micro-batches). 0: the
  /// memory-aware list scheduler, which needs one and throttles when fewer fit than it could use.
  long stashes = 0;
};

/// The objective of `stages` (each a layer range on an ordered GPU list at its degree and
/// recomputation, as in a plan), or nothing when a stage does not fit one micro-batch in
/// memory. O(sum over stages of layers + r_s t_s).
std::optional<Objective> objective(const model::Model& model, const topology::Topology& topology,
                                   const std::vector<Stage>& stages, int micro_batches,
                                   const ScheduleModel& schedule = {},
                                   Optimizer optimizer = Optimizer::kReplicated);

/// Work one DP pass may do before the grid is made coarser (about a second; the value and its
/// origin: search_constants.hpp).
inline constexpr double kMaxPassWork = tuning::kMaxPassWork;

/// The plan minimising `objective` among all plans whose stages are contiguous layer ranges
/// on consecutive runs of `order` starting at its first GPU, with `1 <= r <= micro_batches`
/// replicas each (unused GPUs form the tail of the order). Nothing when no plan fits in memory.
/// Exact (Pareto fronts of (latency, excess, tail) per state, since the objective is monotone
/// in each) while no front passes 32 entries (beyond that the entry of largest objective is
/// dropped: memory-tight profiles grow fronts into the thousands), on a grid: every layer boundary
/// and GPU position while blocks^2 x positions x lengths^2 stays within a budget of about a second;
/// beyond it, runs align to units of 2^k GPUs and layers group into blocks of equal compute cut
/// where the activation is smallest (docs/algorithms.md). `full_grid` lifts the budget (for
/// measuring what the grid costs). O(C^2 P Q^2 F) for C blocks, P run starts, Q run lengths, fronts
/// of F. A pass whose work (entries combined, times the front they enter) passes `max_pass_work`
/// gives up and the DP retries on a coarser grid, until the grid can be no coarser.
std::optional<Solution> solve(const model::Model& model, const topology::Topology& topology,
                              const std::vector<int>& order, int micro_batches,
                              const ScheduleModel& schedule = {}, bool full_grid = false,
                              double max_pass_work = kMaxPassWork);

/// Options of `solve_several`.
struct SolveOptions {
  bool full_grid = false;               ///< Lift the grid's budget (see `solve`).
  double max_pass_work = kMaxPassWork;  ///< Work one pass may do before the grid coarsens.
  std::size_t solutions = 1;            ///< How many of the best solutions to return.
  int max_stages = 0;                   ///< At most this many stages (0: no cap). With a cap
                                        ///< below the grid's reach the fronts also keep the
                                        ///< stage count (fewer is better), so the DP stays exact.
  StageChoices choices;                 ///< Degrees, recomputation and optimizer (spec 8.4).
};

/// A lower bound on the stages of any plan on `order` at the tensor-parallel `degrees`: the
/// fewest contiguous stages whose static bytes alone fit the largest GPU of `order`, each layer's
/// weights at the listed degree that makes them smallest, a sharded optimizer's state spread over
/// unboundedly many replicas (phi - phi_sh bytes per parameter byte; else phi), no stash. Greedy
/// packing is optimal for that relaxed packing with free boundaries. 0 when a GPU of `order` has
/// no memory limit (no bound); -1 when no plan can fit (a layer larger than the largest GPU, or
/// no degree). O(L D).
int fewest_stages_for_static_bytes(const model::Model& model, const topology::Topology& topology,
                                   const std::vector<int>& order, const std::vector<int>& degrees,
                                   Optimizer optimizer = Optimizer::kReplicated);

/// `solve`, returning up to `options.solutions` solutions: the plans of the final Pareto front
/// (every first run length) with the smallest objective, smallest first (ties: fixed loop
/// order). The first is `solve`'s. Empty when no plan fits. Same complexity as `solve`, plus
/// the stage count in the fronts when `max_stages` binds.
std::vector<Solution> solve_several(const model::Model& model, const topology::Topology& topology,
                                    const std::vector<int>& order, int micro_batches,
                                    const ScheduleModel& schedule, const SolveOptions& options);

}  // namespace pipeplan::partition
