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

/// One line per stage and a line of totals: stages, GPUs per stage, iteration time and its
/// ratio to both bounds. No trailing newline.
std::string plan_summary(const Plan& plan, const model::Model& model,
                         const topology::Topology& topology);

/// Per-GPU utilisation, bubble and peak memory against capacity, one line per used GPU.
std::string gpu_summary(const Plan& plan, const topology::Topology& topology);

/// The figures of `simulate --json`: `iteration_ms`, `bounds`, ratios, and per GPU `id`,
/// `stage`, `busy_ms`, `bubble_fraction`, `peak_memory_bytes`, `memory_bytes`.
nlohmann::ordered_json simulation_figures(const Plan& plan, const topology::Topology& topology);

}  // namespace pipeplan::report
