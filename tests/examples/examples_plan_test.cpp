// Every shipped example plans, and every plan passes the simulator's checks; two golden plans
// pin the planner's output for real models.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../support/examples.hpp"
#include "../support/same_json.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan {
namespace {

namespace fs = std::filesystem;

using testing::load;
using testing::source_dir;
using testing::stems;

using testing::same_json;

class ExamplePlanTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExamplePlanTest, EveryModelPlansAndPassesSimulate) {
  topology::Topology topology =
      topology::read_topology(load(source_dir() / "examples/topologies" / (GetParam() + ".json")));
  for (const std::string& name : stems("examples/models")) {
    SCOPED_TRACE(name);
    model::Model model =
        model::read_model(load(source_dir() / "examples/models" / (name + ".json")));
    ASSERT_TRUE(model.micro_batches.has_value());
    planners::Request request{model, topology, static_cast<int>(*model.micro_batches)};
    Plan plan = planners::make_plan("spp", request);
    EXPECT_GE(plan.timeline.iteration_ms, plan.bounds.partition_ms * (1 - 1e-9));
    EXPECT_GE(plan.bounds.partition_ms, plan.bounds.any_plan_ms * (1 - 1e-9));
    const std::string text = io::dump_json(report::plan_to_json(plan, model, topology));
    // The plan command's writer, which streams the schedule, gives the same bytes.
    EXPECT_EQ(report::plan_json_text(plan, model, topology), text);
    Plan checked = simulate::check_plan(
        report::read_plan(io::source_from_text("plan.json", text), topology), model, topology);
    EXPECT_DOUBLE_EQ(checked.timeline.iteration_ms, plan.timeline.iteration_ms);
  }
}

INSTANTIATE_TEST_SUITE_P(Topologies, ExamplePlanTest,
                         ::testing::ValuesIn(stems("examples/topologies")), testing::StemName());

struct Golden {
  const char* model;
  const char* topology;
};

class GoldenPlanTest : public ::testing::TestWithParam<Golden> {};

// Regenerate with: pipeplan -q plan examples/models/M.json examples/topologies/T.json
//   -o tests/data/golden/M.T.plan.json  (after checking the change is an improvement).
TEST_P(GoldenPlanTest, MatchesTheGoldenPlan) {
  const Golden g = GetParam();
  model::Model model =
      model::read_model(load(source_dir() / "examples/models" / (std::string(g.model) + ".json")));
  topology::Topology topology = topology::read_topology(
      load(source_dir() / "examples/topologies" / (std::string(g.topology) + ".json")),
      model.profile_device);
  Plan plan = planners::make_plan("spp", {model, topology, static_cast<int>(*model.micro_batches)});
  const auto actual = nlohmann::json::parse(report::plan_to_json(plan, model, topology).dump());
  // Examples in subfolders (llm/) keep their base names.
  std::ifstream in(source_dir() / "tests/data/golden" /
                   (fs::path(g.model).filename().string() + "." +
                    fs::path(g.topology).filename().string() + ".plan.json"));
  const auto expected = nlohmann::json::parse(in);
  std::string mismatch;
  EXPECT_TRUE(same_json(actual, expected, "", mismatch)) << mismatch;
}

INSTANTIATE_TEST_SUITE_P(RealModels, GoldenPlanTest,
                         ::testing::Values(Golden{"gnmt", "dgx1-hybrid-mesh"},
                                           Golden{"bert-24", "pcie-server"},
                                           // Spec 8: only tensor parallelism with
                                           // recomputation fits (docs/results.md).
                                           Golden{"llm/gpt3-13b-mb8", "llm/dgx-a100-40gb-2x8"}),
                         [](const auto& param_info) {
                           std::string name = std::string(param_info.param.model) + "_" +
                                              param_info.param.topology;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(GoldenPlanTest, ComparisonSeesDifferences) {
  std::string mismatch;
  EXPECT_TRUE(same_json(nlohmann::json::parse(R"({"a": [1, 2.0000000000001]})"),
                        nlohmann::json::parse(R"({"a": [1, 2]})"), "", mismatch));
  EXPECT_FALSE(same_json(nlohmann::json::parse(R"({"a": [1, 2.001]})"),
                         nlohmann::json::parse(R"({"a": [1, 2]})"), "", mismatch));
  EXPECT_EQ(mismatch, "/a/1: 2.001 vs 2");
}

}  // namespace
}  // namespace pipeplan
