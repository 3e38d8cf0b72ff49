// Spec 8.3 by hand: every rule of the v2 execution model (tensor-parallel groups and their
// all-reduces, recomputation's time and memory, transfers between leaders, t parallel
// data-parallel rings, the sharded optimizer, update tasks, the bounds) on timelines computed
// on paper, and a v2 plan that round-trips through plan.json and the checker.

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "../support/plan_mutation.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

using namespace pipeplan::testing;

// A layer that splits over 1 or 2 GPUs: at t = 2 it runs 4.5 ms forward and 8.5 ms backward
// per GPU (at speed 1), holds half its 100 parameter bytes and 10 stash bytes, and runs two
// all-reduces of 1 MB in each pass. `update_ms` 6 (3 per GPU at t = 2, by the default rule).
model::Layer split_layer(double activation_bytes, double update_ms = 0) {
  model::Layer layer;
  layer.name = "split";
  layer.forward_ms = 8;
  layer.backward_ms = 16;
  layer.activation_bytes = activation_bytes;
  layer.parameter_bytes = 100;
  layer.stash_bytes = 10;
  layer.update_ms = update_ms;
  model::TensorParallel tp;
  tp.degrees = {1, 2};
  tp.allreduce_bytes = 1e6;
  tp.forward_ms = {8, 4.5};
  tp.backward_ms = {16, 8.5};
  layer.tensor_parallel = tp;
  return layer;
}

model::Model one_layer_model(double update_ms = 0) {
  model::Model model;
  model.name = "v2";
  model.parameter_memory_factor = 4;
  model.input_bytes = 7;
  model.layers.push_back(split_layer(0, update_ms));
  return model;
}

// Every pair at 1 GB/s and 0.5 ms: one tensor-parallel all-reduce of 1 MB over a group of two
// takes 2 (1/2) 1e6 / 1e9 s + 2 (0.5 ms) = 1 ms + 1 ms = 2 ms.
topology::Topology four_gpus(std::vector<double> speeds = {1, 0.5, 1, 1}) {
  return uniform_topology(4, 1e9, 0.5, std::move(speeds));
}

Stage group_stage(std::vector<int> gpus, int t, bool recompute = false, int first = 0,
                  int last = 0) {
  Stage stage{first, last, std::move(gpus)};
  stage.tensor_parallel = t;
  stage.recompute = recompute;
  return stage;
}

const TimedCompute& find(const Timeline& t, ComputeTask task) {
  for (const auto& e : t.compute) {
    if (e.task == task) return e;
  }
  throw std::runtime_error("task not found");
}

void expect_times(const Timeline& t, ComputeTask task, double start, double end) {
  const auto& e = find(t, task);
  EXPECT_DOUBLE_EQ(e.start_ms, start) << describe(task);
  EXPECT_DOUBLE_EQ(e.end_ms, end) << describe(task);
}

// Two micro-batches through the one stage of `stages`, both forwards first, replayed.
Timeline forwards_then_backwards(const model::Model& model, const topology::Topology& topology,
                                 const std::vector<Stage>& stages) {
  Schedule s = schedule_of(2, {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {}, {}, {}});
  return replay(model, topology, stages, s);
}

TEST(ExecutionV2, AGroupIsOneResourceAtItsSlowestSpeedWithItsAllReduces) {
  const model::Model model = one_layer_model();
  const topology::Topology topology = four_gpus();
  const std::vector<Stage> stages{group_stage({0, 1}, 2)};
  // Group {g0, g1}: speed 0.5 (g1). F = 4.5 / 0.5 + 2 x 2 = 13 ms, B = 8.5 / 0.5 + 4 = 21 ms.
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  ASSERT_EQ(exec.size(), 1U);
  ASSERT_EQ(exec[0].groups.size(), 1U);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].speed, 0.5);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].forward_ms, 13);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].backward_ms, 21);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].forward_allreduce_ms, 4);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].backward_allreduce_ms, 4);
  const Timeline t = forwards_then_backwards(model, topology, stages);
  expect_times(t, F(0, 0), 0, 13);
  expect_times(t, F(0, 1), 13, 26);
  expect_times(t, B(0, 0), 26, 47);
  expect_times(t, B(0, 1), 47, 68);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 68);
  // Both GPUs of the group report the group's figures: busy 68, 4 x 50 + 2 stashes of 5.
  for (int g : {0, 1}) {
    EXPECT_DOUBLE_EQ(t.gpus[static_cast<std::size_t>(g)].busy_ms, 68) << g;
    EXPECT_DOUBLE_EQ(t.gpus[static_cast<std::size_t>(g)].peak_memory_bytes, 210) << g;
    EXPECT_EQ(t.gpus[static_cast<std::size_t>(g)].stages, std::vector<int>{0}) << g;
  }
  EXPECT_TRUE(t.gpus[2].stages.empty());
  EXPECT_TRUE(t.updates.empty());
}

