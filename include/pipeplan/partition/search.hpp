#pragma once
/// \file
/// Searches over plan shapes whose value is measured, not estimated: the DP (dp.hpp) proposes
/// stages, and the planner replays them; these functions enumerate, seed and refine shapes
/// with a caller's `Evaluate` (the replayed iteration time), deterministically and within a
/// work budget. A shape is a list of stages, each a contiguous layer range on a run of
/// consecutive GPUs of an order, the runs following each other from the order's first GPU
/// (unused GPUs are the order's tail), as the DP's plans are.

#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/partition/search_constants.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::partition {

/// What a shape may be: `layers` layers on `order`, every stage at most `max_replicas`
/// replicas (groups), at most `max_stages` stages (the task limit); each stage at one of
/// `degrees` that its layers allow (spec 8.1), its run a multiple of it, recomputing as
/// `recompute` allows (spec 8.4). The defaults are the v1 shapes.
struct ShapeLimits {
  int layers = 0;
  int max_replicas = 1;
  int max_stages = 1;
  std::vector<int> degrees{1};          ///< Ascending.
  bool may_recompute = false;           ///< A stage may recompute or not.
  bool must_recompute = false;          ///< Every stage recomputes.
  const model::Model* model = nullptr;  ///< For the degrees a stage allows; needed when
                                        ///< `degrees` is not {1}.
  bool uniform = false;     ///< Every stage with the same run length and degree (`--uniform`).
  int equal_shares_of = 0;  ///< When > 0, replica counts share it equally (`shares_equally`).
};

/// The value of a shape: the replayed iteration time in ms, or nothing when it is infeasible
/// (memory). `work` is what the evaluation cost, in the caller's units (tasks replayed).
struct Evaluation {
  std::optional<double> iteration_ms;
  double work = 0;
};
using Evaluate = std::function<Evaluation(const std::vector<Stage>&)>;

/// How many shapes `limits` allows on an order of `gpus` GPUs (saturating at 1e18), counted
/// stage count by stage count until the total passes `stop_above`; with several degrees or
/// recomputation choices, an upper bound (every stage counted with every choice). O(S N R) for
/// the S stage counts counted and R = max_replicas x the largest degree.
double count_shapes(const ShapeLimits& limits, int gpus, double stop_above = 1e18);

/// Calls `visit` on every shape `limits` allows on `order`, in a fixed order (first stage
/// shortest, then smallest degree, then fewest replicas, then without recomputation first,
/// recursively). O(shapes x S).
void for_each_shape(const ShapeLimits& limits, const std::vector<int>& order,
                    const std::function<void(const std::vector<Stage>&)>& visit);

/// How the stages of a greedy packing are made: groups of `tensor_parallel` consecutive GPUs,
/// recomputing or not, under `optimizer` (one group per stage: a sharded optimizer divides
/// nothing). The defaults are one GPU per stage as in section 3.
struct Packing {
  int tensor_parallel = 1;
  bool recompute = false;
};

/// The shape with one group per stage that packs the layers greedily along `order`: each stage
/// takes as many layers as its group holds with `stashes` stashes beside the static bytes
/// (counted as the replay counts memory, spec 8.3). Greedy is optimal for contiguous packing
/// along a fixed order, so nothing is returned exactly when no such packing on `order` fits
/// (a layer larger than its group, a layer that cannot run at the degree, more GPUs needed
/// than `order` has, or more stages than `max_stages`). `gpus_needed`, when given, receives
/// the GPUs the packing needs (or `order.size() + 1` when it runs out; -1 when a layer fits on
/// no group of `order`). O((L + N) t).
std::optional<std::vector<Stage>> greedy_packing(const model::Model& model,
                                                 const topology::Topology& topology,
                                                 const std::vector<int>& order, long stashes,
                                                 int max_stages, int* gpus_needed = nullptr,
                                                 const Packing& packing = {});

/// The shapes one move away from `stages`, in a fixed order: move a stage boundary by 1, 2,
/// 4, ... layers either way; move a GPU (a group) between neighbouring runs; add or drop a
/// replica (the later runs shift along the order); merge two neighbouring stages; split a
/// stage in two at its middle of compute (halving its run, or taking a GPU from the unused
/// tail); then, where `limits` allows them, change a stage's degree (keeping its GPUs, or
/// its replicas) and switch its recomputation; for uniform shapes, change every stage's replica
/// count or degree at once, merge two stages into one of the same run, or split one taking a
/// run from the unused tail. These single moves come first; then, unless `compound` is false,
/// the compound ones: every boundary from the s-th on, or up to
/// it, moved by 1, 2, 4, ... layers together; and 1, 2, 4, ... groups moved between
/// neighbouring runs with their boundary moved 1, 2, 4, ... layers towards the giver (the
/// work follows the GPUs), or without it for 2 groups and more; `fine`: the compound moves'
/// shifts are 1, 2, 3, 4, 6, 8, 12, ... layers instead (the midpoints too). Only shapes
/// `limits` allows. O(S (S log L + log N log L + D)) shapes of O(N) each.
std::vector<std::vector<Stage>> neighbours(const model::Model& model,
                                           const std::vector<Stage>& stages,
                                           const std::vector<int>& order, const ShapeLimits& limits,
                                           bool compound = true, bool fine = false);

