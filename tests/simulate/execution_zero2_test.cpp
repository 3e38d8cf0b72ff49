// A data-parallel stage with sharded gradients (docs/decisions.md "A data-parallel stage with
// sharded gradients", ZeRO-2 as torch FSDP's SHARD_GRAD_OP runs it) by hand: each layer's
// all-gather overlaps its forward and its reduce-scatter its backward, with no all-gather in the
// backward (the weights kept from the forward) nor in a recomputed forward; the gradients and the
// optimizer state are divided among the replicas, the weights are whole, and the device holds the
// largest layer's unsharded gradients once; there is no AllReduce. Then the plan file, the
// checker's refusal of an AllReduce, the DP's memory rule, the planners on a model that fits with
// sharded gradients and not sharded, and the one-replica screen.

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "../support/plan_mutation.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/planners/settings_choice.hpp"
#include "pipeplan/report/memory_view.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

using namespace pipeplan::testing;

constexpr Optimizer kZero2 = Optimizer::kShardedGradients;

// Two layers: layer 0 computes 4 ms forward and 8 ms backward (3 of them weight gradients) on
// 2 MB of weights, layer 1 computes 1 and 2 (1) on 4 MB. phi 4 with the default phi_sh 2: per
// weight byte 1 of weights, 1 of gradients, 2 of optimizer state.
model::Model two_layers(double update_ms = 0) {
  model::Model model = make_model({{4, 8, 0, 2e6, 10}, {1, 2, 0, 4e6, 20}});
  model.layers[0].backward_weight_ms = 3;
  model.layers[1].backward_weight_ms = 1;
  model.layers[0].update_ms = update_ms;
  model.layers[1].update_ms = update_ms;
  return model;
}

// Four GPUs, every pair at 1 GB/s and 0.5 ms. Over a ring of n = 4 an all-gather (or a
// reduce-scatter) of x bytes per GPU takes (3/4) x / 1e9 s + 3 x 0.5 ms: 3 ms for layer 0's 2 MB,
// 4.5 ms for layer 1's 4 MB.
topology::Topology four_gpus() { return uniform_topology(4, 1e9, 0.5); }

const std::vector<Stage> kFourReplicas{Stage{0, 1, {0, 1, 2, 3}}};

TEST(ShardedGradients, TheForwardGathersAndTheBackwardReduceScattersOnly) {
  const auto exec = execution(two_layers(), four_gpus(), kFourReplicas, kZero2);
  const GroupExecution& g = exec[0].groups[0];
  // F: max(4, 3) + max(1, 4.5) = 8.5. B: a reduce-scatter per layer, max(8, 3) + max(2, 4.5) =
  // 12.5 (fully sharded: 17, an all-gather more). Split: I = 5 + 1 = 6, nothing to overlap;
  // W = max(3, 3) + max(1, 4.5) = 7.5 (the reduce-scatter).
  EXPECT_DOUBLE_EQ(g.forward_ms, 8.5);
  EXPECT_DOUBLE_EQ(g.backward_ms, 12.5);
  EXPECT_DOUBLE_EQ(g.input_ms, 6);
  EXPECT_DOUBLE_EQ(g.weight_ms, 7.5);
  EXPECT_DOUBLE_EQ(g.work_ms, 21);
  EXPECT_DOUBLE_EQ(exec[0].allreduce_ms, 0);
  EXPECT_DOUBLE_EQ(exec[0].gather_ms, 6);
}

// A recomputing backward runs the forward again on the weights the forward kept: 4 + 1 = 5 ms,
// not the gathering forward's 8.5 (fully sharded, which gathers again, adds 8.5).
TEST(ShardedGradients, ARecomputedForwardDoesNotGatherAgain) {
  std::vector<Stage> stages = kFourReplicas;
  stages[0].recompute = true;
  const auto exec = execution(two_layers(), four_gpus(), stages, kZero2);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].recompute_ms, 5);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].backward_ms, 17.5);
  EXPECT_DOUBLE_EQ(exec[0].groups[0].input_ms, 11);
  const auto fully = execution(two_layers(), four_gpus(), stages, Optimizer::kFullySharded);
  EXPECT_DOUBLE_EQ(fully[0].groups[0].recompute_ms, 8.5);
  EXPECT_DOUBLE_EQ(fully[0].groups[0].backward_ms, 25.5);
}

TEST(ShardedGradients, TheWeightsAreWholeAndTheRestDividedPlusTheLargestLayersGradients) {
  const auto exec = execution(two_layers(), four_gpus(), kFourReplicas, kZero2);
  // 6 MB of weights, (1 + 2) x 6 MB / 4 of gradients and optimizer state: 10.5 MB; once per
  // device the unsharded gradients of the 4 MB layer, and no gathered weights.
  EXPECT_DOUBLE_EQ(exec[0].static_bytes, 10.5e6);
  EXPECT_DOUBLE_EQ(exec[0].weight_bytes, 6e6);
  EXPECT_DOUBLE_EQ(exec[0].gradient_bytes, 1.5e6);
  EXPECT_DOUBLE_EQ(exec[0].working_weight_bytes, 0);
  EXPECT_DOUBLE_EQ(exec[0].working_gradient_bytes, 4e6);
  EXPECT_DOUBLE_EQ(exec[0].device_bytes(), 4e6);
}

