// The planner limits (planners::check_limits, check_task_limit): inputs beyond them fail fast
// with exit 4 and a message naming the limit; inputs at them are let through.

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;

const std::string kSee = " (see \"Limits\" in docs/errors.md)";

model::Model layers(int count) {
  return make_model(std::vector<L>(static_cast<std::size_t>(count), L{1, 2, 1000, 1000, 1000}));
}

// The message of the InfeasibleError that `body` throws (empty when it throws none).
template <typename Body>
std::string infeasible(Body&& body) {
  try {
    body();
  } catch (const InfeasibleError& error) {
    return error.what();
  }
  return "";
}

TEST(LimitsTest, TooManyLayers) {
  const model::Model model = layers(kMaxPlanLayers + 1);
  const topology::Topology topology = uniform_topology(2, 1e10, 0.001);
  const Request request{model, topology, 2};
  for (const std::string& planner : planner_names()) {
    EXPECT_EQ(infeasible([&] { make_plan(planner, request); }),
              "cannot plan 4097 layers: the planners handle at most 4096; merge layers in the "
              "profile" +
                  kSee)
        << planner;
  }
  const model::Model at_limit = layers(kMaxPlanLayers);
  EXPECT_EQ(infeasible([&] { check_limits("uniform", Request{at_limit, topology, 2}); }), "");
}

TEST(LimitsTest, EveryClusterTheReaderAcceptsMayBePlanned) {
  // No GPU limit beyond the reader's: spp's DP runs on a budgeted grid and its ordering on a
  // budget of its own, so only the O(N^2) pair costs grow (docs/errors.md measures 8,192 GPUs).
  const model::Model model = layers(2);
  const topology::Topology topology = uniform_topology(4096, 1e10, 0.001);
  for (const std::string& planner : planner_names()) {
    EXPECT_EQ(infeasible([&] {
                check_limits(planner, Request{model, topology, 64});
              }),
              "")
        << planner;
  }
}

TEST(LimitsTest, MoreMicroBatchesThanOneStageMayHaveTasks) {
  const model::Model model = layers(1);
  const topology::Topology topology = uniform_topology(1, 1e10, 0.001);
  EXPECT_EQ(infeasible([&] {
              make_plan("spp", Request{model, topology, 262145});
            }),
            "cannot plan 262145 micro-batches: even one stage makes 524290 tasks, and a plan may "
            "have at most 524288" +
                kSee);
  EXPECT_EQ(infeasible([&] { check_limits("spp", Request{model, topology, 262144}); }), "");
}

TEST(LimitsTest, TooManyTasksOnceTheStagesAreKnown) {
  // gpipe makes one stage per GPU: 64 stages of 4096 micro-batches.
  const model::Model model = layers(64);
  const topology::Topology topology = uniform_topology(64, 1e10, 0.001);
  EXPECT_EQ(infeasible([&] {
              make_plan("gpipe", Request{model, topology, 4096});
            }),
            "cannot schedule 64 stages with 4096 micro-batches: that makes 1040384 tasks, and a "
            "plan may have at most 524288; use fewer micro-batches" +
                kSee);
  EXPECT_EQ(infeasible([] { check_task_limit(2, 349525); }), "");                  // 2097150 tasks
  EXPECT_NE(infeasible([] { check_task_limit(2, 349526); }), "");                  // 2097156 tasks
  EXPECT_EQ(infeasible([] { check_task_limit(2, 87381, kMaxSearchTasks); }), "");  // 524286
  EXPECT_NE(infeasible([] { check_task_limit(2, 87382, kMaxSearchTasks); }), "");  // 524292
}

// The planners that search keep each candidate within kMaxSearchTasks; the megatron planner,
// which plans the configuration it is given, within kMaxPlanTasks (NVIDIA's GPT-3 175B on
// 2,048 GPUs: 96 stages, 4,096 micro-batches, 1,564,672 tasks).
TEST(LimitsTest, TheMegatronPlannerMayPlanMoreTasksThanASearch) {
  EXPECT_EQ(kMaxPlanTasks, std::int64_t{1} << 21);
  EXPECT_EQ(kMaxSearchTasks, std::int64_t{1} << 19);
  for (const PlannerRow& row : planner_table()) {
    EXPECT_EQ(plan_task_limit(row.name), row.name == "megatron" ? kMaxPlanTasks : kMaxSearchTasks)
        << row.name;
  }
  EXPECT_EQ(plan_task_limit("test"), kMaxSearchTasks);
  const model::Model model = layers(2);
  const topology::Topology topology = uniform_topology(2, 1e10, 0.001);
  // Two stages of 87,382 micro-batches: 524,292 tasks, one stage's 2 M within the search limit.
  Request fixed{model, topology, 87382};
  fixed.tensor_parallel = {1};
  fixed.pipeline_parallel = 2;
  const Plan plan = make_plan("megatron", fixed);
  EXPECT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.timeline.compute.size() + plan.timeline.transfers.size(), 524292u);
  EXPECT_EQ(infeasible([&] {
              make_plan("gpipe", Request{model, topology, 87382});
            }),
            "cannot schedule 2 stages with 87382 micro-batches: that makes 524292 tasks, and a "
            "plan may have at most 524288; use fewer micro-batches" +
                kSee);
  // Before planning: one stage's 2 M against each planner's limit.
  EXPECT_EQ(infeasible([&] { check_limits("megatron", Request{model, topology, 1048576}); }), "");
  EXPECT_EQ(infeasible([&] {
              check_limits("megatron", Request{model, topology, 1048577});
            }),
            "cannot plan 1048577 micro-batches: even one stage makes 2097154 tasks, and a plan "
            "may have at most 2097152" +
                kSee);
}

