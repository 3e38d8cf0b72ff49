// report/input_summary: the one-line summaries of models and topologies on standard error
// (`validate`, `import pipedream`, `model transformer`), on hand-made inputs whose sums are
// known.

#include "pipeplan/report/input_summary.hpp"

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::report {
namespace {

using pipeplan::testing::L;
using pipeplan::testing::make_model;
using pipeplan::testing::uniform_topology;

constexpr double kMiB = 1024.0 * 1024.0;

TEST(InputSummaryTest, ModelSumsItsLayers) {
  model::Model model = make_model({L{1, 2, 0, kMiB}, L{3, 4, 0, 2 * kMiB}});
  model.name = "bert";
  EXPECT_EQ(model_summary("m.json", model),
            "m.json: model \"bert\", 2 layers, forward 4 ms and backward 6 ms per micro-batch, "
            "3 MiB of parameters");
  model.micro_batches = 1;
  EXPECT_TRUE(model_summary("m.json", model).ends_with(", 1 micro-batch"));
  model.micro_batches = 16;
  EXPECT_TRUE(model_summary("m.json", model).ends_with(", 16 micro-batches"));
}

TEST(InputSummaryTest, ModelNameIsEscapedOrLeftOut) {
  model::Model model = make_model({L{}});
  model.name = "a\x1b[2J\x7f";
  EXPECT_EQ(model_summary("m", model).substr(0, 33), "m: model \"a\\x1B[2J\\x7F\", 1 layer,");
  model.name.clear();
  EXPECT_EQ(model_summary("m", model).substr(0, 18), "m: model, 1 layer,");
}

TEST(InputSummaryTest, ModelOfSpec81NamesItsFields) {
  model::Model model = make_model({L{}, L{}, L{}});
  model::TensorParallel split;
  split.degrees = {1, 2, 8};
  split.forward_ms = {1, 0.5, 0.125};
  split.backward_ms = {1, 0.5, 0.125};
  model.layers[1].tensor_parallel = split;
  model.layers[0].update_ms = 2;
  model.layers[2].update_ms = 0.5;
  model.input_bytes = 16 * 1024;
  ASSERT_TRUE(model::uses_v2_fields(model));
  EXPECT_TRUE(model_summary("m", model)
                  .ends_with(", tensor-parallel up to degree 8 on 1 of 3 layers, optimizer step "
                             "2.5 ms, input 16 KiB, "
                             "sharded memory factor " +
                             io::format_number(model::sharded_factor(model)) + " (default)"))
      << model_summary("m", model);
  model.sharded_memory_factor = 6;
  EXPECT_TRUE(model_summary("m", model).ends_with(", sharded memory factor 6"))
      << model_summary("m", model);
}

TEST(InputSummaryTest, TopologyRangesCollapseWhenAlike) {
  const topology::Topology one = uniform_topology(1, 1e9, 0);
  EXPECT_EQ(topology_summary("t.json", one),
            "t.json: topology \"uniform\", 1 GPU on 1 node, speed 1, memory unlimited");
  const topology::Topology alike = uniform_topology(2, 25e9, 0, {2, 2}, 32 * 1024 * kMiB);
  EXPECT_EQ(topology_summary("t.json", alike),
            "t.json: topology \"uniform\", 2 GPUs on 2 nodes, pair bandwidth 25 GB/s, speed 2, "
            "memory 32 GiB");
}

TEST(InputSummaryTest, TopologyRangesSpanTheGpus) {
  std::vector<topology::Gpu> gpus(3);
  for (int g = 0; g < 3; ++g) {
    gpus[static_cast<std::size_t>(g)].id = "g" + std::to_string(g);
    gpus[static_cast<std::size_t>(g)].node = g < 2 ? "a" : "b";
  }
  gpus[0].speed = 0.5;
  gpus[0].memory_bytes = 16 * kMiB;
  gpus[1].memory_bytes = 8 * kMiB;
  const topology::Topology topology = topology::Topology::build(
      "", gpus, std::vector<topology::Link>{{0, 1, 12.5e9, 0}, {1, 2, 25e9, 0}, {0, 2, 25e9, 0}},
      "t");
  EXPECT_EQ(topology_summary("t", topology),
            "t: topology, 3 GPUs on 2 nodes, pair bandwidth 12.5 GB/s to 25 GB/s, speed 0.5 to 1, "
            "memory 8 MiB to unlimited");
  gpus[2].memory_bytes = 4 * kMiB;
  const topology::Topology limited = topology::Topology::build(
      "", gpus, std::vector<topology::Link>{{0, 1, 12.5e9, 0}, {1, 2, 25e9, 0}, {0, 2, 25e9, 0}},
      "t");
  EXPECT_TRUE(topology_summary("t", limited).ends_with(", memory 4 MiB to 16 MiB"));
}

TEST(InputSummaryTest, TransformerNamesItsShape) {
  model::Model model = make_model({L{1, 2, 0, kMiB}, L{1, 2, 0, kMiB}, L{1, 2, 0, kMiB}});
  model.name = "gpt";
  model::TransformerConfig config;
  config.layers = 1;
  config.micro_batch_size = 4;
  config.dtype = hardware::DType::kFp16;
  config.gpu = "H100-SXM";
  config.degrees = {1, 2, 4};
  EXPECT_EQ(
      transformer_summary(model, config),
      "model \"gpt\": 1 decoder layers, 3 MiB of fp16 weights, forward 3 ms and backward 6 ms "
      "per micro-batch of 4 on one H100-SXM, tensor-parallel degrees 1, 2, 4");
}

TEST(InputSummaryTest, TransformerModelStatesItsKernelFloor) {
  // A small gelu model (b = 1, s = 16, h = 64, a = 4, F = 256, V = 100; degrees 1, 2, 4), whose
  // passes all take less than their launches: embedding 4 + 3 kernels, each decoder 17 + 24 + 4,
  // output 16 + 7; 10 us each: 0.04 + 2 x 0.17 + 0.16 = 0.54 ms forward, 0.03 + 2 x 0.28 + 0.07 =
  // 0.66 ms backward.
  model::TransformerConfig config;
  config.name = "tiny";
  config.layers = 2;
  config.hidden = 64;
  config.heads = 4;
  config.ffn_hidden = 256;
  config.sequence = 16;
  config.vocab = 100;
  config = model::complete_transformer_config(config).first;
  const model::Model model = model::transformer_model(config);
  EXPECT_TRUE(model_summary("m.json", model)
                  .ends_with(", kernel floor 120 kernels x 10 us = 1.2 ms per micro-batch (0.54 "
                             "ms forward, 0.66 ms backward), above the FLOP and byte time on 4 "
                             "of 4 layers at degree 1 and 4 at degree 4"))
      << model_summary("m.json", model);
  config.kernel_overhead_us = 0;
  EXPECT_TRUE(model_summary("m.json", model::transformer_model(config))
                  .ends_with(", no kernel floor (kernel_overhead_us 0)"));
}

TEST(InputSummaryTest, ImportNamesTheLargestCut) {
  model::Model model = make_model({L{1, 2, 3 * kMiB, kMiB}, L{1, 2, 5 * kMiB, 0}, L{1, 2, kMiB}});
  model.name = "vgg";
  EXPECT_EQ(import_summary("graph.txt", model, 64, std::nullopt),
            "graph.txt: imported 3 layers as model \"vgg\", forward 3 ms and backward 6 ms per "
            "micro-batch of 64, 1 MiB of parameters, largest cut 5 MiB");
  model.name.clear();
  EXPECT_EQ(import_summary("g", model, 1, 8),
            "g: imported 3 layers, forward 3 ms and backward 6 ms per micro-batch of 1, 1 MiB of "
            "parameters, largest cut 5 MiB, 8 micro-batches");
}

}  // namespace
}  // namespace pipeplan::report
