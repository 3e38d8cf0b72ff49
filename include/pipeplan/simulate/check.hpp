#pragma once
/// \file
/// Checking a plan someone wrote (pipeplan or anyone else) against the execution model:
/// every rule of spec sections 3 and 4, reported as the first violation with the JSON pointer
/// of the entry involved.

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::simulate {

/// A compute entry as a plan states it (same fields as a replayed one).
using StatedCompute = TimedCompute;

/// A transfer entry as a plan states it (same fields as a replayed one).
using StatedTransfer = TimedTransfer;

/// An AllReduce entry as a plan states it.
struct StatedAllReduce {
  int stage = 0;
  std::vector<int> gpus;
  double bytes = 0;
  double start_ms = 0;
  double end_ms = 0;
};

/// An optimizer-step entry (spec 8.3) as a plan states it: `gpu` is the group's leader.
using StatedUpdate = TimedUpdate;

/// A stage's figures as a plan states them.
struct StatedStageFigures {
  double forward_ms = 0;
  double backward_ms = 0;
  double parameter_bytes = 0;
  double boundary_bytes = 0;
  double allreduce_ms = 0;
};

/// A GPU entry as a plan states it.
struct StatedGpu {
  int gpu = 0;
  std::vector<int> stages;  ///< `stage` (one), `stages` (several, v3) or none for `null`.
  double busy_ms = 0;
  double peak_memory_bytes = 0;
  bool memory_stated = false;          ///< Whether the entry has a `memory_bytes` key.
  std::optional<double> memory_bytes;  ///< Its capacity; empty for `null` (unlimited).
};

/// Everything a plan file states, with GPU ids already resolved to topology indices.
struct StatedPlan {
  std::string file;             ///< For messages.
  std::string planner;          ///< As stated (may be empty).
  std::string schedule_policy;  ///< As stated (may be empty).
  int micro_batches = 0;
  bool split_backward = false;        ///< `split_backward` (spec 9.2); false when absent.
  std::optional<int> virtual_stages;  ///< `virtual_stages` (spec 9.2), when stated.
  int context_parallel = 1;           ///< `context_parallel` (spec 10.2); 1 when absent.
  double iteration_ms = 0;
  std::optional<Bounds> bounds;
  std::optional<std::vector<int>> gpu_order;
  std::vector<Stage> stages;
  std::vector<std::optional<StatedStageFigures>> stage_figures;  ///< Per stage.
  std::vector<StatedCompute> compute;
  std::vector<StatedTransfer> transfers;
  std::vector<StatedAllReduce> allreduces;
  std::vector<StatedUpdate> updates;             ///< `schedule.updates`; empty when absent.
  Optimizer optimizer = Optimizer::kReplicated;  ///< `optimizer`; replicated when absent.
  std::optional<std::vector<StatedGpu>> gpus;
};

/// Positions in `stated.compute` ordered by GPU, then start, ties by position in the file: each
/// GPU's order as the plan states it (docs/formats.md). O(T log T).
std::vector<std::size_t> compute_by_gpu(const StatedPlan& stated);

/// Positions in `stated.transfers` ordered by sender, receiver, then start, ties by position:
/// each channel's order as the plan states it. O(T log T).
std::vector<std::size_t> transfers_by_channel(const StatedPlan& stated);

/// No entry: a stage without an AllReduce.
inline constexpr std::size_t kNoEntry = static_cast<std::size_t>(-1);

/// What `check_structure` establishes about a plan, for the checks and views built on it.
struct StatedIndex {
  std::vector<int> stage_of;                 ///< Per GPU: the (first) stage it serves, -1 when
                                             ///< unused.
  std::vector<int> device_of;                ///< Per stage: the first stage of its device.
  std::vector<std::size_t> entry;            ///< Per `TaskGraph` id of a compute task or
                                             ///< transfer: its position in `compute` or
                                             ///< `transfers`.
  std::vector<std::size_t> allreduce_entry;  ///< Per stage: position in `allreduces`, or
                                             ///< `kNoEntry`.
  std::vector<int> group_of;                 ///< Per GPU: its replica in its stage, -1 unused.
  std::vector<std::size_t> compute_order;    ///< `compute_by_gpu(stated)`.
  std::vector<std::size_t> transfer_order;   ///< `transfers_by_channel(stated)`.
};

/// The plan rules that need neither the model nor the topology, checked once for every way a
/// plan is read (`check_plan`, and `report::read_plan_view` of a plan file alone), so that a
/// broken plan gets the same message and JSON pointer either way. In this order:
/// `iteration_ms >= 0`; stages contiguous from layer 0 with at least one GPU each, no GPU in
/// two stages, stated figures >= 0; every compute task of the `TaskGraph` exactly once on a
/// GPU of its stage (a backward on its forward's GPU); every transfer exactly once between the
/// GPUs its forwards imply, bytes >= 0; 0 <= start <= end <= iteration_ms; no overlap on a
/// GPU or channel (entries ordered by start, ties by position in the file); every dependency
/// of spec section 3 on the stated times; one AllReduce per replicated stage over its GPUs in
/// ring order, after its last backward; `iteration_ms` the end of the last task; `gpu_order`
/// and `gpus` listing each of `gpu_ids` once, with the stages the placement implies and
/// figures >= 0. `gpu_ids[g]` names GPU index `g` in messages. Throws `InputError` naming the
/// file and JSON pointer of the first violation. Sizes nothing by the stated S M before the
/// entries' count is known to match it. O(T log T).
StatedIndex check_structure(const StatedPlan& stated, const std::vector<std::string>& gpu_ids);

/// The per-GPU and per-channel orders a structurally checked plan states: entries by start,
/// ties by position in the file. O(T).
Schedule stated_schedule(const StatedPlan& stated, const StatedIndex& index, int gpu_count);

/// The plan a structurally checked file states, all but its timeline and bounds: planner,
/// policy, stages, optimizer, GPU order (the input order when absent) and the per-resource
/// orders (`stated_schedule`). Both readers of a plan file, `check_plan` and
/// `report::read_plan_view`, assemble it here. O(T).
Plan stated_plan(const StatedPlan& stated, const StatedIndex& index, int gpu_count);

/// Checks `stated` against the model, topology and the execution model: first
/// `check_structure` (with the topology's GPU ids), then the rest in this order: the stages
/// cover the model's layers, the replay of the stated orders (a deadlock names the tasks),
/// durations and transfer sizes, starts equal to the replay, AllReduce sizes and times,
/// memory, the stated iteration time, bounds, stage figures and GPU figures (busy time, peak
/// memory, capacity as the topology gives it). Throws `InputError` naming the file, the JSON
/// pointer and the task for the first violation. Returns the recomputed plan. O(T log T).
Plan check_plan(const StatedPlan& stated, const model::Model& model,
                const topology::Topology& topology);

}  // namespace pipeplan::simulate