TEST(ShardedGradients, OneReplicaIsAsIfReplicated) {
  const std::vector<Stage> one{Stage{0, 1, {0}}};
  const auto sharded = execution(two_layers(), four_gpus(), one, kZero2);
  const auto replicated = execution(two_layers(), four_gpus(), one, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(sharded[0].static_bytes, replicated[0].static_bytes);
  EXPECT_DOUBLE_EQ(sharded[0].device_bytes(), 0);
  EXPECT_DOUBLE_EQ(sharded[0].groups[0].forward_ms, 5);
  EXPECT_DOUBLE_EQ(sharded[0].groups[0].backward_ms, 10);
  EXPECT_DOUBLE_EQ(sharded[0].gather_ms, 0);
}

TEST(ShardedGradients, TheTimelineHasNoAllReduceAndTheMemoryAddsUp) {
  const model::Model model = two_layers(8);
  const topology::Topology topology = four_gpus();
  const Schedule s = schedule_of(
      4, {{F(0, 0), B(0, 0)}, {F(0, 1), B(0, 1)}, {F(0, 2), B(0, 2)}, {F(0, 3), B(0, 3)}});
  const Timeline t = replay(model, topology, kFourReplicas, s, kZero2);
  EXPECT_TRUE(t.allreduces.empty());
  // F 0-8.5, B 8.5-21; each replica's step is (8 + 8) / 4 = 4 ms: 21-25.
  ASSERT_EQ(t.updates.size(), 4U);
  EXPECT_DOUBLE_EQ(t.updates[3].start_ms, 21);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 25);
  // Static 10.5 MB, the 4 MB working gradients and one micro-batch's stash of 30 bytes.
  EXPECT_DOUBLE_EQ(t.gpus[2].peak_memory_bytes, 14.5e6 + 30);
  Plan plan;
  plan.stages = kFourReplicas;
  plan.optimizer = kZero2;
  plan.timeline = t;
  const std::vector<report::StageMemory> memory = report::memory_breakdown(plan, model, topology);
  ASSERT_EQ(memory.size(), 1U);
  EXPECT_DOUBLE_EQ(memory[0].weights, 6e6);
  EXPECT_DOUBLE_EQ(memory[0].gradients, 5.5e6);
  EXPECT_DOUBLE_EQ(memory[0].optimizer, 3e6);
  EXPECT_DOUBLE_EQ(memory[0].activations, 30);
}

struct ShardedGradientsPlanFile : ::testing::Test {
  model::Model model = two_layers(8);
  topology::Topology topology = four_gpus();
  Plan plan = [this] {
    planners::Request request{model, topology, 8};
    request.optimizer = kZero2;
    const planners::Partition partition{{0, 1, 2, 3}, {Stage{0, 0, {0, 1}}, Stage{1, 1, {2, 3}}}};
    return planners::finish_plan("test", partition, request, schedule::Policy::kOneFOneB);
  }();
  nlohmann::ordered_json json = report::plan_to_json(plan, model, topology);

  std::string error_of(const std::function<void(nlohmann::ordered_json&)>& mutate) {
    return mutated_plan_error(json, model, topology, mutate);
  }
};

TEST_F(ShardedGradientsPlanFile, RoundTripsAndChecks) {
  EXPECT_EQ(json["optimizer"], "sharded-gradients");
  EXPECT_TRUE(json["schedule"]["allreduces"].empty());
  EXPECT_EQ(error_of([](auto&) {}), "no error");
  io::Source source = io::source_from_text("plan.json", io::dump_json(json));
  const Plan again = check_plan(report::read_plan(source, topology), model, topology);
  EXPECT_EQ(io::dump_json(report::plan_to_json(again, model, topology)), io::dump_json(json));
}

TEST_F(ShardedGradientsPlanFile, AnAllReduceOrAnotherOptimizerIsRefused) {
  EXPECT_EQ(
      error_of([](auto& j) {
        j["schedule"]["allreduces"].push_back(
            {{"stage", 0}, {"gpus", {"g0", "g1"}}, {"bytes", 2e6}, {"start_ms", 0}, {"end_ms", 1}});
      }),
      "plan.json: /schedule/allreduces/0: stage 0 shards its gradients (they are "
      "reduce-scattered in each backward) and no AllReduce");
  EXPECT_EQ(error_of([](auto& j) { j["optimizer"] = "sharded"; }),
            "plan.json: /schedule/allreduces: the AllReduce of stage 0 is missing");
  // Read as fully sharded, the same times are those of a plan that gathers in its backwards too.
  EXPECT_NE(error_of([](auto& j) { j["optimizer"] = "fully-sharded"; }), "no error");
}

