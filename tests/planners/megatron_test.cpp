// The megatron planner: Megatron-LM's placement and layer split for a given configuration.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;

// Layers named as `pipeplan model transformer` names them: embedding, decoder0..n-1, output,
// each splitting over 1, 2 or 4 GPUs; 1 MB of weights and stash per decoder.
model::Model transformer_shaped(int decoders, double stash = 1e6) {
  std::vector<L> spec{{1, 2, 1e5, 2e6, 1e5}};
  for (int l = 0; l < decoders; ++l) spec.push_back({4, 8, 1e5, 1e6, stash});
  spec.push_back({2, 4, 0, 2e6, 1e5});
  model::Model model = make_model(spec);
  model.layers.front().name = "embedding";
  for (int l = 0; l < decoders; ++l)
    model.layers[static_cast<std::size_t>(l) + 1].name = "decoder" + std::to_string(l);
  model.layers.back().name = "output";
  for (model::Layer& layer : model.layers) {
    model::TensorParallel tp;
    tp.degrees = {1, 2, 4};
    tp.allreduce_bytes = 1e5;
    layer.tensor_parallel = tp;
  }
  return model;
}

Request configuration(const model::Model& model, const topology::Topology& topology, int M, int T,
                      int P, std::optional<int> D = std::nullopt) {
  Request request{model, topology, M};
  request.tensor_parallel = {T};
  request.pipeline_parallel = P;
  request.data_parallel = D;
  return request;
}

// What megatron_partition says of `request` (interleaved-1f1b when it has virtual stages, else
// 1f1b): its refusal, or "planned".
std::string partition_refusal(const Request& request) {
  try {
    megatron_partition(request, request.virtual_stages.value_or(1) > 1
                                    ? schedule::Policy::kInterleaved1F1B
                                    : schedule::Policy::kOneFOneB);
  } catch (const Error& error) {
    return error.what();
  }
  return "planned";
}

TEST(MegatronTest, TensorInnermostThenDataThenPipelineOverTheInputOrder) {
  const model::Model model = transformer_shaped(4);
  const topology::Topology topology = uniform_topology(8, 50e9, 0.002);
  const Plan plan = make_plan("megatron", configuration(model, topology, 8, 2, 2));
  EXPECT_EQ(plan.planner, "megatron");
  EXPECT_EQ(plan.schedule_policy, "1f1b");
  ASSERT_EQ(plan.stages.size(), 2U);
  // Stage 0: the embedding and decoders 0-1 on GPUs 0-3 (groups {0,1} and {2,3}); stage 1:
  // decoders 2-3 and the output on GPUs 4-7.
  EXPECT_EQ(plan.stages[0].first_layer, 0);
  EXPECT_EQ(plan.stages[0].last_layer, 2);
  EXPECT_EQ(plan.stages[1].first_layer, 3);
  EXPECT_EQ(plan.stages[1].last_layer, 5);
  EXPECT_EQ(plan.stages[0].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.stages[1].gpus, (std::vector<int>{4, 5, 6, 7}));
  for (const Stage& stage : plan.stages) {
    EXPECT_EQ(stage.tensor_parallel, 2);
    EXPECT_EQ(stage.replicas(), 2);
    EXPECT_FALSE(stage.recompute);
  }
}

