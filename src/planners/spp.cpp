// The main planner: the paper's three steps end to end, with the final choice made on the
// replayed time.
//
// Reference: Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN Training",
// INFOCOM 2022. Per candidate GPU order (three, on parallel threads): the DP (dp.hpp) proposes
// its best few solutions by its estimate; with the greedy memory packing (search.hpp) they seed
// a local search whose every move is scheduled and replayed under the requested policy, so the
// plan kept is the fastest the replay found. When an order allows few enough shapes
// (`SppSearch::exhaustive_shapes`), every one is replayed instead: exact on small instances.
// Complexity: the ordering (mincut_order.hpp), the DP runs (dp.hpp), then at most
// `SppSearch::work` tasks scheduled and replayed per order, O(T log T) per shape of T tasks.

#include <algorithm>
#include <chrono>
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
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/simulate/execution.hpp"

namespace pipeplan::planners {
namespace {

// What replaying a shape of `stages` stages costs the search budget: its 4 S M tasks and the
// N GPUs of `request` (SppSearch::work is counted in these units).
double replay_work(const Request& request, std::size_t stages) {
  return 4.0 * static_cast<double>(stages) * static_cast<double>(request.micro_batches) +
         request.topology.size();
}

// Megatron configurations seeding spp (models with tensor-parallel layers) are replayed
// whatever the search budget while their replays cost at most this many budgets.
constexpr double kMegatronSeedWork = 16;

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

MegatronSeeds megatron_seeds_for(const Request& request, const partition::StageChoices& choices,
                                 schedule::Policy policy, double search_work) {
  const int N = request.topology.size();
  const int L = static_cast<int>(request.model.layers.size());
  std::vector<Request> configurations;
  if (request.uniform) {
    for (const int t : choices.degrees) {
      for (int P = 1;
           P <= std::min({L, N / t, max_stages_within_task_limit(request.micro_batches)}); ++P) {
        Request fixed = request;
        fixed.tensor_parallel = {t};
        fixed.pipeline_parallel = P;
        configurations.push_back(std::move(fixed));
      }
    }
  } else {
    configurations = megatron_candidates(request, choices);
  }
  MegatronSeeds out;
  for (const Request& fixed : configurations) {
    try {
      out.shapes.push_back(megatron_partition(fixed, policy).stages);
    } catch (const InfeasibleError&) {  // a depth the model or GPUs cannot take
    } catch (const UsageError&) {
    }
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
    if (out.budgeted > 0 && cost > kMegatronSeedWork * search_work) break;  // the first always
    ++out.budgeted;
  }
  return out;
}

// Baselines whose search takes at most this many steps (`planning_steps`) seed spp's search.
constexpr double kMaxSeedSteps = 2e5;

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

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Step 1's candidate GPU orders: the min-cut order, its reverse and the input order, without
// repeats. O(ordering) (mincut_order.hpp).
struct CandidateOrders {
  std::vector<std::vector<int>> orders;
  ordering::OrderStats stats;
  double ordering_ms = 0;
};

CandidateOrders candidate_orders(const topology::Topology& topology) {
  CandidateOrders out;
  const auto started = Clock::now();
  out.orders.push_back(ordering::mincut_order(topology, &out.stats));
  out.ordering_ms = ms_since(started);
  std::vector<int> reversed(out.orders.front().rbegin(), out.orders.front().rend());
  std::vector<int> input(static_cast<std::size_t>(topology.size()));
  std::iota(input.begin(), input.end(), 0);
  for (auto& order : {reversed, input}) {
    if (std::find(out.orders.begin(), out.orders.end(), order) == out.orders.end())
      out.orders.push_back(order);
  }
  return out;
}

// What the DP assumes of the schedule: the list scheduler splits micro-batches by speed
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
  double scheduling_ms = 0;
  std::string note;
  std::exception_ptr failure;  // anything but infeasibility: rethrown on the calling thread
};

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
    // A plan may have at most kMaxPlanTasks tasks: the search stays within as many stages.
    limits_.max_stages =
        std::min({max_stages_within_task_limit(request.micro_batches), limits_.layers, N_});
    restrict_shapes(request, limits_);
    // Few enough shapes: every one is replayed on each order, whatever the DP's memory model.
    exhaustive_ =
        partition::count_shapes(limits_, N_, search.exhaustive_shapes) <= search.exhaustive_shapes;
  }

  bool exhaustive() const { return exhaustive_; }

  // Order `c` under `model` (`first_model`: the first of the schedule models, the one the
  // Megatron seeds are tried under).
  Outcome evaluate(std::size_t c, const partition::ScheduleModel& model, bool first_model) const {
    static const char* const kCandidateNames[] = {"min-cut order", "reversed min-cut order",
                                                  "input order"};
    Outcome out;
    try {
      const auto& order = orders_[c];
      std::string name = c < 3 ? kCandidateNames[c] : "order";
      if (model.stashes > 0) name += " (" + std::to_string(model.stashes) + " stashes per replica)";
      std::string how;
      const auto started = Clock::now();
      std::optional<partition::Found> found;
      std::optional<Plan> fastest;
      if (exhaustive_) {
        found = replay_every_shape(order, how, fastest);
        out.scheduling_ms = ms_since(started);
      } else {
        found = search(c, model, first_model, out, how, fastest);
      }
      if (!found) {
        out.note = name + ": no placement fits (" + how + ")";
        return out;
      }
      // The found shape's plan was made when it was replayed (a plan of 2^19 tasks takes about
      // 0.4 s to schedule and replay); made again only if the search kept another of equal time.
      out.plan = fastest && fastest->stages == found->stages
                     ? std::move(fastest)
                     : finish_plan("spp", Partition{order, found->stages}, request_, policy_);
      out.note = name + ": " + how + ", replayed " +
                 io::format_ms(out.plan->timeline.iteration_ms) + ", " +
                 std::to_string(found->stages.size()) + " stages, DP " + io::format_ms(out.dp_ms) +
                 ", search " + io::format_ms(out.scheduling_ms);
    } catch (...) {
      out.failure = std::current_exception();
    }
    return out;
  }

 private:
  // Every shape is measured the same way: scheduled under the policy and replayed. The fastest
  // plan made so far is kept in `fastest` (the first of equal ones), so that the shape the
  // search returns need not be scheduled and replayed again.
  partition::Evaluation replayed(const std::vector<int>& order, const std::vector<Stage>& stages,
                                 std::optional<Plan>& fastest) const {
    const double work = replay_work(request_, stages.size());
    try {
      Plan plan = finish_plan("spp", Partition{order, stages}, request_, policy_);
      const double ms = plan.timeline.iteration_ms;
      if (!fastest || ms < fastest->timeline.iteration_ms) fastest = std::move(plan);
      return {ms, work};
    } catch (const InfeasibleError&) {
      return {std::nullopt, work};
    }
  }

  // Few enough shapes: replay them all (exact for the replayed time on this order); the
  // fastest is the one `replayed` kept.
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

  // The baselines' shapes (when cheap to make and to replay): on the input order the search
  // then never ends slower than such a baseline rescheduled with the same policy.
  void add_baselines(std::vector<std::vector<Stage>>& starts) const {
    for (const PlannerRow* baseline : baseline_partitions()) {
      if (baseline->steps(request_) > kMaxSeedSteps) continue;
      try {
        Partition partition = baseline->partition(request_, policy_);
        // Within the stage cap, and no dearer to replay than the whole search budget.
        if (static_cast<int>(partition.stages.size()) <= limits_.max_stages &&
            replay_work(request_, partition.stages.size()) <= search_.work) {
          starts.push_back(std::move(partition.stages));
        }
      } catch (const InfeasibleError&) {
      }
    }
  }

  // Steps 2 and 3 on one order: the DP's solutions and the other starts, refined by the
  // replayed local search. Starts: the DP's best, the greedy packings, the baselines and the
  // budgeted Megatron seeds whatever the budget; then the other seeds, the DP's other solutions
  // and the random starts while the budget lasts.
  std::optional<partition::Found> search(std::size_t c, const partition::ScheduleModel& model,
                                         bool first_model, Outcome& out, std::string& how,
                                         std::optional<Plan>& fastest) const {
    const auto& order = orders_[c];
    const bool input_order = is_identity(order);  // the orders are distinct: one is the input's
    const auto started = Clock::now();
    partition::SolveOptions options;
    options.solutions = search_.dp_solutions;
    options.max_stages = limits_.max_stages;
    options.choices = choices_;
    const auto solutions = partition::solve_several(request_.model, request_.topology, order,
                                                    request_.micro_batches, model, options);
    out.dp_ms = ms_since(started);
    const auto search_started = Clock::now();
    std::vector<std::vector<Stage>> starts;
    if (!solutions.empty()) starts.push_back(solutions.front().stages);
    add_packings(order, model, starts);
    if (input_order) add_baselines(starts);
    const bool seeded = (request_.uniform || first_model) && input_order;
    auto [megatron_seeds, first_budgeted] =
        seeded ? megatron_seeds_for(request_, choices_, policy_, search_.work) : MegatronSeeds{};
    const std::size_t always = starts.size() + first_budgeted;
    for (auto& seed : megatron_seeds) starts.push_back(std::move(seed));
    for (std::size_t x = 1; x < solutions.size(); ++x) starts.push_back(solutions[x].stages);
    std::mt19937 rng(search_.seed + static_cast<unsigned>(c));
    for (int x = 0; x < search_.restarts; ++x) {
      starts.push_back(partition::random_shape(rng, order, limits_));
    }
    auto found = partition::local_search(
        request_.model, starts, always, order, limits_,
        [&](const std::vector<Stage>& stages) { return replayed(order, stages, fastest); },
        partition::SearchBudget{
            search_.work, search_.sweeps, search_.max_work, search_.min_gain, search_.diverse,
            [&](const std::vector<Stage>& stages, double gamma, double cap) {
              return partition::fill_split(request_.model, request_.topology, stages,
                                           request_.micro_batches, gamma, cap);
            }});
    out.scheduling_ms = ms_since(search_started);
    how = solutions.empty() ? std::string("DP found nothing")
                            : "DP estimate " + io::format_ms(solutions.front().objective.total_ms) +
                                  " (" + std::to_string(solutions.size()) + " solutions)";
    return found;
  }

  static bool is_identity(const std::vector<int>& order) {
    for (std::size_t x = 0; x < order.size(); ++x) {
      if (order[x] != static_cast<int>(x)) return false;
    }
    return true;
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

// Why spp found no plan: under a fixed schedule, whether the list schedule has one (which
// plans again under it); else the binding memory constraint (infeasibility_message).
[[noreturn]] void refuse(const Request& request, schedule::Policy policy, const SppSearch& search) {
  if (policy != schedule::Policy::kList) {
    bool list_fits = false;
    try {
      list_fits = plan_spp(request, schedule::Policy::kList, search).timeline.iteration_ms > 0;
    } catch (const InfeasibleError&) {
    }
    if (list_fits) {
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
  // 4 S M - 2 M <= kMaxPlanTasks.
  const std::int64_t M = micro_batches;
  return static_cast<int>(std::min<std::int64_t>((kMaxPlanTasks + 2 * M) / (4 * M), 1 << 30));
}

Plan plan_spp(const Request& request, schedule::Policy policy, const SppSearch& search) {
  // Spec 8.4: the degrees, recomputation and optimizer each stage may use (a v1 request: t = 1,
  // no recomputation, so the search is that of sections 1-7).
  const partition::StageChoices choices = stage_choices(request);
  if (choices.degrees.empty()) throw InfeasibleError(no_degree_message(request));
  const CandidateOrders candidates = candidate_orders(request.topology);
  std::vector<partition::ScheduleModel> models = schedule_models(policy, request.micro_batches);
  const SppRun run(request, policy, search, choices, candidates);
  if (run.exhaustive()) models.resize(1);
  // spp's shapes include --uniform's, but its search can miss them where the uniform search,
  // whose moves change every stage at once, finds them (bert-48 on geo-distributed: 3163 ms
  // against 2875 ms). For a model without tensor-parallel layers (where no Megatron seeds start
  // the search) the uniform search runs too, on a thread of its own beside the main search, and
  // its plan is kept when strictly faster, so spp is never slower than `spp --uniform`. About
  // 1.6 times the work; plans it does not beat are unchanged. (Where every shape was replayed,
  // none can be faster.)
  const bool uniform_search_ran =
      !request.uniform && !run.exhaustive() && !model::has_tensor_parallel_layers(request.model);
  std::future<std::optional<Plan>> uniform_search;  // waits in its destructor: exception-safe
  if (uniform_search_ran) {
    uniform_search = std::async(std::launch::async, [&request, policy, &search] {
      Request uniform = request;
      uniform.uniform = true;
      try {
        return std::optional<Plan>(plan_spp(uniform, policy, search));
      } catch (const InfeasibleError&) {
        return std::optional<Plan>();
      }
    });
  }

  std::optional<Plan> best;
  std::vector<std::string> notes;
  double dp_ms = 0, scheduling_ms = 0;
  for (const partition::ScheduleModel& model : models) {
    // The candidates are independent: evaluate them on parallel threads, then merge in
    // candidate order, so the result does not depend on the number of threads.
    const bool first_model = &model == &models.front();
    std::vector<Outcome> outcomes(candidates.orders.size());
    std::vector<std::thread> workers;
    for (std::size_t c = 1; c < candidates.orders.size(); ++c) {
      workers.emplace_back([&, c] { outcomes[c] = run.evaluate(c, model, first_model); });
    }
    outcomes[0] = run.evaluate(0, model, first_model);
    for (auto& worker : workers) worker.join();
    for (Outcome& out : outcomes) {
      if (out.failure) std::rethrow_exception(out.failure);
      notes.push_back(out.note);
      dp_ms += out.dp_ms;
      scheduling_ms += out.scheduling_ms;
      if (out.plan && (!best || out.plan->timeline.iteration_ms < best->timeline.iteration_ms))
        best = std::move(out.plan);
    }
    // Every memory model proposes shapes; the fastest replayed plan over all of them wins.
  }
  std::optional<Plan> uniform_plan = uniform_search.valid() ? uniform_search.get() : std::nullopt;
  if (uniform_plan) {
    for (const auto& [phase, ms] : uniform_plan->phase_ms) {
      if (phase == "DP") dp_ms += ms;
      if (phase == "scheduling") scheduling_ms += ms;
    }
    const bool kept =
        !best || uniform_plan->timeline.iteration_ms < best->timeline.iteration_ms * (1 - 1e-9);
    notes.push_back("uniform search: replayed " +
                    io::format_ms(uniform_plan->timeline.iteration_ms) +
                    (kept ? ", kept" : ", not kept"));
    if (kept) {
      uniform_plan->notes.clear();
      uniform_plan->warnings.clear();
      uniform_plan->phase_ms.clear();
      best = std::move(uniform_plan);
    }
  } else if (uniform_search_ran) {
    notes.push_back("uniform search: no plan");
  }
  if (!best) refuse(request, policy, search);
  if (candidates.stats.spanning_tree_groups > 0) {
    best->warnings.push_back(
        "min-cut order: " + std::to_string(candidates.stats.spanning_tree_gpus) + " GPUs in " +
        std::to_string(candidates.stats.spanning_tree_groups) +
        " group(s) without structure were ordered by maximum spanning tree, the "
        "minimum cuts' work budget being spent (docs/algorithms.md)");
  }
  best->notes = notes;
  best->phase_ms = {
      {"ordering", candidates.ordering_ms}, {"DP", dp_ms}, {"scheduling", scheduling_ms}};
  return std::move(*best);
}

}  // namespace pipeplan::planners
