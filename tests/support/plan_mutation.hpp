#pragma once
// A plan file changed by a test and read back as `simulate` reads it: the checker's message.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::testing {

/// `json` (a plan as plan.json holds it) changed by `mutate`, read and checked against `model`
/// and `topology`: the InputError's message, or "no error".
inline std::string mutated_plan_error(const nlohmann::ordered_json& json, const model::Model& model,
                                      const topology::Topology& topology,
                                      const std::function<void(nlohmann::ordered_json&)>& mutate) {
  nlohmann::ordered_json copy = json;
  mutate(copy);
  try {
    io::Source source = io::source_from_text("plan.json", io::dump_json(copy));
    simulate::check_plan(report::read_plan(source, topology), model, topology);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace pipeplan::testing