TEST(ExecutionV2, TasksMustRunOnTheLeader) {
  const model::Model model = one_layer_model();
  const topology::Topology topology = four_gpus();
  const std::vector<Stage> stages{group_stage({0, 1}, 2)};
  Schedule s = schedule_of(2, {{}, {F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {}, {}});
  try {
    replay(model, topology, stages, s);
    FAIL() << "a task on a non-leader was accepted";
  } catch (const ScheduleError& error) {
    EXPECT_STREQ(error.what(),
                 "forward of micro-batch 0 on stage 0 runs on GPU \"g1\", which is not the leader "
                 "of its tensor-parallel group (GPU \"g0\")");
  }
}

TEST(ExecutionV2, RecomputationRunsTheForwardAgainAndHoldsOnlyInputsPlusOneLayer) {
  const model::Model model = one_layer_model();
  const topology::Topology topology = four_gpus();
  const std::vector<Stage> stages{group_stage({0, 1}, 2, true)};
  // B = 21 + F 13 = 34: F(m0) 0-13, F(m1) 13-26, B(m0) 26-60, B(m1) 60-94.
  const Timeline t = forwards_then_backwards(model, topology, stages);
  expect_times(t, B(0, 0), 26, 60);
  expect_times(t, B(0, 1), 60, 94);
  // Memory: 200 static; per micro-batch the layer's input (input_bytes 7) from F's start to
  // B's end; during each B one layer's stash (5 at t = 2). Peak at B(m0): 200 + 2 x 7 + 5.
  EXPECT_DOUBLE_EQ(t.gpus[0].peak_memory_bytes, 219);
  EXPECT_DOUBLE_EQ(t.gpus[1].peak_memory_bytes, 219);
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].recompute_ms, 13);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].backward_allreduce_ms, 8);  // its own 4 and the forward's
}

// A layer whose backward recomputes part of its forward itself (selective recomputation's
// attention core: 1.5 ms per GPU at t = 2) skips that part when its stage recomputes the whole
// forward first: B = (8.5 - 1.5) / 0.5 + 4 = 18, plus F 13 = 31, where without recomputation B is
// 21. F(m0) 0-13, F(m1) 13-26, B(m0) 26-57, B(m1) 57-88; the steady-state bound 2 (13 + 31).
TEST(ExecutionV2, RecomputationSkipsTheForwardWorkTheBackwardWouldRecompute) {
  model::Model model = one_layer_model();
  model.layers[0].backward_recompute_ms = 3;
  model.layers[0].tensor_parallel->backward_recompute_ms = {3, 1.5};
  const topology::Topology topology = four_gpus();
  const std::vector<Stage> stages{group_stage({0, 1}, 2, true)};
  const Timeline t = forwards_then_backwards(model, topology, stages);
  expect_times(t, B(0, 0), 26, 57);
  expect_times(t, B(0, 1), 57, 88);
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].recompute_ms, 13);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].work_ms, 44);
  EXPECT_DOUBLE_EQ(exec[0].backward_ms, 8.5);  // the stage's figure stays the layers' sum
  EXPECT_DOUBLE_EQ(compute_bounds(model, topology, stages, 2).partition_ms, 88);
  // Whole on GPU 0 (speed 1, no all-reduce: section 3's proportional term): F + B = 8 + (16 - 3
  // + 8) = 29 a micro-batch, 58 for two.
  const std::vector<Stage> whole{group_stage({0}, 1, true)};
  EXPECT_DOUBLE_EQ(compute_bounds(model, topology, whole, 2).partition_ms, 58);
  // Without recomputation the backward runs its whole 8.5 ms: B = 21.
  const std::vector<Stage> plain{group_stage({0, 1}, 2, false)};
  const Timeline u = forwards_then_backwards(model, topology, plain);
  expect_times(u, B(0, 0), 26, 47);
}

