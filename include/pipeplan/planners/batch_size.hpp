#pragma once
/// \file
/// The batch-size search (issue 16 part 3): given a global batch of N sequences, the micro-batch
/// size b and the micro-batch count M = N / b of an iteration. For a model given by its
/// transformer description every b that divides N is planned and the fastest kept; for a
/// profiled model, b is the profiled batch size.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"

namespace pipeplan::planners {

/// Largest global batch `--global-batch` accepts: 2^40 sequences (its divisors are found in
/// O(sqrt N) steps, 2^20 at most).
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 40;

/// Most micro-batch sizes the search plans: each candidate is a whole plan (made within the
/// planner limits), so the search costs at most this many plans. Global batches in use have
/// fewer candidates (1536: 20, 1920: 32, 2520: 48).
inline constexpr int kMaxBatchSizeCandidates = 64;

/// Plans `model` with `micro_batches` micro-batches: the requested planner and its options.
/// Throws `InfeasibleError` when nothing fits or the request is beyond the planner limits.
using PlanFunction = std::function<Plan(const model::Model& model, int micro_batches)>;

/// A quick estimate of the iteration of `model` with `micro_batches` micro-batches, ms (smaller
/// is more promising; infinity: no idea). Ranks the sizes before any is planned.
using EstimateFunction = std::function<double(const model::Model& model, int micro_batches)>;

/// With an estimate, the search plans sizes from the smallest estimate on until this many gave
/// plans: its work is that of a few plans, not of one per divisor (issue 18).
inline constexpr int kBatchSizePlans = 3;

/// ... or until the next size would take the search's work, counted as micro-batches x GPUs
/// summed over the sizes planned, past this. A proxy, not a measure: on 2 cores one spp plan
/// takes 1.5 s at 0.6e6 (GPT-3 175B, 384 GPUs, 1,536 micro-batches) and 3.7 s at 6.5e6
/// (MT-NLG, 3,360 GPUs, 1,920). A size is planned while none has given a plan yet, whatever
/// the work.
inline constexpr double kBatchSizeWork = 2e6;

/// The outcome of planning a global batch.
struct GlobalBatchPlan {
  model::Model model;  ///< The model at the chosen micro-batch size (what the plan is of).
  Plan plan;           ///< Its plan, `micro_batch_size` set.
};

/// The micro-batch sizes the search tries for a global batch of `global_batch` sequences: every
/// divisor b of it with `N / b` micro-batches within a search's task limit (`2 (N / b) <=
/// kMaxSearchTasks`), ascending. O(sqrt N).
std::vector<std::int64_t> candidate_micro_batch_sizes(std::int64_t global_batch);

/// Plans a global batch of `global_batch` sequences (1 to `kMaxGlobalBatch`).
///
/// * A model from a transformer description (`model.transformer`): every candidate size b
///   (`candidate_micro_batch_sizes`) that the description allows is planned with `plan` on the
///   model regenerated at b and `N / b` micro-batches; candidates that do not fit, or are beyond
///   the planner limits, are skipped. The plan with the smallest iteration time wins (the same
///   global batch, so also the fastest per sample); ties (equal within 1e-9 relative, spec 4)
///   go to the larger b, which makes fewer tasks and launches fewer kernels in reality. A
///   description that sets `micro_batch_size` (`micro_batch_size_fixed`) fixes b: only it is tried.
///   With `estimate`, the candidates are planned in order of their estimate (ties: the smaller b
///   first) until `kBatchSizePlans` of them gave plans, or once one has, until the next would
///   take the work (`N / b` micro-batches times `gpus`, summed over the sizes planned) past
///   `kBatchSizeWork`; the others are not planned, and the notes say so with every estimate.
///   Without, every candidate is planned.
///   Cost: at most `kMaxBatchSizeCandidates` plans; more candidates are refused
///   (`InfeasibleError`), as is a search where no candidate gives a plan (the message names the
///   smallest and largest sizes tried and why they failed).
/// * A profiled model: M = N / `profile.batch_size`, planned once, with a warning that no other
///   size could be tried; `UsageError` naming `model_path` when the profile has no batch size or
///   it does not divide N.
GlobalBatchPlan plan_global_batch(const model::Model& model, std::int64_t global_batch,
                                  const std::string& model_path, const PlanFunction& plan,
                                  const EstimateFunction& estimate = {}, int gpus = 1);

}  // namespace pipeplan::planners
