// The batch-size search (issue 16 part 3, docs/transformer-model.md "The batch-size search"): the
// micro-batch sizes that divide the global batch are planned and the fastest plan kept; with an
// estimate, only the kBatchSizePlans most promising that give plans, within kBatchSizeWork
// (issue 18: bounded work).
// O(sqrt N) to find the candidates, one estimate per candidate, then at most
// kMaxBatchSizeCandidates plans (kBatchSizePlans plus those that fail, with an estimate).

#include "pipeplan/planners/batch_size.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

// `1 micro-batch`, `2 micro-batches`.
std::string micro_batches_text(std::int64_t count) {
  return std::to_string(count) + (count == 1 ? " micro-batch" : " micro-batches");
}

// Spec 4's equality of times: within 1e-9 relative plus 1e-9 ms.
bool no_slower(double candidate_ms, double best_ms) {
  return candidate_ms <= best_ms + 1e-9 * std::abs(best_ms) + 1e-9;
}

struct Attempt {
  std::int64_t micro_batch_size = 0;
  std::optional<double> estimate_ms;   // when the search ranks by estimate
  bool tried = false;                  // planned (else left out by its estimate)
  std::optional<double> iteration_ms;  // empty: no plan
  std::string failure;                 // why not, when there is no plan
  bool refused = false;  // the schedule policy cannot run its micro-batch count (exit 3 alone)
};

// An estimate in a note: its time, or that no megatron configuration fits.
std::string estimate_text(double ms) {
  return std::isfinite(ms) ? io::format_ms(ms) : std::string("none (no configuration fits)");
}

// Which sizes a ranked search planned: `the 3 with plans of the smallest estimates`, or, when
// the work limit stopped it, `from the smallest estimate on, until the next would pass the work
// limit (2e6 micro-batches x GPUs)`.
std::string tried_text(bool work_limited) {
  if (!work_limited) {
    return "the " + std::to_string(kBatchSizePlans) + " with plans of the smallest estimates";
  }
  return "from the smallest estimate on, until the next would pass the work limit (" +
         io::format_number(kBatchSizeWork / 1e6) + "e6 micro-batches x GPUs)";
}

GlobalBatchPlan plan_profiled(const model::Model& model, std::int64_t global_batch,
                              const std::string& model_path, const PlanFunction& plan) {
  if (!model.profile_batch_size) {
    throw UsageError(
        "--global-batch needs the micro-batch size the model was profiled at: " + model_path +
        " has no \"profile\": {\"batch_size\": ...} (or pass "
        "--micro-batches)");
  }
  const std::int64_t size = *model.profile_batch_size;
  if (global_batch % size != 0) {
    throw UsageError("--global-batch: " + std::to_string(global_batch) +
                     " is not a multiple of the profiled batch size " + std::to_string(size) +
                     " (profile.batch_size in " + model_path + ")");
  }
  const std::int64_t micro_batches = global_batch / size;
  if (micro_batches > model::kMaxMicroBatches) {
    throw UsageError("--global-batch: " + std::to_string(global_batch) + " sequences at " +
                     std::to_string(size) + " per micro-batch make " +
                     micro_batches_text(micro_batches) + ", more than the limit of " +
                     std::to_string(model::kMaxMicroBatches));
  }
  GlobalBatchPlan out{model, plan(model, static_cast<int>(micro_batches))};
  out.plan.micro_batch_size = size;
  out.plan.warnings.push_back(
      "--global-batch: " + model_path + " is a profile measured at micro-batch size " +
      std::to_string(size) + ", so only that size was planned (" +
      micro_batches_text(micro_batches) +
      "); a model with its transformer description (as pipeplan model transformer writes it) "
      "is planned at every size that divides " +
      std::to_string(global_batch));
  return out;
}

// The one-line reason of the smallest and the largest size tried, when none gave a plan.
std::string no_plan_message(std::int64_t global_batch, const std::vector<Attempt>& attempts) {
  const Attempt& first = attempts.front();
  std::string message = "--global-batch " + std::to_string(global_batch) + ": ";
  auto reason = [&](const Attempt& attempt) {
    return "at micro-batch size " + std::to_string(attempt.micro_batch_size) + " (" +
           micro_batches_text(global_batch / attempt.micro_batch_size) + "): " + attempt.failure;
  };
  if (attempts.size() == 1) return message + "no plan " + reason(first);
  return message + "no micro-batch size of the " + std::to_string(attempts.size()) +
         " tried gives a plan; " + reason(first) + "; " + reason(attempts.back());
}

}  // namespace

