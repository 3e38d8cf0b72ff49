// The batch-size search (planners::plan_global_batch): the candidates, the choice and its ties,
// candidates that do not fit, profiled models, and the errors.

#include "pipeplan/planners/batch_size.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;

// A small GPT-style description (b = 1 unless fixed).
model::Model tiny_transformer(bool fix_size = false, int micro_batch_size = 1) {
  model::TransformerConfig config;
  config.name = "tiny";
  config.layers = 2;
  config.hidden = 256;
  config.heads = 4;
  config.sequence = 128;
  config.vocab = 1000;
  config.micro_batch_size = micro_batch_size;
  config = model::complete_transformer_config(config).first;
  config.micro_batch_size_fixed = fix_size;
  model::Model model = model::transformer_model(config);
  model.transformer = config;
  return model;
}

// A plan whose only content is its iteration time: what the search compares.
Plan plan_taking(double ms, int micro_batches) {
  Plan plan;
  plan.timeline.iteration_ms = ms;
  plan.schedule.micro_batches = micro_batches;
  return plan;
}

// A plan function for the ranked search: records the sizes it is asked for, in order, and
// returns a plan taking `iteration[b]` ms (0: does not fit).
struct RecordingPlanner {
  std::map<int, double> iteration;
  std::vector<int> sizes_planned;
  Plan operator()(const model::Model& at, int micro_batches) {
    const int b = static_cast<int>(*at.profile_batch_size);
    sizes_planned.push_back(b);
    if (iteration[b] == 0) throw InfeasibleError("stage 0 does not fit");
    return plan_taking(iteration[b], micro_batches);
  }
};