TEST(LimitsTest, SearchSteps) {
  const model::Model model = layers(2000);
  const topology::Topology topology = uniform_topology(64, 1e10, 0.001);
  const Request request{model, topology, 64};
  EXPECT_EQ(planning_steps("spp", request), (64.0 * 64 + 2000.0 * 64) / 4);
  EXPECT_EQ(planning_steps("pipedream", request), 2000.0 * 2000 * 64 * 64);
  EXPECT_EQ(planning_steps("gpipe", request), 64.0 * 2000 * 2000 / 5);
  EXPECT_EQ(planning_steps("uniform", request), 2064.0);
  EXPECT_EQ(infeasible([&] { make_plan("pipedream", request); }),
            "cannot plan 2000 layers on 64 GPUs with 64 micro-batches: the pipedream planner would "
            "take about 1.64e+10 steps, more than its limit of 1e+08; use fewer layers, GPUs or "
            "micro-batches" +
                kSee);
  // The cheaper planners are not held back by pipedream's cost; spp's DP is on a grid.
  EXPECT_EQ(infeasible([&] { check_limits("gpipe", request); }), "");
  EXPECT_EQ(infeasible([&] { check_limits("spp", request); }), "");
}

TEST(LimitsTest, StepsCountTheWorkThatTakesTime) {
  // pipedream on 4,096 layers and 24 GPUs once took 541 s, its estimate just under the old
  // limit of 1e10; 256 layers take about a second.
  const topology::Topology cluster = uniform_topology(24, 1e10, 0.001);
  const model::Model many = layers(4096);
  EXPECT_EQ(infeasible([&] {
              check_limits("pipedream", Request{many, cluster, 16});
            }),
            "cannot plan 4096 layers on 24 GPUs with 16 micro-batches: the pipedream planner "
            "would take about 9.66e+09 steps, more than its limit of 1e+08; use fewer layers, "
            "GPUs or micro-batches" +
                kSee);
  EXPECT_EQ(infeasible([&] { check_limits("pipedream", Request{layers(256), cluster, 16}); }), "");
  // gpipe's split on the same input takes about 3 s: admitted.
  EXPECT_EQ(infeasible([&] { check_limits("gpipe", Request{many, cluster, 16}); }), "");
}

