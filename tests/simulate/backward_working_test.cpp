// A layer's backward working set (`backward_working_bytes`, docs/formats.md; the loss of a
// description with `"cross_entropy": "torch-fp32"`, docs/memory.md): read and written, divided
// by the tensor- and context-parallel degrees, held by hand-computed timelines only while a
// backward of its stage runs, and counted by every planner's memory rule, so that none of them
// plans what the replay refuses.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/description.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

using namespace pipeplan::testing;

model::Model read(const std::string& text) {
  return model::read_model(io::source_from_text("model.json", text));
}

std::string read_error(const std::string& text) {
  try {
    read(text);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

// Two layers; the second ("loss") holds 100 bytes while its backward runs, 50 at degree 2.
const char* const kWorking = R"({"layers": [
  {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 5, "parameter_bytes": 1000,
   "stash_bytes": 10, "tensor_parallel": {"degrees": [1, 2], "allreduce_bytes": 0}},
  {"name": "loss", "forward_ms": 1, "backward_ms": 2, "activation_bytes": 0, "stash_bytes": 20,
   "backward_working_bytes": 100,
   "tensor_parallel": {"degrees": [1, 2], "allreduce_bytes": 0,
                       "backward_working_bytes": [100, 50]},
   "context_parallel": {"degrees": [1, 2, 4]}}]})";

TEST(BackwardWorking, IsAnOptionalLayerFieldWithPerDegreeValues) {
  const model::Model model = read(kWorking);
  const model::Layer& loss = model.layers[1];
  EXPECT_EQ(loss.backward_working_bytes, 100);
  EXPECT_EQ(model::backward_working_bytes_at(loss, 2), 50);
  EXPECT_EQ(model::backward_working_bytes_at(model.layers[0], 2), 0);  // absent: none
  EXPECT_TRUE(model::uses_v3_fields(model));
  EXPECT_TRUE(model::has_backward_working_bytes(model));
  // Written back as read; a model without it writes no key.
  const nlohmann::ordered_json written = model::model_to_json(model);
  EXPECT_EQ(written["layers"][1]["backward_working_bytes"], 100);
  EXPECT_EQ(written["layers"][1]["tensor_parallel"]["backward_working_bytes"],
            nlohmann::ordered_json::parse("[100, 50]"));
  EXPECT_FALSE(written["layers"][0].contains("backward_working_bytes"));
  EXPECT_EQ(model::model_to_json(read(written.dump())), written);
  // Without a per-degree array a split layer's working set is divided by t, like its stash.
  const model::Model plain = read(R"({"layers": [{"forward_ms": 1, "backward_ms": 2,
    "activation_bytes": 0, "backward_working_bytes": 100,
    "tensor_parallel": {"degrees": [1, 4], "allreduce_bytes": 0}}]})");
  EXPECT_EQ(model::backward_working_bytes_at(plain.layers[0], 4), 25);
  // Each GPU of a context-parallel group holds its tokens' share.
  const model::Model at_two = model::at_context_degree(model, 2);
  EXPECT_EQ(model::backward_working_bytes_at(at_two.layers[1], 1), 50);
  EXPECT_EQ(model::backward_working_bytes_at(at_two.layers[1], 2), 25);
}

TEST(BackwardWorking, ItsProblemsAreNamed) {
  const std::string layer = R"({"layers": [{"forward_ms": 1, "backward_ms": 2,
    "activation_bytes": 0, )";
  EXPECT_EQ(read_error(layer + R"("backward_working_bytes": -1}]})"),
            "model.json: /layers/0/backward_working_bytes: must be a finite number >= 0, got -1");
  EXPECT_EQ(read_error(layer + R"("backward_working_bytes": 8, "tensor_parallel": {"degrees":
    [1, 2], "allreduce_bytes": 0, "backward_working_bytes": [8]}}]})"),
            "model.json: /layers/0/tensor_parallel/backward_working_bytes: must have one entry "
            "per degree (2), got 1");
  EXPECT_EQ(read_error(layer + R"("tensor_parallel": {"degrees": [1, 2], "allreduce_bytes": 0,
    "backward_working_bytes": [1, 0]}}]})"),
            "model.json: /layers/0/tensor_parallel/backward_working_bytes/0: must equal the "
            "layer's backward_working_bytes (0) at degree 1, got 1");
  EXPECT_EQ(read_error(layer + R"("backward_working_bytes": 1e300}, {"forward_ms": 1,
    "backward_ms": 2, "activation_bytes": 0, "backward_working_bytes": 1e300}]})"),
            "model.json: /layers: too large: the sum of backward_working_bytes is 2e+300, more "
            "than 1e+290 (figures derived from it would overflow)");
}