TEST(MegatronTest, AGivenDataParallelDegreeUsesFewerGpus) {
  const model::Model model = transformer_shaped(4);
  const topology::Topology topology = uniform_topology(8, 50e9, 0.002);
  const Plan plan = make_plan("megatron", configuration(model, topology, 8, 2, 2, 1));
  EXPECT_EQ(plan.stages[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.stages[1].gpus, (std::vector<int>{2, 3}));
  EXPECT_TRUE(plan.timeline.gpus[4].stages.empty());
}

TEST(MegatronTest, UnevenSplitsGiveTheFirstStagesOneMore) {
  const Partition five = megatron_partition(
      configuration(transformer_shaped(5), uniform_topology(2, 50e9, 0.002), 4, 1, 2),
      schedule::Policy::kOneFOneB);
  EXPECT_EQ(five.stages[0].last_layer, 3);  // embedding + decoders 0-2
  EXPECT_EQ(five.stages[1].first_layer, 4);
  // A profile not shaped like a transformer: equal layer counts.
  const model::Model plain = make_model({{1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}});
  const Partition generic = megatron_partition(
      configuration(plain, uniform_topology(3, 50e9, 0.002), 4, 1, 3), schedule::Policy::kOneFOneB);
  EXPECT_EQ(stages_text(generic.stages), "0-1@0 2-3@1 4-4@2");
}

// Megatron-LM's `--decoder-first-pipeline-num-layers` and `--decoder-last-pipeline-num-layers`
// (Llama 3 405B's 126 layers on 16 stages: 7, then 14 x 8, then 7).
TEST(MegatronTest, FirstAndLastStageLayersAsMegatronLmSplitsThem) {
  const topology::Topology topology = uniform_topology(4, 50e9, 0.002);
  const model::Model ten = transformer_shaped(10),
                     twelve = transformer_shaped(12);  // outlive the requests
  Request request = configuration(ten, topology, 4, 1, 4);
  request.first_stage_layers = 1;
  request.last_stage_layers = 1;
  // Embedding + decoder 0 | decoders 1-4 | 5-8 | decoder 9 + output.
  EXPECT_EQ(stages_text(megatron_partition(request, schedule::Policy::kOneFOneB).stages),
            "0-1@0 2-5@1 6-9@2 10-11@3");
  request.last_stage_layers.reset();  // 1, then 9 over three stages
  EXPECT_EQ(stages_text(megatron_partition(request, schedule::Policy::kOneFOneB).stages),
            "0-1@0 2-4@1 5-7@2 8-11@3");
  // Interleaved, two stages per device: each position's count is halved over its chunks, the
  // chunks in Megatron-LM's order (stage k on position k mod P).
  Request interleaved = configuration(twelve, topology, 4, 1, 2);
  interleaved.first_stage_layers = 4;
  interleaved.last_stage_layers = 8;
  interleaved.virtual_stages = 2;
  const Partition chunks = megatron_partition(interleaved, schedule::Policy::kInterleaved1F1B);
  ASSERT_EQ(chunks.stages.size(), 4U);
  EXPECT_EQ(chunks.stages[0].last_layer, 2);   // embedding + 2 decoders on position 0
  EXPECT_EQ(chunks.stages[1].last_layer, 6);   // 4 decoders on position 1
  EXPECT_EQ(chunks.stages[2].last_layer, 8);   // 2 decoders on position 0
  EXPECT_EQ(chunks.stages[3].last_layer, 13);  // 4 decoders and the output on position 1
  EXPECT_EQ(chunks.stages[2].gpus, chunks.stages[0].gpus);
}

// Megatron-LM's `--account-for-embedding-in-pipeline-split` and
// `--account-for-loss-in-pipeline-split`: the embedding, and the output layer with the loss,
// split as one decoder layer each (Llama 3 405B: 126 + 2 = 128 over 16 x 8 one-layer chunks, the
// first chunk only the embedding and the last only the output).
TEST(MegatronTest, EmbeddingAndLossSplitAsDecoderLayers) {
  const topology::Topology topology = uniform_topology(4, 50e9, 0.002);
  const model::Model ten = transformer_shaped(10), six = transformer_shaped(6);
  Request both = configuration(ten, topology, 4, 1, 4);
  both.account_for_embedding = both.account_for_loss = true;
  // 12 units over 4 stages: embedding + decoders 0-1 | 2-4 | 5-7 | decoders 8-9 + output.
  EXPECT_EQ(stages_text(megatron_partition(both, schedule::Policy::kOneFOneB).stages),
            "0-2@0 3-5@1 6-8@2 9-11@3");
  // The embedding alone: 11 units over 11 stages, the first the embedding alone.
  const topology::Topology eleven = uniform_topology(11, 50e9, 0.002);
  Request alone{ten, eleven, 11};
  alone.tensor_parallel = {1};
  alone.pipeline_parallel = 11;
  alone.account_for_embedding = true;
  const Partition first_alone = megatron_partition(alone, schedule::Policy::kOneFOneB);
  EXPECT_EQ(first_alone.stages.front().last_layer, 0);   // the embedding alone
  EXPECT_EQ(first_alone.stages.back().first_layer, 10);  // decoder 9 and the output
  // Interleaved, 8 units over 2 x 4 one-unit chunks: chunk k (layer k) on position k mod 2, the
  // first the embedding alone and the last the output alone.
  Request interleaved = configuration(six, topology, 4, 1, 2);
  interleaved.account_for_embedding = interleaved.account_for_loss = true;
  interleaved.virtual_stages = 4;
  const Partition chunks = megatron_partition(interleaved, schedule::Policy::kInterleaved1F1B);
  ASSERT_EQ(chunks.stages.size(), 8U);
  EXPECT_EQ(chunks.stages.front().first_layer, 0);
  EXPECT_EQ(chunks.stages.front().last_layer, 0);  // the embedding alone
  EXPECT_EQ(chunks.stages.back().first_layer, 7);  // the output alone
  EXPECT_EQ(chunks.stages.back().last_layer, 7);
  EXPECT_EQ(chunks.stages[2].gpus, chunks.stages[0].gpus);  // chunk k on position k mod 2
}

TEST(MegatronTest, EmbeddingAndLossAsLayersRefusedWhereMegatronLmRefusesThem) {
  const topology::Topology topology = uniform_topology(4, 50e9, 0.002);
  const model::Model ten = transformer_shaped(10);
  const model::Model plain = make_model({{1, 2}, {1, 2}, {1, 2}, {1, 2}});
  auto refusal = [&](const model::Model& model, int P, bool embedding, bool loss, int V = 1,
                     std::optional<int> first = std::nullopt) {
    Request request = configuration(model, topology, 4, 1, P);
    request.account_for_embedding = embedding;
    request.account_for_loss = loss;
    request.virtual_stages = V;
    request.first_stage_layers = first;
    return partition_refusal(request);
  };
  EXPECT_EQ(refusal(ten, 4, true, false),
            "the 11 decoder layers with the embedding (--account-for-embedding) do not divide into "
            "4 pipeline stages: Megatron-LM needs an equal share for each");
  EXPECT_EQ(refusal(ten, 2, true, true, 4),
            "the 12 decoder layers with the embedding and the loss (--account-for-embedding "
            "--account-for-loss) do not divide into 2 x 4 virtual stages: Megatron-LM needs an "
            "equal share for each");
  EXPECT_EQ(refusal(ten, 4, false, true, 1, 3),
            "--account-for-loss: Megatron-LM takes it or --first-stage-layers and "
            "--last-stage-layers, not both");
  EXPECT_EQ(refusal(plain, 2, false, true),
            "--account-for-loss: needs a model made by `pipeplan model transformer` (layers "
            "embedding, decoder0 .. decoderN-1, output)");
  EXPECT_EQ(refusal(ten, 2, true, true, 3), "planned");  // 12 over 2 x 3
}

TEST(MegatronTest, FirstAndLastStageLayersThatMegatronLmRefusesAreRefused) {
  const topology::Topology topology = uniform_topology(4, 50e9, 0.002);
  const model::Model model = transformer_shaped(10);  // a request holds a reference to it
  auto refusal = [&](int P, std::optional<int> first, std::optional<int> last, int V = 1) {
    Request request = configuration(model, topology, 4, 1, P);
    request.first_stage_layers = first;
    request.last_stage_layers = last;
    request.virtual_stages = V;
    return partition_refusal(request);
  };
  EXPECT_EQ(refusal(4, 2, 1),
            "--first-stage-layers 2 and --last-stage-layers 1 leave 7 of the 10 decoder layers for "
            "2 other pipeline stages: Megatron-LM needs an equal share of at least one for each");
  EXPECT_EQ(refusal(4, 5, 4),
            "--first-stage-layers 5 and --last-stage-layers 4 leave 1 of the 10 decoder layers for "
            "2 other pipeline stages: Megatron-LM needs an equal share of at least one for each");
  EXPECT_EQ(refusal(4, 8, 3),
            "--first-stage-layers 8 and --last-stage-layers 3 ask for more than the 10 decoder "
            "layers");
  EXPECT_EQ(refusal(4, 11, std::nullopt),
            "--first-stage-layers 11 asks for more than the 10 decoder layers");
  EXPECT_EQ(refusal(2, 4, 4),
            "--first-stage-layers 4 and --last-stage-layers 4 leave 2 of the 10 decoder layers, "
            "and no pipeline stage is left to take them");
  EXPECT_EQ(refusal(1, 4, std::nullopt),
            "--first-stage-layers: needs --pipeline-parallel 2 or more (a single stage holds every "
            "layer)");
  EXPECT_EQ(refusal(2, 3, std::nullopt, 2),
            "pipeline stage 0's 3 decoder layers (--first-stage-layers 3) do not divide into its 2 "
            "virtual stages");
  EXPECT_EQ(refusal(2, 4, 6), "planned");
}

// Megatron-LM interleaves only on two pipeline stages or more ("pipeline-model-parallel size
// should be greater than 1 with interleaved schedule"): the planner refuses V > 1 at P = 1.
TEST(MegatronTest, NoVirtualStagesOnOnePipelineStage) {
  const model::Model model = transformer_shaped(4);
  const topology::Topology topology = uniform_topology(2, 50e9, 0.002);
  Request one = configuration(model, topology, 4, 2, 1);
  one.virtual_stages = 2;
  EXPECT_EQ(megatron_refusal(one),
            "--virtual-stages 2: Megatron-LM interleaves only with --pipeline-parallel 2 or more");
  try {
    make_plan("megatron", one, schedule::Policy::kInterleaved1F1B);
    ADD_FAILURE() << "planned";
  } catch (const UsageError& error) {
    EXPECT_EQ(
        std::string(error.what()),
        "--virtual-stages 2: Megatron-LM interleaves only with --pipeline-parallel 2 or more");
  }
  one.virtual_stages = 1;
  EXPECT_FALSE(megatron_refusal(one).has_value());
  const topology::Topology four = uniform_topology(4, 50e9, 0.002);  // outlives the request
  Request two = configuration(model, four, 4, 1, 2);
  two.virtual_stages = 2;
  EXPECT_FALSE(megatron_refusal(two).has_value());
}

TEST(MegatronTest, AutoRecomputesEveryStageOnlyWhenTheConfigurationDoesNotFitOtherwise) {
  // 1F1B keeps up to 2 micro-batches of 30 MB (3 decoders at degree 1) in flight on stage 0.
  const model::Model model = transformer_shaped(6, 10e6);
  const auto roomy = uniform_topology(2, 50e9, 0.002, {}, 1e9);
  const auto tight = uniform_topology(2, 50e9, 0.002, {}, 60e6);
  EXPECT_FALSE(make_plan("megatron", configuration(model, roomy, 4, 1, 2)).stages[0].recompute);
  const Plan plan = make_plan("megatron", configuration(model, tight, 4, 1, 2));
  for (const Stage& stage : plan.stages) EXPECT_TRUE(stage.recompute);
  EXPECT_FALSE(simulate::memory_violation(tight, plan.timeline).has_value());
  Request never = configuration(model, tight, 4, 1, 2);
  never.recompute = Recompute::kNever;
  EXPECT_THROW(make_plan("megatron", never), InfeasibleError);
}

TEST(MegatronTest, AutoRecomputesAsMegatronLmWouldForItsOwnScheduleUnderEveryPolicy) {
  // 60 MB GPUs: stage 0 holds one micro-batch of 30 MB without recomputation, not the two
  // 1F1B keeps in flight. Under the list schedule one would do, but Megatron-LM, which runs
  // 1F1B, recomputes: the rescheduled configuration recomputes too. GPipe keeps more in flight
  // than 1F1B and recomputes as well; with room for everything nothing recomputes.
  const model::Model model = transformer_shaped(6, 10e6);
  const auto tight = uniform_topology(2, 50e9, 0.002, {}, 60e6);
  const auto roomy = uniform_topology(2, 50e9, 0.002, {}, 1e9);
  for (const auto policy : {schedule::Policy::kList, schedule::Policy::kGpipe}) {
    SCOPED_TRACE(schedule::policy_name(policy));
    const Plan plan = make_plan("megatron", configuration(model, tight, 4, 1, 2), policy);
    for (const Stage& stage : plan.stages) EXPECT_TRUE(stage.recompute);
    EXPECT_FALSE(
        make_plan("megatron", configuration(model, roomy, 4, 1, 2), policy).stages[0].recompute);
  }
  // Without recomputation the list schedule fits on the tight GPUs (what `auto` chose before).
  Request never = configuration(model, tight, 4, 1, 2);
  never.recompute = Recompute::kNever;
  const Plan stalled = make_plan("megatron", never, schedule::Policy::kList);
  EXPECT_FALSE(stalled.stages[0].recompute);
}

TEST(MegatronTest, ConfigurationsThatCannotBeBuiltAreRefused) {
  const model::Model model = transformer_shaped(4);
  const topology::Topology topology = uniform_topology(8, 50e9, 0.002);
  Request bare{model, topology, 4};
  EXPECT_THROW(make_plan("megatron", bare), UsageError);
  try {
    make_plan("megatron", configuration(model, topology, 4, 4, 4));
    FAIL();
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(error.what(),
                 "tensor-parallel 4 x pipeline-parallel 4 needs 16 GPUs, the "
                 "topology has 8");
  }
  try {
    make_plan("megatron", configuration(model, topology, 4, 1, 5));
    FAIL();
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(error.what(),
                 "pipeline-parallel 5 is more stages than the 4 decoder layers to split");
  }
}

// Megatron-LM gives every data-parallel replica the same number of micro-batches: 2 micro-batches
// on 4 replicas is a configuration it cannot run, refused (a usage error naming the option)
// instead of planned; the estimate of such a configuration is infinite and compare leaves it out.
TEST(MegatronTest, MicroBatchesThatTheReplicasCannotShareAreRefused) {
  const model::Model model = transformer_shaped(4);
  const topology::Topology topology = uniform_topology(8, 50e9, 0.002);
  try {
    make_plan("megatron", configuration(model, topology, 2, 1, 2));  // D = 8 / 2 = 4
    FAIL() << "planned";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(),
                 "--micro-batches 2: Megatron-LM gives each of the 4 data-parallel replicas the "
                 "same number of micro-batches, and 2 is not a multiple of 4; give a multiple of "
                 "4 micro-batches, or --data-parallel D with D dividing 2");
  }
  try {
    make_plan("megatron", configuration(model, topology, 6, 1, 2, 4));
    FAIL() << "planned";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(),
                 "--micro-batches 6: Megatron-LM gives each of the 4 data-parallel replicas the "
                 "same number of micro-batches, and 6 is not a multiple of 4; give a multiple of "
                 "4 micro-batches, or a --data-parallel that divides 6");
  }
  // What it can run: D = 2 of 6, D = 4 of 8.
  EXPECT_NO_THROW(make_plan("megatron", configuration(model, topology, 6, 1, 2, 2)));
  EXPECT_NO_THROW(make_plan("megatron", configuration(model, topology, 8, 1, 2)));
  EXPECT_EQ(
      estimate_iteration_ms(configuration(model, topology, 2, 1, 2), schedule::Policy::kOneFOneB),
      std::numeric_limits<double>::infinity());
  // compare's configurations with 2 micro-batches on 8 GPUs: D of 1 or 2 only.
  const Request free{model, topology, 2};
  int variants = 0;
  for (const CompareVariant& variant : compare_variants(find_planner("megatron"), free)) {
    EXPECT_TRUE(partition::shares_equally(2, *variant.request.data_parallel)) << variant.label;
    ++variants;
  }
  EXPECT_GT(variants, 0);
  EXPECT_LT(variants, static_cast<int>(megatron_configurations(free, {1, 2, 4}).size()));
}

