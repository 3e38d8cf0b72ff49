#include "pipeplan/partition/search.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <numeric>
#include <random>

#include "../support/builders.hpp"
#include "../support/enumerate.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

using namespace pipeplan::testing;

TEST(SearchTest, CountsAndEnumeratesEveryShape) {
  for (int L = 1; L <= 6; ++L) {
    for (int N = 1; N <= 5; ++N) {
      for (int R = 1; R <= N; ++R) {
        for (int S = 1; S <= 6; ++S) {
          SCOPED_TRACE(std::to_string(L) + " " + std::to_string(N) + " " + std::to_string(R) + " " +
                       std::to_string(S));
          std::vector<int> order(static_cast<std::size_t>(N));
          std::iota(order.rbegin(), order.rend(), 0);
          const ShapeLimits limits{L, R, S};
          int shapes = 0, plans = 0;
          for_each_shape(limits, order, [&](const std::vector<Stage>&) { ++shapes; });
          for_each_plan(L, order, R, S, [&](const std::vector<Stage>&) { ++plans; });
          EXPECT_EQ(shapes, plans);
          EXPECT_EQ(count_shapes(limits, N), static_cast<double>(plans));
        }
      }
    }
  }
}

TEST(SearchTest, NeighboursAreValidShapes) {
  std::mt19937 rng(7);
  const model::Model model = random_model(rng, 9, 1e6);
  const topology::Topology topology = uniform_topology(7, 10e9, 0.01);
  const std::vector<int> order{6, 5, 4, 3, 2, 1, 0};
  const ShapeLimits limits{9, 3, 4};
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<Stage> start = random_shape(rng, order, limits);
    ASSERT_NO_THROW(simulate::check_stages(model, topology, start));
    const auto around = neighbours(model, start, order, limits);
    EXPECT_FALSE(around.empty());
    for (const auto& stages : around) {
      ASSERT_NO_THROW(simulate::check_stages(model, topology, stages)) << stages_text(stages);
      EXPECT_LE(static_cast<int>(stages.size()), limits.max_stages);
      for (const Stage& stage : stages)
        EXPECT_LE(static_cast<int>(stage.gpus.size()), limits.max_replicas);
    }
  }
}

TEST(SearchTest, GreedyPackingNeedsTheFewestGpus) {
  // Greedy is optimal for contiguous one-GPU-per-stage packing along an order: compare it with
  // the fewest stages of every such packing that fits.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 7);
    const model::Model model = random_model(rng, L, 4e6);
    const topology::Topology topology =
        uniform_topology(6, 10e9, 0.01, {}, 4e6 + 4e6 * (rng() % 4));
    const std::vector<int> order{0, 1, 2, 3, 4, 5};
    const int fewest = fewest_fitting_stages(model, order, 1, 6, *topology.gpu(0).memory_bytes);
    int needed = 0;
    const auto packed = greedy_packing(model, topology, order, 1, 6, &needed);
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_EQ(packed.has_value(), fewest > 0);
    if (packed) {
      EXPECT_EQ(static_cast<int>(packed->size()), fewest);
    }
  }
}

// A shape of stages on runs of `runs` GPUs of `order` (from its first GPU), stage s beginning
// at layer firsts[s], of `layers` layers.
std::vector<Stage> shape(const std::vector<int>& firsts, const std::vector<int>& runs, int layers,
                         const std::vector<int>& order) {
  std::vector<Stage> stages;
  std::size_t gpu = 0;
  for (std::size_t s = 0; s < firsts.size(); ++s) {
    Stage stage;
    stage.first_layer = firsts[s];
    stage.last_layer = (s + 1 < firsts.size() ? firsts[s + 1] : layers) - 1;
    for (int g = 0; g < runs[s]; ++g) stage.gpus.push_back(order[gpu++]);
    stages.push_back(stage);
  }
  return stages;
}

// Where `wanted` is among `around` (its layer ranges and GPUs), or -1.
long position(const std::vector<std::vector<Stage>>& around, const std::vector<Stage>& wanted) {
  for (std::size_t x = 0; x < around.size(); ++x) {
    if (stages_text(around[x]) == stages_text(wanted)) return static_cast<long>(x);
  }
  return -1;
}