TEST(BackwardWorking, AStageHoldsItsLargestLayersDuringEachBackward) {
  const model::Model model = read(kWorking);
  const model::StageCost cost = model::stage_cost(model, 0, 1, 1);
  EXPECT_EQ(cost.transient_bytes(false), 100);
  // Recomputing, each layer's own stash is held beside its working set: max(10, 20 + 100).
  EXPECT_EQ(cost.transient_bytes(true), 120);
  EXPECT_EQ(model::stage_cost(model, 0, 1, 2).transient_bytes(true), 10 + 50);
  EXPECT_EQ(model::stage_cost(model, 0, 0, 1).transient_bytes(false), 0);
}

// One GPU runs both layers for two micro-batches, F F B B: static 4 x 1000; each micro-batch
// holds 30 bytes of stashes (8 recomputing: input_bytes 3 and layer 0's activation 5).
TEST(BackwardWorking, TheTimelineHoldsItOnlyWhileABackwardRuns) {
  model::Model model = read(kWorking);
  model.input_bytes = 3;
  const topology::Topology one = uniform_topology(1, 1e9, 0);
  const Schedule order = schedule_of(2, {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}});
  const Timeline t = replay(model, one, {Stage{0, 1, {0}}}, order);
  // During B(0, 0): both stashes and the loss's working set.
  EXPECT_DOUBLE_EQ(t.gpus[0].peak_memory_bytes, 4000 + 2 * 30 + 100);
  // Recomputing: two stashes of inputs and, during each B, the loss's stash and working set.
  Stage recomputing{0, 1, {0}};
  recomputing.recompute = true;
  const Timeline r = replay(model, one, {recomputing}, order);
  EXPECT_DOUBLE_EQ(r.gpus[0].peak_memory_bytes, 4000 + 2 * 8 + 120);
  // Not during a forward: F B F B holds one stash and the working set at most.
  const Timeline alternating = replay(model, one, {Stage{0, 1, {0}}},
                                      schedule_of(2, {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}}));
  EXPECT_DOUBLE_EQ(alternating.gpus[0].peak_memory_bytes, 4000 + 30 + 100);
  // Without the field, the peak of the F F B B order is the stashes alone.
  model.layers[1].backward_working_bytes = 0;
  model.layers[1].tensor_parallel->backward_working_bytes.clear();
  EXPECT_DOUBLE_EQ(replay(model, one, {Stage{0, 1, {0}}}, order).gpus[0].peak_memory_bytes,
                   4000 + 2 * 30);
}

// Four layers of 1 MB (4 MB each at phi 4) with 1 kB stashes, the last with a working set of
// `working` bytes, on GPUs of 20 MB.
model::Model four_layers(double working) {
  model::Model model = make_model(std::vector<L>(4, L{1, 2, 1e3, 1e6, 1e3}));
  model.layers[3].backward_working_bytes = working;
  return model;
}

