// The deepspeed export's precision: DeepSpeed trains in fp32 unless its configuration enables
// bf16 or fp16, so a plan of a described model says which the estimate assumed.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "../support/builders.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::report {
namespace {

using nlohmann::ordered_json;

// The deepspeed export of a two-stage plan (t 1, p 2) of a small GPT-shaped model in `dtype`.
ordered_json deepspeed_of(hardware::DType dtype) {
  model::TransformerConfig config;
  config.layers = 4;
  config.hidden = 512;
  config.heads = 8;
  config.sequence = 1024;
  config.vocab = 32000;
  config.dtype = dtype;
  config.gpu = dtype == hardware::DType::kFp8 ? "H100-SXM" : "A100-80GB";
  const model::Model model = testing::described_model(config);
  const topology::Topology topology = testing::uniform_topology(2, 50e9, 0.002);
  planners::Request request{model, topology, 8};
  request.tensor_parallel = {1};
  request.pipeline_parallel = 2;
  const Plan plan = planners::make_plan("megatron", request);
  return deepspeed_json(make_view(plan, model, topology));
}

TEST(DeepSpeedPrecisionTest, TheConfigurationEnablesTheFormatTheEstimateAssumed) {
  const ordered_json bf16 = deepspeed_of(hardware::DType::kBf16);
  EXPECT_EQ(bf16.at("config").at("bf16"), ordered_json({{"enabled", true}}));
  EXPECT_FALSE(bf16.at("config").contains("fp16"));
  const ordered_json fp16 = deepspeed_of(hardware::DType::kFp16);
  EXPECT_EQ(fp16.at("config").at("fp16"), ordered_json({{"enabled", true}}));
  EXPECT_FALSE(fp16.at("config").contains("bf16"));
  const ordered_json fp32 = deepspeed_of(hardware::DType::kFp32);
  EXPECT_FALSE(fp32.at("config").contains("bf16"));
  EXPECT_FALSE(fp32.at("config").contains("fp16"));
  // FP8: bf16 in the configuration, and a note that the FP8 GEMMs are the layers' to run.
  const ordered_json fp8 = deepspeed_of(hardware::DType::kFp8);
  EXPECT_EQ(fp8.at("config").at("bf16"), ordered_json({{"enabled", true}}));
  EXPECT_NE(fp8.at("notes").dump().find("FP8 matrix multiplications"), std::string::npos)
      << fp8.at("notes");
}

}  // namespace
}  // namespace pipeplan::report
