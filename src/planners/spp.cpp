// The main planner: the paper's three steps end to end.
//
// Reference: Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN Training",
// INFOCOM 2022. Complexity: the ordering (mincut_order.hpp), three DP runs (dp.hpp) and up to
// three list schedules with replays, O(T log T) each.

#include <algorithm>
#include <chrono>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/format.hpp"

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

  // What the DP assumes of the schedule: the list scheduler splits micro-batches by speed
  // and throttles when memory is short; the fixed orders place micro-batch m on replica
  // m mod r and need their stashes to fit. GPipe keeps all of a replica's micro-batches;
  // 1F1B's depth depends on the stages after each one, so the DP asks for 1, 2, 4, ... stashes
  // per replica until the schedule fits.
  std::vector<partition::ScheduleModel> models;
  const long M = request.micro_batches;
  if (policy == schedule::Policy::kList) {
    models.push_back({false, 0});
  } else if (policy == schedule::Policy::kGpipe) {
    models.push_back({true, M});
  } else {
    for (long k = 1;; k *= 2) {
      models.push_back({true, std::min(k, M)});
      if (k >= M) break;
    }
  }

  static const char* const kCandidateNames[] = {"min-cut order", "reversed min-cut order", "input order"};
  std::optional<Plan> best;
  std::optional<InfeasibleError> last_error;
  std::vector<std::string> notes;
  for (const partition::ScheduleModel& model : models) {
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const auto& order = candidates[c];
      const auto started = std::chrono::steady_clock::now();
      auto solution = partition::solve(request.model, request.topology, order, request.micro_batches, model);
      const double dp_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
      std::string name = c < 3 ? kCandidateNames[c] : "order";
      if (model.stashes > 0) name += " (" + std::to_string(model.stashes) + " stashes per replica)";
      if (!solution) {
        notes.push_back(name + ": no placement fits (DP " + report::format_ms(dp_ms) + ")");
        continue;
      }
      try {
        Plan plan = finish_plan("spp", Partition{order, solution->stages}, request, policy);
        notes.push_back(name + ": DP estimate " + report::format_ms(solution->objective.total_ms) + " (latency " +
                        report::format_ms(solution->objective.latency_ms) + ", excess " +
                        report::format_ms(solution->objective.excess_ms) + ", tail " +
                        report::format_ms(solution->objective.tail_ms) + "), scheduled " +
                        report::format_ms(plan.timeline.iteration_ms) + ", " +
                        std::to_string(solution->stages.size()) + " stages, DP " + report::format_ms(dp_ms));
        if (!best || plan.timeline.iteration_ms < best->timeline.iteration_ms) best = std::move(plan);
      } catch (const InfeasibleError& error) {
        notes.push_back(name + ": " + error.what());
        last_error = error;
      }
    }
    if (best) break;  // the least demanding memory model that fits
  }
  if (best) best->notes = notes;
  if (!best) {
    if (last_error) throw *last_error;
    if (policy != schedule::Policy::kList &&
        partition::solve(request.model, request.topology, candidates.front(), request.micro_batches)) {
      throw InfeasibleError(
          "no placement fits in GPU memory under the " + std::string(schedule::policy_name(policy)) +
          " schedule, which keeps " +
          (policy == schedule::Policy::kGpipe ? "every micro-batch of a replica in flight"
                                              : "its warm-up micro-batches in flight") +
          "; the default list schedule, which waits for memory instead, has a plan (--schedule list)");
    }
    throw InfeasibleError(infeasibility_message(request));
  }
  return std::move(*best);
}

}  // namespace pipeplan::planners
