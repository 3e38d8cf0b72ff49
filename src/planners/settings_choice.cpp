// The settings a planner chooses (settings_choice.hpp; issue 33 item 8): a few whole plans, one
// per combination, the fastest kept; then, for a described model under spp's default schedule,
// its devices with several stages each and Megatron-LM's most promising configurations
// interleaved. O(K) plans and O(K^2) replays for K <= 5 candidates, then O(20 + 3 V) schedules
// and replays.

#include "pipeplan/planners/settings_choice.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/parallel.hpp"
#include "pipeplan/planners/schedule_choice.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::planners {

bool reschedules_final_plan(const Request& request, schedule::Policy policy) {
  return policy == schedule::Policy::kList && !request.schedule_auto &&
         request.model.transformer.has_value();
}

namespace {

// Spec 4's equality of times: `a` is strictly below `b` beyond 1e-9 relative plus 1e-9 ms.
bool strictly_faster(double a, double b) { return a < b - 1e-9 * std::abs(b) - 1e-9; }

// Whether a sharded optimizer changes any time or byte of `request` (spec 8.3): more than one
// GPU to shard over, and an update time or a sharded memory factor.
bool sharding_matters(const Request& request) {
  return request.topology.size() > 1 &&
         (model::has_updates(request.model) || model::sharded_factor(request.model) > 0);
}

// The values one flag takes: the fixed one, else the file's and, when it may be chosen, the
// other.
std::vector<bool> flag_values(std::optional<bool> fixed, bool file, bool choosable) {
  if (fixed) return {*fixed};
  if (choosable) return {file, !file};
  return {file};
}

// `sequence parallelism on, selective recomputation off, sharded optimizer`.
std::string candidate_text(const SettingsCandidate& candidate, const model::Model& model) {
  std::string text;
  if (model.transformer) {
    const model::TransformerConfig& file = *model.transformer;
    text += "sequence parallelism ";
    text += candidate.settings.sequence_parallel.value_or(file.sequence_parallel) ? "on" : "off";
    text += ", selective recomputation ";
    text +=
        candidate.settings.selective_recompute.value_or(file.selective_recompute) ? "on" : "off";
    text += ", ";
  }
  return text + optimizer_name(candidate.optimizer) + " optimizer";
}

// The flags of `candidate` that differ from the model file's, as the plan records them.
void record_flags(const SettingsCandidate& candidate, const model::Model& model, Plan& plan) {
  if (!model.transformer) return;
  const auto& sp = candidate.settings.sequence_parallel;
  const auto& selective = candidate.settings.selective_recompute;
  if (sp && *sp != model.transformer->sequence_parallel) plan.sequence_parallel = sp;
  if (selective && *selective != model.transformer->selective_recompute) {
    plan.selective_recompute = selective;
  }
}

}  // namespace

std::vector<SettingsCandidate> settings_candidates(const Request& request) {
  const model::Model& model = request.model;
  const bool choose = request.choose_settings;
  std::vector<Optimizer> optimizers{request.optimizer};
  if (choose && !request.optimizer_fixed && model::uses_v2_fields(model) &&
      sharding_matters(request) && request.optimizer == Optimizer::kReplicated) {
    optimizers.push_back(Optimizer::kSharded);
  }
  if (!model.transformer) {
    // A profile's layers were measured with the framework's settings: nothing to regenerate.
    for (const auto& [option, fixed] :
         {std::pair{"--sequence-parallel", request.sequence_parallel},
          std::pair{"--selective-recompute", request.selective_recompute}}) {
      if (!fixed) continue;
      throw UsageError(std::string(option) + (*fixed ? " on" : " off") +
                       ": the model has no \"transformer\" description to regenerate its layers "
                       "with (a profile was measured with its own settings); describe the model "
                       "with pipeplan model transformer");
    }
    std::vector<SettingsCandidate> out;
    out.reserve(optimizers.size());
    for (const Optimizer optimizer : optimizers) out.push_back({{}, optimizer});
    return out;
  }
  const model::TransformerConfig& file = *model.transformer;
  if (file.per_op_recompute && request.selective_recompute.value_or(false)) {
    throw UsageError(
        "--selective-recompute on: the model recomputes per operator (its description's "
        "per_op_recompute), and the two recomputation policies exclude each other");
  }
  const std::vector<int> degrees = candidate_degrees(request);
  const bool splits = !degrees.empty() && degrees.back() > 1;
  const std::vector<bool> sp_values =
      flag_values(request.sequence_parallel, file.sequence_parallel, choose && splits);
  const std::vector<bool> selective_values = flag_values(
      request.selective_recompute, file.selective_recompute, choose && !file.flash_attention);
  std::vector<SettingsCandidate> out;
  for (const bool sp : sp_values) {
    for (const bool selective : selective_values) {
      model::TransformerSettings settings{std::nullopt, sp, selective};
      if (out.empty()) {
        for (const Optimizer optimizer : optimizers) out.push_back({settings, optimizer});
      } else {
        out.push_back({settings, optimizers.back()});
      }
    }
  }
  return out;
}