// The batch-size search's ranking (estimate_iteration_ms): a fixed configuration's own
// estimate; free, the smallest over the configurations using every GPU, each as shaped and
// memory-checked by megatron_partition; infinity when none fits or nothing splits.
TEST(MegatronTest, TheEstimateIsTheBestConfigurationThatFits) {
  const model::Model model = transformer_shaped(8);
  const topology::Topology topology = uniform_topology(8, 50e9, 0.002);
  const auto policy = schedule::Policy::kOneFOneB;
  const Request t2p2 = configuration(model, topology, 8, 2, 2);
  EXPECT_EQ(
      estimate_iteration_ms(t2p2, policy),
      megatron_estimate(t2p2, megatron_partition(t2p2, policy).stages, Optimizer::kReplicated));
  const Request free{model, topology, 8};
  const double best = estimate_iteration_ms(free, policy);
  int equal = 0;
  for (const Request& fixed : megatron_configurations(free, {1, 2, 4})) {
    const double each = estimate_iteration_ms(fixed, policy);
    EXPECT_LE(best, each);
    equal += each == best ? 1 : 0;
  }
  EXPECT_EQ(equal, 1);
  // Nothing fits in 1 kB per GPU; a model without tensor-parallel layers has no configuration.
  const topology::Topology tiny = uniform_topology(8, 50e9, 0.002, {}, 1e3);
  EXPECT_EQ(estimate_iteration_ms(Request{model, tiny, 8}, policy),
            std::numeric_limits<double>::infinity());
  const model::Model plain = make_model({L{1, 2}, L{1, 2}});
  EXPECT_EQ(estimate_iteration_ms(Request{plain, topology, 8}, policy),
            std::numeric_limits<double>::infinity());
}

