#pragma once
/// \file
/// Human summaries of plans for standard error, and the figures `simulate --json` prints.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {

/// `value / bound` when the bound is positive and the ratio finite, else nothing: a bound of
/// 5e-324 ms (denormal layer times) under an iteration of 1 ms has no ratio a double holds.
std::optional<double> bound_ratio(double value, double bound);

/// `layers 0-12` or `layer 5`, with names when the model has them.
std::string layer_range(const model::Model& model, int first, int last);

/// `stage 3`, `stages 0 and 2`, `stages 0, 4, 8 and 12`, or for more than four a constant step
/// apart `stages 0, 4, ..., 76` (`stages 0 to 9` for a step of 1). `stages` is ascending and not
/// empty.
std::string stage_names(const std::vector<int>& stages);

/// A line of totals, a line per stage and a line for the iteration: GPUs per stage, times, and
/// the iteration's ratio to both bounds. A run of three or more consecutive stages that read
/// alike (as many layers each, the same GPU count and shape, the same times) shares one line,
/// so that a plan of 128 one-layer stages stays a summary. No trailing newline.
std::string plan_summary(const Plan& plan, const model::Model& model,
                         const topology::Topology& topology);

/// Per-GPU utilisation, bubble and peak memory against capacity, one line per used GPU; a run
/// of three or more GPUs next to each other in the topology that read alike shares one line
/// (`node0/gpu0 .. node7/gpu7 (64 GPUs, each stage 3): ...`), so that 16,384 GPUs do not print
/// 16,384 lines.
std::string gpu_summary(const Plan& plan, const topology::Topology& topology);

/// The figures of `simulate --json`: `iteration_ms`, `bounds`, ratios, and per GPU `id`,
/// `stage`, `busy_ms`, `bubble_fraction`, `peak_memory_bytes`, `memory_bytes`.
nlohmann::ordered_json simulation_figures(const Plan& plan, const topology::Topology& topology);

}  // namespace pipeplan::report