template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(BatchSizeTest, CandidatesAreTheDivisorsWithinTheTaskLimit) {
  EXPECT_EQ(candidate_micro_batch_sizes(12), (std::vector<std::int64_t>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(candidate_micro_batch_sizes(1), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(candidate_micro_batch_sizes(49), (std::vector<std::int64_t>{1, 7, 49}));
  EXPECT_EQ(candidate_micro_batch_sizes(1536).size(), 20u);  // 2^9 x 3
  EXPECT_EQ(candidate_micro_batch_sizes(1920).size(), 32u);  // 2^7 x 3 x 5
  // 2^20 sequences: micro-batch sizes 1 and 2 make more than 2^18 micro-batches, which even
  // one stage cannot schedule within 2^19 tasks.
  const std::vector<std::int64_t> large = candidate_micro_batch_sizes(std::int64_t{1} << 20);
  EXPECT_EQ(large.front(), 4);
  EXPECT_EQ(large.size(), 19u);
}

TEST(BatchSizeTest, KeepsTheFastestAndBreaksTiesTowardTheLargerSize) {
  const model::Model model = tiny_transformer();
  // Per micro-batch size: iteration time, or no plan (0).
  std::map<int, double> iteration = {{1, 900}, {2, 700}, {3, 0}, {4, 650}, {6, 650}, {12, 800}};
  std::vector<int> sizes_planned;
  auto plan = [&](const model::Model& at, int micro_batches) {
    const int b = static_cast<int>(*at.profile_batch_size);
    sizes_planned.push_back(b);
    EXPECT_EQ(b * micro_batches, 12);
    EXPECT_EQ(at.transformer->micro_batch_size, b);
    if (iteration[b] == 0) throw InfeasibleError("stage 0 does not fit");
    return plan_taking(iteration[b], micro_batches);
  };
  const GlobalBatchPlan chosen = plan_global_batch(model, 12, "m.json", plan);
  EXPECT_EQ(sizes_planned, (std::vector<int>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(chosen.plan.micro_batch_size, 6);  // 650 ms at 4 and 6: the larger wins
  EXPECT_EQ(chosen.plan.timeline.iteration_ms, 650);
  EXPECT_EQ(chosen.model.profile_batch_size, 6);
  EXPECT_EQ(chosen.model.name, "tiny");
  ASSERT_GE(chosen.plan.notes.size(), 7u);
  EXPECT_EQ(chosen.plan.notes[2],
            "batch-size search: micro-batch size 3 (4 micro-batches): no plan (stage 0 does not "
            "fit)");
  EXPECT_EQ(chosen.plan.notes[6], "batch-size search: chose micro-batch size 6 of 6 tried");
  // Within 1e-9 relative is a tie too; a clearly faster smaller size still wins.
  iteration = {{1, 900}, {2, 700}, {3, 0}, {4, 650}, {6, 650 * (1 + 1e-12)}, {12, 800}};
  EXPECT_EQ(plan_global_batch(model, 12, "m.json", plan).plan.micro_batch_size, 6);
  iteration = {{1, 900}, {2, 700}, {3, 0}, {4, 649}, {6, 650}, {12, 800}};
  EXPECT_EQ(plan_global_batch(model, 12, "m.json", plan).plan.micro_batch_size, 4);
}

TEST(BatchSizeTest, WithAnEstimatePlansTheMostPromisingUntilThreeGavePlans) {
  const model::Model model = tiny_transformer();
  RecordingPlanner recorder{{{1, 900}, {2, 700}, {3, 0}, {4, 650}, {6, 650}, {12, 800}}, {}};
  auto& [iteration, sizes_planned] = recorder;
  std::map<int, double> guess = {{1, 500}, {2, 100}, {3, 50}, {4, 300}, {6, 300}, {12, 900}};
  auto plan = [&](const model::Model& at, int micro_batches) {
    return recorder(at, micro_batches);
  };
  auto estimate = [&](const model::Model& at, int micro_batches) {
    const int b = static_cast<int>(*at.profile_batch_size);
    EXPECT_EQ(b * micro_batches, 12);
    return guess[b];
  };
  const GlobalBatchPlan chosen = plan_global_batch(model, 12, "m.json", plan, estimate);
  // By estimate: 3 (no plan), 2, then 4 and 6 (equal estimates: the smaller first); three plans.
  EXPECT_EQ(sizes_planned, (std::vector<int>{3, 2, 4, 6}));
  EXPECT_EQ(chosen.plan.micro_batch_size, 6);  // 650 ms at 4 and 6: the larger wins
  ASSERT_EQ(chosen.plan.notes.size(), 7u);
  EXPECT_EQ(chosen.plan.notes[0],
            "batch-size search: micro-batch size 1 (12 micro-batches): not planned, estimate "
            "500 ms");
  EXPECT_EQ(chosen.plan.notes[1],
            "batch-size search: micro-batch size 2 (6 micro-batches): 700 ms, estimate 100 ms");
  EXPECT_EQ(chosen.plan.notes[6],
            "batch-size search: chose micro-batch size 6 of 4 tried (the 3 with plans of the "
            "smallest estimates, of 6 sizes)");
  // Planned larger size first, the tie still goes to the larger; a clearly faster smaller size
  // planned later still wins.
  guess = {{1, 500}, {2, 100}, {3, 50}, {4, 300}, {6, 200}, {12, 900}};
  sizes_planned.clear();
  EXPECT_EQ(plan_global_batch(model, 12, "m.json", plan, estimate).plan.micro_batch_size, 6);
  EXPECT_EQ(sizes_planned, (std::vector<int>{3, 2, 6, 4}));
  iteration[4] = 649;
  EXPECT_EQ(plan_global_batch(model, 12, "m.json", plan, estimate).plan.micro_batch_size, 4);
  // Within 1e-9 relative is a tie, whichever is planned first.
  iteration[4] = 650 * (1 - 1e-12);
  EXPECT_EQ(plan_global_batch(model, 12, "m.json", plan, estimate).plan.micro_batch_size, 6);
  // When nothing fits, every size is tried.
  iteration = {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {6, 0}, {12, 0}};
  sizes_planned.clear();
  EXPECT_EQ(error_of([&] {
              plan_global_batch(model, 12, "m.json", plan, estimate);
            }).rfind("--global-batch 12: no micro-batch size of the 6 tried gives a plan", 0),
            0u);
  EXPECT_EQ(sizes_planned.size(), 6u);
}

// A size whose micro-batch count the schedule policy refuses (interleaved-1f1b on 4 devices
// wants a multiple of 4 per replica: simulate::ScheduleError, exit 3 under --micro-batches) is a
// size without a plan, so the search goes on: ranked first by its estimate here, as the search
// that threw it did before 2026-12-07. Every size refused is invalid input; one that did not fit
// among them makes it infeasible.
TEST(BatchSizeTest, SizesThePolicyRefusesAreSkipped) {
  const model::Model model = tiny_transformer();
  std::vector<int> sizes_planned;
  std::map<int, bool> fits;  // by micro-batch size; refused counts never get this far
  auto plan = [&](const model::Model& at, int micro_batches) {
    const int b = static_cast<int>(*at.profile_batch_size);
    sizes_planned.push_back(b);
    if (micro_batches % 4 != 0) {
      throw simulate::ScheduleError("--micro-batches " + std::to_string(micro_batches) +
                                    " is not a multiple of 4");
    }
    if (!fits[b]) throw InfeasibleError("stage 0 does not fit");
    return plan_taking(100.0 * b, micro_batches);
  };
  auto estimate = [](const model::Model& at, int) {
    return 1000.0 / static_cast<double>(*at.profile_batch_size);  // the largest size first
  };
  fits = {{1, true}, {3, true}};
  // 12 sequences: sizes 12, 6, 4, 3, 2, 1 in the estimate's order, 1, 2, 3, 4, 6 and 12
  // micro-batches: 12 and 4 are multiples of 4 (sizes 1 and 3).
  const GlobalBatchPlan chosen = plan_global_batch(model, 12, "m.json", plan, estimate);
  EXPECT_EQ(chosen.plan.micro_batch_size, 1);  // 100 ms against 300
  EXPECT_EQ(sizes_planned, (std::vector<int>{12, 6, 4, 3, 2, 1}));
  EXPECT_EQ(chosen.plan.notes[3],
            "batch-size search: micro-batch size 4 (3 micro-batches): no plan (--micro-batches 3 "
            "is not a multiple of 4), estimate 250 ms");
  // 6 sequences: 6, 3, 2 and 1 micro-batches, none a multiple of 4.
  try {
    plan_global_batch(model, 6, "m.json", plan, estimate);
    FAIL() << "expected a refusal";
  } catch (const simulate::ScheduleError& error) {
    EXPECT_EQ(error.code(), ExitCode::kInvalidInput);
    EXPECT_STREQ(error.what(),
                 "--global-batch 6: no micro-batch size of the 4 tried gives a plan; at "
                 "micro-batch size 1 (6 micro-batches): --micro-batches 6 is not a multiple of 4; "
                 "at micro-batch size 6 (1 micro-batch): --micro-batches 1 is not a multiple of 4");
  }
  // 12 sequences where the sizes the policy runs do not fit: infeasible.
  fits = {};
  EXPECT_THROW(plan_global_batch(model, 12, "m.json", plan, estimate), InfeasibleError);
}

// The work limit (kBatchSizeWork, micro-batches x GPUs over the sizes planned): once a size has
// given a plan, the search stops before the first size that would pass it, and plans no later
// (smaller) size either; until one has, it plans whatever the work.
TEST(BatchSizeTest, WithAnEstimateStopsBeforeTheWorkLimit) {
  const model::Model model = tiny_transformer();
  RecordingPlanner recorder{{{1, 900}, {2, 700}, {3, 0}, {4, 650}, {6, 650}, {12, 800}}, {}};
  auto& [iteration, sizes_planned] = recorder;
  const std::map<int, double> guess = {{1, 500}, {2, 100}, {3, 50}, {4, 300}, {6, 300}, {12, 900}};
  auto plan = [&](const model::Model& at, int micro_batches) {
    return recorder(at, micro_batches);
  };
  auto estimate = [&](const model::Model& at, int) {
    return guess.at(static_cast<int>(*at.profile_batch_size));
  };
  // By estimate 3 (4 micro-batches, no plan), 2 (6), 4 (3), 6 (2). With W / 12.5 GPUs (W the
  // limit), 3 and 2 make 0.8 W; 4 (0.24 W more) would pass W and stops the search, so 6 (0.16 W,
  // within what is left) is not planned either.
  const auto gpus = static_cast<int>(kBatchSizeWork / 12.5);
  const GlobalBatchPlan chosen = plan_global_batch(model, 12, "m.json", plan, estimate, gpus);
  EXPECT_EQ(sizes_planned, (std::vector<int>{3, 2}));
  EXPECT_EQ(chosen.plan.micro_batch_size, 2);
  EXPECT_EQ(chosen.plan.notes.back(),
            "batch-size search: chose micro-batch size 2 of 2 tried (from the smallest estimate "
            "on, until the next would pass the work limit (2e6 micro-batches x GPUs), of 6 sizes)");
  EXPECT_EQ(chosen.plan.notes[3],
            "batch-size search: micro-batch size 4 (3 micro-batches): not planned, estimate "
            "300 ms");
  // W / 20 GPUs: 3, 2, 4 and 6 make 0.75 W, within the limit: three plans, as without it.
  sizes_planned.clear();
  EXPECT_EQ(
      plan_global_batch(model, 12, "m.json", plan, estimate, static_cast<int>(kBatchSizeWork / 20))
          .plan.micro_batch_size,
      6);
  EXPECT_EQ(sizes_planned, (std::vector<int>{3, 2, 4, 6}));
  // Nothing fits: every size is tried, whatever the work.
  iteration = {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {6, 0}, {12, 0}};
  sizes_planned.clear();
  EXPECT_THROW(plan_global_batch(model, 12, "m.json", plan, estimate, gpus), InfeasibleError);
  EXPECT_EQ(sizes_planned.size(), 6u);
}

TEST(BatchSizeTest, PicksTheSizeWhosePlanIsFastest) {
  // One GPU: every candidate is planned for real and the search must return the fastest of
  // the plans made one by one.
  const model::Model model = tiny_transformer();
  const topology::Topology topology = uniform_topology(1, 1e10, 0.001);
  auto plan = [&](const model::Model& at, int micro_batches) {
    return make_plan("data-parallel", Request{at, topology, micro_batches});
  };
  const GlobalBatchPlan chosen = plan_global_batch(model, 16, "m.json", plan);
  double best_ms = 1e300;
  std::int64_t best_size = 0;
  for (std::int64_t b : candidate_micro_batch_sizes(16)) {
    model::TransformerConfig config = *model.transformer;
    config.micro_batch_size = static_cast<int>(b);
    const model::Model at = model::transformer_model(config);
    const Plan alone = plan(at, static_cast<int>(16 / b));
    // One stage on one GPU: M forwards and backwards in a row, then (spec 8.3, once the
    // execution model runs update tasks) the optimizer step.
    double work_ms = 0, update_ms = 0;
    for (const model::Layer& layer : at.layers) {
      work_ms += layer.forward_ms + layer.backward_ms;
      update_ms += layer.update_ms;
    }
    const double without = (16.0 / static_cast<double>(b)) * work_ms;
    const double tolerance = 1e-9 * without;
    const double got = alone.timeline.iteration_ms;
    EXPECT_TRUE(std::abs(got - without) <= tolerance ||
                std::abs(got - without - update_ms) <= tolerance)
        << b << ": " << got << " vs " << without << " (+ " << update_ms << ")";
    if (alone.timeline.iteration_ms <= best_ms * (1 + 1e-9)) {
      best_ms = alone.timeline.iteration_ms;
      best_size = b;
    }
  }
  EXPECT_EQ(chosen.plan.micro_batch_size, best_size);
  EXPECT_EQ(chosen.plan.timeline.iteration_ms, best_ms);
  EXPECT_EQ(chosen.plan.schedule.micro_batches, 16 / best_size);
  // Larger micro-batches run closer to the peak (Calculon's efficiencies): not the smallest.
  EXPECT_GT(best_size, 1);
}

TEST(BatchSizeTest, SkipsSizesThatDoNotFitInMemory) {
  const model::Model model = tiny_transformer();
  // Room for the static bytes, the framework reserve and the stashes of a micro-batch of 2
  // sequences, not 4.
  model::TransformerConfig config = *model.transformer;
  config.micro_batch_size = 2;
  const model::Model at_two = model::transformer_model(config);
  double static_bytes = 0, stash_bytes = 0;
  for (const model::Layer& layer : at_two.layers) {
    static_bytes += at_two.parameter_memory_factor * layer.parameter_bytes;
    stash_bytes += layer.stash_bytes;
  }
  const topology::Topology topology =
      uniform_topology(1, 1e10, 0.001, {}, static_bytes + at_two.reserve_bytes + 1.5 * stash_bytes);
  auto plan = [&](const model::Model& at, int micro_batches) {
    return make_plan("data-parallel", Request{at, topology, micro_batches});
  };
  const GlobalBatchPlan chosen = plan_global_batch(model, 16, "m.json", plan);
  EXPECT_LE(*chosen.plan.micro_batch_size, 2);
  EXPECT_EQ(chosen.plan.notes[2].rfind("batch-size search: micro-batch size 4 (4 micro-batches): "
                                       "no plan (data-parallel: stage 0 (layers 0-3) needs ",
                                       0),
            0u)
      << chosen.plan.notes[2];
  // With room for nothing, the search says so for the smallest and the largest size.
  const topology::Topology tiny_gpu = uniform_topology(1, 1e10, 0.001, {}, 1000.0);
  auto nothing_fits = [&](const model::Model& at, int micro_batches) {
    return make_plan("data-parallel", Request{at, tiny_gpu, micro_batches});
  };
  const std::string message =
      error_of([&] { plan_global_batch(model, 16, "m.json", nothing_fits); });
  EXPECT_EQ(
      message.rfind("--global-batch 16: no micro-batch size of the 5 tried gives a plan; "
                    "at micro-batch size 1 (16 micro-batches): data-parallel: stage 0 (layers "
                    "0-3) needs ",
                    0),
      0u)
      << message;
  EXPECT_NE(
      message.find("; at micro-batch size 16 (1 micro-batch): data-parallel: stage 0 (layers 0-3) "
                   "needs "),
      std::string::npos)
      << message;
}

TEST(BatchSizeTest, AFixedSizeIsTheOnlyOneTried) {
  const model::Model model = tiny_transformer(true, 4);
  std::vector<int> planned;
  auto plan = [&](const model::Model&, int micro_batches) {
    planned.push_back(micro_batches);
    return plan_taking(1, micro_batches);
  };
  EXPECT_EQ(plan_global_batch(model, 32, "m.json", plan).plan.micro_batch_size, 4);
  EXPECT_EQ(planned, (std::vector<int>{8}));
  EXPECT_EQ(error_of([&] { plan_global_batch(model, 30, "m.json", plan); }),
            "--global-batch: 30 is not a multiple of the micro-batch size 4 "
            "(transformer.micro_batch_size in m.json)");
}

TEST(BatchSizeTest, AProfiledModelUsesItsBatchSize) {
  model::Model model = make_model({L{1, 2}, L{1, 2}});
  std::vector<int> planned;
  auto plan = [&](const model::Model&, int micro_batches) {
    planned.push_back(micro_batches);
    return plan_taking(1, micro_batches);
  };
  EXPECT_EQ(error_of([&] { plan_global_batch(model, 96, "m.json", plan); }),
            "--global-batch needs the micro-batch size the model was profiled at: m.json has no "
            "\"profile\": {\"batch_size\": ...} (or pass --micro-batches)");
  model.profile_batch_size = 6;
  const GlobalBatchPlan chosen = plan_global_batch(model, 96, "m.json", plan);
  EXPECT_EQ(planned, (std::vector<int>{16}));
  EXPECT_EQ(chosen.plan.micro_batch_size, 6);
  EXPECT_EQ(error_of([&] { plan_global_batch(model, 100, "m.json", plan); }),
            "--global-batch: 100 is not a multiple of the profiled batch size 6 "
            "(profile.batch_size in m.json)");
  model.profile_batch_size = 1;
  EXPECT_EQ(error_of([&] { plan_global_batch(model, std::int64_t{1} << 30, "m.json", plan); }),
            "--global-batch: 1073741824 sequences at 1 per micro-batch make 1073741824 "
            "micro-batches, more than the limit of 1048576");
}

TEST(BatchSizeTest, RefusesSearchesBeyondItsLimit) {
  const model::Model model = tiny_transformer();
  auto plan = [&](const model::Model&, int micro_batches) { return plan_taking(1, micro_batches); };
  // 720720 = 2^4 3^2 5 7 11 13 has 240 divisors; 238 of them (all but 1 and 2) leave at most
  // 2^18 micro-batches.
  EXPECT_EQ(error_of([&] { plan_global_batch(model, 720720, "m.json", plan); }),
            "--global-batch 720720 has 238 micro-batch sizes to try, more than the search's "
            "limit of 64; set micro_batch_size in the transformer description, or use a global "
            "batch with fewer divisors (see \"Limits\" in docs/errors.md)");
  EXPECT_EQ(error_of([&] { plan_global_batch(model, 0, "m.json", plan); }),
            "--global-batch: must be from 1 to 1099511627776");
}

}  // namespace
}  // namespace pipeplan::planners
