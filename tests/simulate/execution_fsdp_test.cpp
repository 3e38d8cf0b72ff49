// The data-parallel stages that shard their gradients, by hand: fully sharded (docs/decisions.md
// "A fully sharded data-parallel stage", ZeRO-3 as torch FSDP2 runs it) and with the gradients
// sharded alone ("A data-parallel stage with sharded gradients", ZeRO-2 as torch FSDP's
// SHARD_GRAD_OP runs it). Each layer's all-gathers and reduce-scatter overlap its compute (ZeRO-2
// gathers once, for the forward, and not again for a recomputed forward); the shards and the
// working copies of the largest layer; no AllReduce, and the optimizer step divided like a
// sharded optimizer's. Then plans that round-trip through plan.json and the checker, the
// checker's refusal of an AllReduce, the DP's memory rule, the planners on a model that fits only
// with its gradients sharded, and the one-replica screen.

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

// The plan as plan.json text, read back and checked as `simulate` does: the same iteration.
void expect_checks(const Plan& plan, const model::Model& model,
                   const topology::Topology& topology) {
  const std::string text = report::plan_json_text(plan, model, topology);
  const Plan checked = check_plan(
      report::read_plan(io::source_from_text("plan.json", text), topology), model, topology);
  EXPECT_DOUBLE_EQ(checked.timeline.iteration_ms, plan.timeline.iteration_ms);
}

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

// Four GPUs, every pair at 1 GB/s and 0.5 ms. Over a ring of n = 4 an all-gather of x bytes per
// GPU takes (3/4) x / 1e9 s + 3 x 0.5 ms: 3 ms for layer 0's 2 MB, 4.5 ms for layer 1's 4 MB.
topology::Topology four_gpus() { return uniform_topology(4, 1e9, 0.5); }

const std::vector<Stage> kFourReplicas{Stage{0, 1, {0, 1, 2, 3}}};

TEST(FullySharded, EachLayerOverlapsItsGathersWithItsCompute) {
  const auto exec = execution(two_layers(), four_gpus(), kFourReplicas, Optimizer::kFullySharded);
  const GroupExecution& g = exec[0].groups[0];
  // F: max(4, 3) + max(1, 4.5) = 8.5. B: an all-gather and a reduce-scatter per layer,
  // max(8, 6) + max(2, 9) = 17. Split: I = max(5, 3) + max(1, 4.5) = 9.5 (the all-gather),
  // W = max(3, 3) + max(1, 4.5) = 7.5 (the reduce-scatter).
  EXPECT_DOUBLE_EQ(g.forward_ms, 8.5);
  EXPECT_DOUBLE_EQ(g.backward_ms, 17);
  EXPECT_DOUBLE_EQ(g.input_ms, 9.5);
  EXPECT_DOUBLE_EQ(g.weight_ms, 7.5);
  EXPECT_DOUBLE_EQ(g.work_ms, 25.5);
  EXPECT_DOUBLE_EQ(exec[0].allreduce_ms, 0);
  // One all-gather of the whole 6 MB: (3/4) 6e6 / 1e9 s + 3 x 0.5 ms.
  EXPECT_DOUBLE_EQ(exec[0].gather_ms, 6);
}

