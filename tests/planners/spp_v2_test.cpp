// Spec 8.4 planning: the DP is exact for its objective over degrees and recomputation, spp
// equals the best replayed v2 shape on small instances, finds the plans only tensor parallelism
// or recomputation make fit, and every v2 plan it writes passes `simulate`'s checker.

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <random>

#include "../support/builders.hpp"
#include "../support/builders_v2.hpp"
#include "../support/enumerate_v2.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;

std::vector<bool> recompute_list(const partition::StageChoices& choices) {
  if (choices.must_recompute) return {true};
  if (choices.may_recompute) return {false, true};
  return {false};
}

TEST(DpV2Test, EqualsExhaustiveSearchOverDegreesAndRecomputation) {
  std::mt19937 rng(88);
  int plans = 0, solved = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 5);
    const int N = 1 + static_cast<int>(rng() % 5);
    const int M = 1 + static_cast<int>(rng() % 6);
    const model::Model model = random_v2_model(rng, L, 4e6, {1, 2}, trial % 2 == 0);
    const topology::Topology topology = random_topology(rng, N, 2e6, 40e6);
    std::vector<int> order(static_cast<std::size_t>(N));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    partition::StageChoices choices;
    choices.degrees = {1, 2};
    choices.may_recompute = trial % 3 != 0;
    choices.must_recompute = trial % 7 == 0;
    choices.optimizer = trial % 4 == 1 ? Optimizer::kSharded : Optimizer::kReplicated;
    partition::ScheduleModel schedule;
    if (trial % 3 == 1) schedule = {true, 1 + static_cast<long>(rng() % 3)};
    std::optional<double> best;
    for_each_v2_plan(model, order, choices.degrees, recompute_list(choices), M, 1 << 30,
                     [&](const std::vector<Stage>& stages) {
                       ++plans;
                       const auto value = partition::objective(model, topology, stages, M, schedule,
                                                               choices.optimizer);
                       if (value && (!best || value->total_ms < *best)) best = value->total_ms;
                     });
    partition::SolveOptions options;
    options.choices = choices;
    const auto solutions = partition::solve_several(model, topology, order, M, schedule, options);
    SCOPED_TRACE("trial " + std::to_string(trial));
    ASSERT_EQ(best.has_value(), !solutions.empty());
    if (!best) continue;
    ++solved;
    EXPECT_NEAR(solutions.front().objective.total_ms, *best, 1e-9 * *best);
    const auto check = partition::objective(model, topology, solutions.front().stages, M, schedule,
                                            choices.optimizer);
    ASSERT_TRUE(check.has_value());
    EXPECT_DOUBLE_EQ(check->total_ms, solutions.front().objective.total_ms);
    EXPECT_NO_THROW(simulate::check_stages(model, topology, solutions.front().stages));
  }
  EXPECT_GT(plans, 5000);
  EXPECT_GT(solved, 100);
}

// The orders spp considers: min-cut, its reverse, the input order.
std::vector<std::vector<int>> spp_orders(const topology::Topology& topology) {
  std::vector<std::vector<int>> orders{ordering::mincut_order(topology)};
  orders.emplace_back(orders.front().rbegin(), orders.front().rend());
  std::vector<int> input(static_cast<std::size_t>(topology.size()));
  std::iota(input.begin(), input.end(), 0);
  if (std::find(orders.begin(), orders.end(), input) == orders.end()) orders.push_back(input);
  return orders;
}

TEST(SppV2Test, EqualsTheBestReplayedShapeOnSmallInstances) {
  std::mt19937 rng(4242);
  int shapes = 0, compared = 0;
  for (int trial = 0; trial < 80; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 4);
    const int N = 2 + static_cast<int>(rng() % 2);
    const int M = 1 + static_cast<int>(rng() % 6);
    const model::Model model = random_v2_model(rng, L, 4e6, {1, 2}, trial % 2 == 1);
    const topology::Topology topology = random_topology(rng, N, 4e6, 40e6);
    Request request{model, topology, M};
    request.optimizer = trial % 3 == 2 ? Optimizer::kSharded : Optimizer::kReplicated;
    const schedule::Policy policy =
        trial % 3 == 1 ? schedule::Policy::kOneFOneB : schedule::Policy::kList;
    const partition::StageChoices choices = stage_choices(request);
    std::optional<double> best;
    for (const auto& order : spp_orders(topology)) {
      for_each_v2_plan(
          model, order, choices.degrees, recompute_list(choices), N,
          max_stages_within_task_limit(M), [&](const std::vector<Stage>& stages) {
            ++shapes;
            try {
              const Plan plan = finish_plan("oracle", Partition{order, stages}, request, policy);
              if (!best || plan.timeline.iteration_ms < *best) best = plan.timeline.iteration_ms;
            } catch (const InfeasibleError&) {
            }
          });
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    if (!best) {
      EXPECT_THROW(plan_spp(request, policy), InfeasibleError);
      continue;
    }
    ++compared;
    const Plan plan = plan_spp(request, policy);
    EXPECT_NEAR(plan.timeline.iteration_ms, *best, 1e-9 * *best);
  }
  EXPECT_GT(shapes, 3000);
  EXPECT_GT(compared, 60);
}