// The candidates spp's seeds and the batch-size estimate rank: every configuration using every
// GPU, without and with recomputation under `auto`, but none whose plan would pass the task
// limit (MT-NLG on 3,360 GPUs at 1,920 micro-batches: t8 p105 estimated 26.5 s, first, and
// could not be planned, so the seeds' budget went to it).
TEST(MegatronTest, CandidatesStayWithinTheTaskLimit) {
  const model::Model model = transformer_shaped(8);
  const topology::Topology topology = uniform_topology(8, 50e9, 0.002);
  Request request{model, topology, 8};
  request.recompute = Recompute::kAuto;
  const auto all = megatron_candidates(request, stage_choices(request));
  EXPECT_EQ(all.size(), 2 * megatron_configurations(request, {1, 2, 4}).size());
  // At 2^15 micro-batches a plan may have at most 4 stages.
  request.micro_batches = 1 << 15;
  ASSERT_EQ(max_stages_within_task_limit(request.micro_batches), 4);
  const auto limited = megatron_candidates(request, stage_choices(request));
  int deepest = 0;
  for (const Request& fixed : limited) deepest = std::max(deepest, *fixed.pipeline_parallel);
  EXPECT_EQ(deepest, 4);
  EXPECT_LT(limited.size(), all.size());
  // --recompute never: one candidate per configuration.
  request.recompute = Recompute::kNever;
  request.micro_batches = 8;
  EXPECT_EQ(megatron_candidates(request, stage_choices(request)).size(),
            megatron_configurations(request, {1, 2, 4}).size());
}

