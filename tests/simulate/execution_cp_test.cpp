// Spec 10 by hand: context parallelism's divided per-GPU values, ring steps overlapped with
// compute layer by layer, the context and tensor-parallel rings of a group, the AllReduce over
// data- and context-parallel ranks, the sharded optimizer's divisor, boundary transfers, memory,
// and every rule of the stage check, each on figures computed on paper.

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

using namespace pipeplan::testing;

constexpr double kTolerance = 1e-9;

// Two layers: layer 0 exchanges 1 GB of keys and values (context degrees 1 and 2), layer 1 has
// no context_parallel (any degree, no exchange). Parameters 1e9 bytes each.
model::Model two_layer_model() {
  model::Model model = make_model({{10, 20, 1000, 1e9, 800}, {4, 8, 600, 1e9, 400}});
  model.layers[0].context_parallel = model::ContextParallel{{1, 2}, 1e9};
  return model;
}

Stage cp_stage(std::vector<int> gpus, int c, int t = 1, int first = 0, int last = 1) {
  Stage stage{first, last, std::move(gpus)};
  stage.tensor_parallel = t;
  stage.context_parallel = c;
  return stage;
}

TEST(ExecutionContextParallel, RingStepsOverlapEachLayersComputeAndTheRanksReduceTogether) {
  const model::Model model = two_layer_model();
  // Every pair at 100 GB/s and 0.01 ms: a ring step of layer 0 passes 1e9 / (2 x 1) = 5e8 bytes
  // in 0.01 + 5 = 5.01 ms.
  const topology::Topology topology = uniform_topology(4, 1e11, 0.01);
  const std::vector<Stage> stages{cp_stage({0, 1}, 2)};
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  ASSERT_EQ(exec[0].groups.size(), 1U);
  const GroupExecution& group = exec[0].groups[0];
  EXPECT_EQ(group.gpus, (std::vector<int>{0, 1}));
  // Forward: layer 0 max(10/2, 1 x 5.01) = 5.01, layer 1 4/2 = 2: 7.01 (the steps overlap layer
  // 0 only, not the stage's whole compute: max(7, 5.01) would be 7).
  EXPECT_NEAR(group.forward_ms, 7.01, kTolerance);
  // Backward: layer 0 max(20/2, 2 x 5.01) = 10.02, layer 1 8/2 = 4: 14.02.
  EXPECT_NEAR(group.backward_ms, 14.02, kTolerance);
  EXPECT_NEAR(group.work_ms, 21.03, kTolerance);
  // The stage's figures are the divided per-GPU sums; parameters are not divided.
  EXPECT_DOUBLE_EQ(exec[0].forward_ms, 7);
  EXPECT_DOUBLE_EQ(exec[0].parameter_bytes, 2e9);
  // r = 1 but c = 2: an AllReduce over the two context-parallel ranks, carrying W_s = 2e9:
  // 2 (1/2) 2e9 / 1e11 s + 2 (0.01) = 20.02 ms.
  EXPECT_NEAR(exec[0].allreduce_ms, 20.02, kTolerance);
  EXPECT_DOUBLE_EQ(exec[0].static_bytes, 8e9);
  EXPECT_DOUBLE_EQ(exec[0].stash_bytes, 600);  // (800 + 400) / 2

  // F F B B on the leader: 0-7.01, 7.01-14.02, 14.02-28.04, 28.04-42.06; AllReduce to 62.08.
  const Timeline t = replay(model, topology, stages,
                            schedule_of(2, {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {}, {}, {}}));
  EXPECT_NEAR(t.iteration_ms, 62.08, kTolerance);
  ASSERT_EQ(t.allreduces.size(), 1U);
  EXPECT_NEAR(t.allreduces[0].start_ms, 42.06, kTolerance);
  for (const int g : {0, 1}) {
    EXPECT_DOUBLE_EQ(t.gpus[static_cast<std::size_t>(g)].peak_memory_bytes, 8e9 + 1200) << g;
    EXPECT_NEAR(t.gpus[static_cast<std::size_t>(g)].busy_ms, 42.06, kTolerance) << g;
  }

  // A sharded optimizer divides its shard by r c = 2: 2e9 (4 - 2 + 2 / 2) = 6e9.
  const auto sharded = execution(model, topology, stages, Optimizer::kSharded);
  EXPECT_DOUBLE_EQ(sharded[0].static_bytes, 6e9);
}

