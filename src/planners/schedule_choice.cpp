// spp's schedule choice (spec 9.5): the chosen stages under every policy that can run them, and
// under `--schedule auto` the same devices with several stages each. Every candidate is
// scheduled, replayed and checked against memory (`try_candidate_plan`, on parallel threads
// where the caller is not on one already), so the choice is by the execution model's own
// iteration time; the one kept is completed.

#include "pipeplan/planners/schedule_choice.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/planners/parallel.hpp"
#include "pipeplan/schedule/fixed_orders.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

// One micro-batch's forward and backward of layer l at degree t, the weight of the balance.
double layer_work(const model::Layer& layer, int t) {
  return model::forward_ms_at(layer, t) + model::backward_ms_at(layer, t);
}

// The first layers of the runs that packing `work` greedily left to right under `bound` makes
// (a run closes before the layer that would take it over `bound`). O(L).
std::vector<int> packed_firsts(const std::vector<double>& work, double bound) {
  std::vector<int> firsts{0};
  double run = 0;
  for (std::size_t l = 0; l < work.size(); ++l) {
    if (l > 0 && run + work[l] > bound) {
      firsts.push_back(static_cast<int>(l));
      run = 0;
    }
    run += work[l];
  }
  return firsts;
}

// The first layer of each of K stages over layers 0..L-1 (L >= K), at least one layer each, with
// the largest stage work as small as a contiguous split allows: the least bound that greedy
// packing meets with at most K runs (bisection, 100 steps), then the heaviest run of two or more
// layers split where its larger half is least until there are K. A prefix-proportional split
// can give one stage two layers' work while the others hold one (MT-NLG's 105 layers in 105
// stages). O(100 L + K^2 + K L).
std::vector<int> balanced_firsts(const model::Model& model, int K, int t) {
  std::vector<double> work;
  work.reserve(model.layers.size());
  for (const model::Layer& layer : model.layers) work.push_back(layer_work(layer, t));
  double lo = *std::max_element(work.begin(), work.end());
  double hi = std::accumulate(work.begin(), work.end(), 0.0);
  for (int step = 0; step < 100 && lo < hi; ++step) {
    const double mid = lo + (hi - lo) / 2;
    if (static_cast<int>(packed_firsts(work, mid).size()) <= K) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  std::vector<int> firsts = packed_firsts(work, hi);
  const int L = static_cast<int>(work.size());
  auto run_end = [&](std::size_t r) { return r + 1 < firsts.size() ? firsts[r + 1] : L; };
  while (static_cast<int>(firsts.size()) < K) {
    std::size_t heaviest = firsts.size();
    double heaviest_work = -1;
    for (std::size_t r = 0; r < firsts.size(); ++r) {
      if (run_end(r) - firsts[r] < 2) continue;
      const double w = std::accumulate(work.begin() + firsts[r], work.begin() + run_end(r), 0.0);
      if (w > heaviest_work) {
        heaviest = r;
        heaviest_work = w;
      }
    }
    int best = firsts[heaviest] + 1;
    double best_max = heaviest_work, left = 0;
    for (int cut = firsts[heaviest] + 1; cut < run_end(heaviest); ++cut) {
      left += work[static_cast<std::size_t>(cut) - 1];
      const double larger = std::max(left, heaviest_work - left);
      if (larger < best_max) {
        best = cut;
        best_max = larger;
      }
    }
    firsts.insert(firsts.begin() + static_cast<std::ptrdiff_t>(heaviest) + 1, best);
  }
  return firsts;
}

}  // namespace

std::vector<Stage> virtual_variant(const model::Model& model, const std::vector<Stage>& stages,
                                   int V, schedule::Policy policy) {
  const std::vector<schedule::Device> devices = schedule::devices(stages);
  const int P = static_cast<int>(devices.size());
  const int K = P * V;
  const int t = stages.front().tensor_parallel;
  const int c = stages.front().context_parallel;
  for (const Stage& stage : stages) {
    if (stage.replicas() != stages.front().replicas() || stage.tensor_parallel != t ||
        stage.context_parallel != c) {
      return {};
    }
  }
  if (static_cast<int>(model.layers.size()) < K) return {};
  const std::vector<int> firsts = balanced_firsts(model, K, t);
  const bool recompute =
      std::any_of(stages.begin(), stages.end(), [](const Stage& stage) { return stage.recompute; });
  std::vector<Stage> out(static_cast<std::size_t>(K));
  for (int p = 0; p < P; ++p) {
    for (int v = 0; v < V; ++v) {
      const int k = schedule::placed_stage(policy, P, p, v);
      Stage& stage = out[static_cast<std::size_t>(k)];
      stage.gpus =
          stages[static_cast<std::size_t>(devices[static_cast<std::size_t>(p)].stages.front())]
              .gpus;
      stage.tensor_parallel = t;
      stage.context_parallel = c;  // the plan's degree (spec 10.2): its groups of c x t GPUs
      stage.recompute = recompute;
    }
  }
  for (int k = 0; k < K; ++k) {
    Stage& stage = out[static_cast<std::size_t>(k)];
    stage.first_layer = firsts[static_cast<std::size_t>(k)];
    stage.last_layer = k + 1 < K ? firsts[static_cast<std::size_t>(k) + 1] - 1
                                 : static_cast<int>(model.layers.size()) - 1;
    if (!model::stage_allows_degree(model, stage.first_layer, stage.last_layer, t)) return {};
  }
  return out;
}

