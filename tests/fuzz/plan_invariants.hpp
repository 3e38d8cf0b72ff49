#pragma once
// For the fuzz targets: what every valid plan satisfies.

#include <cmath>
#include <string>

#include "fuzz_support.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::fuzz {

/// Aborts unless `plan` (valid for `model` and `topology`) has finite times no better than
/// its lower bounds, and passes `simulate::check_plan` again, with the same figures, once
/// written as plan.json and read back. `what` names the plan in the message.
inline void check_plan_invariants(const Plan& plan, const model::Model& model,
                                  const topology::Topology& topology, const std::string& what) {
  const double iteration = plan.timeline.iteration_ms;
  if (!std::isfinite(iteration) || iteration < 0) bug(what + " has a non-finite iteration time");
  const auto below = [&](double bound) { return iteration < bound * (1 - 1e-9) - 1e-9; };
  if (below(plan.bounds.any_plan_ms)) bug(what + " beats the any-plan bound");
  if (below(plan.bounds.partition_ms)) bug(what + " beats its partition bound");

  const std::string text = io::dump_json(report::plan_to_json(plan, model, topology));
  Plan again;
  expect_only({}, [&] {
    again = simulate::check_plan(
        report::read_plan(io::source_from_text("written.json", text), topology), model, topology);
  });
  if (!simulate::times_equal(again.timeline.iteration_ms, iteration)) {
    bug(what + " changed its iteration time when written and read back");
  }
}

}  // namespace pipeplan::fuzz