TEST(FullySharded, EverythingIsDividedPlusTheLargestLayersWorkingCopies) {
  const auto exec = execution(two_layers(), four_gpus(), kFourReplicas, Optimizer::kFullySharded);
  // 4 x 6 MB / 4 = 6 MB, plus, once per device, two gathered copies and one unsharded gradient
  // of the 4 MB layer.
  EXPECT_DOUBLE_EQ(exec[0].static_bytes, 6e6);
  EXPECT_DOUBLE_EQ(exec[0].weight_bytes, 6e6 / 4);
  EXPECT_DOUBLE_EQ(exec[0].gradient_bytes, 6e6 / 4);
  EXPECT_DOUBLE_EQ(exec[0].working_weight_bytes, 2 * 4e6);
  EXPECT_DOUBLE_EQ(exec[0].working_gradient_bytes, 4e6);
  EXPECT_DOUBLE_EQ(exec[0].device_bytes(), 12e6);
  // Replicated: 24 MB; sharded: 6 MB x (4 - 2 + 2 / 4) = 15 MB; neither has working copies.
  const auto replicated =
      execution(two_layers(), four_gpus(), kFourReplicas, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(replicated[0].static_bytes, 24e6);
  EXPECT_DOUBLE_EQ(replicated[0].device_bytes(), 0);
  EXPECT_DOUBLE_EQ(
      execution(two_layers(), four_gpus(), kFourReplicas, Optimizer::kSharded)[0].static_bytes,
      15e6);
}

// Two stages on one device (spec 9.2): one layer computes at a time, so the device holds the
// working copies of its largest layer once, not one set per stage.
TEST(FullySharded, ADeviceHoldsTheWorkingCopiesOnce) {
  const model::Model model = two_layers();
  const topology::Topology topology = four_gpus();
  const std::vector<Stage> shared{Stage{0, 0, {0, 1, 2, 3}}, Stage{1, 1, {0, 1, 2, 3}}};
  const auto exec = execution(model, topology, shared, Optimizer::kFullySharded);
  EXPECT_DOUBLE_EQ(exec[0].static_bytes, 2e6);
  EXPECT_DOUBLE_EQ(exec[1].static_bytes, 4e6);
  EXPECT_DOUBLE_EQ(exec[0].device_bytes(), 12e6);  // the 4 MB layer of stage 1
  EXPECT_DOUBLE_EQ(exec[1].device_bytes(), 12e6);
  const Schedule s = schedule_of(4, {{F(0, 0), F(1, 0), B(1, 0), B(0, 0)},
                                     {F(0, 1), F(1, 1), B(1, 1), B(0, 1)},
                                     {F(0, 2), F(1, 2), B(1, 2), B(0, 2)},
                                     {F(0, 3), F(1, 3), B(1, 3), B(0, 3)}});
  const Timeline t = replay(model, topology, shared, s, Optimizer::kFullySharded);
  // 6 MB of shards, 12 MB of working copies, one micro-batch's stashes on both stages (30 B).
  EXPECT_DOUBLE_EQ(t.gpus[0].peak_memory_bytes, 18e6 + 30);
}

TEST(FullySharded, OneReplicaIsAsIfReplicated) {
  const std::vector<Stage> one{Stage{0, 1, {0}}};
  const auto fully = execution(two_layers(), four_gpus(), one, Optimizer::kFullySharded);
  const auto replicated = execution(two_layers(), four_gpus(), one, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(fully[0].static_bytes, replicated[0].static_bytes);
  EXPECT_DOUBLE_EQ(fully[0].groups[0].forward_ms, 5);
  EXPECT_DOUBLE_EQ(fully[0].groups[0].backward_ms, 10);
  EXPECT_DOUBLE_EQ(fully[0].gather_ms, 0);
}

TEST(FullySharded, TheTimelineHasNoAllReduceAndTheStepFollowsTheBackwards) {
  const model::Model model = two_layers(8);
  const topology::Topology topology = four_gpus();
  const Schedule s = schedule_of(
      4, {{F(0, 0), B(0, 0)}, {F(0, 1), B(0, 1)}, {F(0, 2), B(0, 2)}, {F(0, 3), B(0, 3)}});
  const Timeline t = replay(model, topology, kFourReplicas, s, Optimizer::kFullySharded);
  EXPECT_TRUE(t.allreduces.empty());
  // F 0-8.5, B 8.5-25.5; each replica's step is (8 + 8) / 4 = 4 ms: 25.5-29.5.
  ASSERT_EQ(t.updates.size(), 4U);
  EXPECT_DOUBLE_EQ(t.updates[3].start_ms, 25.5);
  EXPECT_DOUBLE_EQ(t.updates[3].end_ms, 29.5);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 29.5);
  // Static 18 MB and one micro-batch's stash of 30 bytes.
  EXPECT_DOUBLE_EQ(t.gpus[2].peak_memory_bytes, 18e6 + 30);
  // The breakdown adds up: weights, gradients, then the optimizer state 2 x 6 MB / 4.
  Plan plan;
  plan.stages = kFourReplicas;
  plan.optimizer = Optimizer::kFullySharded;
  plan.timeline = t;
  const std::vector<report::StageMemory> memory = report::memory_breakdown(plan, model, topology);
  ASSERT_EQ(memory.size(), 1U);
  EXPECT_DOUBLE_EQ(memory[0].weights, 9.5e6);
  EXPECT_DOUBLE_EQ(memory[0].gradients, 5.5e6);
  EXPECT_DOUBLE_EQ(memory[0].optimizer, 3e6);
  EXPECT_DOUBLE_EQ(memory[0].activations, 30);
}

// Sharded gradients (ZeRO-2): the forward gathers, the backward reduce-scatters only.
constexpr Optimizer kZero2 = Optimizer::kShardedGradients;

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

// A plan that pipeplan makes with its gradients sharded round-trips through plan.json and the
// checker, refuses an AllReduce, and does not check as made under another optimizer.
class ShardedPlanFile : public ::testing::TestWithParam<Optimizer> {
 protected:
  model::Model model = two_layers(8);
  topology::Topology topology = four_gpus();
  Plan plan = [this] {
    planners::Request request{model, topology, 8};
    request.optimizer = GetParam();
    const planners::Partition partition{{0, 1, 2, 3}, {Stage{0, 0, {0, 1}}, Stage{1, 1, {2, 3}}}};
    return planners::finish_plan("test", partition, request, schedule::Policy::kOneFOneB);
  }();
  nlohmann::ordered_json json = report::plan_to_json(plan, model, topology);

  std::string error_of(const std::function<void(nlohmann::ordered_json&)>& mutate) {
    return mutated_plan_error(json, model, topology, mutate);
  }
};

TEST_P(ShardedPlanFile, RoundTripsAndChecks) {
  EXPECT_EQ(json["optimizer"], optimizer_name(GetParam()));
  EXPECT_TRUE(json["schedule"]["allreduces"].empty());
  EXPECT_EQ(error_of([](auto&) {}), "no error");
  io::Source source = io::source_from_text("plan.json", io::dump_json(json));
  const Plan again = check_plan(report::read_plan(source, topology), model, topology);
  EXPECT_EQ(io::dump_json(report::plan_to_json(again, model, topology)), io::dump_json(json));
}

TEST_P(ShardedPlanFile, AnAllReduceOrAnotherOptimizerIsRefused) {
  EXPECT_EQ(
      error_of([](auto& j) {
        j["schedule"]["allreduces"].push_back(
            {{"stage", 0}, {"gpus", {"g0", "g1"}}, {"bytes", 2e6}, {"start_ms", 0}, {"end_ms", 1}});
      }),
      std::string("plan.json: /schedule/allreduces/0: stage 0 ") +
          (GetParam() == Optimizer::kFullySharded
               ? "is fully sharded (its gradients are reduce-scattered in each backward)"
               : "shards its gradients (they are reduce-scattered in each backward)") +
          " and no AllReduce");
  // Read as sharded, the same plan lacks its AllReduces; read as the other gradient sharding,
  // its backwards take other times (one all-gather more or fewer).
  EXPECT_EQ(error_of([](auto& j) { j["optimizer"] = "sharded"; }),
            "plan.json: /schedule/allreduces: the AllReduce of stage 0 is missing");
  const Optimizer other =
      GetParam() == Optimizer::kFullySharded ? kZero2 : Optimizer::kFullySharded;
  EXPECT_NE(error_of([other](auto& j) { j["optimizer"] = optimizer_name(other); }), "no error");
}

INSTANTIATE_TEST_SUITE_P(GradientShardings, ShardedPlanFile,
                         ::testing::Values(Optimizer::kFullySharded, kZero2),
                         [](const ::testing::TestParamInfo<Optimizer>& param) {
                           return param.param == Optimizer::kFullySharded ? "FullySharded"
                                                                          : "ShardedGradients";
                         });

// Eight layers of 2 MB at phi 4 on four GPUs of 31 MB, as Megatron-LM's configuration P = 1,
// D = 4: replicated each GPU holds 64 MB, sharded 16 MB x (2 + 2 / 4) = 40 MB, with sharded
// gradients 16 MB x (1 + 3 / 4) + 2 MB (one layer's gradients) = 30 MB, fully sharded 64 MB / 4 +
// 3 x 2 MB (two gathered copies and one gradient of a layer) = 22 MB.
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

// The static bytes above per GPU, with one micro-batch's stashes of the eight layers (1 kB each).
const std::pair<Optimizer, double> kPeakOfEach[] = {{Optimizer::kFullySharded, 22e6 + 8e3},
                                                    {kZero2, 30e6 + 8e3}};

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

// Only the plans that shard their gradients fit; the megatron planner and spp plan them.
TEST(ShardedGradients, PlannersFindWhatFitsOnlyWithTheGradientsSharded) {
  const model::Model model = eight_layers();
  const topology::Topology topology = uniform_topology(4, 1e9, 0.5, {}, 31e6);
  for (const Optimizer optimizer : {Optimizer::kReplicated, Optimizer::kSharded}) {
    EXPECT_THROW(
        (void)planners::make_plan("megatron", one_stage_on_four(model, topology, optimizer)),
        InfeasibleError)
        << optimizer_name(optimizer);
  }
  for (const auto& [optimizer, peak] : kPeakOfEach) {
    SCOPED_TRACE(optimizer_name(optimizer));
    const Plan megatron =
        planners::make_plan("megatron", one_stage_on_four(model, topology, optimizer));
    ASSERT_EQ(megatron.stages.size(), 1U);
    EXPECT_EQ(megatron.stages[0].replicas(), 4);
    EXPECT_TRUE(megatron.timeline.allreduces.empty());
    EXPECT_DOUBLE_EQ(megatron.timeline.gpus[0].peak_memory_bytes, peak);
    expect_checks(megatron, model, topology);

    planners::Request spp{model, topology, 8};
    spp.optimizer = optimizer;
    spp.optimizer_fixed = true;
    const Plan plan = planners::make_plan("spp", spp);
    EXPECT_EQ(plan.optimizer, optimizer);
    for (const GpuUsage& gpu : plan.timeline.gpus) EXPECT_LE(gpu.peak_memory_bytes, 31e6);
    expect_checks(plan, model, topology);
  }
}

// spp screens Megatron-LM's configurations on one replica (planners::one_replica_ms): the
// replica's GPUs hold the state divided by r (and with sharded gradients the weights whole), so
// the configuration above is screened, and the screen stays a lower bound of the whole plan.
TEST(ShardedGradients, TheOneReplicaScreenDividesTheState) {
  const model::Model model = eight_layers();
  const topology::Topology topology = uniform_topology(4, 1e9, 0.5, {}, 31e6);
  for (const Optimizer optimizer : {Optimizer::kFullySharded, kZero2}) {
    SCOPED_TRACE(optimizer_name(optimizer));
    const planners::Request request = one_stage_on_four(model, topology, optimizer);
    const planners::Partition shape{{0, 1, 2, 3}, {Stage{0, 7, {0, 1, 2, 3}}}};
    const std::optional<double> screen =
        planners::one_replica_ms(request, shape, schedule::Policy::kOneFOneB);
    ASSERT_TRUE(screen.has_value());
    const Plan whole = planners::finish_plan("test", shape, request, schedule::Policy::kOneFOneB);
    EXPECT_LE(*screen, whole.timeline.iteration_ms);
    // Two micro-batches of F + B = 8 + 16 ms on the replica alone, with no collectives: 48 ms.
    EXPECT_DOUBLE_EQ(*screen, 48);
  }
}

}  // namespace
}  // namespace pipeplan::simulate