namespace {

// One candidate's inputs, as its plans are made and replayed; `request` refers to `model`, so
// an Asked is made in place and never moved (a std::deque of them).
struct Asked {
  Asked(const Request& base, model::Model variant, Optimizer optimizer, std::string text)
      : model(std::move(variant)),
        request(with_inputs(base, model, base.topology)),
        label(std::move(text)) {
    request.optimizer = optimizer;
  }
  model::Model model;
  Request request;
  std::string label;
  std::optional<Plan> plan;  // its planner's plan, when planned and it fits
};

// The schedules `fastest_schedule` makes of a plan under `--schedule auto`, at most 8 + 3 x 5,
// each counted once against a budget (those with V stages per device take up to V times the
// plan's steps): what admits the step, not a bound on its cost.
constexpr double kSharedDeviceSchedules = 23;

// spp's default list schedule for a model with its transformer description (issue 33 item 8:
// `V` and the split chosen by default, as Megatron-LM users set them): the chosen devices with
// 2, 3 and 4 stages each under every multi-stage policy and the list scheduler, and every fixed
// policy, as `--schedule auto` tries them on its final plan (fastest_schedule; kept only where
// strictly faster). Only the final plan's: `--schedule auto` also gives every search of the
// recipe the choice, at about twice the cost. Profiles keep one stage per device unless asked
// (pipeplan_torch runs one stage per GPU). O(20) schedules and replays.
Plan with_devices_shared(const Request& request, Plan plan, schedule::Policy policy) {
  if (!reschedules_final_plan(request, policy)) return plan;
  Request shared = request;
  shared.schedule_auto = true;
  return fastest_schedule(shared, std::move(plan), policy);
}

// Megatron-LM's configurations as published runs use them (issue 33 item 8: never slower than
// a configuration a published run chose), tried on the configurations of the smallest
// Megatron-shaped estimates (`megatron_candidates`, shaped by megatron_partition), each kept only
// where strictly faster:
// * interleaved: V stages per device for every V that divides the decoders per stage
//   (Megatron-LM needs the layers to divide evenly, and two pipeline stages or more), under
//   interleaved-1f1b;
// * then with balanced ends: the embedding and the loss split as one decoder layer each
//   (Megatron-LM's --account-for-embedding-in-pipeline-split and
//   --account-for-loss-in-pipeline-split; Llama 3 405B's published 7, 14 x 8, 7 split), for
//   every V (1 included) that divides the decoders plus two over P V stages, under the list
//   schedule and 1f1b for V = 1 and interleaved-1f1b above.
// The first kMegatronVariantSeeds configurations are tried whatever they cost; the next ones,
// up to kMegatronVariantExtraSeeds in all, while their schedules stay within
// kMegatronVariantExtraSteps scheduling steps (`scheduling_steps`, about a second of the dev
// build): a published configuration of a small cluster can rank fourth or lower by the 1F1B
// estimate (Llama 3.1 405B on 1,152 GPUs: t 8, p 9, V 7), while a plan on 131,072 GPUs takes
// seconds. Last, the one-stage configurations (add_one_stage_variants) within the same budget.
// Each group of variants comes after every earlier one, so a plan changes only where a later
// variant is strictly faster than all before it: the variants are listed in that order
// (`add_variant`), made on parallel threads (`make_variants`) and decided one after another
// (`replay_variants`). Only for spp's list schedule (its default, and `--schedule auto`) on a
// described model. O(K V) plans.
constexpr std::size_t kMegatronVariantSeeds = 3;
constexpr std::size_t kMegatronVariantExtraSeeds = 8;
constexpr double kMegatronVariantExtraSteps = 2e7;

// The scheduling steps the variants past the first seeds may still spend (nullopt: no limit).
using StepsLeft = std::optional<double>;

// A planner's plan of one candidate's request (`plan_choosing_settings`'s `plan_one`).
using PlanOne = std::function<Plan(const Request&, schedule::Policy)>;

// Whether scheduling `stages` for `request` fits in `steps_left`, which it then spends
// (`scheduling_steps`; always, without a limit). O(N) with a limit, else O(1).
bool spend(StepsLeft& steps_left, const Request& request, const std::vector<Stage>& stages) {
  if (!steps_left) return true;
  const double steps = scheduling_steps(request.topology, stages, request.micro_batches);
  if (steps > *steps_left) return false;
  *steps_left -= steps;
  return true;
}

// The variants' state: the incumbent plan, and the configuration past spp's search limit whose
// one-replica screen is the smallest, strictly below the incumbent when it was screened (planned
// whole once, after every other variant: `try_beyond_search`).
struct Variants {
  struct Beyond {
    double screen_ms = 0;
    Partition shape;
    schedule::Policy policy = schedule::Policy::kList;
    std::string what;
  };
  Plan plan;
  std::optional<Beyond> beyond;
};

// The note an adoption leaves: `what`, then the adopted plan's time `ms`. O(1).
std::string adoption_note(const std::string& what, double ms) {
  // Appended piece by piece: `"t" + std::string&&` draws a false -Wrestrict from GCC 12 at -O3
  // (GCC bug 105329), as in megatron_variants.
  std::string note = what;
  note += ": ";
  note += io::format_ms(ms);
  return note;
}

// `adopted` replaces `tried.plan`, its notes saying so (`what`, then the time). A search's
// candidate is adopted as it is: the plan the settings' steps end with is completed once, at
// their end (`completed`), where completing every adopted one took three full replays of 0.1 to
// 0.2 s on Llama 3.1 405B at 16,384 GPUs. O(1) besides the notes.
void adopt(Plan adopted, const std::string& what, Variants& tried) {
  Plan& plan = tried.plan;
  std::string note = adoption_note(what, adopted.timeline.iteration_ms);
  adopted.notes = std::move(plan.notes);
  adopted.notes.push_back(std::move(note));
  plan = std::move(adopted);
}

// One Megatron-LM configuration to try, as `add_variant` found it before any incumbent mattered:
// its shape and policy, the note it leaves when adopted, and whether it is past spp's search
// limit (kMaxSearchTasks; NVIDIA's GPT-3 175B on 2,048 GPUs: 96 chunks x 4,096 micro-batches),
// where it is only screened.
struct VariantTry {
  Partition shape;
  schedule::Policy policy = schedule::Policy::kList;
  std::string what;
  bool beyond_search = false;
  // Screened on one replica first (`one_replica_ms`, a lower bound on identical replicas) where
  // that is sound: under a fixed policy, whose per-GPU order other replicas cannot change (a list
  // schedule's choices can differ with more replicas), and past the search limit.
  [[nodiscard]] bool screened() const { return beyond_search || policy != schedule::Policy::kList; }
};

// `fixed` under `policy` appended to `tries` unless Megatron-LM refuses it, it does not fit, or
// its schedule is beyond the steps left (which it then spends). O(N) besides the shape.
void add_variant(const Request& request, const Request& fixed, schedule::Policy policy,
                 std::string what, std::int64_t search_limit, std::vector<VariantTry>& tries,
                 StepsLeft& steps_left) {
  try {
    if (megatron_refusal(fixed)) return;
    Partition shape = megatron_partition(fixed, policy);
    if (!spend(steps_left, request, shape.stages)) return;
    const bool beyond_search =
        task_limit_refusal(shape.stages.size(), request.micro_batches,
                           uses_split_backward(request, policy), search_limit)
            .has_value();
    tries.push_back({std::move(shape), policy, std::move(what), beyond_search});
  } catch (const InfeasibleError&) {
  } catch (const UsageError&) {
  }
}

// The configuration past the search limit kept in `tried.beyond`, planned whole within the
// megatron planner's kMaxPlanTasks where its screen is still strictly below the incumbent, and
// adopted where strictly faster: at most one such plan (seconds at 16,384 GPUs), the one most
// likely to pay. O(one plan of up to kMaxPlanTasks tasks).
void try_beyond_search(const Request& request, Variants& tried) {
  if (!tried.beyond ||
      !strictly_faster(tried.beyond->screen_ms, tried.plan.timeline.iteration_ms)) {
    return;
  }
  const Variants::Beyond& beyond = *tried.beyond;  // adopting changes the plan, not this
  try {
    // A search's candidate, as every variant: the settings' steps complete the plan they keep.
    Candidate made =
        try_candidate_plan(tried.plan.planner, beyond.shape, request, beyond.policy, kMaxPlanTasks);
    if (made.sketch &&
        strictly_faster(made.sketch->timeline.iteration_ms, tried.plan.timeline.iteration_ms)) {
      adopt(std::move(*made.sketch), beyond.what, tried);
    }
  } catch (const InfeasibleError&) {
  } catch (const UsageError&) {
  }
}

// `kind` and "t8 p16 V2 interleaved-1f1b", "t8 p4 c2 V1 list" and the like. O(1).
std::string variant_label(const std::string& kind, const Request& fixed, int V,
                          schedule::Policy policy) {
  std::string label = kind;
  label += "t";
  label += std::to_string(fixed.tensor_parallel.front());
  label += " p";
  label += std::to_string(*fixed.pipeline_parallel);
  if (fixed.context_parallel.size() == 1 && fixed.context_parallel.front() > 1) {
    label += " c";
    label += std::to_string(fixed.context_parallel.front());
  }
  label += " V";
  label += std::to_string(V);
  label += " ";
  label += schedule::policy_name(policy);
  return label;
}

// The `configurations` (megatron_candidates) that interleave (P >= 2), most promising first
// (megatron_estimate), at most kMegatronVariantExtraSeeds. O(K (S + N)).
std::vector<Request> megatron_variant_seeds(const Request& request,
                                            const std::vector<Request>& configurations) {
  std::vector<std::pair<double, std::size_t>> ranked;  // estimate, configuration
  for (std::size_t x = 0; x < configurations.size(); ++x) {
    // Megatron-LM refuses a virtual pipeline on one pipeline stage ("pipeline-model-parallel
    // size should be greater than 1 with interleaved schedule", core/parallel_state.py).
    if (configurations[x].pipeline_parallel.value_or(1) < 2) continue;
    try {
      const Partition shape = megatron_partition(configurations[x], schedule::Policy::kOneFOneB);
      ranked.emplace_back(megatron_estimate(configurations[x], shape.stages, request.optimizer), x);
    } catch (const InfeasibleError&) {
    } catch (const UsageError&) {
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Request> seeds;
  for (std::size_t r = 0; r < std::min(kMegatronVariantExtraSeeds, ranked.size()); ++r) {
    seeds.push_back(configurations[ranked[r].second]);
  }
  return seeds;
}

// The variants of `seeds` (interleaved, then with balanced ends; above), in the order tried,
// appended to `tries`. O(K V) shapes for K seeds.
void add_megatron_variants(const Request& request, std::vector<Request> seeds,
                           std::int64_t search_limit, std::vector<VariantTry>& tries,
                           StepsLeft& steps_left) {
  const int decoders = request.model.transformer->layers;
  for (Request& fixed : seeds) {
    const int P = *fixed.pipeline_parallel;
    if (decoders % P != 0) continue;
    for (int V = 2; V <= decoders / P && V <= kMaxVirtualStages; ++V) {
      if ((decoders / P) % V != 0) continue;
      fixed.virtual_stages = V;
      add_variant(request, fixed, schedule::Policy::kInterleaved1F1B,
                  variant_label("Megatron-LM's interleaved configuration faster: ", fixed, V,
                                schedule::Policy::kInterleaved1F1B),
                  search_limit, tries, steps_left);
    }
  }
  for (Request& fixed : seeds) {
    const int P = *fixed.pipeline_parallel;
    fixed.account_for_embedding = fixed.account_for_loss = true;
    for (int V = 1; V * P <= decoders + 2 && V <= kMaxVirtualStages; ++V) {
      if ((decoders + 2) % (P * V) != 0) continue;
      fixed.virtual_stages = V;
      for (const schedule::Policy each :
           V == 1 ? std::vector{schedule::Policy::kList, schedule::Policy::kOneFOneB}
                  : std::vector{schedule::Policy::kInterleaved1F1B}) {
        add_variant(request, fixed, each,
                    variant_label("Megatron-LM's configuration with balanced ends faster: ", fixed,
                                  V, each) +
                        ", embedding and loss as layers",
                    search_limit, tries, steps_left);
      }
    }
  }
}

// Megatron-LM's one-stage configurations (P = 1: tensor, context and data parallelism alone)
// among `configurations` that Megatron-LM runs and that hold one micro-batch under
// `request.optimizer` (what cannot is not planned: a plan of every GPU is slow to refuse), in
// order. O(K (L + N)).
std::vector<Request> one_stage_configurations(const Request& request,
                                              const std::vector<Request>& configurations) {
  std::vector<Request> out;
  for (const Request& fixed : configurations) {
    if (fixed.pipeline_parallel.value_or(1) != 1 || megatron_refusal(fixed)) continue;
    try {
      const Partition shape = megatron_partition(fixed, schedule::Policy::kOneFOneB);
      if (std::isfinite(megatron_estimate(fixed, shape.stages, request.optimizer))) {
        out.push_back(fixed);
      }
    } catch (const Error&) {
    }
  }
  return out;
}

// Megatron-LM's one-stage configurations (`one_stage_configurations`) under the list schedule,
// after every other variant and within the steps left, appended to `tries`: spp's own search can
// keep pipelined shapes where one stage over every GPU is faster (Llama 3.1 8B on 8 GPUs at
// c = 2, as NVIDIA's recipe runs it). O(degrees) shapes of one stage.
void add_one_stage_variants(const Request& request, const std::vector<Request>& configurations,
                            std::int64_t search_limit, std::vector<VariantTry>& tries,
                            StepsLeft& steps_left) {
  for (const Request& fixed : one_stage_configurations(request, configurations)) {
    add_variant(request, fixed, schedule::Policy::kList,
                variant_label("Megatron-LM's one-stage configuration faster: ", fixed, 1,
                              schedule::Policy::kList),
                search_limit, tries, steps_left);
  }
}

// What the threads made of one try (`make_variants`): its screen, and its candidate where the
// tries before it could leave it faster than the incumbent.
struct VariantMade {
  std::optional<double> screen;       // one_replica_ms, for a screened try
  std::exception_ptr screen_failure;  // one_replica_ms's error
  bool made = false;                  // the candidate was made (else the replay makes it if needed)
  std::optional<double> ms;           // its time, where it fits
  std::optional<Plan> sketch;         // kept while it can be the plan adopted last
  std::exception_ptr failure;         // try_candidate_plan's error
};

// The candidate of `each` made into `made`, its error kept for the replay. O(one plan).
void make_variant(const Request& request, const std::string& planner, std::int64_t search_limit,
                  const VariantTry& each, VariantMade& made) {
  made.made = true;
  try {
    Candidate candidate =
        try_candidate_plan(planner, each.shape, request, each.policy, search_limit);
    if (candidate.sketch) {
      made.ms = candidate.sketch->timeline.iteration_ms;
      made.sketch = std::move(candidate.sketch);
    }
  } catch (...) {
    made.failure = std::current_exception();
  }
}

// Every try's screen, and its candidate unless its screen is not strictly below the fastest of
// the incumbent and the candidates made before it so far, on parallel threads (for_each_index).
// Whatever the threads' interleaving, the replay decides as the tries one after another would
// (`replay_variants`, which makes what a thread skipped and turns out needed); a sketch is kept
// only while it is strictly faster than `incumbent_ms` and than every other made. O(K) plans and
// O(K^2) comparisons for K tries.
std::vector<VariantMade> make_variants(const Request& request, const std::string& planner,
                                       std::int64_t search_limit,
                                       const std::vector<VariantTry>& tries, double incumbent_ms) {
  std::vector<VariantMade> made(tries.size());
  std::mutex mutex;  // guards every `made[i].made`, `ms` and `sketch`
  auto bound_before = [&](std::size_t x) {
    double bound = incumbent_ms;
    for (std::size_t i = 0; i < x; ++i) {
      if (made[i].ms) bound = std::min(bound, *made[i].ms);
    }
    return bound;
  };
  const auto failures = for_each_index(tries.size(), [&](std::size_t x) {
    const VariantTry& each = tries[x];
    if (each.screened()) {
      try {
        made[x].screen = one_replica_ms(request, each.shape, each.policy);
      } catch (...) {
        made[x].screen_failure = std::current_exception();
        return;
      }
      if (each.beyond_search) return;
      const std::lock_guard<std::mutex> lock(mutex);
      if (made[x].screen && !strictly_faster(*made[x].screen, bound_before(x))) return;
    }
    VariantMade mine;
    make_variant(request, planner, search_limit, each, mine);
    const std::lock_guard<std::mutex> lock(mutex);
    made[x].made = true;
    made[x].ms = mine.ms;
    made[x].sketch = std::move(mine.sketch);
    made[x].failure = mine.failure;
    double fastest = incumbent_ms;
    for (const VariantMade& other : made) {
      if (other.ms) fastest = std::min(fastest, *other.ms);
    }
    for (VariantMade& other : made) {
      if (other.sketch &&
          (!strictly_faster(*other.ms, incumbent_ms) || strictly_faster(fastest, *other.ms))) {
        other.sketch.reset();
      }
    }
  });
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  return made;
}

// The tries decided one after another on `plan`, each adopted where strictly faster than the
// incumbent (a screened one skipped where its screen is not; one past the search limit kept in
// `beyond` where its screen is the smallest so far and strictly below the incumbent), errors met
// where trying each in turn meets them: the plan and notes the tries made one by one leave,
// whatever the threads did. O(K) besides what the threads skipped and the last adopted's sketch
// if dropped.
Variants replay_variants(const Request& request, std::int64_t search_limit,
                         const std::vector<VariantTry>& tries, std::vector<VariantMade>& made,
                         Plan plan) {
  const std::string planner = plan.planner;
  double incumbent_ms = plan.timeline.iteration_ms;
  std::vector<std::size_t> adopted;
  std::optional<Variants::Beyond> beyond;
  for (std::size_t x = 0; x < tries.size(); ++x) {
    const VariantTry& each = tries[x];
    VariantMade& result = made[x];
    try {
      if (each.screened()) {
        if (result.screen_failure) std::rethrow_exception(result.screen_failure);
        const std::optional<double>& screen = result.screen;
        if (each.beyond_search) {
          if (screen && strictly_faster(*screen, incumbent_ms) &&
              (!beyond || strictly_faster(*screen, beyond->screen_ms))) {
            beyond = Variants::Beyond{*screen, each.shape, each.policy, each.what};
          }
          continue;
        }
        if (screen && !strictly_faster(*screen, incumbent_ms)) continue;
      }
      if (!result.made) make_variant(request, planner, search_limit, each, result);
      if (result.failure) std::rethrow_exception(result.failure);
      if (result.ms && strictly_faster(*result.ms, incumbent_ms)) {
        incumbent_ms = *result.ms;
        adopted.push_back(x);
      }
    } catch (const InfeasibleError&) {
    } catch (const UsageError&) {
    }
  }
  Variants tried{std::move(plan), std::move(beyond)};
  if (adopted.empty()) return tried;
  for (std::size_t a = 0; a + 1 < adopted.size(); ++a) {
    tried.plan.notes.push_back(adoption_note(tries[adopted[a]].what, *made[adopted[a]].ms));
  }
  VariantMade& last = made[adopted.back()];
  if (!last.sketch) make_variant(request, planner, search_limit, tries[adopted.back()], last);
  adopt(std::move(*last.sketch), tries[adopted.back()].what, tried);
  return tried;
}

// Megatron-LM's variants of `request` tried against `plan` (above): the first `unlimited_seeds`
// seeds whatever they cost, the others, then the one-stage configurations (where `one_stage`),
// within kMegatronVariantExtraSteps scheduling steps. O(K V) plans.
Plan megatron_variants_tried(const Request& request, Plan plan, std::size_t unlimited_seeds,
                             bool one_stage) {
  const std::vector<Request> configurations = megatron_candidates(request, stage_choices(request));
  const std::vector<Request> seeds = megatron_variant_seeds(request, configurations);
  const auto split =
      seeds.begin() + static_cast<std::ptrdiff_t>(std::min(unlimited_seeds, seeds.size()));
  StepsLeft unlimited, budget = kMegatronVariantExtraSteps;
  const std::int64_t search_limit = plan_task_limit(plan.planner);
  std::vector<VariantTry> tries;
  add_megatron_variants(request, {seeds.begin(), split}, search_limit, tries, unlimited);
  add_megatron_variants(request, {split, seeds.end()}, search_limit, tries, budget);
  if (one_stage) add_one_stage_variants(request, configurations, search_limit, tries, budget);
  std::vector<VariantMade> made =
      make_variants(request, plan.planner, search_limit, tries, plan.timeline.iteration_ms);
  Variants tried = replay_variants(request, search_limit, tries, made, std::move(plan));
  try_beyond_search(request, tried);
  return std::move(tried.plan);
}

Plan with_megatron_variants(const Request& request, Plan plan, schedule::Policy policy) {
  if (policy != schedule::Policy::kList || !request.model.transformer) {
    return plan;
  }
  return megatron_variants_tried(request, std::move(plan), kMegatronVariantSeeds, true);
}

// The optimizers that shard the gradients, in the order spp tries them (full sharding first, as
// before the gradients were sharded alone: a plan that gains nothing from the second keeps its
// bytes), and the note a plan adopted under each leaves.
constexpr Optimizer kGradientShardings[] = {Optimizer::kFullySharded, Optimizer::kShardedGradients};

const char* sharding_note(Optimizer sharding) {
  return sharding == Optimizer::kFullySharded ? "fully sharded optimizer faster"
                                              : "sharded gradients faster";
}

// Whether spp may choose full sharding for `request` (issue 33 item 8; docs/decisions.md "A
// fully sharded data-parallel stage"): as it chooses a sharded optimizer (the optimizer left
// open, spec 8.1 fields, sharding that matters), for a model with its transformer description (a
// profile is run by pipeplan_torch, whose runner all-reduces), and not under `--uniform`, which
// keeps to plans every framework runs (DeepSpeed's pipeline engine refuses ZeRO-3). O(1).
bool may_shard_fully(const Request& request) {
  return request.choose_settings && !request.optimizer_fixed && !request.uniform &&
         request.optimizer != Optimizer::kFullySharded && request.model.transformer &&
         model::uses_v2_fields(request.model) && sharding_matters(request);
}

// Megatron-LM's pipelined configurations of `sharded` (fully sharded), interleaved and with
// balanced ends (`add_megatron_variants` of the most promising, `megatron_variant_seeds`),
// within `steps_left` and spp's search limit, as the megatron planner plans them: full sharding
// can leave the memory that spares a recomputation (GPT-3 175B on 64 A100-80GB at -m 64:
// t4 p8 V4 fully sharded, 11,815.97 ms, where spp kept a sharded plan of 11,818.21 ms until
// 2026-12-07). Made on parallel threads, in the tries' order; a refused one stays empty.
// O(K V) plans for K seeds.
std::vector<Candidate> fully_sharded_pipelines(const Request& sharded, const std::string& planner,
                                               StepsLeft& steps_left) {
  const std::int64_t search_limit = plan_task_limit(planner);
  const std::vector<Request> configurations = megatron_candidates(sharded, stage_choices(sharded));
  std::vector<VariantTry> tries;
  add_megatron_variants(sharded, megatron_variant_seeds(sharded, configurations), search_limit,
                        tries, steps_left);
  std::vector<Candidate> made(tries.size());
  const auto failures = for_each_index(tries.size(), [&](std::size_t x) {
    if (tries[x].beyond_search) return;
    try {
      made[x] = try_candidate_plan(planner, tries[x].shape, sharded, tries[x].policy, search_limit);
    } catch (const InfeasibleError&) {
    } catch (const UsageError&) {
    }
  });
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  return made;
}

// The fastest fully sharded plan of `planner` among `plan`'s stages (when given) replayed so,
// Megatron-LM's one-stage configurations (tensor, context and data parallelism alone: what
// torchtitan and Megatron-LM's --use-torch-fsdp2 run; at each context-parallel degree of a list,
// in its order), the latter within `steps_left`, each under the list schedule or, where that
// holds no micro-batch (it reserves a split backward's weight stash beside the stash), under
// 1F1B, as the frameworks run them: a search's candidate (`adopt`). Nothing when none fits.
// O(degrees) plans.
std::optional<Plan> fastest_fully_sharded(const Request& sharded, const std::string& planner,
                                          const Plan* plan, StepsLeft& steps_left) {
  std::optional<Plan> best;
  auto keep = [&](Candidate made) {
    if (made.sketch && (!best || strictly_faster(made.sketch->timeline.iteration_ms,
                                                 best->timeline.iteration_ms))) {
      best = std::move(made.sketch);
    }
  };
  if (const auto policy = plan ? schedule::parse_policy(plan->schedule_policy) : std::nullopt) {
    keep(try_candidate_plan(planner, Partition{plan->gpu_order, plan->stages}, sharded, *policy));
  }
  const std::vector<Request> configurations = megatron_candidates(sharded, stage_choices(sharded));
  for (const Request& fixed : one_stage_configurations(sharded, configurations)) {
    for (const schedule::Policy each : {schedule::Policy::kList, schedule::Policy::kOneFOneB}) {
      try {
        const Partition shape = megatron_partition(fixed, each);
        if (!spend(steps_left, sharded, shape.stages)) break;
        Candidate made = try_candidate_plan(planner, shape, sharded, each);
        const bool planned = made.sketch.has_value();
        keep(std::move(made));
        if (planned) break;
      } catch (const InfeasibleError&) {
      } catch (const UsageError&) {
      }
    }
  }
  return best;
}

// The fastest fully sharded plan of `request` (`fastest_fully_sharded`; `plan`'s stages among
// them when given), with its devices shared as spp's default shares them and its fixed policies
// tried (`fastest_schedule`, as `--schedule auto`), within its own budget of
// kMegatronVariantExtraSteps scheduling steps (the devices shared cost about 23 schedules of the
// plan); then Megatron-LM's pipelined configurations (`fully_sharded_pipelines`) within a budget
// of their own, each kept where strictly faster (so the first step's plan is never lost to a
// pipeline that used its budget). Nothing when none fits. `sharding`: full sharding, or the
// gradients sharded only (ZeRO-2; the same steps). O(degrees + 23 + K V) plans.
std::optional<Plan> fully_sharded_plan(const Request& request, const std::string& planner,
                                       const Plan* plan, schedule::Policy policy,
                                       Optimizer sharding) {
  Request sharded = request;
  sharded.optimizer = sharding;
  StepsLeft budget = kMegatronVariantExtraSteps;
  std::optional<Plan> found = fastest_fully_sharded(sharded, planner, plan, budget);
  if (found && scheduling_steps(sharded.topology, found->stages, sharded.micro_batches) *
                       kSharedDeviceSchedules <=
                   *budget) {
    // As with_devices_shared, and under --schedule auto too: the fixed policies on the same
    // stages as well (1F1B beats the greedy list schedule on some one-stage plans).
    Request shared = sharded;
    shared.schedule_auto = true;
    found = fastest_schedule(shared, std::move(*found), policy);
  }
  StepsLeft pipelines_budget = kMegatronVariantExtraSteps;
  for (Candidate& made : fully_sharded_pipelines(sharded, planner, pipelines_budget)) {
    if (made.sketch && (!found || strictly_faster(made.sketch->timeline.iteration_ms,
                                                  found->timeline.iteration_ms))) {
      found = std::move(made.sketch);
    }
  }
  return found;
}

// The planner's own search of `request` fully sharded (`plan_one`, as `--optimizer
// fully-sharded` plans it), with its devices shared (`with_devices_shared`): its partition
// weighs the all-gathers and the memory full sharding frees, where `fully_sharded_plan` replays
// stages found under another optimizer (Llama 3.1 8B with fused attention on 2 DGX H100, 64
// micro-batches: 2,962 ms from the kept plan's stages, 2,946 ms from its own, which spp found
// only with --optimizer fully-sharded until 2026-12-07). Only where the kept `plan`'s schedule
// is cheap (kSharedDeviceSchedules of it within kMegatronVariantExtraSteps scheduling steps):
// one more search, about a fifth more planning where it runs. Nothing where nothing fits or
// where the request's options refuse full sharding (as fastest_fully_sharded's tries).
// `sharding`: as fully_sharded_plan's.
std::optional<Plan> fully_sharded_search(const Request& request, const Plan& plan,
                                         schedule::Policy policy, const PlanOne& plan_one,
                                         Optimizer sharding) {
  if (scheduling_steps(request.topology, plan.stages, request.micro_batches) *
          kSharedDeviceSchedules >
      kMegatronVariantExtraSteps) {
    return std::nullopt;
  }
  Request sharded = request;
  sharded.optimizer = sharding;
  try {
    return with_devices_shared(sharded, plan_one(sharded, policy), policy);
  } catch (const InfeasibleError&) {
    return std::nullopt;
  } catch (const UsageError&) {  // an option full sharding cannot take: not spp's to choose
    return std::nullopt;
  }
}

// Full sharding chosen by spp (`may_shard_fully` of the user's request, `asked`) under its list
// schedule: the faster of `fully_sharded_plan` and `fully_sharded_search` of `request` (the kept
// candidate's; the description's flags it was planned with), adopted where strictly faster than
// `plan`; then the same with the gradients sharded only (ZeRO-2, docs/decisions.md "A
// data-parallel stage with sharded gradients"): between the two, a layer's weights are gathered
// once per micro-batch instead of twice, and kept whole (GPT-3 175B on 8 DGX A100-80GB at
// -m 64: 11,483.26 ms fully sharded, 11,477.40 ms with sharded gradients). O(2 (degrees + 23 +
// K V) + 2 searches) plans.
Plan with_full_sharding(const Request& asked, const Request& request, Plan plan,
                        schedule::Policy policy, const PlanOne& plan_one) {
  if (policy != schedule::Policy::kList || !may_shard_fully(asked)) return plan;
  for (const Optimizer sharding : kGradientShardings) {
    std::optional<Plan> found = fully_sharded_plan(request, plan.planner, &plan, policy, sharding);
    std::optional<Plan> searched = fully_sharded_search(request, plan, policy, plan_one, sharding);
    if (searched && (!found || strictly_faster(searched->timeline.iteration_ms,
                                               found->timeline.iteration_ms))) {
      found = std::move(searched);
    }
    if (!found || !strictly_faster(found->timeline.iteration_ms, plan.timeline.iteration_ms)) {
      continue;
    }
    Variants tried{std::move(plan), std::nullopt};
    adopt(std::move(*found), sharding_note(sharding), tried);
    plan = std::move(tried.plan);
  }
  return plan;
}

// Every plan's stages replayed under every other candidate's settings (a shape one search found
// can be faster under another's: the searches are heuristic, a sharded optimizer never slower),
// the fastest kept with `best` as the incumbent (strictly faster only). O(K^2) replays, on
// parallel threads; the kept one is replayed once more (deterministic) rather than every
// replay's plan held, and kept as a search's candidate (`adopt`).
void cross_replay(std::deque<Asked>& asked, std::optional<Plan>& best, std::size_t& best_x,
                  std::vector<std::string>& notes) {
  const std::size_t K = asked.size();
  auto replay = [&](std::size_t from, std::size_t to) -> Candidate {
    const Plan& found = *asked[from].plan;
    const auto policy = schedule::parse_policy(found.schedule_policy);
    if (to == from || !policy) return {};
    return try_candidate_plan(found.planner, Partition{found.gpu_order, found.stages},
                              asked[to].request, *policy);
  };
  std::vector<std::optional<double>> times(K * K);  // [from K + to]: the replay's iteration
  const auto failures = for_each_index(K * K, [&](std::size_t x) {
    if (!asked[x / K].plan) return;
    const Candidate made = replay(x / K, x % K);
    if (made.sketch) times[x] = made.sketch->timeline.iteration_ms;
  });
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  for (std::size_t x = 0; x < K * K; ++x) {
    if (!times[x] || !strictly_faster(*times[x], best->timeline.iteration_ms)) continue;
    const std::size_t from = x / K, to = x % K;
    notes.push_back(asked[to].label + io::format_ms(*times[x]) + " with the stages found under " +
                    asked[from].label.substr(10) + " (replayed)");
    Candidate made = replay(from, to);
    const std::vector<std::string> found_notes = asked[from].plan->notes;
    best = std::move(*made.sketch);
    best->notes = found_notes;
    best_x = to;
  }
}

// `plan`, the settings' steps' last, completed (`complete_plan`; `adopt`): every step after the
// settings plans with the kept candidate's model (`kept`; its sharded twin's is the same), full
// sharding under its own optimizer, which the plan records. O(T log T) where it is a candidate.
Plan completed(Plan plan, const Request& kept) {
  Request made_with = kept;
  made_with.optimizer = plan.optimizer;
  return complete_plan(std::move(plan), made_with);
}

// Whether spp plans full sharding where its settings search finds nothing (`may_shard_fully` of
// the user's request, `asked`, under its list schedule). O(1).
bool falls_back_to_full_sharding(const Request& asked, schedule::Policy policy) {
  return policy == schedule::Policy::kList && may_shard_fully(asked);
}

// Whether the first two candidates are the file's settings with the optimizer replicated, then
// sharded (settings_candidates: spp chooses the optimizer). O(1).
bool has_sharded_twin(const std::vector<SettingsCandidate>& candidates) {
  return candidates.size() > 1 && candidates[0].optimizer == Optimizer::kReplicated &&
         candidates[1].optimizer == Optimizer::kSharded;
}

// The description's flags a candidate's model was made with: sequence parallelism, selective
// recomputation. O(1).
std::pair<bool, bool> description_flags(const Request& request) {
  const model::TransformerConfig& description = *request.model.transformer;
  return {description.sequence_parallel, description.selective_recompute};
}

// The candidates' requests, in order. O(K).
std::vector<const Request*> requests_of(const std::deque<Asked>& asked) {
  std::vector<const Request*> out;
  out.reserve(asked.size());
  for (const Asked& each : asked) out.push_back(&each.request);
  return out;
}

// The indices of `requests` whose flags no earlier one (nor `except`, when given) has: each
// distinct flag set once, in order. O(K^2).
std::vector<std::size_t> first_of_each_flags(const std::vector<const Request*>& requests,
                                             const Request* except = nullptr) {
  std::vector<std::size_t> out;
  for (std::size_t x = 0; x < requests.size(); ++x) {
    const auto flags = description_flags(*requests[x]);
    bool seen = except && description_flags(*except) == flags;
    for (const std::size_t before : out)
      seen = seen || description_flags(*requests[before]) == flags;
    if (!seen) out.push_back(x);
  }
  return out;
}

// What follows a refusal where full sharding was tried too (`fully_sharded_plan`: the
// one-stage configurations, and the pipelined ones within its budget). Since 2026-12-07.
constexpr const char* kNorFullySharded =
    "; none of the Megatron-LM configurations spp tried fully sharded (--optimizer "
    "fully-sharded) fits either";

// The refusal where no candidate has a plan, nor full sharding where tried (`tried_full`): the
// refusal of the sharded twin of the file's settings where spp chose the optimizer (the first
// candidate's would advise --shard-optimizer, which spp tried), else the first candidate's.
// O(1).
InfeasibleError refusal_of_all(const std::vector<SettingsCandidate>& candidates,
                               const std::vector<std::optional<InfeasibleError>>& refusals,
                               bool tried_full) {
  const bool twin = has_sharded_twin(candidates) && refusals[1].has_value();
  const InfeasibleError& refusal = *refusals[twin ? 1 : 0];
  if (!tried_full) return refusal;
  return InfeasibleError(refusal.what() + std::string(kNorFullySharded));
}

// Where no candidate of the settings search has a plan (each refused for memory): the fastest
// fully sharded plan of `planner` (`fully_sharded_plan`, Megatron-LM's one-stage configurations)
// under each candidate's description flags, `requests`, its first with the same flags tried
// alone, kept where strictly faster than those before it; with the index of the candidate it
// was made under. Only where spp may choose full sharding (`may_shard_fully` of the user's
// request, `asked`) under its list schedule: the megatron planner plans such configurations
// (Llama 3.1 70B at 32,768 tokens on 64 H100 at --context-parallel 4: t1 p1 c4, 99.01 s) where
// spp refused until 2026-12-07, as it tried full sharding only beside a plan it had.
// O(K (degrees + 23)) plans for K candidates.
std::optional<std::pair<Plan, std::size_t>> fully_sharded_instead(
    const Request& asked, const std::vector<const Request*>& requests, const std::string& planner,
    schedule::Policy policy) {
  std::optional<std::pair<Plan, std::size_t>> best;
  if (!falls_back_to_full_sharding(asked, policy)) return best;
  for (const std::size_t x : first_of_each_flags(requests)) {
    for (const Optimizer sharding : kGradientShardings) {
      std::optional<Plan> found =
          fully_sharded_plan(*requests[x], planner, nullptr, policy, sharding);
      if (found && (!best || strictly_faster(found->timeline.iteration_ms,
                                             best->first.timeline.iteration_ms))) {
        best.emplace(std::move(*found), x);
      }
    }
  }
  if (best) {
    best->first.notes.push_back("no plan under the settings searched; Megatron-LM's " +
                                std::string(best->first.optimizer == Optimizer::kFullySharded
                                                ? "fully sharded configuration"
                                                : "configuration with sharded gradients") +
                                ": " + io::format_ms(best->first.timeline.iteration_ms));
  }
  return best;
}

// Full sharding under the flags of the candidates the search did not keep (`with_full_sharding`
// tried the kept one's): Megatron-LM's fully sharded one-stage configurations can fit or run
// faster under other flags (Llama 3.1 8B at 32,768 tokens on one DGX H100 at c = 4, 8
// micro-batches: 17.57 s under the kept flags, 16.81 s under others). Each distinct flag set
// once, in the candidates' order, adopted into `plan` where strictly faster; returns the index of
// the candidate whose flags the plan has (`flags_x`, the kept one's or that of an earlier step,
// when none is adopted). O(K (degrees + 23)) plans.
std::size_t with_full_sharding_elsewhere(const Request& user, const std::deque<Asked>& asked,
                                         std::size_t kept_x, std::size_t flags_x,
                                         schedule::Policy policy, Plan& plan) {
  if (!falls_back_to_full_sharding(user, policy)) return flags_x;
  const std::vector<const Request*> requests = requests_of(asked);
  for (const std::size_t x : first_of_each_flags(requests, requests[kept_x])) {
    for (const Optimizer sharding : kGradientShardings) {
      std::optional<Plan> found =
          fully_sharded_plan(asked[x].request, plan.planner, nullptr, policy, sharding);
      if (!found || !strictly_faster(found->timeline.iteration_ms, plan.timeline.iteration_ms)) {
        continue;
      }
      Variants tried{std::move(plan), std::nullopt};
      adopt(std::move(*found), asked[x].label + sharding_note(sharding), tried);
      plan = std::move(tried.plan);
      flags_x = x;
    }
  }
  return flags_x;
}

// spp's last scheduling step (`with_devices_shared`) on the plans of the candidates the search did
// not keep: a candidate's plan with its devices shared can beat the kept plan with its own
// (Llama 3.1 8B at 8,192 tokens with fused attention on 2 DGX H100, 32 micro-batches: the kept
// plan, sequence parallelism on, 1,591 ms on three stages, no faster shared; sequence
// parallelism off, 1,657 ms on two stages, and 1,524 ms with 4 stages per device, which spp found
// only with `--sequence-parallel off` until 2026-12-07). Each other candidate with a plan, in
// order, within a budget of kMegatronVariantExtraSteps scheduling steps (kSharedDeviceSchedules
// schedules of each plan), adopted into `plan` where strictly faster; returns the index of the
// candidate whose settings the plan has (`kept_x` when none is adopted). Only where the final
// plan gets that step (`reschedules_final_plan`). O(K 23) schedules and replays.
std::size_t with_devices_shared_elsewhere(const std::deque<Asked>& asked, std::size_t kept_x,
                                          schedule::Policy policy, Plan& plan) {
  std::size_t flags_x = kept_x;
  if (!reschedules_final_plan(asked[kept_x].request, policy)) return flags_x;
  double budget = kMegatronVariantExtraSteps;
  for (std::size_t x = 0; x < asked.size(); ++x) {
    if (x == kept_x || !asked[x].plan) continue;
    const Request& request = asked[x].request;
    const double steps =
        scheduling_steps(request.topology, asked[x].plan->stages, request.micro_batches) *
        kSharedDeviceSchedules;
    if (steps > budget) continue;
    budget -= steps;
    Plan found = with_devices_shared(request, *asked[x].plan, policy);
    if (!strictly_faster(found.timeline.iteration_ms, plan.timeline.iteration_ms)) continue;
    Variants tried{std::move(plan), std::nullopt};
    adopt(std::move(found), asked[x].label + "its devices shared faster", tried);
    plan = std::move(tried.plan);
    flags_x = x;
  }
  return flags_x;
}

// Megatron-LM's variants (`megatron_variants_tried`) under the flags of the candidates the search
// did not keep (`with_megatron_variants` tried the kept one's): a configuration can be faster
// under other flags (GPT-3 175B on 512 A100-80GB, 256 micro-batches: the kept candidate,
// selective recomputation off, led to t8 p4 V24 at 6,081 ms; with it on, 5,990.6 ms, which spp
// found only with the flags fixed until 2026-12-07). Each distinct flag set once, in the
// candidates' order, every seed within kMegatronVariantExtraSteps scheduling steps (none past
// them), a variant adopted into `plan` where strictly faster; returns the index of the candidate
// whose flags the plan has (`flags_x` when none is adopted). Only for the list policy on a
// described model. O(K V) plans for K candidates.
std::size_t with_megatron_variants_elsewhere(const std::deque<Asked>& asked, std::size_t kept_x,
                                             std::size_t flags_x, schedule::Policy policy,
                                             Plan& plan) {
  if (policy != schedule::Policy::kList || !asked[kept_x].request.model.transformer) {
    return flags_x;
  }
  const std::vector<const Request*> requests = requests_of(asked);
  for (const std::size_t x : first_of_each_flags(requests, requests[kept_x])) {
    const double before = plan.timeline.iteration_ms;
    plan = megatron_variants_tried(asked[x].request, std::move(plan), kMegatronVariantSeeds, false);
    if (strictly_faster(plan.timeline.iteration_ms, before)) flags_x = x;
  }
  return flags_x;
}

}  // namespace

Plan plan_choosing_settings(const Request& request, const std::string& planner,
                            schedule::Policy policy,
                            const std::function<Plan(const Request&, schedule::Policy)>& plan_one) {
  const std::vector<SettingsCandidate> candidates = settings_candidates(request);
  const model::Model& file_model = request.model;
  // Nothing to choose and nothing to change: the planner alone, on the request as it is (with
  // its schedule's stages per device chosen, for spp on a model with spec 8 fields).
  if (candidates.size() == 1 && candidates.front().optimizer == request.optimizer &&
      (!file_model.transformer || (candidates.front().settings.sequence_parallel ==
                                       file_model.transformer->sequence_parallel &&
                                   candidates.front().settings.selective_recompute ==
                                       file_model.transformer->selective_recompute))) {
    Plan plan;
    try {
      plan = plan_one(request, policy);
    } catch (const InfeasibleError& error) {
      auto instead = fully_sharded_instead(request, {&request}, planner, policy);
      if (instead) return completed(std::move(instead->first), request);
      if (!falls_back_to_full_sharding(request, policy)) throw;
      throw InfeasibleError(error.what() + std::string(kNorFullySharded));
    }
    if (!request.choose_settings) return plan;
    return completed(
        with_full_sharding(
            request, request,
            with_megatron_variants(request, with_devices_shared(request, std::move(plan), policy),
                                   policy),
            policy, plan_one),
        request);
  }
  std::deque<Asked> asked;
  for (const SettingsCandidate& candidate : candidates) {
    asked.emplace_back(
        request,
        file_model.transformer ? model::transformer_variant(file_model, candidate.settings)
                               : file_model,
        candidate.optimizer, "settings: " + candidate_text(candidate, file_model) + ": ");
  }
  std::optional<Plan> best;
  std::size_t best_x = 0;
  std::vector<std::optional<InfeasibleError>> refusals(asked.size());
  std::vector<std::string> notes;
  // Every candidate planned on parallel threads, then read in order (deterministic).
  const std::vector<std::exception_ptr> failures = for_each_index(
      asked.size(), [&](std::size_t x) { asked[x].plan = plan_one(asked[x].request, policy); });
  for (std::size_t x = 0; x < asked.size(); ++x) {
    try {
      if (failures[x]) std::rethrow_exception(failures[x]);
      notes.push_back(asked[x].label + io::format_ms(asked[x].plan->timeline.iteration_ms));
      if (!best ||
          strictly_faster(asked[x].plan->timeline.iteration_ms, best->timeline.iteration_ms)) {
        best = asked[x].plan;
        best_x = x;
      }
    } catch (const InfeasibleError& error) {
      refusals[x] = error;
      notes.push_back(asked[x].label + "no plan (" + error.what() + ")");
    }
  }
  if (!best) {
    auto instead = fully_sharded_instead(request, requests_of(asked), planner, policy);
    if (!instead) {
      throw refusal_of_all(candidates, refusals, falls_back_to_full_sharding(request, policy));
    }
    Plan out = completed(std::move(instead->first), asked[instead->second].request);
    record_flags(candidates[instead->second], file_model, out);
    out.notes.insert(out.notes.end(), notes.begin(), notes.end());
    return out;
  }
  cross_replay(asked, best, best_x, notes);
  // The later steps try their variants under the kept candidate's request, or where it keeps the
  // replicated optimizer spp may shard, its sharded twin's (the same flags): sharded is never
  // slower and never needs more memory for the same stages (spec 8.3), so more variants fit. The
  // kept plan stays as it is unless a variant is strictly faster.
  const bool twin = best_x == 0 && has_sharded_twin(candidates);
  const Request& kept = asked[twin ? 1 : best_x].request;
  Plan planned = with_full_sharding(
      request, kept,
      with_megatron_variants(kept, with_devices_shared(kept, std::move(*best), policy), policy),
      policy, plan_one);
  const std::size_t shared_x = with_devices_shared_elsewhere(asked, best_x, policy, planned);
  const std::size_t variants_x =
      with_megatron_variants_elsewhere(asked, best_x, shared_x, policy, planned);
  const std::size_t flags_x =
      with_full_sharding_elsewhere(request, asked, best_x, variants_x, policy, planned);
  Plan out = completed(std::move(planned), flags_x == best_x ? kept : asked[flags_x].request);
  record_flags(candidates[flags_x], file_model, out);
  out.notes.insert(out.notes.end(), notes.begin(), notes.end());
  return out;
}

std::optional<double> one_replica_ms(const Request& request, const Partition& shape,
                                     schedule::Policy policy) {
  const int r = shape.stages.front().replicas();
  if (r < 2 || request.micro_batches % r != 0) return std::nullopt;
  model::Model model = request.model;
  const double shard = model::sharded_factor(model) / r;
  if (request.optimizer == Optimizer::kSharded) {
    model.parameter_memory_factor -= model::sharded_factor(model) - shard;
    model.sharded_memory_factor = shard;
  } else if (request.optimizer == Optimizer::kFullySharded) {
    // Everything divided among the replicas; the replica alone is planned replicated, without
    // the working copies and the gathers, which only add to the whole plan (still a bound).
    model.sharded_memory_factor = shard;
    model.parameter_memory_factor /= r;
  } else if (request.optimizer == Optimizer::kShardedGradients) {
    // The weights whole, the rest divided; likewise without the working copies and the
    // reduce-scatters.
    const double weights = model::factor_split(model).weights;
    model.sharded_memory_factor = shard;
    model.parameter_memory_factor = weights + (model.parameter_memory_factor - weights) / r;
  }
  for (model::Layer& layer : model.layers) {
    layer.update_ms = 0;
    if (layer.tensor_parallel) layer.tensor_parallel->update_ms.clear();
  }
  Partition one{shape.gpu_order, shape.stages};
  for (Stage& stage : one.stages) stage.gpus = stage.group(0);
  Request replica = with_inputs(request, model, request.topology);
  replica.micro_batches = request.micro_batches / r;
  if (shards_gradients(replica.optimizer)) replica.optimizer = Optimizer::kReplicated;
  const Finished made = try_finish_plan("spp", one, replica, policy);
  if (!made.plan) return std::nullopt;
  // The last forward or backward: a replica of a context-parallel stage has an AllReduce of its
  // own, over fewer ranks than the whole plan's.
  double end = 0;
  for (const TimedCompute& task : made.plan->timeline.compute) end = std::max(end, task.end_ms);
  return end;
}

model::TransformerSettings settings_of(const Plan& plan) {
  model::TransformerSettings settings;
  if (plan.micro_batch_size) settings.micro_batch_size = static_cast<int>(*plan.micro_batch_size);
  settings.sequence_parallel = plan.sequence_parallel;
  settings.selective_recompute = plan.selective_recompute;
  return settings;
}

}  // namespace pipeplan::planners
