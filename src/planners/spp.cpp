// The main planner: the paper's three steps end to end.
//
// Reference: Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN Training",
// INFOCOM 2022. Complexity: the ordering (mincut_order.hpp), three DP runs (dp.hpp) and up to
// three list schedules with replays, O(T log T) each.

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

#include "pipeplan/error.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/format.hpp"

namespace pipeplan::planners {

Plan plan_spp(const Request& request, schedule::Policy policy) {
  const int N = request.topology.size();
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  const auto ordering_started = Clock::now();
  std::vector<std::vector<int>> candidates;
  ordering::OrderStats order_stats;
  candidates.push_back(ordering::mincut_order(request.topology, &order_stats));
  const double ordering_ms = since(ordering_started);
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
  // One candidate order under one schedule model: DP, then schedule and replay.
  struct Outcome {
    std::optional<Plan> plan;
    double dp_ms = 0;
    double scheduling_ms = 0;
    std::string note;
    std::optional<InfeasibleError> infeasible;
    std::exception_ptr failure;  // anything else: rethrown on the calling thread
  };
  auto evaluate = [&](std::size_t c, const partition::ScheduleModel& model) {
    Outcome out;
    try {
      const auto& order = candidates[c];
      const auto started = Clock::now();
      auto solution = partition::solve(request.model, request.topology, order, request.micro_batches, model);
      const double dp_ms = since(started);
      out.dp_ms = dp_ms;
      std::string name = c < 3 ? kCandidateNames[c] : "order";
      if (model.stashes > 0) name += " (" + std::to_string(model.stashes) + " stashes per replica)";
      if (!solution) {
        out.note = name + ": no placement fits (DP " + report::format_ms(dp_ms) + ")";
        return out;
      }
      const auto scheduling_started = Clock::now();
      try {
        Plan plan = finish_plan("spp", Partition{order, solution->stages}, request, policy);
        out.scheduling_ms = since(scheduling_started);
        out.note = name + ": DP estimate " + report::format_ms(solution->objective.total_ms) + " (latency " +
                   report::format_ms(solution->objective.latency_ms) + ", excess " +
                   report::format_ms(solution->objective.excess_ms) + ", tail " +
                   report::format_ms(solution->objective.tail_ms) + "), scheduled " +
                   report::format_ms(plan.timeline.iteration_ms) + ", " + std::to_string(solution->stages.size()) +
                   " stages, DP " + report::format_ms(dp_ms);
        out.plan = std::move(plan);
      } catch (const InfeasibleError& error) {
        out.note = name + ": " + error.what();
        out.infeasible = error;
      }
    } catch (...) {
      out.failure = std::current_exception();
    }
    return out;
  };

  std::optional<Plan> best;
  std::optional<InfeasibleError> last_error;
  std::vector<std::string> notes;
  double dp_ms = 0, scheduling_ms = 0;
  for (const partition::ScheduleModel& model : models) {
    // The candidates are independent: evaluate them on parallel threads, then merge in
    // candidate order, so the result does not depend on the number of threads.
    std::vector<Outcome> outcomes(candidates.size());
    std::vector<std::thread> workers;
    for (std::size_t c = 1; c < candidates.size(); ++c) {
      workers.emplace_back([&, c] { outcomes[c] = evaluate(c, model); });
    }
    outcomes[0] = evaluate(0, model);
    for (auto& worker : workers) worker.join();
    for (Outcome& out : outcomes) {
      if (out.failure) std::rethrow_exception(out.failure);
      notes.push_back(out.note);
      dp_ms += out.dp_ms;
      scheduling_ms += out.scheduling_ms;
      if (out.infeasible) last_error = out.infeasible;
      if (out.plan && (!best || out.plan->timeline.iteration_ms < best->timeline.iteration_ms)) best = std::move(out.plan);
    }
    if (best) break;  // the least demanding memory model that fits
  }
  if (best) {
    if (order_stats.spanning_tree_groups > 0) {
      best->warnings.push_back(
                   "min-cut order: " + std::to_string(order_stats.spanning_tree_gpus) + " GPUs in " +
                       std::to_string(order_stats.spanning_tree_groups) +
                       " group(s) without structure were ordered by maximum spanning tree, the "
                       "minimum cuts' work budget being spent (docs/algorithms.md)");
    }
    best->notes = notes;
    best->phase_ms = {{"ordering", ordering_ms}, {"DP", dp_ms}, {"scheduling", scheduling_ms}};
  }
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