TEST(ExecutionV2, RecomputationReleasesBeforeAllocatingAtEqualTimes) {
  // One micro-batch in flight at a time (F B F B): at B(m0)'s end the next F allocates at the
  // same instant, after the release: the peak is 200 + 7 + 5, never 200 + 14 + 5.
  const model::Model model = one_layer_model();
  const topology::Topology topology = four_gpus();
  const std::vector<Stage> stages{group_stage({0, 1}, 2, true)};
  Schedule s = schedule_of(2, {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {}, {}, {}});
  const Timeline t = replay(model, topology, stages, s);
  EXPECT_DOUBLE_EQ(t.gpus[0].peak_memory_bytes, 212);
}

TEST(ExecutionV2, BoundaryTransfersCarryTheActivationOverTheSmallerDegreeBetweenLeaders) {
  model::Model model = one_layer_model();
  model.layers[0].activation_bytes = 4e6;
  model.layers.push_back(split_layer(0));
  const topology::Topology topology = four_gpus({1, 1, 1, 1});
  // Stage 0 at t = 2 on {g0, g1}, stage 1 at t = 1 on g2: the activation carries 4e6 / 1 bytes
  // from g0 to g2: 0.5 + 4 = 4.5 ms.
  std::vector<Stage> stages{group_stage({0, 1}, 2, false, 0, 0), group_stage({2}, 1, false, 1, 1)};
  auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(exec[0].transfer_bytes, 4e6);
  // Both at t = 2: 2e6 bytes, 2.5 ms, leader g0 to leader g2.
  stages[1] = group_stage({2, 3}, 2, false, 1, 1);
  exec = execution(model, topology, stages, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(exec[0].transfer_bytes, 2e6);
  Schedule s = schedule_of(1, {{F(0, 0), B(0, 0)}, {}, {F(1, 0), B(1, 0)}, {}});
  s.channel_order[{0, 2}] = {Act(0, 0)};
  s.channel_order[{2, 0}] = {Grad(0, 0)};
  const Timeline t = replay(model, topology, stages, s);
  // Stage 0 (speed 1): F 4.5 + 4 = 8.5, B 8.5 + 4 = 12.5; stage 1 the same.
  // F0 0-8.5, act 8.5-11, F1 11-19.5, B1 19.5-32, grad 32-34.5, B0 34.5-47.
  ASSERT_EQ(t.transfers.size(), 2U);
  EXPECT_EQ(t.transfers[0].from, 0);
  EXPECT_EQ(t.transfers[0].to, 2);
  EXPECT_DOUBLE_EQ(t.transfers[0].bytes, 2e6);
  EXPECT_DOUBLE_EQ(t.transfers[0].start_ms, 8.5);
  EXPECT_DOUBLE_EQ(t.transfers[0].end_ms, 11);
  expect_times(t, F(1, 0), 11, 19.5);
  expect_times(t, B(0, 0), 34.5, 47);
}

TEST(ExecutionV2, TheDataParallelAllReduceIsTParallelRingsAndUpdatesFollowIt) {
  model::Model model = one_layer_model(6);
  model.layers[0].parameter_bytes = 2e6;  // 1e6 per GPU at t = 2
  // Every pair at 1 GB/s and 0.5 ms, except g1-g3 at 0.5 GB/s.
  std::vector<topology::Gpu> gpus;
  for (int i = 0; i < 4; ++i) {
    topology::Gpu g;
    g.id = "g" + std::to_string(i);
    g.node = g.id;
    g.speed = i == 3 ? 0.5 : 1;
    gpus.push_back(g);
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < 4; ++u) {
    for (int v = u + 1; v < 4; ++v) links.push_back({u, v, (u == 1 && v == 3) ? 0.5e9 : 1e9, 0.5});
  }
  const topology::Topology topology = topology::Topology::build("t", gpus, links, "test");
  // Two groups of two: {g0, g1} and {g2, g3}. Rings {g0, g2} and {g1, g3}, each carrying 1e6:
  // 2 (1/2) 1e6 / 1e9 s + 2 x 0.5 = 2 ms, and with 0.5 GB/s 3 ms: the AllReduce takes 3 ms.
  const std::vector<Stage> stages{group_stage({0, 1, 2, 3}, 2)};
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(exec[0].allreduce_ms, 3);
  // Group 0 at speed 1: F 8.5, B 12.5; group 1 at speed 0.5 (g3): F 13, B 21.
  Schedule s = schedule_of(2, {{F(0, 0), B(0, 0)}, {}, {F(0, 1), B(0, 1)}, {}});
  const Timeline t = replay(model, topology, stages, s);
  expect_times(t, B(0, 1), 13, 34);
  ASSERT_EQ(t.allreduces.size(), 1U);
  EXPECT_DOUBLE_EQ(t.allreduces[0].start_ms, 34);
  EXPECT_DOUBLE_EQ(t.allreduces[0].end_ms, 37);
  EXPECT_DOUBLE_EQ(t.allreduces[0].bytes, 1e6);
  // Updates after the AllReduce: 3 ms per GPU at t = 2, at speeds 1 and 0.5: 37-40 and 37-43.
  ASSERT_EQ(t.updates.size(), 2U);
  EXPECT_EQ(t.updates[0].gpu, 0);
  EXPECT_DOUBLE_EQ(t.updates[0].start_ms, 37);
  EXPECT_DOUBLE_EQ(t.updates[0].end_ms, 40);
  EXPECT_EQ(t.updates[1].gpu, 2);
  EXPECT_DOUBLE_EQ(t.updates[1].end_ms, 43);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 43);
  // busy stays forwards and backwards only.
  EXPECT_DOUBLE_EQ(t.gpus[2].busy_ms, 34);
  EXPECT_DOUBLE_EQ(t.gpus[3].busy_ms, 34);
  // Replicated: 4 x 1e6 + one stash of 5.
  EXPECT_DOUBLE_EQ(t.gpus[0].peak_memory_bytes, 4e6 + 5);
}