TEST(ExecutionContextParallel, TheInputGradientHalfCarriesTheBackwardsRingSteps) {
  model::Model model = two_layer_model();
  model.layers[0].backward_weight_ms = 4;  // 2 per GPU at c = 2
  const topology::Topology topology = uniform_topology(2, 1e11, 0.01);
  const auto exec = execution(model, topology, {cp_stage({0, 1}, 2)}, Optimizer::kReplicated);
  const GroupExecution& group = exec[0].groups[0];
  // I: layer 0 max(10 - 2, 2 x 5.01) = 10.02, layer 1 4: 14.02; W: 2. The whole backward is
  // still 14.02 (max(10, 10.02) + 4): the steps overlap I, which W does not shorten.
  EXPECT_NEAR(group.duration(Op::kBackwardInput), 14.02, kTolerance);
  EXPECT_DOUBLE_EQ(group.duration(Op::kBackwardWeight), 2);
  EXPECT_NEAR(group.duration(Op::kBackward), 14.02, kTolerance);
}

TEST(ExecutionContextParallel, RecomputationRunsTheForwardAndItsStepsAgain) {
  const model::Model model = two_layer_model();
  const topology::Topology topology = uniform_topology(2, 1e11, 0.01);
  Stage stage = cp_stage({0, 1}, 2);
  stage.recompute = true;
  const auto exec = execution(model, topology, {stage}, Optimizer::kReplicated);
  EXPECT_NEAR(exec[0].groups[0].backward_ms, 14.02 + 7.01, kTolerance);
  EXPECT_NEAR(exec[0].groups[0].duration(Op::kBackwardInput), 14.02 + 7.01, kTolerance);
  // Held per micro-batch: the layers' inputs divided by c (input_bytes 0, then 1000 / 2).
  EXPECT_DOUBLE_EQ(exec[0].stash_bytes, 500);
  EXPECT_DOUBLE_EQ(exec[0].transient_bytes, 400);  // max(800, 400) / 2
}

// Four GPUs: tensor-parallel pairs {0,1} and {2,3} at 10 GB/s and 0.1 ms, the context rings
// {0,2} and {1,3} at 1 GB/s and 0.5 ms, the other pairs at 10 GB/s and 0.1 ms.
topology::Topology two_by_two() {
  std::vector<topology::Link> links;
  for (int u = 0; u < 4; ++u) {
    for (int v = u + 1; v < 4; ++v) {
      const bool context_ring = (u == 0 && v == 2) || (u == 1 && v == 3);
      links.push_back({u, v, context_ring ? 1e9 : 1e10, context_ring ? 0.5 : 0.1});
    }
  }
  return linked_topology({"g0", "g1", "g2", "g3"}, links);
}

