// The planner registry, the uniform and data-parallel baselines, and the plans of every
// baseline surviving a round trip through plan.json and the checker.

#include "pipeplan/planners/baselines.hpp"

#include <gtest/gtest.h>

#include <random>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;
using schedule::Policy;

model::Model equal_layers(int count, double parameter_bytes = 0, double stash_bytes = 0) {
  return make_model(
      std::vector<L>(static_cast<std::size_t>(count), L{1, 2, 1e6, parameter_bytes, stash_bytes}));
}

// The request `name` plans: megatron plans one configuration, here its deepest pipeline without
// tensor parallelism (P the largest divisor of the GPUs not above the layers).
Request request_for(const std::string& name, Request request) {
  if (name != "megatron") return request;
  request.tensor_parallel = {1};
  const int gpus = request.topology.size();
  int depth = 1;
  for (int p = 1; p <= gpus; ++p) {
    if (gpus % p == 0 && p <= static_cast<int>(request.model.layers.size())) depth = p;
  }
  request.pipeline_parallel = depth;
  return request;
}

TEST(PlannerRegistryTest, NamesAndDefaultPolicies) {
  EXPECT_EQ(planner_names(), (std::vector<std::string>{"spp", "gpipe", "pipedream", "uniform",
                                                       "data-parallel", "megatron"}));
  EXPECT_EQ(default_policy("spp"), Policy::kList);
  EXPECT_EQ(default_policy("gpipe"), Policy::kGpipe);
  EXPECT_EQ(default_policy("pipedream"), Policy::kOneFOneB);
  EXPECT_EQ(default_policy("uniform"), Policy::kOneFOneB);
  EXPECT_EQ(default_policy("data-parallel"), Policy::kOneFOneB);
  EXPECT_EQ(default_policy("megatron"), Policy::kOneFOneB);
}

TEST(PlannerRegistryTest, EveryRowIsComplete) {
  const auto& table = planner_table();
  ASSERT_EQ(table.size(), planner_names().size());
  for (std::size_t x = 0; x < table.size(); ++x) {
    const PlannerRow& row = table[x];
    EXPECT_EQ(planner_names()[x], row.name);
    EXPECT_EQ(&find_planner(row.name), &row);
    EXPECT_FALSE(row.description.empty()) << row.name;
    EXPECT_TRUE(row.steps != nullptr) << row.name;
    // One entry point: a whole plan, or stages that finish_plan completes.
    EXPECT_NE(row.plan == nullptr, row.partition == nullptr) << row.name;
    EXPECT_TRUE(!row.seeds_spp || row.partition != nullptr) << row.name;
    // compare runs a planner under its default policy first.
    EXPECT_TRUE(row.compare_policies.empty() || row.compare_policies.front() == row.default_policy)
        << row.name;
    for (std::size_t y = 0; y < x; ++y) EXPECT_NE(table[y].name, row.name);
  }
  // spp is the default planner and no baseline; it is seeded by every baseline but megatron,
  // which plans one configuration of the request's own and is left out of compare's plain rows
  // (compare runs its configurations itself).
  EXPECT_EQ(table.front().name, "spp");
  EXPECT_FALSE(table.front().baseline);
  EXPECT_EQ(table.front().compare_policies,
            (std::vector<Policy>{Policy::kList, Policy::kOneFOneB, Policy::kGpipe}));
  for (std::size_t x = 1; x < table.size(); ++x) {
    EXPECT_TRUE(table[x].baseline) << table[x].name;
    EXPECT_EQ(table[x].seeds_spp, table[x].name != "megatron") << table[x].name;
    EXPECT_EQ(table[x].compare_policies.empty(), table[x].name == "megatron") << table[x].name;
  }
}

TEST(PlannerRegistryTest, UnknownPlannerIsAUsageError) {
  const model::Model model = equal_layers(2);
  const topology::Topology topology = uniform_topology(2, 1e9, 0);
  try {
    (void)make_plan("alpa", Request{model, topology, 2});
    FAIL() << "expected UsageError";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(),
                 "unknown planner \"alpa\" (known: spp, gpipe, pipedream, uniform, data-parallel, "
                 "megatron)");
  }
  EXPECT_THROW((void)planning_steps("alpa", Request{model, topology, 2}), UsageError);
  EXPECT_THROW((void)default_policy("alpa"), UsageError);
  EXPECT_THROW(check_limits("alpa", Request{model, topology, 2}), UsageError);
}

