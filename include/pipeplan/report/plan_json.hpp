#pragma once
/// \file
/// `plan.json` (spec section 4): writing a plan deterministically, and reading one back
/// (from pipeplan or anyone else) for checking.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {

/// The schema string of a plan file without any field of spec 8.2.
inline constexpr const char* kPlanSchema = "pipeplan/plan/v1";
/// The schema string of a plan that uses a field of spec 8.2. Readers accept every string.
inline constexpr const char* kPlanSchemaV2 = "pipeplan/plan/v2";
/// The schema string of a plan that uses a field of spec 9.2 (a split backward, stages sharing
/// GPUs, or a policy of spec 9.4).
inline constexpr const char* kPlanSchemaV3 = "pipeplan/plan/v3";

/// Whether the plan needs the fields of spec 8.2: a stage with t > 1 or recomputation, a
/// sharded optimizer, or update tasks (a model with update times). Otherwise it is written
/// as v1, byte for byte as before.
bool plan_uses_v2_fields(const Plan& plan);

/// Whether the plan needs the fields of spec 9.2: a split backward, stages sharing GPUs, or a
/// schedule policy of spec 9.4. Such a plan is written as v3, with the v2 fields too.
bool plan_uses_v3_fields(const Plan& plan);

/// The plan as spec sections 4 and 8.2 lay it out, keys in a fixed order; numbers print in
/// their shortest round-tripping form, so the same plan always gives the same bytes. A v2 plan
/// adds `optimizer` (after `gpu_order`), `tensor_parallel` and `recompute` to every stage
/// (after `gpus`) and, when there are update tasks, `schedule.updates`.
nlohmann::ordered_json plan_to_json(const Plan& plan, const model::Model& model,
                                    const topology::Topology& topology);

/// The plan file's text: the same bytes as `io::dump_json(plan_to_json(...))`, written without
/// a DOM of the schedule's tasks (each task's JSON is made and dumped alone). O(T).
std::string plan_json_text(const Plan& plan, const model::Model& model,
                           const topology::Topology& topology);

/// `plan_json_text`'s bytes handed to `sink` in pieces of about 4 MiB (the last shorter), never
/// held whole: what `pipeplan plan` writes as it makes it. O(T).
void write_plan_json(const Plan& plan, const model::Model& model,
                     const topology::Topology& topology, const io::TextSink& sink);

/// Reads a plan file: types and ids are checked here (unknown keys are ignored, as spec
/// section 1 asks of plan readers); the rules of the execution model are checked by
/// `simulate::check_plan`. Throws `InputError` with the file and JSON pointer.
simulate::StatedPlan read_plan(const io::Source& source, const topology::Topology& topology);

/// A plan file read without its topology: GPU indices refer to the plan's own `gpus` list.
struct StandalonePlan {
  simulate::StatedPlan stated;                      ///< As `read_plan` gives it.
  std::vector<std::string> gpu_ids;                 ///< Per GPU index, from `/gpus`.
  std::vector<std::optional<double>> memory_bytes;  ///< Capacity per GPU; empty when unlimited.
  std::string model;                                ///< The stated model name (may be empty).
  std::string topology;                             ///< The stated topology name (may be empty).
};

/// Reads a plan file without its model and topology: `/gpus` (required here, at least one
/// entry, unique non-empty ids) names the GPUs the rest refers to; everything else is read as
/// `read_plan` reads it. Checks types and ids only. Throws `InputError` with the file and
/// JSON pointer. O(size of the file).
StandalonePlan read_standalone_plan(const io::Source& source);

}  // namespace pipeplan::report
