#pragma once
/// \file
/// What changed between two plans, in one line, for `plan --check`.

#include <nlohmann/json.hpp>
#include <string>

namespace pipeplan::report {

/// One line saying how `fresh` (a plan as `plan_to_json` makes it) differs from the plan file
/// text `existing_text`, in this order, `; `-separated: planner, schedule policy and
/// micro-batches (`planner gpipe -> spp`); stage layer ranges and replica counts
/// (`stages 0-3 x1 | 4-7 x1 -> 0-7 x2`); how many GPUs are used, else the GPUs of the stages
/// that changed (ids shortened beyond five), else `a different set of GPUs is used`; the
/// iteration time. When none of those differ, the top-level keys that do (`the schedule`, or
/// `formatting only (same content)`). An existing text that is not a JSON object says so.
/// Linear in the size of both plans, plus sorting their GPU ids.
std::string plan_difference(const std::string& existing_text, const nlohmann::ordered_json& fresh);

}  // namespace pipeplan::report
