#pragma once
// Internal to the report module: small helpers the export writers share.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/report/export.hpp"

namespace pipeplan::report::detail {

// `text` with &, <, >, " and ' replaced by entities, for XML and HTML text and attributes.
std::string xml_escape(std::string_view text);

// A coordinate or length with at most two decimals, trailing zeros removed: `12.5`, `300`.
std::string coordinate(double value);

// JSON with every value at depth >= `compact_depth` on one line, shallower containers one
// member per line (indent 1): one line per trace event or rank operation. Final newline.
std::string dump_compact_below(const nlohmann::ordered_json& value, int compact_depth);

// `F m3 s1`, `B m3 s1`: a compute task's short name.
std::string short_name(const ComputeTask& task);

// `0, 2`: stage numbers joined by `separator`.
std::string stage_list(const std::vector<int>& stages, const char* separator = ", ");

// `stage 1` for one stage, `stages 0, 2` for the stages of a device (spec 9.2).
std::string stages_text(const std::vector<int>& stages);

// The plan's and the model's file names for messages: `plan` and `model` when the view has none.
std::string plan_file(const PlanView& view);
std::string model_file(const PlanView& view);

// The name of GPU `gpu` of the view.
const std::string& gpu_id(const PlanView& view, int gpu);

// The iteration's title: `<model> on <topology>` (or `pipeplan plan` when both are unknown).
std::string plan_title(const PlanView& view);

// `iteration 412.7 ms, 1.03x the partition bound (401.9 ms), 1.09x the any-plan bound (...)`;
// a bound of 0 (unknown) is left out.
std::string iteration_text(const PlanView& view);

}  // namespace pipeplan::report::detail