TEST(ExecutionV2, AShardedOptimizerDividesItsStateAndItsStep) {
  model::Model model = one_layer_model(6);
  model.layers[0].parameter_bytes = 2e6;
  const topology::Topology topology = four_gpus({1, 1, 1, 0.5});
  const std::vector<Stage> stages{group_stage({0, 1, 2, 3}, 2)};
  // phi 4, phi_sh default 2: static = 1e6 (4 - 2 + 2 / 2) = 3e6; steps 3 / 2 and 6 / 2.
  const auto exec = execution(model, topology, stages, Optimizer::kSharded);
  EXPECT_DOUBLE_EQ(exec[0].static_bytes, 3e6);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].update_ms, 1.5);
  EXPECT_DOUBLE_EQ(exec[0].groups[1].update_ms, 3);
  Schedule s = schedule_of(2, {{F(0, 0), B(0, 0)}, {}, {F(0, 1), B(0, 1)}, {}});
  const Timeline t = replay(model, topology, stages, s, Optimizer::kSharded);
  EXPECT_DOUBLE_EQ(t.gpus[1].peak_memory_bytes, 3e6 + 5);
  // The AllReduce (2 ms on uniform links) then the steps: ends at 34 + 2 + 3.
  EXPECT_DOUBLE_EQ(t.iteration_ms, 39);
}

TEST(ExecutionV2, WithOneReplicaTheUpdateFollowsTheLastBackward) {
  const model::Model model = one_layer_model(6);
  const topology::Topology topology = four_gpus();
  const std::vector<Stage> stages{group_stage({0, 1}, 2)};
  const Timeline t = forwards_then_backwards(model, topology, stages);
  ASSERT_TRUE(t.allreduces.empty());
  ASSERT_EQ(t.updates.size(), 1U);
  // 3 ms per GPU at t = 2 on the group's speed 0.5: 68-74.
  EXPECT_DOUBLE_EQ(t.updates[0].start_ms, 68);
  EXPECT_DOUBLE_EQ(t.updates[0].end_ms, 74);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 74);
}