/// A shape drawn at random (for restarts of the slow reference search): a stage count, cuts
/// and run lengths uniform within `limits`. Deterministic for a seeded `rng`. O(L + N).
std::vector<Stage> random_shape(std::mt19937& rng, const std::vector<int>& order,
                                const ShapeLimits& limits);

/// The result of a search: the best shape found and its value.
struct Found {
  std::vector<Stage> stages;
  double iteration_ms = 0;
};

/// What a local search may spend, in the evaluations' work units: `work` at least; more where
/// `sweeps` passes over the neighbourhood of the best start (its neighbour count times what
/// evaluating it cost) would cost more, but not beyond `max_work`, and only where one pass
/// costs at most `max_work` (large plans, whose one pass costs more, keep `work`).
struct SearchBudget {
  double work = 0;
  double sweeps = 0;
  double max_work = 0;
  /// The relative improvement a move must make to be taken in phase 2 (phases 1, 3 and 4 take
  /// any beyond tuning::kAnyGain). Larger values skip the long runs of tiny gains a flat landscape
  /// offers and spend the budget on larger moves; the slow reference search of the quality
  /// benchmark uses them as a variant, spp keeps 1e-9.
  double min_gain = tuning::kAnyGain;
  /// Phase 2 climbs first from the best start of each stage count, then from the others: more
  /// depths explored where the DP's solutions share one (a reference-search variant; spp: off).
  bool diverse = false;
  /// Phase 4's re-split of a shape's layers for a fill weight and a cap (`fill_split` bound to
  /// the caller's model, cluster and micro-batches); empty: no phase 4.
  using Resplit =
      std::function<std::optional<std::vector<Stage>>(const std::vector<Stage>&, double, double)>;
  Resplit resplit{};
};

/// `stages`' layers split anew, their runs, degrees and recomputation kept, by the list
/// schedule's fill rule: under the list schedule a replicated pipeline's iteration is about the
/// largest, over stages k, of P_k + (M / r_k) tau_k, where tau_k is a micro-batch's forward and
/// backward on stage k, P_k the sum of tau_j over j < k (the pipeline's fill before k and its
/// drain back), r_k the stage's replicas and M the micro-batches (docs/algorithms.md, "Phase
/// 4"). The split makes gamma P_k + (M / r_k) tau_k even over the stages with every stage but
/// the last also within `cap` of the bound (gamma 0, cap 1: balanced compute; larger gamma: the
/// later stages lighter; cap below 1: the first stages too, which leaves their memory the
/// headroom that more micro-batches in flight need). tau_k counts the layers' forward_ms +
/// backward_ms (and forward_ms again when the stage recomputes) on the stage's slowest GPU,
/// divided by its degree: a rough figure (no transfers, no memory), since the caller replays what
/// the split proposes. Nothing for fewer than two stages or more stages than layers. O(L + S) to
/// make the sums, then 60 bisection steps on the bound of O(L + S) each.
std::optional<std::vector<Stage>> fill_split(const model::Model& model,
                                             const topology::Topology& topology,
                                             const std::vector<Stage>& stages, int micro_batches,
                                             double gamma, double cap);

/// Local search by first improvement: the first `always` starts are evaluated whatever the
/// budget, the others while `budget.work` lasts; then two phases climb from each start, best
/// first (phase 2 with `budget.diverse`: the best of each stage count first), and a third from
/// the best found. A climb repeatedly takes the first neighbour that replays faster than the
/// current shape by more than 1e-9 relative (phase 2: `budget.min_gain`), until a whole pass finds
/// none or the work passes the phase's limit. Phase 1, within `budget.work`: single moves only,
/// each pass from the first (the search as it was before the compound moves, so that no plan gets
/// slower). Phase 2, within the larger budget (`SearchBudget`): every move, each pass resuming at
/// the move that improved last (a shift of the work tends to repeat). Phase 3, where phase 2 had
/// more than `budget.work`, as much again: one climb from the best shape found, with the finer
/// shifts of `neighbours(..., fine)`, so it only improves. Phase 4, where `budget.resplit` is
/// given, within as much again as phase 3 had (a quarter of `budget.work` where phase 3 did not
/// run): the re-splits (`fill_split`) of the best shape, of the best start of each of a few other
/// stage counts, and of the best with one of its widest stages halved, on a coarse grid of
/// (gamma, cap); a pattern search around the best of them; and a climb from it as in phase 3. It
/// too only improves. Every shape is evaluated once (memoised); a shape that does not fit is an
/// Evaluation without a time, whose work counts like any other. The phases' constants:
/// search_constants.hpp. Deterministic. Returns the best
/// shape seen, nothing when every shape seen was infeasible. O(always + max work / work per
/// evaluation) evaluations.
std::optional<Found> local_search(const model::Model& model,
                                  const std::vector<std::vector<Stage>>& starts, std::size_t always,
                                  const std::vector<int>& order, const ShapeLimits& limits,
                                  const Evaluate& evaluate, const SearchBudget& budget);

}  // namespace pipeplan::partition