TEST(PlannerRegistryTest, PolicyIsPassedThrough) {
  const model::Model model = equal_layers(6);
  const topology::Topology topology = uniform_topology(3, 1e9, 0);
  for (const auto& name : planner_names()) {
    const Request request = request_for(name, Request{model, topology, 4});
    EXPECT_EQ(make_plan(name, request).schedule_policy, schedule::policy_name(default_policy(name)))
        << name;
    for (Policy policy : {Policy::kList, Policy::kOneFOneB, Policy::kGpipe}) {
      Plan plan = make_plan(name, request, policy);
      EXPECT_EQ(plan.planner, name);
      EXPECT_EQ(plan.schedule_policy, schedule::policy_name(policy)) << name;
    }
  }
}

TEST(UniformTest, SpreadsTheRemainderFromTheFirstStage) {
  const topology::Topology four = uniform_topology(4, 1e9, 0);
  const model::Model ten = equal_layers(10);
  Partition partition = uniform_partition(Request{ten, four, 4});
  EXPECT_EQ(stages_text(partition.stages), "0-2@0 3-5@1 6-7@2 8-9@3");
  EXPECT_EQ(partition.gpu_order, (std::vector<int>{0, 1, 2, 3}));
  const model::Model eight = equal_layers(8);
  EXPECT_EQ(stages_text(uniform_partition(Request{eight, four, 4}).stages),
            "0-1@0 2-3@1 4-5@2 6-7@3");
}

