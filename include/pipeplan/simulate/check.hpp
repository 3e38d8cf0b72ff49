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
  std::optional<int> stage;
  double busy_ms = 0;
  double peak_memory_bytes = 0;
};

/// Everything a plan file states, with GPU ids already resolved to topology indices.
struct StatedPlan {
  std::string file;                   ///< For messages.
  std::string planner;                ///< As stated (may be empty).
  std::string schedule_policy;        ///< As stated (may be empty).
  int micro_batches = 0;
  double iteration_ms = 0;
  std::optional<Bounds> bounds;
  std::optional<std::vector<int>> gpu_order;
  std::vector<Stage> stages;
  std::vector<std::optional<StatedStageFigures>> stage_figures;  ///< Per stage.
  std::vector<StatedCompute> compute;
  std::vector<StatedTransfer> transfers;
  std::vector<StatedAllReduce> allreduces;
  std::optional<std::vector<StatedGpu>> gpus;
};

/// Positions in `stated.compute` ordered by GPU, then start, ties by position in the file: each
/// GPU's order as the plan states it (docs/formats.md). O(T log T).
std::vector<std::size_t> compute_by_gpu(const StatedPlan& stated);

/// Positions in `stated.transfers` ordered by sender, receiver, then start, ties by position:
/// each channel's order as the plan states it. O(T log T).
std::vector<std::size_t> transfers_by_channel(const StatedPlan& stated);

/// Checks `stated` against the model, topology and the execution model, in this order:
/// stages, task set and placement (via the replay of the per-resource orders: entries of one
/// GPU or channel ordered by start, ties by position in the file), durations, overlaps on a
/// GPU or channel, dependencies, starts equal to the replay, AllReduces, memory, the stated
/// iteration time, bounds, stage figures and GPU figures. Throws `InputError` naming the file,
/// the JSON pointer and the task for the first violation. Returns the recomputed plan.
/// O(T log T).
Plan check_plan(const StatedPlan& stated, const model::Model& model,
                const topology::Topology& topology);

}  // namespace pipeplan::simulate
