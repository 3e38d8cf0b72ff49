#pragma once
/// \file
/// Planners by name, and the common last step every planner shares: schedule the chosen
/// stages, replay them through the execution model, check memory, compute the bounds.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::planners {

/// What every planner is asked.
struct Request {
  const model::Model& model;
  const topology::Topology& topology;
  int micro_batches = 1;
};

/// A planner's choice before scheduling.
struct Partition {
  std::vector<int> gpu_order;  ///< Every GPU once, in the order the planner considered them.
  std::vector<Stage> stages;
};

/// Turns a partition into a complete plan: schedules it with `policy`, replays the schedule
/// (so every time is the execution model's), checks memory and computes the bounds. Throws
/// `InfeasibleError` when the schedule exceeds a GPU's memory, `InternalError` when the
/// scheduler and the replay disagree.
Plan finish_plan(std::string planner, const Partition& partition, const Request& request,
                 schedule::Policy policy);

/// The planners, in the order `compare` lists them: `spp` first.
const std::vector<std::string>& planner_names();

/// The policy a planner uses unless told otherwise.
schedule::Policy default_policy(std::string_view planner);

/// Runs the planner `name` (one of `planner_names()`), rescheduled with `policy` when given.
/// Throws `UsageError` for an unknown name and `InfeasibleError` when nothing fits.
Plan make_plan(std::string_view name, const Request& request,
               std::optional<schedule::Policy> policy = std::nullopt);

/// The main planner (spec section 5): recursive min-cut GPU order, DP partition and
/// placement, list scheduling. The DP runs on the min-cut order, its reverse and the input
/// order; the plan with the smallest replayed iteration time is kept (ties: that order).
Plan plan_spp(const Request& request, schedule::Policy policy = schedule::Policy::kList);

/// Explains why nothing fits: what the most demanding layer needs alone against the largest
/// GPU, or the model's static memory against all GPUs together.
std::string infeasibility_message(const Request& request);

}  // namespace pipeplan::planners