TEST(UniformTest, NeverAnEmptyStage) {
  // Three layers on five GPUs: three one-layer stages, two GPUs unused.
  const model::Model model = equal_layers(3);
  const topology::Topology topology = uniform_topology(5, 1e9, 0);
  Plan plan = make_plan("uniform", Request{model, topology, 4});
  EXPECT_EQ(stages_text(plan.stages), "0-0@0 1-1@1 2-2@2");
  EXPECT_EQ(plan.gpu_order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(plan.timeline.gpus[3].stages.empty());
  EXPECT_EQ(plan.schedule_policy, "1f1b");
}

TEST(UniformTest, InfeasibleWhenAStageDoesNotFit) {
  // Stage 0 keeps min(M, S) = 2 stashes of 2 x 1 MiB beside 4 x 2 x 1 MiB of parameters:
  // 12 MiB against 11 MiB. Stage 1 keeps one (10 MiB) and would fit.
  const model::Model model = equal_layers(4, 1048576, 1048576);
  const topology::Topology topology = uniform_topology(2, 1e9, 0, {}, 11 * 1048576.0);
  try {
    (void)make_plan("uniform", Request{model, topology, 4});
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(
        error.what(),
        "uniform: stage 0 (layers 0-1) needs 12 MiB (4 x parameters + 2 stashes) but GPU \"g0\" "
        "has 11 MiB under the 1f1b schedule");
  }
  // The list schedule holds one stash: it fits.
  EXPECT_NO_THROW((void)make_plan("uniform", Request{model, topology, 4}, Policy::kList));
}

TEST(DataParallelTest, OneStageOnARingInInputOrder) {
  const model::Model model = equal_layers(5, 1e6);
  const topology::Topology topology = uniform_topology(4, 1e9, 0.01);
  Plan plan = make_plan("data-parallel", Request{model, topology, 8});
  EXPECT_EQ(stages_text(plan.stages), "0-4@0,1,2,3");
  EXPECT_EQ(plan.gpu_order, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(plan.timeline.allreduces.size(), 1u);
  // 2 (3/4) 5 MB / 1 GB/s + 2 x 3 x 0.01 ms.
  const TimedAllReduce& allreduce = plan.timeline.allreduces.front();
  EXPECT_NEAR(allreduce.end_ms - allreduce.start_ms, 7.5 + 0.06, 1e-9);
  // Round-robin: every GPU runs two micro-batches of 3 ms each way... F = 5, B = 10.
  for (int g = 0; g < 4; ++g) {
    EXPECT_DOUBLE_EQ(plan.timeline.gpus[static_cast<std::size_t>(g)].busy_ms, 2 * 15);
  }
  EXPECT_DOUBLE_EQ(plan.timeline.iteration_ms, 2 * 15 + 7.56);
}

TEST(DataParallelTest, InfeasibleWhenTheModelDoesNotFitOneGpu) {
  const model::Model model = equal_layers(3, 1048576, 1048576);
  const topology::Topology topology = uniform_topology(2, 1e9, 0, {}, 8 * 1048576.0);
  try {
    (void)make_plan("data-parallel", Request{model, topology, 4});
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(error.what(),
                 "data-parallel: stage 0 (layers 0-2) needs 15 MiB (4 x parameters + 1 stash) but "
                 "GPU \"g0\" "
                 "has 8 MiB under the 1f1b schedule");
  }
}

TEST(PeakStashesTest, FollowsTheFixedOrders) {
  // Stages with 1, 2 and 1 replicas, M = 7: 1F1B warm-ups min(7, max((3-t) r_t)) = 4, 4, 1.
  const std::vector<Stage> stages{{0, 0, {0}}, {1, 1, {1, 2}}, {2, 2, {3}}};
  EXPECT_EQ(peak_stashes(stages, 0, 7, Policy::kOneFOneB), 4);
  EXPECT_EQ(peak_stashes(stages, 1, 7, Policy::kOneFOneB), 2);
  EXPECT_EQ(peak_stashes(stages, 2, 7, Policy::kOneFOneB), 1);
  EXPECT_EQ(peak_stashes(stages, 0, 7, Policy::kGpipe), 7);
  EXPECT_EQ(peak_stashes(stages, 1, 7, Policy::kGpipe), 4);
  EXPECT_EQ(peak_stashes(stages, 1, 7, Policy::kList), 1);
}

// A random heterogeneous instance with memories.
struct Instance {
  model::Model model;
  topology::Topology topology;
  int micro_batches;
};

Instance random_instance(std::mt19937& rng) {
  std::uniform_real_distribution<double> time(0.1, 10), bytes(0, 4e6), speed(0.25, 2),
      bandwidth(1e9, 50e9), memory(20e6, 80e6);
  const int layer_count = 1 + static_cast<int>(rng() % 9);
  const int N = 1 + static_cast<int>(rng() % 6);
  std::vector<L> layers;
  for (int l = 0; l < layer_count; ++l) {
    layers.push_back(L{time(rng), time(rng), bytes(rng), bytes(rng) / 4, bytes(rng)});
  }
  std::vector<topology::Gpu> gpus;
  for (int i = 0; i < N; ++i) {
    topology::Gpu g;
    g.id = "gpu" + std::to_string(i);
    g.node = g.id;
    g.speed = speed(rng);
    if (rng() % 3 != 0) g.memory_bytes = memory(rng);
    gpus.push_back(g);
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < N; ++u) {
    for (int v = u + 1; v < N; ++v) links.push_back({u, v, bandwidth(rng), 0.005});
  }
  return Instance{make_model(layers), topology::Topology::build("random", gpus, links, "test"),
                  1 + static_cast<int>(rng() % 12)};
}

TEST(BaselinesTest, PlansPassTheCheckerAfterARoundTrip) {
  std::mt19937 rng(42);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const Instance instance = random_instance(rng);
    for (const auto& name : planner_names()) {
      if (name == "spp") continue;
      const Request request =
          request_for(name, Request{instance.model, instance.topology, instance.micro_batches});
      for (Policy policy : {Policy::kList, Policy::kOneFOneB, Policy::kGpipe}) {
        Plan plan;
        try {
          plan = make_plan(name, request, policy);
        } catch (const InfeasibleError&) {
          continue;
        } catch (const UsageError&) {  // replicas that cannot share the micro-batches
          EXPECT_TRUE(refusal(name, request).has_value()) << name;
          continue;
        }
        std::vector<int> input(static_cast<std::size_t>(instance.topology.size()));
        for (std::size_t g = 0; g < input.size(); ++g) input[g] = static_cast<int>(g);
        EXPECT_EQ(plan.gpu_order, input) << name;
        const std::string json =
            io::dump_json(report::plan_to_json(plan, instance.model, instance.topology));
        const auto stated =
            report::read_plan(io::source_from_text("plan.json", json), instance.topology);
        Plan checked_plan;
        ASSERT_NO_THROW(checked_plan =
                            simulate::check_plan(stated, instance.model, instance.topology))
            << name << " " << schedule::policy_name(policy) << " trial " << trial;
        EXPECT_DOUBLE_EQ(checked_plan.timeline.iteration_ms, plan.timeline.iteration_ms);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

}  // namespace
}  // namespace pipeplan::planners