// A synthetic value: how far the stages' layer counts are from `target` (`mismatch` more for
// another stage count), each evaluation costing 1 and counted in `evaluations`.
Evaluate size_distance(const std::vector<int>& target, double mismatch, int& evaluations) {
  return [&target, mismatch, &evaluations](const std::vector<Stage>& stages) {
    ++evaluations;
    double d = stages.size() == target.size() ? 0 : mismatch;
    for (std::size_t s = 0; s < stages.size() && s < target.size(); ++s) {
      d += std::abs(stages[s].last_layer - stages[s].first_layer + 1 - target[s]);
    }
    return Evaluation{d, 1};
  };
}

// A value read from `table` (shape, value), `otherwise` for any other shape; each evaluation
// costs 1.
Evaluate table_value(const std::vector<std::pair<std::vector<Stage>, double>>& table,
                     double otherwise) {
  std::map<std::string, double> values;
  for (const auto& [stages, value] : table) values.emplace(stages_text(stages), value);
  return [values, otherwise](const std::vector<Stage>& stages) {
    const auto it = values.find(stages_text(stages));
    return Evaluation{it == values.end() ? otherwise : it->second, 1};
  };
}

// The best value `local_search` reaches from `start` alone within `budget` (-1: none found).
double reached(const model::Model& model, const std::vector<Stage>& start,
               const std::vector<int>& order, const ShapeLimits& limits, const Evaluate& value,
               const SearchBudget& budget) {
  const auto found = local_search(model, {start}, 1, order, limits, value, budget);
  return found ? found->iteration_ms : -1;
}

