// The main planner: the paper's three steps end to end, with the final choice made on the
// replayed time.
//
// Reference: Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN Training",
// INFOCOM 2022. The recipe is `spp_recipe` below, one line per step (docs/algorithms.md, "The
// recipe"): the candidate GPU orders, the DP's schedule models, every order searched (every
// shape replayed where few, else the DP's proposals and five other sources of starts refined by
// the four-phase replayed local search of search.hpp), the uniform search beside it, the notes.
// Every tuning constant is in partition/search_constants.hpp. "Does not fit" is a value
// (std::nullopt): `try_finish_plan` returns it per candidate, and `baseline_shape` and
// `megatron_shape`, the only places that catch InfeasibleError, turn the seeds' refusals into it.
// Complexity: the ordering (mincut_order.hpp), the DP runs (dp.hpp), then at most
// `SppSearch::max_work` (and as much again for phases 3 and 4) tasks scheduled and replayed per
// order and schedule model, O(T log T) per shape of T tasks.

#include <algorithm>
#include <cstdio>
#include <future>
#include <numeric>
#include <random>
#include <thread>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/partition/search.hpp"
#include "pipeplan/partition/search_constants.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/planners/schedule_choice.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"
#include "pipeplan/simulate/task_graph.hpp"

namespace pipeplan::planners {
namespace {

namespace tuning = partition::tuning;

// What replaying a shape of `stages` stages costs the search budget: its 4 S M tasks and the
// N GPUs of `request` (SppSearch::work is counted in these units).
double replay_work(const Request& request, std::size_t stages) {
  return 4.0 * static_cast<double>(stages) * static_cast<double>(request.micro_batches) +
         request.topology.size();
}

// --- "Does not fit" as a value. A partition that does not fit is `try_finish_plan`'s value
// (planner.cpp), asked per candidate; the baselines' partitions and megatron_partition, asked a
// few times per order for seeds, refuse by throwing InfeasibleError, which `baseline_shape` and
// `megatron_shape` turn into values. Every step below sees std::nullopt for a shape or seed that
// does not fit.

// The partition of a baseline planner, or nothing where it refuses the request.
std::optional<Partition> baseline_shape(const PlannerRow& baseline, const Request& request,
                                        schedule::Policy policy) {
  try {
    return baseline.partition(request, policy);
  } catch (const InfeasibleError&) {
    return std::nullopt;
  }
}

// Megatron-LM's stages for one configuration, or nothing for a depth or degree the model or
// GPUs cannot take (megatron_partition refuses some as usage errors).
std::optional<std::vector<Stage>> megatron_shape(const Request& fixed, schedule::Policy policy) {
  try {
    return megatron_partition(fixed, policy).stages;
  } catch (const InfeasibleError&) {
    return std::nullopt;
  } catch (const UsageError&) {
    return std::nullopt;
  }
}

// Megatron-LM's own placements as starts of spp's search on the input order, so that the search
// never ends slower than a megatron configuration it could reach. Under --uniform: every degree
// and depth within the task limit (D = floor(N / (t P))), tried while the budget lasts (small
// instances replay every shape anyway). For a model with tensor-parallel layers:
// `megatron_candidates`, most promising first (megatron_estimate); the first `budgeted` of
// them, whose replays together cost at most kMegatronSeedWork search budgets (and at least the
// first, whatever it costs), are evaluated whatever the budget. O(degrees x depths x (S + N))
// to make and rank them.
struct MegatronSeeds {
  std::vector<std::vector<Stage>> shapes;
  std::size_t budgeted = 0;
};

std::vector<Request> megatron_configurations_for(const Request& request,
                                                 const partition::StageChoices& choices) {
  if (!request.uniform) return megatron_candidates(request, choices);
  const int N = request.topology.size();
  const int L = static_cast<int>(request.model.layers.size());
  std::vector<Request> configurations;
  for (const int t : choices.degrees) {
    for (int P = 1; P <= std::min({L, N / t, max_stages_within_task_limit(request.micro_batches)});
         ++P) {
      Request fixed = request;
      fixed.tensor_parallel = {t};
      fixed.pipeline_parallel = P;
      configurations.push_back(std::move(fixed));
    }
  }
  return configurations;
}

MegatronSeeds megatron_seeds_for(const Request& request, const partition::StageChoices& choices,
                                 schedule::Policy policy, double search_work) {
  MegatronSeeds out;
  for (const Request& fixed : megatron_configurations_for(request, choices)) {
    if (auto shape = megatron_shape(fixed, policy)) out.shapes.push_back(std::move(*shape));
  }
  if (request.uniform) return out;
  std::vector<std::pair<double, std::size_t>> ranked;
  for (std::size_t x = 0; x < out.shapes.size(); ++x) {
    ranked.emplace_back(megatron_estimate(request, out.shapes[x], choices.optimizer), x);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<Stage>> sorted;
  sorted.reserve(ranked.size());
  for (const auto& entry : ranked) sorted.push_back(std::move(out.shapes[entry.second]));
  out.shapes = std::move(sorted);
  double cost = 0;
  for (const auto& seed : out.shapes) {
    cost += replay_work(request, seed.size());
    // The first always, whatever it costs.
    if (out.budgeted > 0 && cost > tuning::kMegatronSeedWork * search_work) break;
    ++out.budgeted;
  }
  return out;
}

// The partitions that seed the search: the planner table's rows marked `seeds_spp`, in order.
std::vector<const PlannerRow*> baseline_partitions() {
  std::vector<const PlannerRow*> rows;
  for (const PlannerRow& row : planner_table()) {
    if (row.seeds_spp && row.partition) rows.push_back(&row);
  }
  return rows;
}

// `1, 2, 4`.
std::string listed(const std::vector<int>& values) {
  std::string out;
  for (const int value : values) {
    if (!out.empty()) out += ", ";
    out += std::to_string(value);
  }
  return out;
}

// Why no stage can use the degrees of `--tensor-parallel`.
std::string no_degree_message(const Request& request) {
  Request all = request;
  all.tensor_parallel.clear();
  std::string message = "no stage can use tensor-parallel degree ";
  message += listed(request.tensor_parallel);
  message += ": the model's layers allow ";
  message += listed(candidate_degrees(all));
  message += " on ";
  message += std::to_string(request.topology.size());
  message += " GPUs (--tensor-parallel)";
  return message;
}

// Step 1, the candidate GPU orders: the min-cut order, its reverse and the input order, without
// repeats. O(ordering) (mincut_order.hpp).
struct CandidateOrders {
  std::vector<std::vector<int>> orders;
  ordering::OrderStats stats;
};

CandidateOrders candidate_orders(const topology::Topology& topology, PhaseClock* clock) {
  CandidateOrders out;
  {
    const PhaseTimer timer(clock, "ordering");
    out.orders.push_back(ordering::mincut_order(topology, &out.stats));
  }
  std::vector<int> reversed(out.orders.front().rbegin(), out.orders.front().rend());
  std::vector<int> input(static_cast<std::size_t>(topology.size()));
  std::iota(input.begin(), input.end(), 0);
  for (auto& order : {reversed, input}) {
    if (std::find(out.orders.begin(), out.orders.end(), order) == out.orders.end())
      out.orders.push_back(order);
  }
  return out;
}

// Step 2, what the DP assumes of the schedule: the list scheduler splits micro-batches by speed
// and throttles when memory is short; the fixed orders place micro-batch m on replica
// m mod r and need their stashes to fit. GPipe keeps all of a replica's micro-batches;
// 1F1B's depth depends on the stages after each one, so the DP runs with 1, 2, 4, ... stashes
// per replica, and every run's proposals are replayed under 1F1B. O(log M) models.
std::vector<partition::ScheduleModel> schedule_models(schedule::Policy policy, long M) {
  std::vector<partition::ScheduleModel> models;
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
  return models;
}

// One candidate order under one schedule model: its plan if any, and what the notes say.
struct Outcome {
  std::optional<Plan> plan;
  double dp_ms = 0;
  double search_ms = 0;  // the local search (its replays included), CPU time
  std::string note;
  std::exception_ptr failure;  // an error (never "does not fit"): rethrown on the calling thread
};

// The starting points of the local search on one order, and how many of them (the first) are
// evaluated whatever the budget.
struct Starts {
  std::vector<std::vector<Stage>> shapes;
  std::size_t always = 0;
};

bool is_identity(const std::vector<int>& order) {
  for (std::size_t x = 0; x < order.size(); ++x) {
    if (order[x] != static_cast<int>(x)) return false;
  }
  return true;
}

// The context every (order, schedule model) evaluation shares; evaluations are independent
// and run on parallel threads (`evaluate` is const and touches no shared state).
class SppRun {
 public:
  SppRun(const Request& request, schedule::Policy policy, const SppSearch& search,
         const partition::StageChoices& choices, const CandidateOrders& candidates)
      : request_(request),
        policy_(policy),
        search_(search),
        choices_(choices),
        orders_(candidates.orders),
        N_(request.topology.size()) {
    limits_.layers = static_cast<int>(request.model.layers.size());
    // Replicas beyond M are allowed: the list scheduler then picks the fastest free replicas,
    // which can beat every run of at most M GPUs on a mixed-speed order (the DP keeps r <= M).
    limits_.max_replicas = N_;
    // A searched plan may have at most kMaxSearchTasks tasks: the search stays within as many
    // stages.
    limits_.max_stages =
        std::min({max_stages_within_task_limit(request.micro_batches), limits_.layers, N_});
    restrict_shapes(request, choices, limits_);
    // Few enough shapes: every one is replayed on each order, whatever the DP's memory model.
    exhaustive_ =
        partition::count_shapes(limits_, N_, search.exhaustive_shapes) <= search.exhaustive_shapes;
  }

  bool exhaustive() const { return exhaustive_; }

  // Step 3 on order `c` under `model` (`first_model`: the first of the schedule models, the one
  // the Megatron seeds are tried under): every shape replayed where few, else `search`.
  Outcome evaluate(std::size_t c, const partition::ScheduleModel& model, bool first_model) const {
    static const char* const kCandidateNames[] = {"min-cut order", "reversed min-cut order",
                                                  "input order"};
    Outcome out;
    try {
      const auto& order = orders_[c];
      std::string name = c < 3 ? kCandidateNames[c] : "order";
      if (model.stashes > 0) name += " (" + std::to_string(model.stashes) + " stashes per replica)";
      std::string how;
      std::optional<partition::Found> found;
      std::optional<Plan> fastest;
      if (exhaustive_) {
        const PhaseTimer timer(nullptr, "search");
        found = replay_every_shape(order, how, fastest);
        out.search_ms = timer.elapsed_ms();
      } else {
        found = search(c, model, first_model, out, how, fastest);
      }
      if (!found) {
        out.note = name + ": no placement fits (" + how + ")";
        return out;
      }
      // The found shape was scheduled when it was replayed (a plan of 2^19 tasks takes about
      // 0.4 s to schedule and replay): its candidate is kept, completed only if spp's plan is
      // made of it (plan_spp), unless the search kept another of equal time.
      out.plan = fastest && fastest->stages == found->stages
                     ? std::move(*fastest)
                     : finish_plan("spp", Partition{order, found->stages}, request_, policy_);
      out.note = name + ": " + how + ", replayed " +
                 io::format_ms(out.plan->timeline.iteration_ms) + ", " +
                 std::to_string(found->stages.size()) + " stages, DP " + io::format_ms(out.dp_ms) +
                 ", search " + io::format_ms(out.search_ms);
    } catch (...) {
      out.failure = std::current_exception();
    }
    return out;
  }

 private:
  // Every shape is measured the same way: scheduled under the policy and replayed (nothing
  // where it does not fit). The fastest candidate made so far is kept in `fastest` (the first
  // of equal ones), so that the shape the search returns need not be scheduled again.
  partition::Evaluation replayed(const std::vector<int>& order, const std::vector<Stage>& stages,
                                 std::optional<Plan>& fastest) const {
    const double work = replay_work(request_, stages.size());
    std::optional<Plan> plan =
        try_candidate_plan("spp", Partition{order, stages}, request_, policy_).sketch;
    if (!plan) return {std::nullopt, work};
    const double ms = plan->timeline.iteration_ms;
    if (!fastest || ms < fastest->timeline.iteration_ms) fastest = std::move(plan);
    return {ms, work};
  }

  // Few enough shapes (at most SppSearch::exhaustive_shapes): replay them all (exact for the
  // replayed time on this order); the fastest is the one `replayed` kept.
  std::optional<partition::Found> replay_every_shape(const std::vector<int>& order,
                                                     std::string& how,
                                                     std::optional<Plan>& fastest) const {
    int shapes = 0;
    partition::for_each_shape(limits_, order, [&](const std::vector<Stage>& stages) {
      ++shapes;
      replayed(order, stages, fastest);
    });
    how = "all " + std::to_string(shapes) + " shapes replayed";
    if (!fastest) return std::nullopt;
    return partition::Found{fastest->stages, fastest->timeline.iteration_ms};
  }

  // Otherwise: the DP's proposals and the other starts (`starts_for`), refined by the replayed
  // local search within the budget of `budget()`.
  std::optional<partition::Found> search(std::size_t c, const partition::ScheduleModel& model,
                                         bool first_model, Outcome& out, std::string& how,
                                         std::optional<Plan>& fastest) const {
    const auto& order = orders_[c];
    partition::SolveOptions options;
    options.solutions = search_.dp_solutions;
    options.max_stages = limits_.max_stages;
    options.choices = choices_;
    PhaseTimer dp_timer(request_.clock, "DP");
    const auto solutions = partition::solve_several(request_.model, request_.topology, order,
                                                    request_.micro_batches, model, options);
    out.dp_ms = dp_timer.elapsed_ms();
    dp_timer.stop();
    const PhaseTimer timer(nullptr, "search");  // its replays are timed as "scheduling"
    const Starts starts = starts_for(c, model, first_model, solutions);
    // The DP's best shape is the search's first start, always replayed: its replay is kept as it
    // passes (no extra replay, the search unchanged) for the verbose line.
    DpReplay dp_replay;
    auto found = partition::local_search(
        request_.model, starts.shapes, starts.always, order, limits_,
        [&](const std::vector<Stage>& stages) {
          partition::Evaluation evaluation = replayed(order, stages, fastest);
          if (!dp_replay.seen && !solutions.empty() && stages == solutions.front().stages) {
            dp_replay = {true, evaluation.iteration_ms};
          }
          return evaluation;
        },
        budget());
    out.search_ms = timer.elapsed_ms();
    how = solutions.empty() ? std::string("DP found nothing") : dp_note(solutions, dp_replay);
    return found;
  }

  // The replay of the DP's best shape, as the search met it.
  struct DpReplay {
    bool seen = false;
    std::optional<double> iteration_ms;  ///< Empty when the shape does not fit.
  };

  // "DP estimate E (n solutions; its best, S stages, replays at R: estimate (E - R) / R)": how
  // well the DP's estimate tracks the replay of its own best shape. O(1).
  static std::string dp_note(const std::vector<partition::Solution>& solutions,
                             const DpReplay& dp_replay) {
    const double estimate = solutions.front().objective.total_ms;
    std::string note = "DP estimate " + io::format_ms(estimate) + " (" +
                       std::to_string(solutions.size()) + " solutions; its best, " +
                       std::to_string(solutions.front().stages.size()) + " stages,";
    if (!dp_replay.seen) return note + " not replayed)";
    if (!dp_replay.iteration_ms) return note + " does not fit when replayed)";
    const double replay = *dp_replay.iteration_ms;
    char error[32];
    std::snprintf(error, sizeof error, "%+.1f%%", 100.0 * (estimate - replay) / replay);
    return note + " replays at " + io::format_ms(replay) + ": estimate " + error + ")";
  }

  // The six sources of starting points, in this order; the first four are replayed whatever
  // the budget (the Megatron seeds only their first `budgeted`), the rest while it lasts:
  //   1. the DP's best solution;
  //   2. the greedy packings (`add_packings`);
  //   3. on the input order, the cheap baselines' shapes (`add_baselines`);
  //   4. on the input order, under the first schedule model or --uniform, the Megatron seeds
  //      (`megatron_seeds_for`, kMegatronSeedWork);
  //   5. the DP's other solutions (SppSearch::dp_solutions in all);
  //   6. SppSearch::restarts random shapes (none for spp; the slow reference search's).
  Starts starts_for(std::size_t c, const partition::ScheduleModel& model, bool first_model,
                    const std::vector<partition::Solution>& solutions) const {
    const auto& order = orders_[c];
    const bool input_order = is_identity(order);  // the orders are distinct: one is the input's
    Starts starts;
    if (!solutions.empty()) starts.shapes.push_back(solutions.front().stages);
    add_packings(order, model, starts.shapes);
    if (input_order) add_baselines(starts.shapes);
    const bool seeded = (request_.uniform || first_model) && input_order;
    auto [megatron_seeds, first_budgeted] =
        seeded ? megatron_seeds_for(request_, choices_, policy_, search_.work) : MegatronSeeds{};
    starts.always = starts.shapes.size() + first_budgeted;
    for (auto& seed : megatron_seeds) starts.shapes.push_back(std::move(seed));
    for (std::size_t x = 1; x < solutions.size(); ++x) starts.shapes.push_back(solutions[x].stages);
    std::mt19937 rng(search_.seed + static_cast<unsigned>(c));
    for (int x = 0; x < search_.restarts; ++x) {
      starts.shapes.push_back(partition::random_shape(rng, order, limits_));
    }
    return starts;
  }

  // Greedy packing at every degree and recomputation choice (one group per stage): at t = 1
  // without recomputation, section 3's packing. It fits whenever any packing with one GPU per
  // stage does, so a plan is found whenever memory allows one under the list schedule (the
  // DP's grid may miss it).
  void add_packings(const std::vector<int>& order, const partition::ScheduleModel& model,
                    std::vector<std::vector<Stage>>& starts) const {
    for (const int t : choices_.degrees) {
      for (const bool recompute : {false, true}) {
        if (recompute ? !(choices_.may_recompute || choices_.must_recompute)
                      : choices_.must_recompute) {
          continue;
        }
        if (auto packed = partition::greedy_packing(request_.model, request_.topology, order,
                                                    std::max(1L, model.stashes), limits_.max_stages,
                                                    nullptr, partition::Packing{t, recompute})) {
          starts.push_back(std::move(*packed));
        }
      }
    }
  }

  // The baselines' shapes when cheap to make (kMaxSeedSteps) and to replay: on the input order
  // the search then never ends slower than such a baseline rescheduled with the same policy.
  void add_baselines(std::vector<std::vector<Stage>>& starts) const {
    for (const PlannerRow* baseline : baseline_partitions()) {
      if (baseline->steps(request_) > tuning::kMaxSeedSteps) continue;
      std::optional<Partition> partition = baseline_shape(*baseline, request_, policy_);
      // Within the stage cap, and no dearer to replay than the whole search budget.
      if (partition && static_cast<int>(partition->stages.size()) <= limits_.max_stages &&
          replay_work(request_, partition->stages.size()) <= search_.work) {
        starts.push_back(std::move(partition->stages));
      }
    }
  }

  // The local search's budget (partition::SearchBudget): SppSearch's work, sweeps and maximum,
  // and phase 4's fill splits on this request.
  partition::SearchBudget budget() const {
    return partition::SearchBudget{
        search_.work,
        search_.sweeps,
        search_.max_work,
        search_.min_gain,
        search_.diverse,
        [this](const std::vector<Stage>& stages, double gamma, double cap) {
          return partition::fill_split(request_.model, request_.topology, stages,
                                       request_.micro_batches, gamma, cap);
        }};
  }

  const Request& request_;
  schedule::Policy policy_;
  const SppSearch& search_;
  const partition::StageChoices& choices_;
  const std::vector<std::vector<int>>& orders_;
  const int N_;
  partition::ShapeLimits limits_;
  bool exhaustive_ = false;
};

// What step 3 gathered over every order and schedule model.
struct Merged {
  std::optional<Plan> best;
  std::vector<std::string> notes;
};

// Step 3: every order under every schedule model. Per model the orders are evaluated on
// parallel threads, then merged in order, so the result does not depend on the number of
// threads; the fastest replayed plan over all of them wins (ties: the earlier), a search's
// candidate as it may be (plan_spp completes the plan it returns). Rethrows an evaluation's
// error.
Merged search_every_order(const SppRun& run, std::size_t orders,
                          const std::vector<partition::ScheduleModel>& models) {
  Merged merged;
  for (const partition::ScheduleModel& model : models) {
    const bool first_model = &model == &models.front();
    std::vector<Outcome> outcomes(orders);
    std::vector<std::thread> workers;
    for (std::size_t c = 1; c < orders; ++c) {
      workers.emplace_back([&, c] { outcomes[c] = run.evaluate(c, model, first_model); });
    }
    outcomes[0] = run.evaluate(0, model, first_model);
    for (auto& worker : workers) worker.join();
    for (Outcome& out : outcomes) {
      if (out.failure) std::rethrow_exception(out.failure);
      merged.notes.push_back(out.note);
      if (out.plan &&
          (!merged.best || out.plan->timeline.iteration_ms < merged.best->timeline.iteration_ms))
        merged.best = std::move(out.plan);
    }
  }
  return merged;
}

std::optional<Plan> spp_recipe(const Request& request, schedule::Policy policy,
                               const SppSearch& search, const partition::StageChoices& choices);
std::optional<Plan> with_list_stages(const Request& request, std::optional<Plan> plan,
                                     schedule::Policy policy, const SppSearch& search,
                                     const partition::StageChoices& choices,
                                     std::vector<std::string>& notes);

// Step 4: spp's shapes include --uniform's, but its search can miss them where the uniform
// search, whose moves change every stage at once, finds them (bert-48 on geo-distributed: 3163
// ms against 2875 ms). For a model without tensor-parallel layers (where no Megatron seeds start
// the search) the uniform search (this recipe under --uniform) runs too, on a thread of its own
// beside step 3, and its plan is kept when strictly faster, so spp is never slower than `spp
// --uniform`. About 1.6 times the work; plans it does not beat are unchanged. (Where every shape
// was replayed, none can be faster: it does not run, and the future is empty.)
std::future<std::optional<Plan>> start_uniform_search(const Request& request,
                                                      schedule::Policy policy,
                                                      const SppSearch& search,
                                                      const partition::StageChoices& choices,
                                                      const SppRun& run) {
  if (request.uniform || run.exhaustive() || model::has_tensor_parallel_layers(request.model)) {
    return {};
  }
  return std::async(std::launch::async, [&request, policy, &search, &choices] {
    Request uniform = request;
    uniform.uniform = true;
    partition::StageChoices uniform_choices = choices;
    uniform_choices.uniform = true;
    return spp_recipe(uniform, policy, search, uniform_choices);
  });
}

// Step 4, after step 3: the uniform search's plan replaces the best where faster by more than
// kUniformMargin (its phases were timed on the request's clock either way).
void keep_uniform_if_faster(Merged& merged, std::future<std::optional<Plan>>& uniform_search) {
  if (!uniform_search.valid()) return;
  std::optional<Plan> uniform_plan = uniform_search.get();
  if (!uniform_plan) {
    merged.notes.push_back("uniform search: no plan");
    return;
  }
  const bool kept =
      !merged.best || uniform_plan->timeline.iteration_ms <
                          merged.best->timeline.iteration_ms * (1 - tuning::kUniformMargin);
  merged.notes.push_back("uniform search: replayed " +
                         io::format_ms(uniform_plan->timeline.iteration_ms) +
                         (kept ? ", kept" : ", not kept"));
  if (kept) {
    uniform_plan->notes.clear();
    uniform_plan->warnings.clear();
    merged.best = std::move(uniform_plan);
  }
}

// Step 5: the best plan with the notes and the ordering's warning.
Plan annotated(Merged merged, const CandidateOrders& candidates) {
  Plan best = std::move(*merged.best);
  if (candidates.stats.spanning_tree_groups > 0) {
    best.warnings.push_back(
        "min-cut order: " + std::to_string(candidates.stats.spanning_tree_gpus) + " GPUs in " +
        std::to_string(candidates.stats.spanning_tree_groups) +
        " group(s) without structure were ordered by maximum spanning tree, the "
        "minimum cuts' work budget being spent (docs/algorithms.md)");
  }
  best.notes = std::move(merged.notes);
  return best;
}

// The recipe: spp's steps in order, each a named function with its budget (the constants:
// partition/search_constants.hpp; the steps: docs/algorithms.md, "The final choice"). Nothing
// where no placement fits. The plan may be a search's candidate (`Candidate`): plan_spp
// completes the one it returns, once.
std::optional<Plan> spp_recipe(const Request& request, schedule::Policy policy,
                               const SppSearch& search, const partition::StageChoices& choices) {
  // 1. The candidate GPU orders: min-cut, reversed, input (the ordering's own work limit).
  const CandidateOrders candidates = candidate_orders(request.topology, request.clock);
  // 2. What the DP assumes of the schedule: one model, or 1, 2, 4, ... stashes under 1F1B.
  std::vector<partition::ScheduleModel> models = schedule_models(policy, request.micro_batches);
  const SppRun run(request, policy, search, choices, candidates);
  if (run.exhaustive()) models.resize(1);  // every shape is replayed: one model is enough
  // 4. The uniform search (this recipe under --uniform), started on a thread beside step 3.
  auto uniform_search = start_uniform_search(request, policy, search, choices, run);
  // 3. Every order under every model: a) at most SppSearch::exhaustive_shapes shapes, all
  //    replayed; b) else the DP's proposals and the other starts, then the four-phase local
  //    search (SppSearch::work, up to SppSearch::max_work, per order and model).
  Merged merged = search_every_order(run, candidates.orders.size(), models);
  // 4. (continued) The uniform search's plan where strictly faster (kUniformMargin).
  keep_uniform_if_faster(merged, uniform_search);
  //    Under a fixed policy, the list search's stages under it where strictly faster.
  if (schedule::policy_row(policy).fixed) {
    merged.best =
        with_list_stages(request, std::move(merged.best), policy, search, choices, merged.notes);
  }
  if (!merged.best) return std::nullopt;
  // 5. The notes and the ordering's warning.
  return annotated(std::move(merged), candidates);
}

// Under a fixed policy the search replays its shapes under that policy, whose memory and
// stalls its DP models only roughly; the list search's stages rescheduled under the policy
// are one more candidate, kept where strictly faster (resnet50 on geo-distributed under 1f1b:
// 11,277 ms from the fixed search, 2,702 ms on the list search's two stages). O(one search).
std::optional<Plan> with_list_stages(const Request& request, std::optional<Plan> plan,
                                     schedule::Policy policy, const SppSearch& search,
                                     const partition::StageChoices& choices,
                                     std::vector<std::string>& notes) {
  const std::optional<Plan> list_plan =
      spp_recipe(request, schedule::Policy::kList, search, choices);
  if (!list_plan || schedule::policy_refusal(policy, list_plan->stages, request.micro_batches)) {
    return plan;
  }
  Finished finished =
      try_finish_plan("spp", Partition{list_plan->gpu_order, list_plan->stages}, request, policy);
  if (!finished.plan) return plan;
  const double ms = finished.plan->timeline.iteration_ms;
  if (plan && (ms >= plan->timeline.iteration_ms ||
               simulate::times_equal(ms, plan->timeline.iteration_ms))) {
    return plan;
  }
  notes.push_back("the list search's stages under " + std::string(schedule::policy_name(policy)) +
                  ": " + io::format_ms(ms) + ", kept");
  return finished.plan;
}

// Why spp found no plan: under a fixed schedule, whether the list schedule has one (which
// plans again under it); else the binding memory constraint (infeasibility_message).
[[noreturn]] void refuse(const Request& request, schedule::Policy policy, const SppSearch& search,
                         const partition::StageChoices& choices) {
  if (schedule::policy_row(policy).fixed) {
    const std::optional<Plan> list_plan =
        spp_recipe(request, schedule::Policy::kList, search, choices);
    if (list_plan && list_plan->timeline.iteration_ms > 0) {
      throw InfeasibleError("no placement fits in GPU memory under the " +
                            std::string(schedule::policy_name(policy)) + " schedule, which keeps " +
                            (policy == schedule::Policy::kGpipe
                                 ? "every micro-batch of a replica in flight"
                                 : "its warm-up micro-batches in flight") +
                            "; the default list schedule, which waits for memory instead, has a "
                            "plan (--schedule list)");
    }
  }
  throw InfeasibleError(infeasibility_message(request));
}

}  // namespace

int max_stages_within_task_limit(int micro_batches) {
  // The largest S with TaskGraph::chain_task_count(S, M) <= kMaxSearchTasks (the count grows by
  // the same number of tasks per stage), at least 1.
  const std::int64_t M = micro_batches;
  const std::int64_t none = simulate::TaskGraph::chain_task_count(0, M);
  const std::int64_t per_stage = simulate::TaskGraph::chain_task_count(1, M) - none;
  return static_cast<int>(
      std::clamp<std::int64_t>((kMaxSearchTasks - none) / per_stage, 1, std::int64_t{1} << 30));
}

namespace {

bool strictly_faster(const Plan& a, const Plan& b) {
  return a.timeline.iteration_ms < b.timeline.iteration_ms &&
         !simulate::times_equal(a.timeline.iteration_ms, b.timeline.iteration_ms);
}

// Steps 1-5 for `request`; when the backward splits, the search runs with the whole backward
// too and the split plan is kept only when strictly faster: a split changes what the search
// prefers (the weight stash stays until W) and the search is a heuristic, so splitting is never
// slower (MT-NLG 530B on 3,360 GPUs: 34.05 s split, 29.57 s whole), and a problem it does not
// speed up keeps its whole-backward (v1 or v2) plan. `uniform` restricts the search to uniform
// plans.
std::optional<Plan> searched_plan(const Request& request, schedule::Policy policy,
                                  const SppSearch& search, partition::StageChoices choices,
                                  bool uniform) {
  Request asked = request;
  if (uniform) {
    asked.uniform = true;
    choices.uniform = true;
  }
  if (!uses_split_backward(asked, policy)) return spp_recipe(asked, policy, search, choices);
  Request whole = asked;
  whole.split_backward = SplitBackward::kNever;
  std::optional<Plan> plan = spp_recipe(whole, policy, search, choices);
  std::optional<Plan> split = spp_recipe(asked, policy, search, choices);
  if (split && (!plan || strictly_faster(*split, *plan))) return split;
  if (plan && split) {
    plan->notes.push_back("a split backward (" + io::format_ms(split->timeline.iteration_ms) +
                          ") was not faster");
  }
  return plan;
}

}  // namespace

Plan plan_spp(const Request& request, schedule::Policy policy, const SppSearch& search) {
  // Spec 8.4: the degrees, recomputation and optimizer each stage may use (a v1 request: t = 1,
  // no recomputation, so the search is that of sections 1-7).
  const partition::StageChoices choices = stage_choices(request);
  if (choices.degrees.empty()) throw InfeasibleError(no_degree_message(request));
  // A policy of two stages per device (zb-v) searches one stage per device under 1f1b, whose
  // activation memory it shares (spec 9.4), and spreads the devices below.
  const schedule::PolicyRow& row = schedule::policy_row(policy);
  const schedule::Policy searched =
      row.device_stages == schedule::DeviceStages::kTwo ? schedule::Policy::kOneFOneB : policy;
  // Spreading devices over V stages needs one replica count and degree (virtual_variant).
  const bool spreads = row.fixed && row.device_stages != schedule::DeviceStages::kOne &&
                       virtual_stages_of(request, policy) > 1;
  std::optional<Plan> plan = searched_plan(request, searched, search, choices, spreads);
  if (!plan) refuse(request, searched, search, choices);
  // 6. The schedule of the chosen stages: never slower than a fixed policy on them, and under
  //    --schedule auto the devices with several stages each too (schedule_choice.hpp).
  //    Under a multi-stage policy with V > 1, the chosen devices hold V stages each.
  Plan out =
      fastest_schedule(request, spread_over_devices(request, std::move(*plan), policy), policy);
  // Under --schedule auto a plan of mixed replica counts or degrees has no multi-stage variants:
  // the uniform search's plan and its variants are tried too (Megatron-LM's interleaved
  // configurations are uniform).
  if (request.schedule_auto && !request.uniform && !is_uniform(out.stages)) {
    if (std::optional<Plan> uniform = searched_plan(request, searched, search, choices, true)) {
      Plan candidate = fastest_schedule(request, std::move(*uniform), policy);
      if (strictly_faster(candidate, out)) {
        candidate.notes.push_back("the uniform search's plan and schedules were faster");
        out = std::move(candidate);
      }
    }
  }
  return complete_plan(std::move(out), request);
}

}  // namespace pipeplan::planners