std::vector<std::int64_t> candidate_micro_batch_sizes(std::int64_t global_batch) {
  if (global_batch < 1 || global_batch > kMaxGlobalBatch) {
    throw InternalError("candidate_micro_batch_sizes: global batch " +
                        std::to_string(global_batch) + " out of range");
  }
  std::vector<std::int64_t> small, large;
  for (std::int64_t d = 1; d * d <= global_batch; ++d) {
    if (global_batch % d != 0) continue;
    small.push_back(d);
    if (d * d != global_batch) large.push_back(global_batch / d);
  }
  std::vector<std::int64_t> sizes = small;
  sizes.insert(sizes.end(), large.rbegin(), large.rend());
  // Fewer sizes than this make more micro-batches than one stage's plan of a search may have
  // tasks for.
  const std::int64_t most_micro_batches = kMaxSearchTasks / 2;
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(),
                             [&](std::int64_t b) { return global_batch / b > most_micro_batches; }),
              sizes.end());
  return sizes;
}

namespace {

// The micro-batch sizes to try for a transformer description: its fixed size, or every size
// dividing `global_batch` within the limits. O(sqrt(global_batch)).
std::vector<std::int64_t> transformer_sizes(const model::TransformerConfig& description,
                                            std::int64_t global_batch,
                                            const std::string& model_path) {
  std::vector<std::int64_t> sizes;
  if (description.micro_batch_size_fixed) {
    const std::int64_t size = description.micro_batch_size;
    if (global_batch % size != 0) {
      throw UsageError("--global-batch: " + std::to_string(global_batch) +
                       " is not a multiple of the micro-batch size " + std::to_string(size) +
                       " (transformer.micro_batch_size in " + model_path + ")");
    }
    sizes = {size};
  } else {
    for (std::int64_t b : candidate_micro_batch_sizes(global_batch)) {
      if (b <= model::kMaxTransformerMicroBatchSize) sizes.push_back(b);
    }
  }
  if (sizes.empty()) {
    throw InfeasibleError("--global-batch " + std::to_string(global_batch) +
                          ": every micro-batch size that divides it makes more micro-batches "
                          "than a plan may have (see \"Limits\" in docs/errors.md)");
  }
  if (sizes.size() > static_cast<std::size_t>(kMaxBatchSizeCandidates)) {
    throw InfeasibleError("--global-batch " + std::to_string(global_batch) + " has " +
                          std::to_string(sizes.size()) +
                          " micro-batch sizes to try, more than the search's limit of " +
                          std::to_string(kMaxBatchSizeCandidates) +
                          "; set micro_batch_size in the transformer description, or use a "
                          "global batch with fewer divisors (see \"Limits\" in docs/errors.md)");
  }

  return sizes;
}

// One note per size (planned or not, its time or why it has no plan, its estimate), then the
// choice.
std::vector<std::string> search_notes(std::int64_t global_batch,
                                      const std::vector<Attempt>& attempts, std::int64_t chosen,
                                      bool work_limited) {
  std::vector<std::string> notes;
  notes.reserve(attempts.size() + 1);
  std::size_t tried = 0;
  for (const Attempt& attempt : attempts) {
    std::string note = "batch-size search: micro-batch size " +
                       std::to_string(attempt.micro_batch_size) + " (" +
                       micro_batches_text(global_batch / attempt.micro_batch_size) + "): ";
    if (!attempt.tried) {
      note += "not planned";
    } else if (attempt.iteration_ms) {
      note += io::format_ms(*attempt.iteration_ms);
    } else {
      note += "no plan (" + attempt.failure + ")";
    }
    if (attempt.estimate_ms) note += ", estimate " + estimate_text(*attempt.estimate_ms);
    notes.push_back(std::move(note));
    tried += attempt.tried ? 1 : 0;
  }
  notes.push_back("batch-size search: chose micro-batch size " + std::to_string(chosen) + " of " +
                  std::to_string(tried) + " tried" +
                  (tried < attempts.size() ? " (" + tried_text(work_limited) + ", of " +
                                                 std::to_string(attempts.size()) + " sizes)"
                                           : std::string()));
  return notes;
}

}  // namespace