TEST(SearchTest, CompoundMovesComeAfterTheSingleOnes) {
  const model::Model model = make_model(std::vector<L>(12, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3, 4, 5, 6, 7};
  const ShapeLimits limits{12, 4, 4};
  const auto start = shape({0, 3, 6, 9}, {2, 2, 2, 2}, 12, order);
  const auto around = neighbours(model, start, order, limits);
  const auto singles = neighbours(model, start, order, limits, false);
  const std::size_t single = singles.size();
  ASSERT_GT(single, 0U);
  ASSERT_LT(single, around.size());
  for (std::size_t x = 0; x < single; ++x) {  // the full list begins with the single moves
    EXPECT_EQ(stages_text(around[x]), stages_text(singles[x]));
  }
  // Single moves: one boundary, one GPU.
  EXPECT_GE(position(around, shape({0, 4, 6, 9}, {2, 2, 2, 2}, 12, order)), 0);
  EXPECT_LT(position(around, shape({0, 4, 6, 9}, {2, 2, 2, 2}, 12, order)),
            static_cast<long>(single));
  EXPECT_LT(position(around, shape({0, 3, 6, 9}, {3, 1, 2, 2}, 12, order)),
            static_cast<long>(single));
  // Compound: the boundaries from the second on, two layers later; up to the second, one layer
  // earlier; a GPU from stage 1 to stage 2 with one layer more for stage 2.
  for (const auto& compound :
       {shape({0, 3, 8, 11}, {2, 2, 2, 2}, 12, order), shape({0, 2, 5, 9}, {2, 2, 2, 2}, 12, order),
        shape({0, 3, 5, 9}, {2, 1, 3, 2}, 12, order)}) {
    SCOPED_TRACE(stages_text(compound));
    EXPECT_GE(position(around, compound), static_cast<long>(single));
  }
  // Two GPUs at once, without a boundary.
  const auto wider = shape({0, 3, 6, 9}, {1, 3, 2, 2}, 12, order);
  const auto two = neighbours(model, wider, order, limits);
  EXPECT_GE(position(two, shape({0, 3, 6, 9}, {3, 1, 2, 2}, 12, order)),
            static_cast<long>(neighbours(model, wider, order, limits, false).size()));
}

TEST(SearchTest, CompoundMovesLeaveLocalOptimaOfTheSingleOnes) {
  // A value whose only improvement from sizes 3, 3, 3 is to move both boundaries together: one
  // boundary alone gives sizes (4, 2, 3) or (3, 4, 2), as far from (4, 3, 2) as the start.
  const model::Model model = make_model(std::vector<L>(9, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2};
  const ShapeLimits limits{9, 1, 3};
  const std::vector<int> target{4, 3, 2};
  int evaluations = 0;
  const Evaluate distance = size_distance(target, 100, evaluations);
  const auto start = shape({0, 3, 6}, {1, 1, 1}, 9, order);
  const auto found = local_search(model, {start}, 1, order, limits, distance, {1000, 0, 0});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->iteration_ms, 0);
  EXPECT_EQ(stages_text(found->stages), stages_text(shape({0, 4, 7}, {1, 1, 1}, 9, order)));
  // Within a budget the first phase (single moves) spends, nothing is left for the compound
  // moves: the single moves' local optimum stays.
  EXPECT_EQ(reached(model, start, order, limits, distance, {1, 0, 0}), 2);
  // A larger second-phase budget (sweeps of the start's neighbourhood) finds it again.
  EXPECT_EQ(reached(model, start, order, limits, distance, {1, 1e9, 1000}), 0);
}

// Measured: 102 evaluations; restarting each pass at the first move takes 503.
constexpr int kResumedEvaluations = 150;

TEST(SearchTest, TheSecondPhaseResumesAtTheMoveThatImproved) {
  // The work moves towards the pipeline's start in many steps: resuming each pass at the move
  // that improved repeats it at once, where restarting at the first move would evaluate every
  // move before it again after each step.
  const int layers = 64;
  const model::Model model = make_model(std::vector<L>(layers, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3};
  const ShapeLimits limits{layers, 1, 4};
  const std::vector<int> target{40, 8, 8, 8};
  int evaluations = 0;
  const Evaluate distance = size_distance(target, 1000, evaluations);
  const auto start = shape({0, 16, 32, 48}, {1, 1, 1, 1}, layers, order);
  const auto found = local_search(model, {start}, 1, order, limits, distance, {0, 1e9, 1e6});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->iteration_ms, 0);
  std::cout << "[ resumed  ] " << evaluations << " evaluations\n";
  EXPECT_LE(evaluations, kResumedEvaluations);
}

TEST(SearchTest, TheThirdPhaseFindsAShiftBetweenThePowersOfTwo) {
  // The only improvement from stages of 6 and 6 layers on 2 and 2 GPUs: a GPU moved from the
  // first stage to the second with 3 layers (the work follows it). The second phase's shifts
  // (1, 2, 4 layers) miss it; the third phase's finer shifts (1, 2, 3, 4, ...) find it, and
  // only where phase 2 had more than the first phase's budget.
  const model::Model model = make_model(std::vector<L>(12, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3};
  const ShapeLimits limits{12, 4, 2};
  const auto start = shape({0, 6}, {2, 2}, 12, order);
  const auto target = shape({0, 3}, {1, 3}, 12, order);
  EXPECT_LT(position(neighbours(model, start, order, limits), target), 0);
  EXPECT_GE(position(neighbours(model, start, order, limits, true, true), target), 0);
  const Evaluate value = table_value({{target, 0.0}, {start, 1.0}}, 2.0);
  EXPECT_EQ(reached(model, start, order, limits, value, {1, 0, 0}), 1);  // no third phase
  EXPECT_EQ(reached(model, start, order, limits, value, {1, 1e9, 1000}), 0);
}

TEST(SearchTest, TheFirstStartsAreEvaluatedWhateverTheBudget) {
  // Three starts, the best last; a budget that the first evaluation already spends. The
  // `always` first starts are evaluated anyway (spp's DP best, packings, baselines and budgeted
  // Megatron seeds), the others only while the budget lasts, so the best is found only when it
  // is among the first `always`.
  const model::Model model = make_model(std::vector<L>(6, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2};
  const ShapeLimits limits{6, 1, 3};
  const std::vector<std::vector<Stage>> starts{shape({0}, {1}, 6, order),
                                               shape({0, 3}, {1, 1}, 6, order),
                                               shape({0, 2, 4}, {1, 1, 1}, 6, order)};
  int evaluations = 0;
  const Evaluate by_stages = [&](const std::vector<Stage>& stages) {
    ++evaluations;
    return Evaluation{10.0 - static_cast<double>(stages.size()), 1};  // more stages: faster
  };
  for (std::size_t always = 1; always <= 3; ++always) {
    SCOPED_TRACE("always " + std::to_string(always));
    evaluations = 0;
    const auto found = local_search(model, starts, always, order, limits, by_stages, {0, 0, 0});
    ASSERT_TRUE(found);
    EXPECT_EQ(evaluations, static_cast<int>(always));
    EXPECT_EQ(found->iteration_ms, 10.0 - static_cast<double>(always));
  }
}

TEST(SearchTest, ShapesThatDoNotFitAreValuesThatCostTheirWork) {
  // "Does not fit" is an Evaluation without a time, not an error: such a shape is never the
  // result, and what evaluating it cost counts against the budget like any other (so the same
  // candidates are evaluated whether they fit or not). Only the start fits; its neighbourhood
  // (about 27 single moves) is larger than the budget of 20 evaluations of work 1.
  const model::Model model = make_model(std::vector<L>(40, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3};
  const ShapeLimits limits{40, 1, 4};
  const auto start = shape({0, 10, 20, 30}, {1, 1, 1, 1}, 40, order);
  ASSERT_GT(neighbours(model, start, order, limits, false).size(), 21U);
  int evaluations = 0;
  const Evaluate only_the_start = [&](const std::vector<Stage>& stages) {
    ++evaluations;
    if (stages_text(stages) == stages_text(start)) return Evaluation{10.0, 1};
    return Evaluation{std::nullopt, 1};
  };
  EXPECT_EQ(reached(model, start, order, limits, only_the_start, SearchBudget{20, 0, 0}), 10.0);
  EXPECT_GT(evaluations, 1);
  EXPECT_LE(evaluations, 21);  // the work is checked before each evaluation: one past 20 at most
  const Evaluate nothing_fits = [&](const std::vector<Stage>&) {
    ++evaluations;
    return Evaluation{std::nullopt, 1};
  };
  EXPECT_FALSE(local_search(model, {start}, 1, order, limits, nothing_fits, {20, 0, 0}));
}

TEST(SearchTest, PhaseTwoTakesOnlyMovesThatGainMinGain) {
  // Two stages of 16 layers on 2 GPUs, valued by where the boundary is: the first move tried (one
  // layer earlier) gains 1e-7 and leads into a trap; the boundary 4 layers later is far better.
  // By default phase 2 takes the tiny gain and stays there (the third phase's finer shifts of a
  // single boundary are the same 1, 2, 4); with a minimum gain of 1e-6 it takes the large one.
  const model::Model model = make_model(std::vector<L>(16, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1};
  const ShapeLimits limits{16, 1, 2};
  const Evaluate by_boundary = [](const std::vector<Stage>& stages) {
    if (stages.size() != 2) return Evaluation{300.0, 1};
    const int boundary = stages[1].first_layer;
    return Evaluation{boundary == 8    ? 100.0
                      : boundary == 7  ? 100 * (1 - 1e-7)
                      : boundary == 12 ? 50.0
                                       : 200.0,
                      1};
  };
  const auto start = shape({0, 8}, {1, 1}, 16, order);
  SearchBudget budget{0, 1e9, 1000};
  EXPECT_DOUBLE_EQ(reached(model, start, order, limits, by_boundary, budget), 100 * (1 - 1e-7));
  budget.min_gain = 1e-6;
  EXPECT_DOUBLE_EQ(reached(model, start, order, limits, by_boundary, budget), 50.0);
}

TEST(SearchTest, DiversePhaseTwoClimbsFromEveryDepthFirst) {
  // Three starts: two of 2 stages (values 10 and 11, local optima) and one of 3 (value 12) whose
  // first neighbour is worth 1. Phase 2's budget covers the pass around the best start and a
  // little more: best first, it goes on to the other 2-stage start and runs out; `diverse`, it
  // climbs from the 3-stage start next and finds the 1.
  const model::Model model = make_model(std::vector<L>(12, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3};
  const ShapeLimits limits{12, 1, 3};
  const auto best_two = shape({0, 6}, {1, 1}, 12, order);
  const auto other_two = shape({0, 4}, {1, 1}, 12, order);
  const auto three = shape({0, 4, 8}, {1, 1, 1}, 12, order);
  const auto target = shape({0, 3, 8}, {1, 1, 1}, 12, order);
  ASSERT_EQ(position(neighbours(model, three, order, limits), target), 0);
  ASSERT_LT(position(neighbours(model, best_two, order, limits, true, true), target), 0);
  const Evaluate value =
      table_value({{best_two, 10.0}, {other_two, 11.0}, {three, 12.0}, {target, 1.0}}, 20.0);
  const auto pass = static_cast<double>(neighbours(model, best_two, order, limits).size());
  // The three starts and the pass around the best, one of whose neighbours is the other 2-stage
  // start (evaluated already): one evaluation more passes the limit.
  SearchBudget budget{0, 1e9, 3 + pass - 1};
  const std::vector<std::vector<Stage>> starts{best_two, other_two, three};
  const auto plain = local_search(model, starts, 3, order, limits, value, budget);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->iteration_ms, 10.0);
  budget.diverse = true;
  const auto diverse = local_search(model, starts, 3, order, limits, value, budget);
  ASSERT_TRUE(diverse);
  EXPECT_EQ(diverse->iteration_ms, 1.0);
}

TEST(SearchTest, FillSplitEvensTheListSchedulesFill) {
  // 12 layers of 3 ms (forward 1, backward 2), M = 2, one GPU per stage unless said. A split
  // after a layers costs stage 0 M 3 a = 6a and stage 1 gamma 3a + 6 (12 - a) (computed by hand).
  const model::Model model = make_model(std::vector<L>(12, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2};
  const auto split = [&](const std::vector<int>& runs, double gamma, double cap,
                         const std::vector<double>& speeds = {}) {
    const auto topology = uniform_topology(3, 1e12, 0, speeds);
    const auto stages = shape({0, 1}, runs, 12, order);
    const auto out = fill_split(model, topology, stages, 2, gamma, cap);
    return out ? stages_text(*out) : std::string("none");
  };
  // gamma 0: balanced compute, 6a = 72 - 6a.
  EXPECT_EQ(split({1, 1}, 0, 1), stages_text(shape({0, 6}, {1, 1}, 12, order)));
  // gamma 1: 6a = 3a + 72 - 6a at a = 8 (48 each): the later stage lighter.
  EXPECT_EQ(split({1, 1}, 1, 1), stages_text(shape({0, 8}, {1, 1}, 12, order)));
  // With stage 0 held to 0.9 of the bound: a = 7 needs T = max(42 / 0.9, 72 - 21) = 51, a = 8
  // needs 48 / 0.9 = 53.3, a = 6 needs 72 - 18 = 54.
  EXPECT_EQ(split({1, 1}, 1, 0.9), stages_text(shape({0, 7}, {1, 1}, 12, order)));
  // Two replicas share stage 1's micro-batches: 6a = 3 (12 - a) at a = 4.
  EXPECT_EQ(split({1, 2}, 0, 1), stages_text(shape({0, 4}, {1, 2}, 12, order)));
  // A GPU of half speed doubles stage 0's time: 12a = 6 (12 - a) at a = 4.
  EXPECT_EQ(split({1, 1}, 0, 1, {0.5, 1, 1}), stages_text(shape({0, 4}, {1, 1}, 12, order)));
  // Nothing to split for one stage.
  const auto topology = uniform_topology(3, 1e12, 0);
  EXPECT_FALSE(fill_split(model, topology, shape({0}, {1}, 12, order), 2, 1, 1));
}

TEST(SearchTest, TheFourthPhaseClimbsFromTheFillSplits) {
  // A value whose only good shape is one re-split proposes (gamma 0.5 with cap 0.85, a point of
  // the coarse grid), far from every start's neighbourhood: phases 1-3 cannot reach it; phase 4
  // evaluates the re-split and keeps it.
  const model::Model model = make_model(std::vector<L>(40, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3};
  const ShapeLimits limits{40, 1, 4};
  const auto start = shape({0, 10, 20, 30}, {1, 1, 1, 1}, 40, order);
  const auto target = shape({0, 14, 26, 35}, {1, 1, 1, 1}, 40, order);
  ASSERT_LT(position(neighbours(model, start, order, limits, true, true), target), 0);
  const Evaluate value = table_value({{start, 10.0}, {target, 1.0}}, 20.0);
  SearchBudget budget{1, 1e9, 1000};
  budget.resplit = [&](const std::vector<Stage>& stages, double gamma,
                       double cap) -> std::optional<std::vector<Stage>> {
    if (stages.size() == 4 && gamma == 0.5 && cap == 0.85) return target;
    return start;
  };
  EXPECT_EQ(reached(model, start, order, limits, value, budget), 1.0);
  budget.resplit = nullptr;
  EXPECT_EQ(reached(model, start, order, limits, value, budget), 10.0);
}

TEST(SearchTest, TheFourthPhaseSpendsAQuarterOfTheBudgetWherePhaseTwoHadNoMore) {
  // Every re-split is a new shape, worth no more than the start. Without more for phase 2
  // (sweeps 0), phase 4 may spend a quarter of `work` (each evaluation costs 1, and the last
  // may pass the limit by one); with more, as much again as phase 3 had.
  const model::Model model = make_model(std::vector<L>(40, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3};
  const ShapeLimits limits{40, 1, 4};
  const auto start = shape({0, 10, 20, 30}, {1, 1, 1, 1}, 40, order);
  int evaluations = 0;
  const Evaluate value = [&](const std::vector<Stage>& stages) {
    ++evaluations;
    return Evaluation{stages_text(stages) == stages_text(start) ? 10.0 : 20.0, 1};
  };
  int calls = 0;
  const SearchBudget::Resplit distinct = [&](const std::vector<Stage>&, double, double) {
    ++calls;  // boundaries 1..9 and 21..29: a shape not seen before, every call
    return std::optional{
        shape({0, 1 + calls % 9, 21 + calls / 9 % 9, 30}, {1, 1, 1, 1}, 40, order)};
  };
  for (const double sweeps : {0.0, 1e9}) {
    SCOPED_TRACE("sweeps " + std::to_string(sweeps));
    SearchBudget budget{40, sweeps, 200};
    evaluations = 0;
    EXPECT_EQ(reached(model, start, order, limits, value, budget), 10.0);
    const int without = evaluations;
    budget.resplit = distinct;
    evaluations = calls = 0;
    EXPECT_EQ(reached(model, start, order, limits, value, budget), 10.0);
    const int fourth = evaluations - without;
    EXPECT_GT(fourth, 0);
    if (sweeps == 0) {
      EXPECT_LE(fourth, 40 / 4 + 1);
    } else {
      EXPECT_GT(fourth, 40 / 4 + 1);
    }
  }
}

TEST(SearchTest, TheFourthPhaseSplitsTheWidestStageOfTheBest) {
  // One stage on 4 GPUs, two fast (speed 2) and two slow. The split move halves the run and cuts
  // at the middle of compute (6 and 6 layers), which this value makes worse than the start;
  // phase 4 halves the stage too and lets the fill split balance it by speed, the fast pair
  // taking more layers (the shape worth 1 here: its first grid point).
  const model::Model model = make_model(std::vector<L>(12, L{1, 2, 1e3, 1e3, 1e3}));
  const std::vector<int> order{0, 1, 2, 3};
  const ShapeLimits limits{12, 4, 2};
  const auto topology = uniform_topology(4, 1e12, 0, {2, 2, 1, 1});
  const auto start = shape({0}, {4}, 12, order);
  const auto middle = shape({0, 6}, {2, 2}, 12, order);
  const auto target = fill_split(model, topology, middle, 4, 0.25, 1);
  ASSERT_TRUE(target);
  ASSERT_GT((*target)[1].first_layer, 6);
  ASSERT_GE(position(neighbours(model, start, order, limits), middle), 0);
  ASSERT_LT(position(neighbours(model, start, order, limits, true, true), *target), 0);
  const Evaluate value = table_value({{start, 10.0}, {*target, 1.0}}, 20.0);
  SearchBudget budget{100, 0, 0};
  budget.resplit = [&](const std::vector<Stage>& stages, double gamma, double cap) {
    return fill_split(model, topology, stages, 4, gamma, cap);
  };
  EXPECT_EQ(reached(model, start, order, limits, value, budget), 1.0);
}

}  // namespace
}  // namespace pipeplan::partition