// With a 13 MB working set on two GPUs the only split that fits is 3 + 1 (the balanced 2 + 2
// puts 8 + 13 MB on the second GPU): every planner that searches finds it rather than refuse
// (the uniform baseline's fixed 2 + 2 is refused, naming the working set); on one GPU (16 + 13
// MB) nothing fits, where without the working set everything does.
TEST(BackwardWorking, EveryPlannerCountsIt) {
  const topology::Topology two = uniform_topology(2, 1e9, 0.01, {}, 20e6);
  for (const char* planner : {"spp", "gpipe", "pipedream"}) {
    planners::Request request{four_layers(13e6), two, 4};
    const Plan plan = planners::make_plan(planner, request);
    EXPECT_EQ(stages_text(plan.stages).substr(0, 4), "0-2@") << planner;
    for (const GpuUsage& gpu : plan.timeline.gpus)
      EXPECT_LE(gpu.peak_memory_bytes, 20e6) << planner;
    // The GPU of the last layer holds its working set at its peak, beside one stash (1F1B) to
    // four (GPipe).
    const int last = plan.stages.back().gpus.front();
    const double peak = plan.timeline.gpus[static_cast<std::size_t>(last)].peak_memory_bytes;
    EXPECT_GE(peak, 4e6 + 13e6 + 1e3) << planner;
    EXPECT_LE(peak, 4e6 + 13e6 + 4e3) << planner;
  }
  try {
    (void)planners::make_plan("uniform", planners::Request{four_layers(13e6), two, 4});
    ADD_FAILURE() << "uniform planned over memory";
  } catch (const InfeasibleError& error) {
    EXPECT_EQ(std::string(error.what()),
              "uniform: stage 1 (layers 2-3) needs 20.03 MiB (4 x parameters + 1 stash + a "
              "backward working set of 12.4 MiB) but GPU \"g1\" has 19.07 MiB under the 1f1b "
              "schedule");
  }
  const topology::Topology one = uniform_topology(1, 1e9, 0.01, {}, 20e6);
  EXPECT_NO_THROW((void)planners::make_plan("spp", planners::Request{four_layers(0), one, 4}));
  for (const char* planner : {"spp", "gpipe", "pipedream", "uniform", "data-parallel"}) {
    EXPECT_THROW((void)planners::make_plan(planner, planners::Request{four_layers(13e6), one, 4}),
                 InfeasibleError)
        << planner;
  }
}

// The DP's memory rule against the replay: one micro-batch of the four layers on one GPU, with
// or without the working set, recomputing or not, fits in the DP exactly when the replayed peak
// fits (capacities just above and below it).
TEST(BackwardWorking, TheDpFitsExactlyWhatTheReplayFits) {
  for (const double working : {0.0, 13e6}) {
    for (const bool recompute : {false, true}) {
      const model::Model model = four_layers(working);
      Stage stage{0, 3, {0}};
      stage.recompute = recompute;
      const double peak =
          replay(model, uniform_topology(1, 1e9, 0), {stage}, schedule_of(1, {{F(0, 0), B(0, 0)}}))
              .gpus[0]
              .peak_memory_bytes;
      EXPECT_DOUBLE_EQ(peak, 16e6 + (recompute ? 3e3 + 1e3 : 4e3) + working);
      for (const double capacity : {peak * (1 + 1e-6), peak * (1 - 1e-6)}) {
        const topology::Topology one = uniform_topology(1, 1e9, 0, {}, capacity);
        EXPECT_EQ(partition::objective(model, one, {stage}, 1).has_value(), capacity >= peak)
            << working << " " << recompute << " " << capacity;
      }
    }
  }
  // Without the working set the DP puts everything on one GPU of 20 MB; with it, on two, 3 + 1.
  const topology::Topology one = uniform_topology(1, 1e9, 0, {}, 20e6);
  EXPECT_TRUE(partition::solve(four_layers(0), one, {0}, 4).has_value());
  EXPECT_FALSE(partition::solve(four_layers(13e6), one, {0}, 4).has_value());
  const topology::Topology two = uniform_topology(2, 1e9, 0, {}, 20e6);
  const auto split = partition::solve(four_layers(13e6), two, {0, 1}, 4);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(stages_text(split->stages), "0-2@0 3-3@1");
}