// Eight layers of 2 MB at phi 4 on four GPUs of 31 MB, as Megatron-LM's configuration P = 1,
// D = 4: replicated each GPU holds 64 MB, sharded 16 MB x (2 + 2 / 4) = 40 MB, with sharded
// gradients 16 MB x (1 + 3 / 4) + 2 MB (one layer's gradients) = 30 MB. The DP's memory rule and
// the replay agree on it, and the megatron planner and spp plan it.
model::Model eight_layers() { return make_model(std::vector<L>(8, L{1, 2, 1e3, 2e6, 1e3})); }

// Megatron-LM's P = 1, D = 4 of `model` (which the request refers to) under `optimizer`.
planners::Request one_stage_on_four(const model::Model& model, const topology::Topology& topology,
                                    Optimizer optimizer) {
  planners::Request request{model, topology, 8};
  request.optimizer = optimizer;
  request.optimizer_fixed = true;
  request.tensor_parallel = {1};
  request.pipeline_parallel = 1;
  request.data_parallel = 4;
  return request;
}

TEST(ShardedGradients, TheDpsMemoryRuleIsTheReplays) {
  const std::vector<Stage> one{Stage{0, 7, {0, 1, 2, 3}}};
  const partition::ScheduleModel one_in_flight{true, 1};
  for (const auto& [gib, fits] : {std::pair{31e6, true}, std::pair{29e6, false}}) {
    const topology::Topology topology = uniform_topology(4, 1e9, 0.5, {}, gib);
    EXPECT_EQ(
        partition::objective(eight_layers(), topology, one, 8, one_in_flight, kZero2).has_value(),
        fits)
        << gib;
    EXPECT_FALSE(
        partition::objective(eight_layers(), topology, one, 8, one_in_flight, Optimizer::kSharded)
            .has_value());
  }
}

TEST(ShardedGradients, PlannersFindWhatFitsOnlyWithShardedGradients) {
  const model::Model model = eight_layers();
  const topology::Topology topology = uniform_topology(4, 1e9, 0.5, {}, 31e6);
  for (const Optimizer optimizer : {Optimizer::kReplicated, Optimizer::kSharded}) {
    EXPECT_THROW(
        (void)planners::make_plan("megatron", one_stage_on_four(model, topology, optimizer)),
        InfeasibleError)
        << optimizer_name(optimizer);
  }
  const Plan megatron = planners::make_plan("megatron", one_stage_on_four(model, topology, kZero2));
  ASSERT_EQ(megatron.stages.size(), 1U);
  EXPECT_EQ(megatron.stages[0].replicas(), 4);
  EXPECT_TRUE(megatron.timeline.allreduces.empty());
  EXPECT_DOUBLE_EQ(megatron.timeline.gpus[0].peak_memory_bytes, 30e6 + 8e3);
  const std::string text = report::plan_json_text(megatron, model, topology);
  const Plan checked = check_plan(
      report::read_plan(io::source_from_text("plan.json", text), topology), model, topology);
  EXPECT_DOUBLE_EQ(checked.timeline.iteration_ms, megatron.timeline.iteration_ms);

  planners::Request spp{model, topology, 8};
  spp.optimizer = kZero2;
  spp.optimizer_fixed = true;
  const Plan plan = planners::make_plan("spp", spp);
  EXPECT_EQ(plan.optimizer, kZero2);
  for (const GpuUsage& gpu : plan.timeline.gpus) EXPECT_LE(gpu.peak_memory_bytes, 31e6);
}

// The one-replica screen (planners::one_replica_ms) divides the gradients and the optimizer
// state and keeps the weights whole: the configuration above is screened, and the screen is a
// lower bound of the whole plan.
TEST(ShardedGradients, TheOneReplicaScreenDividesTheGradientsAndTheState) {
  const model::Model model = eight_layers();
  const topology::Topology topology = uniform_topology(4, 1e9, 0.5, {}, 31e6);
  const planners::Request request = one_stage_on_four(model, topology, kZero2);
  const planners::Partition shape{{0, 1, 2, 3}, {Stage{0, 7, {0, 1, 2, 3}}}};
  const std::optional<double> screen =
      planners::one_replica_ms(request, shape, schedule::Policy::kOneFOneB);
  ASSERT_TRUE(screen.has_value());
  const Plan whole = planners::finish_plan("test", shape, request, schedule::Policy::kOneFOneB);
  EXPECT_LE(*screen, whole.timeline.iteration_ms);
  // Two micro-batches of F + B = 8 + 16 ms on the replica alone, with no collectives: 48 ms.
  EXPECT_DOUBLE_EQ(*screen, 48);
}

}  // namespace
}  // namespace pipeplan::simulate