Plan spread_over_devices(const Request& request, Plan plan, schedule::Policy policy) {
  const schedule::PolicyRow& row = schedule::policy_row(policy);
  const int V = virtual_stages_of(request, policy);
  if (!row.fixed || row.device_stages == schedule::DeviceStages::kOne || V == 1 ||
      virtual_stages(plan.stages) > 1) {
    return plan;
  }
  const std::string what = std::to_string(V) + " stages per device (--virtual-stages " +
                           std::to_string(V) + ") under " +
                           std::string(schedule::policy_name(policy));
  const std::vector<Stage> variant = virtual_variant(request.model, plan.stages, V, policy);
  if (variant.empty()) {
    throw InfeasibleError("spp: its plan (" + std::to_string(plan.stages.size()) +
                          " stages) cannot be spread to " + what +
                          ": the model has fewer layers than stages, or a stage cannot run at "
                          "its degree; try a smaller --virtual-stages");
  }
  // What the policy cannot run (micro-batches not in groups of P, say) or what does not fit is
  // "no plan", not a usage error: a batch-size search tries other sizes (try_finish_plan).
  Finished finished =
      try_finish_plan(plan.planner, Partition{plan.gpu_order, variant}, request, policy);
  if (!finished.plan) {
    throw InfeasibleError("spp: its plan spread to " + what + " has no plan: " + finished.refusal);
  }
  finished.plan->notes = std::move(plan.notes);
  finished.plan->notes.push_back(
      "spread to " + what + ": " + io::format_ms(finished.plan->timeline.iteration_ms) +
      " (one stage per device: " + io::format_ms(plan.timeline.iteration_ms) + ")");
  finished.plan->warnings = std::move(plan.warnings);
  finished.plan->micro_batch_size = plan.micro_batch_size;
  return std::move(*finished.plan);
}