TEST(ExecutionV2, BoundsReadGroupsForGpus) {
  const model::Model model = one_layer_model();
  const topology::Topology topology = four_gpus({1, 1, 1, 1});
  // any_plan: the layer's least total work is min(1 x 24, 2 x 13) = 24 over 4 GPUs of speed 1
  // for M = 2 (12 ms), and its least time min(24, 13) = 13 on the fastest GPU: 13.
  const std::vector<Stage> stages{group_stage({0, 1, 2, 3}, 2)};
  const Bounds bounds = compute_bounds(model, topology, stages, 2);
  EXPECT_DOUBLE_EQ(bounds.any_plan_ms, 13);
  // partition: two groups, each d = F + B = 8.5 + 12.5 = 21; L = max(2 / (2 / 21), 1 x 21) = 21,
  // H = 0, AR of 50 bytes per GPU over rings of two: 2 (1/2) 50 / 1e9 s + 1 ms.
  EXPECT_DOUBLE_EQ(bounds.partition_ms, 21 + (50 / 1e9 * 1e3 + 1));
}

TEST(ExecutionV2, StagesMustHoldWholeGroupsAtAnAllowedDegree) {
  model::Model model = one_layer_model();
  const topology::Topology topology = four_gpus();
  try {
    check_stages(model, topology, {group_stage({0, 1, 2}, 2)});
    FAIL();
  } catch (const ScheduleError& error) {
    EXPECT_STREQ(error.what(),
                 "stage 0 lists 3 GPUs, not a multiple of its tensor-parallel degree 2 (groups of "
                 "t GPUs, spec 8.2)");
  }
  try {
    check_stages(model, topology, {group_stage({0, 1, 2, 3}, 4)});
    FAIL();
  } catch (const ScheduleError& error) {
    EXPECT_STREQ(error.what(),
                 "stage 0 (layers 0-0) cannot run at tensor-parallel degree 4: every layer with "
                 "tensor_parallel must list it, and at least one must have tensor_parallel "
                 "(spec 8.1)");
  }
}

TEST(ExecutionV2, AV1StageHasExactlyTheSection3Figures) {
  // t = 1, no recomputation, replicated: the same numbers as the section-3 formulas.
  const model::Model model = make_model({{1.1, 2.3, 3e6, 7e5, 9e5}, {0.7, 1.9, 0, 3e5, 2e5}});
  const topology::Topology topology = uniform_topology(3, 7e9, 0.003, {1, 0.3, 0.7});
  const std::vector<Stage> stages{{0, 0, {0, 1}}, {1, 1, {2}}};
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  EXPECT_EQ(exec[0].groups[1].forward_ms, 1.1 / 0.3);
  EXPECT_EQ(exec[0].groups[1].backward_ms, 2.3 / 0.3);
  EXPECT_EQ(exec[0].groups[1].work_ms, (1.1 + 2.3) / 0.3);
  EXPECT_EQ(exec[0].static_bytes, 4 * 7e5);
  EXPECT_EQ(exec[0].transfer_bytes, 3e6);
  EXPECT_EQ(exec[0].allreduce_ms, allreduce_ms(topology, {0, 1}, 7e5));
  EXPECT_EQ(exec[1].transfer_bytes, 0);
  EXPECT_EQ(exec[1].transient_bytes, 0);
}

// A v2 plan that pipeplan makes round-trips through plan.json and passes the checker; its
// mutations get their own messages.
struct V2PlanFile : ::testing::Test {
  model::Model model = [] {
    model::Model m = one_layer_model(6);
    m.layers[0].activation_bytes = 4e6;
    m.layers.push_back(split_layer(0, 2));
    return m;
  }();
  topology::Topology topology = four_gpus();
  Plan plan = [this] {
    planners::Request request{model, topology, 4};
    request.optimizer = Optimizer::kSharded;
    planners::Partition partition{
        {0, 1, 2, 3}, {group_stage({0, 1}, 2, true, 0, 0), group_stage({2, 3}, 1, false, 1, 1)}};
    return planners::finish_plan("test", partition, request, schedule::Policy::kOneFOneB);
  }();
  nlohmann::ordered_json json = report::plan_to_json(plan, model, topology);