GlobalBatchPlan plan_global_batch(const model::Model& model, std::int64_t global_batch,
                                  const std::string& model_path, const PlanFunction& plan,
                                  const EstimateFunction& estimate, int gpus) {
  if (global_batch < 1 || global_batch > kMaxGlobalBatch) {
    throw UsageError("--global-batch: must be from 1 to " + std::to_string(kMaxGlobalBatch));
  }
  if (!model.transformer) return plan_profiled(model, global_batch, model_path, plan);

  const std::vector<std::int64_t> sizes =
      transformer_sizes(*model.transformer, global_batch, model_path);
  // With an estimate: the sizes from the most promising, until kBatchSizePlans have plans or
  // the next would take the work past kBatchSizeWork.
  std::vector<std::size_t> order(sizes.size());
  for (std::size_t x = 0; x < order.size(); ++x) order[x] = x;
  std::vector<std::optional<double>> estimates(sizes.size());
  if (estimate) {
    for (std::size_t x = 0; x < sizes.size(); ++x) {
      const model::Model at = model::transformer_model_at(model, static_cast<int>(sizes[x]));
      estimates[x] = estimate(at, static_cast<int>(global_batch / sizes[x]));
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return *estimates[a] < *estimates[b]; });
  }
  std::optional<GlobalBatchPlan> best;
  std::vector<Attempt> attempts(sizes.size());
  int planned = 0;
  double work = 0;            // micro-batches x GPUs over the sizes planned
  bool work_limited = false;  // the work limit stopped the search (no later size is planned)
  for (const std::size_t x : order) {
    const std::int64_t b = sizes[x];
    Attempt& attempt = attempts[x];
    attempt.micro_batch_size = b;
    attempt.estimate_ms = estimates[x];
    const auto micro_batches = static_cast<int>(global_batch / b);
    const double cost = static_cast<double>(micro_batches) * gpus;
    if (estimate && planned >= kBatchSizePlans) continue;
    if (estimate && planned > 0 && (work_limited || work + cost > kBatchSizeWork)) {
      work_limited = true;
      continue;
    }
    work += cost;
    attempt.tried = true;
    model::Model candidate = model::transformer_model_at(model, static_cast<int>(b));
    try {
      Plan made = plan(candidate, micro_batches);
      ++planned;
      attempt.iteration_ms = made.timeline.iteration_ms;
      // Ties go to the larger size, whatever the order of planning.
      const double ms = made.timeline.iteration_ms;
      const bool better = !best || (b > *best->plan.micro_batch_size
                                        ? no_slower(ms, best->plan.timeline.iteration_ms)
                                        : !no_slower(best->plan.timeline.iteration_ms, ms));
      if (better) {
        made.micro_batch_size = b;
        best = GlobalBatchPlan{std::move(candidate), std::move(made)};
      }
    } catch (const InfeasibleError& error) {
      attempt.failure = error.what();
    } catch (const simulate::ScheduleError& error) {
      // The policy refuses this count (interleaved-1f1b's micro-batch groups, say): another
      // size may suit it.
      attempt.failure = error.what();
      attempt.refused = true;
    }
  }
  if (!best) {
    // Every size the policy refused: the options cannot run together (invalid input, as with
    // --micro-batches); else no plan fits (infeasible).
    const std::string message = no_plan_message(global_batch, attempts);
    if (std::all_of(attempts.begin(), attempts.end(),
                    [](const Attempt& a) { return !a.tried || a.refused; })) {
      throw simulate::ScheduleError(message);
    }
    throw InfeasibleError(message);
  }

  const std::vector<std::string> notes =
      search_notes(global_batch, attempts, *best->plan.micro_batch_size, work_limited);
  best->plan.notes.insert(best->plan.notes.begin(), notes.begin(), notes.end());
  return std::move(*best);
}

}  // namespace pipeplan::planners