namespace {

// One schedule `fastest_schedule` tries: stages, the policy, their stages per device, whether
// the backward may split (the request's own choice) or stays whole, and the list policy's rules.
struct ScheduleOption {
  std::vector<Stage> stages;
  schedule::Policy policy;
  int V;
  bool split;
  schedule::ListRule rule{};
};

// The options of `fastest_schedule` in the order they are tried (ties keep the earlier): the
// chosen stages with the other kind of backward, under every other policy, under the list
// policy's other rules (alternating forwards and backwards, replicas by their work left task by
// task), then (`--schedule auto`) the devices with 2, 3 and 4 stages each. Each one the policy
// can run. O(K (L + S V)).
std::vector<ScheduleOption> schedule_options(const Request& request, const Plan& plan,
                                             schedule::Policy policy) {
  std::vector<ScheduleOption> options;
  auto add = [&](std::vector<Stage> stages, schedule::Policy candidate, int V, bool split = true) {
    if (schedule::policy_refusal(candidate, stages, request.micro_batches)) return;
    options.push_back({std::move(stages), candidate, V, split});
  };
  const std::vector<Stage>& chosen = plan.stages;
  const bool own = policy == schedule::Policy::kList || request.schedule_auto;
  // A split backward is a choice too: the stages with the other kind of backward than `plan`'s.
  if (uses_split_backward(request, policy)) add(chosen, policy, 1, !plan.schedule.split_backward);
  if (own) {
    // On one stage per device interleaved-1f1b is 1f1b, and zb-h1 without a split is too.
    for (const schedule::Policy candidate : schedule::all_policies()) {
      const bool same =
          candidate == policy || candidate == schedule::Policy::kInterleaved1F1B ||
          (candidate == schedule::Policy::kZbH1 && !uses_split_backward(request, candidate)) ||
          (candidate == schedule::Policy::kLoopedBfs && !request.schedule_auto);
      if (!same) add(chosen, candidate, 1);
    }
    for (const schedule::ListRule& rule : schedule::other_list_rules())
      options.push_back({chosen, schedule::Policy::kList, 1, true, rule});
  }
  if (request.schedule_auto && virtual_stages(chosen) == 1) {
    for (const int V : {2, 3, 4}) {  // 3: the chunks per GPU of Korthikanti et al.'s runs
      for (const schedule::Policy candidate : schedule::all_policies()) {
        if (schedule::policy_row(candidate).device_stages == schedule::DeviceStages::kOne) continue;
        if (candidate == schedule::Policy::kZbV && V != 2) continue;
        std::vector<Stage> variant = virtual_variant(request.model, chosen, V, candidate);
        if (!variant.empty()) add(std::move(variant), candidate, V);
      }
    }
  }
  return options;
}

// Candidates farther than this above the fastest so far cannot be the fastest (the choice's
// tolerance, times_equal, is 1e-9 relative): their plans are dropped as soon as one is seen.
constexpr double kKeepMargin = 1e-6;

// Every option's iteration time (nothing where it does not fit), made on parallel threads
// (for_each_index); the candidates that can still be the fastest below `incumbent_ms` are kept
// in `kept`, the others dropped as soon as a faster one is seen, so that at most a few plans
// are held at once. O(K) candidates.
std::vector<std::optional<double>> time_options(const Request& request, const Plan& plan,
                                                const std::vector<ScheduleOption>& options,
                                                std::vector<std::optional<Plan>>& kept) {
  Request whole = request;  // the same, with whole backwards
  whole.split_backward = SplitBackward::kNever;
  std::vector<Request> by_rule;  // the same, under each of the list policy's other rules
  for (const schedule::ListRule& rule : schedule::other_list_rules()) {
    by_rule.push_back(request);
    by_rule.back().list_rule = rule;
  }
  auto asked = [&](const ScheduleOption& option) -> const Request& {
    if (!option.split) return whole;
    const auto& rules = schedule::other_list_rules();
    const auto at = std::find(rules.begin(), rules.end(), option.rule);
    return at == rules.end() ? request : by_rule[static_cast<std::size_t>(at - rules.begin())];
  };
  const double incumbent_ms = plan.timeline.iteration_ms;
  std::vector<std::optional<double>> times(options.size());
  kept.assign(options.size(), std::nullopt);
  std::mutex mutex;
  double fastest = incumbent_ms;
  auto may_win = [&](double ms) {
    return ms < incumbent_ms && !simulate::times_equal(ms, incumbent_ms) &&
           ms <= fastest * (1 + kKeepMargin);
  };
  const auto failures = for_each_index(options.size(), [&](std::size_t x) {
    const ScheduleOption& option = options[x];
    Candidate made = try_candidate_plan(plan.planner, Partition{plan.gpu_order, option.stages},
                                        asked(option), option.policy);
    if (!made.sketch) return;
    const double ms = made.sketch->timeline.iteration_ms;
    const std::lock_guard<std::mutex> lock(mutex);
    times[x] = ms;
    fastest = std::min(fastest, ms);
    if (may_win(ms)) kept[x] = std::move(made.sketch);
    for (std::optional<Plan>& other : kept) {
      if (other && !may_win(other->timeline.iteration_ms)) other.reset();
    }
  });
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  return times;
}

}  // namespace

Plan fastest_schedule(const Request& request, Plan plan, schedule::Policy policy) {
  const std::vector<ScheduleOption> options = schedule_options(request, plan, policy);
  std::vector<std::optional<Plan>> kept;
  const std::vector<std::optional<double>> times = time_options(request, plan, options, kept);
  // The choice, as if the options were tried one after another: strictly faster only (a tie
  // within the execution model's tolerance keeps the earlier).
  std::vector<std::string> tried;
  std::optional<std::size_t> faster;
  double best = plan.timeline.iteration_ms;
  for (std::size_t x = 0; x < options.size(); ++x) {
    const ScheduleOption& option = options[x];
    std::string label = std::string(schedule::policy_name(option.policy));
    if (option.V > 1) label += " with " + std::to_string(option.V) + " stages per device";
    if (!option.split) label += " without a split backward";
    label += schedule::list_rule_words(option.rule);
    if (!times[x]) {
      tried.push_back(label + ": does not fit");
      continue;
    }
    tried.push_back(label + ": " + io::format_ms(*times[x]));
    if (*times[x] < best && !simulate::times_equal(*times[x], best)) {
      faster = x;
      best = *times[x];
    }
  }
  if (faster) {
    if (!kept[*faster]) throw InternalError("the fastest schedule's plan was not kept");
    Plan chosen = std::move(*kept[*faster]);
    chosen.notes = std::move(plan.notes);
    chosen.warnings = std::move(plan.warnings);
    chosen.micro_batch_size = plan.micro_batch_size;
    plan = std::move(chosen);
  }
  if (!tried.empty()) plan.notes.push_back("schedules tried: " + io::format_list(tried));
  return plan;
}

}  // namespace pipeplan::planners