TEST(ExecutionContextParallel, AGroupIsCTensorParallelGroupsWithItsRingsAcrossThem) {
  model::Model model = make_model({{8, 16, 0, 2e9, 0}});
  model::TensorParallel split;
  split.degrees = {1, 2};
  split.allreduce_bytes = 1e6;
  model.layers[0].tensor_parallel = split;
  model.layers[0].context_parallel = model::ContextParallel{{1, 2}, 8e6};
  const topology::Topology topology = two_by_two();
  const std::vector<Stage> stages{cp_stage({0, 1, 2, 3}, 2, 2, 0, 0)};
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  ASSERT_EQ(exec[0].groups.size(), 1U);
  const GroupExecution& group = exec[0].groups[0];
  EXPECT_EQ(group.gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(group.leader, 0);
  // Tensor-parallel all-reduces over {0,1} and {2,3} (10 GB/s, 0.1 ms) of 1e6 / c = 5e5 bytes,
  // two per pass: 2 (1/2) 1e6 / 1e10 s + 2 x 0.1 x 2 = 0.1 + 0.4 = 0.5 ms.
  EXPECT_NEAR(group.forward_allreduce_ms, 0.5, kTolerance);
  // Ring steps over {0,2} and {1,3} (1 GB/s, 0.5 ms) of 8e6 / (c t) = 2e6 bytes: 2.5 ms.
  // Forward: max(8 / 2 / 2, 2.5) + 0.5 = 3; backward max(16 / 2 / 2, 2 x 2.5) + 0.5 = 5.5.
  EXPECT_NEAR(group.forward_ms, 3, kTolerance);
  EXPECT_NEAR(group.backward_ms, 5.5, kTolerance);
  // The data-parallel AllReduce: t = 2 rings over the r c = 2 GPUs of one tensor-parallel rank,
  // {0,2} and {1,3}, each carrying 1e9 (2e9 / t): 1e9 / 1e9 s + 2 x 0.5 = 1001 ms.
  EXPECT_NEAR(exec[0].allreduce_ms, 1001, kTolerance);
}

TEST(ExecutionContextParallel, BoundaryTransfersCarryTheActivationOverCBetweenLeaders) {
  const model::Model model = two_layer_model();
  const topology::Topology topology = uniform_topology(4, 1e11, 0.01);
  const std::vector<Stage> stages{cp_stage({0, 1}, 2, 1, 0, 0), cp_stage({2, 3}, 2, 1, 1, 1)};
  const auto exec = execution(model, topology, stages, Optimizer::kReplicated);
  EXPECT_DOUBLE_EQ(exec[0].boundary_bytes, 1000);
  EXPECT_DOUBLE_EQ(exec[0].transfer_bytes, 500);  // A_0 / (c min(t0, t1)) = 1000 / 2
  Schedule s = schedule_of(1, {{F(0, 0), B(0, 0)}, {}, {F(1, 0), B(1, 0)}, {}});
  s.channel_order[{0, 2}] = {Act(0, 0)};
  s.channel_order[{2, 0}] = {Grad(0, 0)};
  const Timeline t = replay(model, topology, stages, s);
  ASSERT_EQ(t.transfers.size(), 2U);
  EXPECT_EQ(t.transfers[0].from, 0);
  EXPECT_EQ(t.transfers[0].to, 2);
  EXPECT_DOUBLE_EQ(t.transfers[0].bytes, 500);
}

void expect_refused(const model::Model& model, const std::vector<Stage>& stages,
                    const std::string& message) {
  const topology::Topology topology = uniform_topology(4, 1e11, 0.01);
  try {
    check_stages(model, topology, stages);
    FAIL() << "accepted: " << message;
  } catch (const ScheduleError& error) {
    EXPECT_EQ(std::string(error.what()), message);
  }
}

TEST(ExecutionContextParallel, TheStageCheckRefusesEachBrokenRule) {
  const model::Model model = two_layer_model();
  expect_refused(model, {cp_stage({0, 1}, 0)},
                 "stage 0 has context-parallel degree 0; it must be at least 1");
  expect_refused(model, {cp_stage({0, 1, 2, 3}, 4)},
                 "context-parallel degree 4 is not allowed by every layer's context_parallel "
                 "degrees (spec 10.1)");
  expect_refused(model, {cp_stage({0, 1, 2}, 2)},
                 "stage 0 lists 3 GPUs, not a multiple of its group size 2 (c t: groups of c "
                 "tensor-parallel groups, spec 10.2)");
  expect_refused(model, {cp_stage({0, 1}, 2, 1, 0, 0), cp_stage({2}, 1, 1, 1, 1)},
                 "stage 1 has context-parallel degree 1, not 2 (one degree for the whole plan, "
                 "spec 10.2)");
  // What passes: the same stages at one degree.
  EXPECT_NO_THROW(check_stages(model, uniform_topology(4, 1e11, 0.01),
                               {cp_stage({0, 1}, 2, 1, 0, 0), cp_stage({2, 3}, 2, 1, 1, 1)}));
}

TEST(ExecutionContextParallel, TheDivisionRuleLeavesParametersAndUpdatesWhole) {
  model::Model model = two_layer_model();
  model.input_bytes = 64;
  model.layers[1].update_ms = 3;
  model::TensorParallel split;
  split.degrees = {1, 2};
  split.allreduce_bytes = 1e6;
  split.forward_ms = {4, 2.5};
  model.layers[1].tensor_parallel = split;
  const model::Model divided = model::at_context_degree(model, 2);
  const model::Layer& layer = divided.layers[1];
  EXPECT_DOUBLE_EQ(layer.forward_ms, 2);
  EXPECT_DOUBLE_EQ(model::forward_ms_at(layer, 2), 1.25);
  EXPECT_DOUBLE_EQ(layer.backward_ms, 4);
  EXPECT_DOUBLE_EQ(layer.activation_bytes, 300);
  EXPECT_DOUBLE_EQ(layer.stash_bytes, 200);
  EXPECT_DOUBLE_EQ(layer.parameter_bytes, 1e9);
  EXPECT_DOUBLE_EQ(layer.update_ms, 3);
  EXPECT_DOUBLE_EQ(model::allreduce_bytes(layer), 5e5);
  EXPECT_DOUBLE_EQ(divided.input_bytes, 32);
  // The exchange is kept whole; a ring step passes exchange / (c t).
  EXPECT_DOUBLE_EQ(divided.layers[0].context_parallel->exchange_bytes, 1e9);
  EXPECT_DOUBLE_EQ(model::ring_step_bytes(divided.layers[0], 2, 2), 2.5e8);
  EXPECT_DOUBLE_EQ(model::ring_step_bytes(divided.layers[1], 2, 2), 0);
  EXPECT_THROW(model::at_context_degree(model, 4), InternalError);
  EXPECT_TRUE(model::allows_context_degree(model, 2));
  EXPECT_FALSE(model::allows_context_degree(model, 3));
}

model::Model read(const std::string& layer) {
  return model::read_model(io::source_from_text(
      "model.json", R"({"schema": "pipeplan/model/v3", "layers": [)" + layer + "]}"));
}

TEST(ExecutionContextParallel, AModelFileStatesItsDegreesAndExchange) {
  const model::Model model = read(
      R"({"forward_ms": 1, "backward_ms": 2, "activation_bytes": 8,
          "context_parallel": {"degrees": [1, 2, 4], "exchange_bytes": 1024}})");
  ASSERT_TRUE(model.layers[0].context_parallel);
  EXPECT_EQ(model.layers[0].context_parallel->degrees, (std::vector<int>{1, 2, 4}));
  EXPECT_DOUBLE_EQ(model.layers[0].context_parallel->exchange_bytes, 1024);
  EXPECT_TRUE(model::uses_v3_fields(model));
  const auto refused = [](const std::string& layer, const std::string& message) {
    try {
      read(layer);
      FAIL() << "accepted: " << layer;
    } catch (const InputError& error) {
      EXPECT_EQ(std::string(error.what()), message);
    }
  };
  refused(R"({"forward_ms": 1, "backward_ms": 2, "activation_bytes": 8,
              "context_parallel": {"degrees": [2, 4]}})",
          "model.json: /layers/0/context_parallel/degrees/0: must be 1 (every layer may run on "
          "one GPU), got 2");
  refused(R"({"forward_ms": 1, "backward_ms": 2, "activation_bytes": 8,
              "context_parallel": {"degrees": [1], "exchange_bytes": -1}})",
          "model.json: /layers/0/context_parallel/exchange_bytes: must be a finite number >= 0, "
          "got -1");
  refused(R"({"forward_ms": 1, "backward_ms": 2, "activation_bytes": 8,
              "context_parallel": {"exchange_bytes": 1}})",
          "model.json: /layers/0/context_parallel: missing required key \"degrees\"");
  refused(R"({"forward_ms": 1, "backward_ms": 2, "activation_bytes": 8,
              "context_parallel": {"degrees": [1], "ring": 1}})",
          "model.json: /layers/0/context_parallel/ring: unknown key");
}

}  // namespace
}  // namespace pipeplan::simulate