  std::string error_of(const std::function<void(nlohmann::ordered_json&)>& mutate) {
    return mutated_plan_error(json, model, topology, mutate);
  }
};

TEST_F(V2PlanFile, WritesTheV2FieldsAndChecks) {
  EXPECT_EQ(json["schema"], "pipeplan/plan/v2");
  EXPECT_EQ(json["optimizer"], "sharded");
  EXPECT_EQ(json["stages"][0]["tensor_parallel"], 2);
  EXPECT_EQ(json["stages"][0]["recompute"], true);
  EXPECT_EQ(json["stages"][1]["tensor_parallel"], 1);
  EXPECT_EQ(json["stages"][1]["recompute"], false);
  ASSERT_EQ(json["schedule"]["updates"].size(), 3U);  // one group, then two
  EXPECT_EQ(error_of([](auto&) {}), "no error");
  // The same plan read back writes the same bytes.
  io::Source source = io::source_from_text("plan.json", io::dump_json(json));
  const Plan again = check_plan(report::read_plan(source, topology), model, topology);
  EXPECT_EQ(io::dump_json(report::plan_to_json(again, model, topology)), io::dump_json(json));
}

TEST_F(V2PlanFile, EachV2MutationHasItsOwnMessage) {
  EXPECT_EQ(error_of([](auto& j) { j["stages"][0]["tensor_parallel"] = 3; }),
            "plan.json: /stages/0/gpus: lists 2 GPUs, not a multiple of the stage's "
            "tensor_parallel (3): each replica is a group of t GPUs");
  EXPECT_EQ(error_of([](auto& j) { j["optimizer"] = "zero"; }),
            "plan.json: /optimizer: must be \"replicated\", \"sharded\", \"sharded-gradients\" or "
            "\"fully-sharded\", got \"zero\"");
  EXPECT_EQ(error_of([](auto& j) {
              // Without its optimizer steps the plan ends with its last other task.
              j["schedule"].erase("updates");
              double last = 0;
              for (const auto& key : {"compute", "transfers", "allreduces"}) {
                for (const auto& e : j["schedule"][key])
                  last = std::max(last, e["end_ms"].template get<double>());
              }
              j["iteration_ms"] = last;
            }),
            "plan.json: /schedule: lists no optimizer steps (schedule.updates), but the model has "
            "update times, so every group of every stage runs one (spec 8.3)");
  EXPECT_EQ(error_of([](auto& j) { j["schedule"]["updates"][0]["gpu"] = "g1"; }),
            "plan.json: /schedule/updates/0/gpu: GPU \"g1\" is not the leader of a group of "
            "stage 0");
  // Without recomputation the backwards are shorter than stated.
  const std::string recompute = error_of([](auto& j) { j["stages"][0]["recompute"] = false; });
  EXPECT_EQ(recompute.rfind("plan.json: /schedule/compute/", 0), 0U) << recompute;
  EXPECT_NE(recompute.find("backward"), std::string::npos) << recompute;
  // A replicated optimizer steps over the whole state: the stated steps are too short.
  const std::string optimizer = error_of([](auto& j) { j["optimizer"] = "replicated"; });
  EXPECT_EQ(optimizer.rfind("plan.json: /schedule/updates/", 0), 0U) << optimizer;
}

TEST(ExecutionV2, AV1ProblemStillWritesAV1Plan) {
  const model::Model model = make_model({{1, 2, 1e6, 10, 100}, {2, 3, 0, 20, 300}});
  const topology::Topology topology = uniform_topology(2, 1e9, 0);
  const Plan plan = planners::make_plan("spp", planners::Request{model, topology, 4});
  const nlohmann::ordered_json json = report::plan_to_json(plan, model, topology);
  EXPECT_EQ(json["schema"], "pipeplan/plan/v1");
  EXPECT_FALSE(json.contains("optimizer"));
  EXPECT_FALSE(json["stages"][0].contains("tensor_parallel"));
  EXPECT_FALSE(json["schedule"].contains("updates"));
}

}  // namespace
}  // namespace pipeplan::simulate