// A layer whose weights fit a GPU only split in two: 4 x 3 MB = 12 MB whole, 6 MB at t = 2,
// on GPUs of 8 MB.
model::Model too_wide_for_one_gpu() {
  model::Model model = make_model({{4, 8, 1e5, 3e6, 1e5}, {4, 8, 0, 3e6, 1e5}});
  for (model::Layer& layer : model.layers) {
    model::TensorParallel tp;
    tp.degrees = {1, 2};
    tp.allreduce_bytes = 1e5;
    layer.tensor_parallel = tp;
  }
  return model;
}

TEST(SppV2Test, FindsThePlanOnlyTensorParallelismMakesFit) {
  const model::Model model = too_wide_for_one_gpu();
  const topology::Topology topology = uniform_topology(4, 50e9, 0.002, {}, 8e6);
  SppSearch no_enumeration;
  no_enumeration.exhaustive_shapes = 0;
  for (const SppSearch& search : {SppSearch{}, no_enumeration}) {
    const Plan plan = plan_spp({model, topology, 4}, schedule::Policy::kList, search);
    for (const Stage& stage : plan.stages) EXPECT_EQ(stage.tensor_parallel, 2);
    EXPECT_FALSE(simulate::memory_violation(topology, plan.timeline).has_value());
  }
  // Without degree 2 nothing fits.
  Request only_one{model, topology, 4};
  only_one.tensor_parallel = {1};
  EXPECT_THROW(plan_spp(only_one), InfeasibleError);
}

TEST(SppV2Test, FindsThePlanOnlyRecomputationMakesFit) {
  // Stashes of 20 MB per layer and micro-batch, inputs of 1 MB, 6 MB of static memory: on a GPU
  // of 30 MB the three layers fit only recomputed (6 + 3 x 1 + one 20 MB stash = 29 MB; without,
  // 6 + 60 MB).
  model::Model model =
      make_model({{2, 4, 1e6, 0.5e6, 20e6}, {2, 4, 1e6, 0.5e6, 20e6}, {2, 4, 0, 0.5e6, 20e6}});
  model.input_bytes = 1e6;
  model.layers[0].update_ms = 0.5;  // a v2 model: recomputation is a choice by default
  const topology::Topology topology = uniform_topology(1, 50e9, 0.002, {}, 30e6);
  const Plan plan = plan_spp({model, topology, 4});
  ASSERT_EQ(plan.stages.size(), 1U);
  EXPECT_TRUE(plan.stages[0].recompute);
  Request never{model, topology, 4};
  never.recompute = Recompute::kNever;
  EXPECT_THROW(plan_spp(never), InfeasibleError);
}

TEST(SppV2Test, AV1ProfileDoesNotRecomputeUnlessAsked) {
  const model::Model model = make_model({{2, 4, 1e6, 1e6, 20e6}, {2, 4, 0, 1e6, 20e6}});
  const topology::Topology topology = uniform_topology(1, 50e9, 0.002, {}, 30e6);
  EXPECT_THROW(plan_spp({model, topology, 2}), InfeasibleError);
  Request asked{model, topology, 2};
  asked.recompute = Recompute::kAuto;
  EXPECT_TRUE(plan_spp(asked).stages[0].recompute);
}

TEST(SppV2Test, AnUnusableDegreeListIsRefused) {
  const model::Model model = too_wide_for_one_gpu();
  const topology::Topology topology = uniform_topology(4, 50e9, 0.002);
  Request request{model, topology, 4};
  request.tensor_parallel = {3};
  try {
    plan_spp(request);
    FAIL();
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(error.what(),
                 "no stage can use tensor-parallel degree 3: the model's layers allow 1, 2 on 4 "
                 "GPUs (--tensor-parallel)");
  }
}

// Every v2 plan a planner writes passes `simulate`: read back from its JSON, checked against
// the execution model, and written again byte for byte.
TEST(SppV2Test, SimulateRechecksEveryV2PlanOverSeededInputs) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int L = 2 + static_cast<int>(rng() % 9);
    const int N = 2 + static_cast<int>(rng() % 7);
    const int M = 1 + static_cast<int>(rng() % 8);
    const model::Model model =
        random_v2_model(rng, L, 4e6, trial % 2 ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2},
                        trial % 3 != 0);
    const topology::Topology topology = random_topology(rng, N, 8e6, 80e6);
    Request request{model, topology, M};
    request.optimizer = trial % 2 ? Optimizer::kSharded : Optimizer::kReplicated;
    const std::array<schedule::Policy, 3> policies{
        schedule::Policy::kList, schedule::Policy::kOneFOneB, schedule::Policy::kGpipe};
    const schedule::Policy policy = policies[static_cast<std::size_t>(trial % 3)];
    std::optional<Plan> plan;
    try {
      plan = make_plan("spp", request, policy);
    } catch (const InfeasibleError&) {
      continue;
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    const std::string text = io::dump_json(report::plan_to_json(*plan, model, topology));
    EXPECT_EQ(report::plan_json_text(*plan, model, topology), text);  // the streamed writer
    const Plan again = simulate::check_plan(
        report::read_plan(io::source_from_text("plan.json", text), topology), model, topology);
    EXPECT_EQ(io::dump_json(report::plan_to_json(again, model, topology)), text);
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace pipeplan::planners
