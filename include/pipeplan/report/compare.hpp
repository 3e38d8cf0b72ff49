#pragma once
/// \file
/// `pipeplan compare`: scoring planner runs against each other and against their bounds, and
/// rendering the rows as an aligned table, a JSON array or CSV. The runs themselves are made
/// by the caller (one per planner and policy of `planners::planner_table()`).

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/plan.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {

/// One planner run: a planner under one policy, its plan or why it has none.
struct CompareRow {
  std::string planner;  ///< The planner's name.
  std::string options;  ///< What the run adds to the request: `--uniform`, or a megatron
                        ///< configuration `t4 p2 d2` (`--tensor-parallel 4 --pipeline-parallel 2
                        ///< --data-parallel 2`); empty for the planner as it is.
  schedule::Policy policy = schedule::Policy::kList;  ///< The policy it was scheduled with.
  bool baseline = true;                               ///< Counts as a baseline for the speed-ups.
  std::optional<Plan> plan;  ///< The plan; absent when the run was infeasible.
  std::string error;         ///< The infeasibility message when there is no plan.
  double planning_ms = 0;    ///< Wall time of the run, ms.
  /// The planner and its options: `spp`, `spp --uniform`, `megatron t4 p2 d2`.
  [[nodiscard]] std::string label() const {
    return options.empty() ? planner : planner + " " + options;
  }
};

/// The runs `compare` makes for `request`, row by row of the planner table: the planner under
/// each policy its row lists (`compare_policies`), then its variants (`planners::compare_variants`,
/// each under its default policy): today `spp --uniform` (unless the request is uniform
/// already), so that users see what uniformity costs, and, for a model whose layers split over
/// tensor-parallel groups, the `megatron` configurations that use every GPU (each degree T of
/// the request, each depth P with T P dividing the GPUs and at most the layers to split,
/// D = N / (T P)). Each run is made (`planners::make_plan`), an infeasible one keeps its
/// message; `done` is called after each. O(runs x planning).
std::vector<CompareRow> compare_planners(const planners::Request& request,
                                         const std::function<void(const CompareRow&)>& done);

/// The used GPU of a plan closest to its capacity (largest peak / capacity; ties: the first in
/// topology order), or, when no used GPU has a capacity, the one with the largest peak.
struct PeakMemory {
  int gpu = -1;                          ///< GPU index; -1 when the plan uses none.
  double peak_bytes = 0;                 ///< Its peak memory, bytes.
  std::optional<double> capacity_bytes;  ///< Its capacity; absent when unlimited.
  /// `peak_bytes / capacity_bytes` when the capacity is known and positive.
  [[nodiscard]] std::optional<double> fraction() const {
    if (!capacity_bytes || *capacity_bytes <= 0) return std::nullopt;
    return peak_bytes / *capacity_bytes;
  }
};

/// `PeakMemory` of `plan`. O(N).
PeakMemory peak_memory(const Plan& plan, const topology::Topology& topology);

/// `0-12x2 13-47x1`: each stage's layer range and replica count. O(S).
std::string stages_text(const Plan& plan);

/// The figures every format prints for one row, derived once; all absent for a row without a
/// plan.
struct CompareFigures {
  std::optional<double> speedup;          ///< Fastest baseline's iteration / this row's.
  std::optional<double> partition_ratio;  ///< Iteration / `partition_ms`.
  std::optional<double> any_plan_ratio;   ///< Iteration / `any_plan_ms`.
  PeakMemory memory;                      ///< The GPU closest to its capacity.
};

/// Scored rows: the figures of each (`figures[x]` belongs to `rows[x]`), the fastest row and
/// the fastest baseline row (the first such on ties; absent when no row has a plan).
struct Comparison {
  std::vector<CompareRow> rows;
  std::vector<CompareFigures> figures;
  std::optional<std::size_t> fastest;
  std::optional<std::size_t> fastest_baseline;
};

/// Scores `rows` in their order: speed-ups against the fastest baseline, ratios to the
/// bounds (`bound_ratio`), peak memory. O(rows x N).
Comparison score_comparison(std::vector<CompareRow> rows, const topology::Topology& topology);

/// The rows as a JSON array (keys in a fixed order; `planning_ms` only with `timing`), ending
/// in a newline. O(size of the plans' stages).
std::string comparison_json(const Comparison& comparison, bool timing,
                            const topology::Topology& topology);

/// The rows as CSV with a header line (RFC 4180 quoting; numbers as in JSON, empty when
/// absent; the `planning_ms` column only with `timing`).
std::string comparison_csv(const Comparison& comparison, bool timing);

/// The rows as a table with a header line, columns aligned (numbers to the right), the status
/// last (`feasible`, or `infeasible: ` and the reason).
std::string comparison_table(const Comparison& comparison, bool timing);

/// The renderings `compare --format` offers, the default first: `table`, `json`, `csv`.
const std::vector<std::string>& comparison_format_names();

/// The rows in the rendering named `format` (one of `comparison_format_names()`):
/// `comparison_table`, `comparison_json` or `comparison_csv`. `UsageError` for another name.
std::string comparison_text(const Comparison& comparison, std::string_view format, bool timing,
                            const topology::Topology& topology);

/// `fastest: spp (list) 412.7 ms; best baseline: gpipe (gpipe) 500 ms`, for standard error;
/// absent when no row has a plan.
std::optional<std::string> comparison_summary(const Comparison& comparison);

/// A CSV field: as is, or quoted (with doubled quotes) when it holds a comma, a quote or a
/// line break.
std::string csv_field(const std::string& text);

}  // namespace pipeplan::report
