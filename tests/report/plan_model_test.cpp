// report::model_for_plan: a transformer description is regenerated at the micro-batch size
// its plan records; everything else is left as it is.

#include "pipeplan/report/plan_model.hpp"

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::report {
namespace {

model::Model described() {
  model::TransformerConfig config;
  config.layers = 2;
  config.hidden = 64;
  config.heads = 4;
  config.sequence = 16;
  config.vocab = 100;
  config.kernel_overhead_us = 0;  // the FLOP and byte times, which grow with the micro-batch
  auto [completed, problem] = model::complete_transformer_config(config);
  EXPECT_EQ(problem, "");
  model::Model model = model::transformer_model(completed);
  model.transformer = completed;
  model.micro_batches = 8;
  return model;
}

io::Source plan_text(const std::string& text) { return io::Source{"plan.json", text}; }

TEST(ModelForPlanTest, RegeneratesAtThePlansMicroBatchSize) {
  const model::Model model = described();
  ASSERT_TRUE(model.transformer);
  ASSERT_EQ(model.transformer->micro_batch_size, 1);
  const model::Model at_four =
      model_for_plan(model, plan_text(R"({"schema": "x", "micro_batch_size": 4})"));
  ASSERT_TRUE(at_four.transformer);
  EXPECT_EQ(at_four.transformer->micro_batch_size, 4);
  EXPECT_EQ(at_four.micro_batches, 8);
  const model::Model expected = model::transformer_model_at(model, 4);
  ASSERT_EQ(at_four.layers.size(), expected.layers.size());
  for (std::size_t l = 0; l < expected.layers.size(); ++l) {
    EXPECT_EQ(at_four.layers[l].forward_ms, expected.layers[l].forward_ms);
    EXPECT_EQ(at_four.layers[l].stash_bytes, expected.layers[l].stash_bytes);
  }
  EXPECT_GT(at_four.layers.back().forward_ms, model.layers.back().forward_ms);
}

TEST(ModelForPlanTest, LeavesTheModelWhenThePlanSaysNothingValid) {
  const model::Model model = described();
  for (const char* text :
       {"", "not json", "[1]", "{}", R"({"micro_batch_size": "4"})", R"({"micro_batch_size": 4.5})",
        R"({"micro_batch_size": 0})", R"({"micro_batch_size": -2})",
        R"({"micro_batch_size": 1048577})", R"({"micro_batch_size": 1})"}) {
    const model::Model same = model_for_plan(model, plan_text(text));
    ASSERT_TRUE(same.transformer) << text;
    EXPECT_EQ(same.transformer->micro_batch_size, 1) << text;
    EXPECT_EQ(same.layers.back().forward_ms, model.layers.back().forward_ms) << text;
  }
}

TEST(ModelForPlanTest, LeavesAProfileAsItIs) {
  const model::Model profile = pipeplan::testing::make_model({{1, 2}, {3, 4}});
  const model::Model same = model_for_plan(profile, plan_text(R"({"micro_batch_size": 4})"));
  EXPECT_FALSE(same.transformer);
  ASSERT_EQ(same.layers.size(), 2u);
  EXPECT_EQ(same.layers[1].forward_ms, 3);
}

}  // namespace
}  // namespace pipeplan::report
