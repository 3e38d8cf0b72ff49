// The memory breakdown (docs/memory.md): hand-computed bytes for small plans, the framework
// reserve counted once per GPU, and the refusal that names it.

#include "pipeplan/report/memory_view.hpp"

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::report {
namespace {

using namespace pipeplan::testing;

// Two layers of 1000 and 2000 parameter bytes stashing 300 and 500 bytes per micro-batch,
// Megatron's mixed-precision factors (phi = 9, phi_sh = 6) and a reserve of 10000 bytes.
model::Model two_layers(double reserve = 10000) {
  model::Model model = make_model({{1, 2, 100, 1000, 300}, {1, 2, 0, 2000, 500}}, 9);
  model.sharded_memory_factor = 6;
  model.reserve_bytes = reserve;
  return model;
}

// Layer 0 on GPUs 0 and 1, layer 1 on GPUs 2 and 3 (two replicas each), 1F1B, 4 micro-batches.
Plan two_stage_plan(const model::Model& model, const topology::Topology& topology,
                    Optimizer optimizer) {
  planners::Request request{model, topology, 4};
  request.optimizer = optimizer;
  planners::Partition partition{{0, 1, 2, 3}, {Stage{0, 0, {0, 1}}, Stage{1, 1, {2, 3}}}};
  return planners::finish_plan("test", partition, request, schedule::Policy::kOneFOneB);
}

TEST(MemoryViewTest, SplitsMegatronsEighteenBytes) {
  const FactorSplit split = factor_split(two_layers());
  EXPECT_EQ(split.weights, 1);    // bf16 weights: 2 bytes per parameter
  EXPECT_EQ(split.gradients, 2);  // fp32 main gradients: 4
  EXPECT_EQ(split.optimizer, 6);  // fp32 master weights and two moments: 12
}

TEST(MemoryViewTest, SplitsAProfileFactorByTheDefaultShardedPart) {
  // phi = 4 without sharded_memory_factor: phi_sh = 2, weights 1, gradients 1, optimizer 2.
  const FactorSplit split = factor_split(make_model({{1, 1, 0, 10, 0}}));
  EXPECT_EQ(split.weights, 1);
  EXPECT_EQ(split.gradients, 1);
  EXPECT_EQ(split.optimizer, 2);
  // A factor below 1 is all weights.
  const FactorSplit small = factor_split(make_model({{1, 1, 0, 10, 0}}, 0.5));
  EXPECT_EQ(small.weights, 0.5);
  EXPECT_EQ(small.gradients, 0);
  EXPECT_EQ(small.optimizer, 0);
}

TEST(MemoryViewTest, HandComputedBreakdownWithAShardedOptimizer) {
  const model::Model model = two_layers();
  const topology::Topology topology = uniform_topology(4, 1e9, 0.01, {}, 1e6);
  const Plan plan = two_stage_plan(model, topology, Optimizer::kSharded);
  const std::vector<StageMemory> memory = memory_breakdown(plan, model, topology);
  ASSERT_EQ(memory.size(), 2U);
  // Stage 0: W = 1000: weights 1000, gradients 2000, optimizer 6000 / 2 replicas = 3000; each
  // replica runs micro-batches 0, 2 (or 1, 3) and 1F1B keeps both in flight: 2 x 300 = 600.
  EXPECT_EQ(memory[0].weights, 1000);
  EXPECT_EQ(memory[0].gradients, 2000);
  EXPECT_EQ(memory[0].optimizer, 3000);
  EXPECT_EQ(memory[0].activations, 600);
  EXPECT_EQ(memory[0].reserve, 10000);
  EXPECT_EQ(memory[0].peak, 16600);
  EXPECT_EQ(memory[0].stash_bytes, 300);
  EXPECT_EQ(memory[0].capacity, 1e6);
  // Stage 1 (the last): W = 2000, one micro-batch in flight: 2000 + 4000 + 6000 + 500 + 10000.
  EXPECT_EQ(memory[1].weights, 2000);
  EXPECT_EQ(memory[1].gradients, 4000);
  EXPECT_EQ(memory[1].optimizer, 6000);
  EXPECT_EQ(memory[1].activations, 500);
  EXPECT_EQ(memory[1].peak, 22500);
  // The parts are the replay's peak of every GPU of the stage.
  for (const int g : plan.stages[1].gpus) EXPECT_EQ(plan.timeline.gpus[g].peak_memory_bytes, 22500);
  EXPECT_EQ(memory_summary(plan, model, topology),
            "  peak memory per GPU (the stage's fullest GPU):\n"
            "  stage 0 on g0: weights 1000 B + gradients 1.953 KiB + optimizer 2.93 KiB + "
            "activations 600 B (2 x 300 B) + reserve 9.766 KiB = 16.21 KiB of 976.6 KiB\n"
            "  stage 1 on g2: weights 1.953 KiB + gradients 3.906 KiB + optimizer 5.859 KiB + "
            "activations 500 B (1 x 500 B) + reserve 9.766 KiB = 21.97 KiB of 976.6 KiB");
}

TEST(MemoryViewTest, AReplicatedOptimizerKeepsItsStateWhole) {
  const model::Model model = two_layers();
  const topology::Topology topology = uniform_topology(4, 1e9, 0.01, {}, 1e6);
  const std::vector<StageMemory> memory =
      memory_breakdown(two_stage_plan(model, topology, Optimizer::kReplicated), model, topology);
  EXPECT_EQ(memory[0].optimizer, 6000);  // 6 x 1000, on every replica
  EXPECT_EQ(memory[0].peak, 1000 + 2000 + 6000 + 600 + 10000);
}

// What a stage holds during a backward only is named beside the stashes: layer 1's 700-byte
// working set on stage 1, and stage 0's recomputation (its stash: layer 0's input, 0 bytes
// here, then the recomputed 300 bytes during each backward).
TEST(MemoryViewTest, NamesWhatABackwardHoldsBesideTheStashes) {
  model::Model model = two_layers();
  model.input_bytes = 40;
  model.layers[1].backward_working_bytes = 700;
  const topology::Topology topology = uniform_topology(4, 1e9, 0.01, {}, 1e6);
  planners::Request request{model, topology, 4};
  request.optimizer = Optimizer::kSharded;
  Stage recomputing{0, 0, {0, 1}};
  recomputing.recompute = true;
  planners::Partition partition{{0, 1, 2, 3}, {recomputing, Stage{1, 1, {2, 3}}}};
  const Plan plan = planners::finish_plan("test", partition, request, schedule::Policy::kOneFOneB);
  const std::vector<StageMemory> memory = memory_breakdown(plan, model, topology);
  EXPECT_EQ(memory[0].transient_bytes, 300);
  EXPECT_EQ(memory[0].activations, 2 * 40 + 300);
  EXPECT_EQ(memory[1].transient_bytes, 700);
  EXPECT_EQ(memory[1].activations, 500 + 700);
  EXPECT_EQ(memory_summary(plan, model, topology),
            "  peak memory per GPU (the stage's fullest GPU):\n"
            "  stage 0 on g0: weights 1000 B + gradients 1.953 KiB + optimizer 2.93 KiB + "
            "activations 380 B (2 x 40 B + 300 B in a backward) + reserve 9.766 KiB = 16 KiB of "
            "976.6 KiB\n"
            "  stage 1 on g2: weights 1.953 KiB + gradients 3.906 KiB + optimizer 5.859 KiB + "
            "activations 1.172 KiB (1 x 500 B + 700 B in a backward) + reserve 9.766 KiB = 22.66 "
            "KiB of 976.6 KiB");
}

TEST(MemoryViewTest, TheReserveIsCountedOncePerGpuAndNothingElseMoves) {
  const topology::Topology topology = uniform_topology(4, 1e9, 0.01, {}, 1e6);
  const Plan with = two_stage_plan(two_layers(), topology, Optimizer::kSharded);
  const Plan without = two_stage_plan(two_layers(0), topology, Optimizer::kSharded);
  for (std::size_t g = 0; g < 4; ++g) {
    EXPECT_EQ(with.timeline.gpus[g].peak_memory_bytes,
              without.timeline.gpus[g].peak_memory_bytes + 10000);
  }
  EXPECT_EQ(with.timeline.iteration_ms, without.timeline.iteration_ms);
}

TEST(MemoryViewTest, StagesSharingADeviceCountTheReserveOnce) {
  // Four layers, stages 0 and 2 on GPU 0, stages 1 and 3 on GPU 1 (interleaved 1F1B).
  auto model_with = [](double reserve) {
    model::Model model = make_model({{1, 2, 100, 1000, 300},
                                     {1, 2, 100, 1000, 300},
                                     {1, 2, 100, 1000, 300},
                                     {1, 2, 0, 1000, 300}},
                                    9);
    model.sharded_memory_factor = 6;
    model.reserve_bytes = reserve;
    return model;
  };
  const topology::Topology topology = uniform_topology(2, 1e9, 0.01, {}, 1e6);
  auto plan_of = [&](const model::Model& model) {
    planners::Request request{model, topology, 4};
    planners::Partition partition{
        {0, 1}, {Stage{0, 0, {0}}, Stage{1, 1, {1}}, Stage{2, 2, {0}}, Stage{3, 3, {1}}}};
    return planners::finish_plan("test", partition, request, schedule::Policy::kInterleaved1F1B);
  };
  const model::Model model = model_with(4096);
  const Plan with = plan_of(model);
  const Plan without = plan_of(model_with(0));
  EXPECT_EQ(with.timeline.gpus[0].peak_memory_bytes,
            without.timeline.gpus[0].peak_memory_bytes + 4096);
  // The device's weights are both stages' (2 x 1000), its reserve counted once.
  const std::vector<StageMemory> memory = memory_breakdown(with, model, topology);
  EXPECT_EQ(memory[0].weights, 2000);
  EXPECT_EQ(memory[0].gradients, 4000);
  EXPECT_EQ(memory[0].optimizer, 12000);
  EXPECT_EQ(memory[0].reserve, 4096);
  EXPECT_EQ(memory[0].weights + memory[0].gradients + memory[0].optimizer + memory[0].activations +
                memory[0].reserve,
            memory[0].peak);
  const std::string summary = memory_summary(with, model, topology);
  EXPECT_NE(summary.find("\n  stages 0 and 2 on g0: weights 1.953 KiB"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("\n  stages 1 and 3 on g1: "), std::string::npos) << summary;
}

// Ten layers as ten stages, five on each of two GPUs (interleaved 1F1B): one line per device,
// its stages named together. GPU 0's stages stash 300 bytes each, so its activations are counted
// in stashes; GPU 1's last stage stashes 500, so its are not (their sizes differ).
TEST(MemoryViewTest, StagesSharingADeviceShareALine) {
  std::vector<L> layers(10, L{1, 2, 100, 1000, 300});
  layers.back() = L{1, 2, 0, 1000, 500};
  const model::Model model = make_model(layers, 9);
  const topology::Topology topology = uniform_topology(2, 1e9, 0.01, {}, 1e6);
  std::vector<Stage> stages;
  for (int s = 0; s < 10; ++s) stages.push_back(Stage{s, s, {s % 2}});
  planners::Request request{model, topology, 4};
  const Plan plan = planners::finish_plan("test", planners::Partition{{0, 1}, stages}, request,
                                          schedule::Policy::kInterleaved1F1B);
  // Weights 5 x 1000 B, gradients the same, optimizer 7 x 5000; GPU 0 peaks at 11 stashes of
  // 300 B (interleaved 1F1B's warm-up on the first device, 2 + 4 x 2 = 10, and one more), GPU 1
  // at 8 of 300 B and one of 500 B.
  EXPECT_EQ(memory_summary(plan, model, topology),
            "  peak memory per GPU (the stage's fullest GPU):\n"
            "  stages 0, 2, ..., 8 on g0: weights 4.883 KiB + gradients 4.883 KiB + optimizer "
            "34.18 KiB + activations 3.223 KiB (11 x 300 B) + reserve 0 B = 47.17 KiB of 976.6 "
            "KiB\n"
            "  stages 1, 3, ..., 9 on g1: weights 4.883 KiB + gradients 4.883 KiB + optimizer "
            "34.18 KiB + activations 2.832 KiB + reserve 0 B = 46.78 KiB of 976.6 KiB");
}

TEST(MemoryViewTest, APlanThatFitsOnlyWithoutTheReserveIsRefusedNamingIt) {
  // Stage 1 needs 2000 + 4000 + 6000 + 500 = 12500 bytes and the reserve 1 KiB more.
  const topology::Topology topology = uniform_topology(4, 1e9, 0.01, {}, 13000);
  EXPECT_NO_THROW(two_stage_plan(two_layers(0), topology, Optimizer::kSharded));
  try {
    two_stage_plan(two_layers(1024), topology, Optimizer::kSharded);
    FAIL() << "expected a refusal";
  } catch (const InfeasibleError& error) {
    EXPECT_NE(std::string(error.what()).find("(a framework reserve of 1 KiB included)"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace pipeplan::report