TEST(LimitsTest, SchedulingStepsCountEachTasksEventsAndReplicas) {
  // uniform with 4,096 stages of one GPU and 16 micro-batches once took 38 s, when every event
  // scanned every group: 262,112 tasks x 4,096 groups, refused. The scheduler now dispatches only
  // the groups an event touched (O(T (log T + r) + G)): about 5e6 steps, under a second.
  std::vector<Stage> one_per_gpu;
  for (int s = 0; s < 4096; ++s) one_per_gpu.push_back(Stage{s, s, {s}});
  const topology::Topology linked = uniform_topology(4096, 1e10, 0.001);  // explicit links
  EXPECT_DOUBLE_EQ(scheduling_steps(linked, one_per_gpu, 16),
                   262112.0 * (std::log2(262112.0) + 1) + 4096);
  EXPECT_EQ(infeasible([&] { check_schedule_limit(linked, one_per_gpu, 16); }), "");
  // One GPU at the task limit: 2^19 tasks of 19 + 1 steps each, and its one group.
  EXPECT_DOUBLE_EQ(scheduling_steps(linked, {Stage{0, 0, {0}}}, 262144), 524288.0 * 20 + 1);
  // Choosing among r replicas costs r per task: 1,024 replicas at the task limit are refused.
  std::vector<int> gpus(1024);
  for (int g = 0; g < 1024; ++g) gpus[static_cast<std::size_t>(g)] = g;
  const std::vector<Stage> wide_stage{Stage{0, 0, gpus}};
  EXPECT_DOUBLE_EQ(scheduling_steps(linked, wide_stage, 262144), 524288.0 * (19 + 1024) + 1024);
  EXPECT_EQ(infeasible([&] { check_schedule_limit(linked, wide_stage, 262144); }),
            "cannot schedule 1 stage with 262144 micro-batches on 4096 GPUs: the scheduler would "
            "take about 5.47e+08 steps (each task's events, and the replicas it may run on), more "
            "than its limit of 4e+08; use fewer stages or micro-batches" +
                kSee);
  // On a node-cost topology the scheduler chooses among alike groups by a tree: the groups on
  // the sender's node (8) and a log per task. The same stage is admitted (about 6e7 steps).
  const topology::Topology nodes = topology::read_topology(io::source_from_text(
      "topo.json", R"({"nodes": [{"name": "n", "count": 128, "gpus": 8, "speed": 1,
                        "link": {"bandwidth": "300 GB/s", "latency": "2 us"}}],
                       "network": {"bandwidth": "25 GB/s", "latency": "5 us"}})"));
  ASSERT_TRUE(nodes.costs_by_node());
  EXPECT_DOUBLE_EQ(scheduling_steps(nodes, wide_stage, 262144),
                   524288.0 * (19 + 10 * std::log2(1025.0)) + 1024);
  EXPECT_EQ(infeasible([&] { check_schedule_limit(nodes, wide_stage, 262144); }), "");
  // Nodes of two speeds: groups that do not work alike are scanned, r per task.
  const topology::Topology mixed = topology::read_topology(io::source_from_text(
      "topo.json", R"({"nodes": [{"name": "a", "count": 64, "gpus": 8, "speed": 1},
                                 {"name": "b", "count": 64, "gpus": 8, "speed": 2}],
                       "network": {"bandwidth": "25 GB/s", "latency": "5 us"}})"));
  EXPECT_DOUBLE_EQ(scheduling_steps(mixed, wide_stage, 262144), 524288.0 * (19 + 1024) + 1024);
  // Replicated stages: the most replicas of a stage; unused GPUs cost nothing.
  const double tasks = 4.0 * 2 * 4 - 2 * 4;
  EXPECT_DOUBLE_EQ(scheduling_steps(linked, {Stage{0, 0, {0, 1}}, Stage{1, 1, {2, 3, 4}}}, 4),
                   tasks * (std::log2(tasks) + 3) + 5);
  // A group of t GPUs is one resource: two stages of two 4-way groups, 4 groups.
  Stage wide{0, 0, {0, 1, 2, 3, 4, 5, 6, 7}};
  wide.tensor_parallel = 4;
  Stage wide2{1, 1, {8, 9, 10, 11, 12, 13, 14, 15}};
  wide2.tensor_parallel = 4;
  EXPECT_DOUBLE_EQ(scheduling_steps(linked, {wide, wide2}, 4), tasks * (std::log2(tasks) + 2) + 4);
}

TEST(LimitsTest, SppPlansWhereTheOldCellLimitRefused) {
  // 1 layer on 2048 GPUs with 128 micro-batches: once refused for its tables (N R (L + R)
  // cells at full resolution); the DP's grid keeps them small.
  const model::Model model = layers(1);
  const topology::Topology topology = uniform_topology(2048, 1e10, 0.001);
  const Plan plan = make_plan("spp", Request{model, topology, 128});
  EXPECT_EQ(plan.stages.size(), 1u);
  EXPECT_GT(plan.timeline.iteration_ms, 0);
}

TEST(LimitsTest, TimesThatCouldOverflow) {
  const model::Model model = make_model({{1e300, 1e300, 0, 0, 0}});
  const topology::Topology topology = uniform_topology(1, 1e10, 0.001, {1e-6});
  EXPECT_EQ(infeasible([&] {
              make_plan("spp", Request{model, topology, 2});
            }),
            "cannot plan: an iteration could take up to 4e+306 ms (all work in series on the "
            "slowest GPU and the narrowest link), beyond the planners' range of 1e+15 ms; check "
            "the model's times and the topology's speeds and bandwidths" +
                kSee);
  // A slow link alone: 2 x 4 micro-batches x 1e12 bytes at 0.125 B/s.
  const model::Model wide = make_model({{1, 1, 1e12, 0, 0}, {1, 1, 0, 0, 0}});
  const topology::Topology slow = uniform_topology(2, 0.125, 0.001);
  EXPECT_NE(infeasible([&] { check_limits("spp", Request{wide, slow, 4}); }), "");
  const topology::Topology fast = uniform_topology(2, 1e9, 0.001);
  EXPECT_EQ(infeasible([&] { check_limits("spp", Request{wide, fast, 4}); }), "");
}

TEST(LimitsTest, UnknownPlannersAreStillUsageErrors) {
  const model::Model model = layers(kMaxPlanLayers + 1);
  const topology::Topology topology = uniform_topology(2, 1e10, 0.001);
  EXPECT_THROW(make_plan("magic", Request{model, topology, 2}), UsageError);
}

}  // namespace
}  // namespace pipeplan::planners