// What the refusals on one GPU say: gpipe names the layer that needs the most (layer 3: 4 MB,
// four stashes of 1 kB and its 5 MB working set), spp the GPUs a packing in order needs.
TEST(BackwardWorking, TheRefusalsCountIt) {
  const topology::Topology one = uniform_topology(1, 1e9, 0.01, {}, 20e6);
  auto refusal = [&](const char* planner) {
    try {
      (void)planners::make_plan(planner, planners::Request{four_layers(5e6), one, 4});
    } catch (const InfeasibleError& error) {
      return std::string(error.what());
    }
    return std::string("planned over memory");
  };
  EXPECT_NE(refusal("gpipe").find("with 4 stashes, layer 3 alone needs 8.587 MiB"),
            std::string::npos)
      << refusal("gpipe");
  EXPECT_NE(refusal("spp").find("the layers need 2 GPUs and there is 1"), std::string::npos)
      << refusal("spp");
}

// b = 2, s = 64, V = 1000 on an A100-80GB: torch's cross_entropy on fp32 logits holds the fp32
// gradients of the log-softmax and of the logits, 8 bytes per logit, during the output layer's
// backward; Megatron-LM's writes its gradient over the kept softmax and holds nothing more.
model::TransformerConfig small_llama(model::CrossEntropy loss) {
  model::TransformerConfig config;
  config.layers = 2;
  config.hidden = 128;
  config.heads = 8;
  config.sequence = 64;
  config.vocab = 1000;
  config.ffn = model::Ffn::kSwiglu;
  config.micro_batch_size = 2;
  config.cross_entropy = loss;
  return config;
}

TEST(BackwardWorking, TorchsFp32CrossEntropyHoldsEightBytesPerLogit) {
  const model::Model torch = described_model(small_llama(model::CrossEntropy::kTorchFp32));
  const model::Model megatron = described_model(small_llama(model::CrossEntropy::kMegatron));
  const model::Layer& output = torch.layers.back();
  EXPECT_EQ(output.name, "output");
  EXPECT_EQ(output.backward_working_bytes, 8.0 * 2 * 64 * 1000);
  EXPECT_EQ(model::backward_working_bytes_at(output, 2), 8.0 * 2 * 64 * 1000 / 2);
  for (std::size_t l = 0; l + 1 < torch.layers.size(); ++l) {
    EXPECT_EQ(model::backward_working_bytes_at(torch.layers[l], 1), 0) << l;
  }
  EXPECT_FALSE(model::has_backward_working_bytes(megatron));
  // Times and stashes are the same: only the memory of the loss's backward differs.
  EXPECT_EQ(output.stash_bytes, megatron.layers.back().stash_bytes);
  EXPECT_EQ(output.backward_ms, megatron.layers.back().backward_ms);
  // The description writes the key only when it is not Megatron-LM's.
  EXPECT_EQ(model::description_to_json(*torch.transformer)["cross_entropy"], "torch-fp32");
  EXPECT_FALSE(model::description_to_json(*megatron.transformer).contains("cross_entropy"));
  EXPECT_FALSE(model::model_to_json(megatron)["layers"].back().contains("backward_working_bytes"));
}

TEST(BackwardWorking, TheDescriptionFieldIsReadAndChecked) {
  const model::Model model = read(R"({"transformer": {"preset": "llama3.1-8b", "sequence": 64,
      "cross_entropy": "torch-fp32"}})");
  ASSERT_TRUE(model.transformer.has_value());
  EXPECT_EQ(model.transformer->cross_entropy, model::CrossEntropy::kTorchFp32);
  EXPECT_EQ(model.layers.back().backward_working_bytes, 8.0 * 64 * 128256);
  EXPECT_EQ(read_error(R"({"transformer": {"preset": "llama3.1-8b", "cross_entropy": "fused"}})"),
            "model.json: /transformer/cross_entropy: must be \"megatron\" or \"torch-fp32\", got "
            "\"fused\"");
}

}  // namespace
}  // namespace pipeplan::simulate