// By hand: four stages of one 1 + 2 ms layer each, 10 MB of stash per micro-batch, M = 8. With
// room for all eight: 8 x 3 ms at the bottleneck plus one 12 ms pass. With 25 MB per GPU each
// holds 2 micro-batches, so stage 0 runs its 8 in 4 waves of a 12 ms round trip (48 ms); the
// list replay of the same stages takes longer still than the unlimited estimate.
TEST(MegatronTest, TheEstimateCountsTheWavesMemoryForces) {
  const model::Model model =
      make_model({{1, 2, 0, 0, 10e6}, {1, 2, 0, 0, 10e6}, {1, 2, 0, 0, 10e6}, {1, 2, 0, 0, 10e6}});
  const std::vector<Stage> four = stages({{0, 0, {0}}, {1, 1, {1}}, {2, 2, {2}}, {3, 3, {3}}});
  const auto roomy = uniform_topology(4, 1e15, 0, {}, 1e9);
  const auto tight = uniform_topology(4, 1e15, 0, {}, 25e6);
  EXPECT_DOUBLE_EQ(megatron_estimate(Request{model, roomy, 8}, four, Optimizer::kReplicated), 36);
  EXPECT_DOUBLE_EQ(megatron_estimate(Request{model, tight, 8}, four, Optimizer::kReplicated), 48);
  // Memory for none: infinity. For 4 of 8 (40 MB): 2 waves of 12 ms, below the 36 ms.
  EXPECT_EQ(megatron_estimate(Request{model, uniform_topology(4, 1e15, 0, {}, 5e6), 8}, four,
                              Optimizer::kReplicated),
            std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(megatron_estimate(Request{model, uniform_topology(4, 1e15, 0, {}, 45e6), 8},
                                     four, Optimizer::kReplicated),
                   36);
  const schedule::Scheduled list =
      schedule::make_schedule(model, tight, four, 8, schedule::Policy::kList);
  EXPECT_GE(simulate::replay(model, tight, four, list.schedule).iteration_ms, 48);
}

}  // namespace
}  // namespace pipeplan::planners
