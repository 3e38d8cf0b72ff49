// The main planner: the paper's three steps end to end.
//
// Reference: Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN Training",
// INFOCOM 2022. Complexity: the ordering (mincut_order.hpp), three DP runs (dp.hpp) and up to
// three list schedules with replays, O(T log T) each.

#include <algorithm>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::planners {

Plan plan_spp(const Request& request, schedule::Policy policy) {
  const int N = request.topology.size();
  std::vector<std::vector<int>> candidates;
  candidates.push_back(ordering::mincut_order(request.topology));
  std::vector<int> reversed(candidates.front().rbegin(), candidates.front().rend());
  std::vector<int> input(static_cast<std::size_t>(N));
  std::iota(input.begin(), input.end(), 0);
  for (auto& order : {reversed, input}) {
    if (std::find(candidates.begin(), candidates.end(), order) == candidates.end()) candidates.push_back(order);
  }

  std::optional<Plan> best;
  std::optional<InfeasibleError> last_error;
  for (const auto& order : candidates) {
    auto solution = partition::solve(request.model, request.topology, order, request.micro_batches);
    if (!solution) continue;
    try {
      Plan plan = finish_plan("spp", Partition{order, solution->stages}, request, policy);
      if (!best || plan.timeline.iteration_ms < best->timeline.iteration_ms) best = std::move(plan);
    } catch (const InfeasibleError& error) {
      last_error = error;  // a fixed-order policy may not fit where the list schedule would
    }
  }
  if (!best) {
    if (last_error) throw *last_error;
    throw InfeasibleError(infeasibility_message(request));
  }
  return std::move(*best);
}

}  // namespace pipeplan::planners
