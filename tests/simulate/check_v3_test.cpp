// Spec 9's rules in the plan checker: a v3 plan (a split backward, two stages per device in a V,
// zb-v) round-trips through plan.json and `check_plan`, and each corruption of it is refused
// with the rule it breaks named, at the entry's JSON pointer.

#include <gtest/gtest.h>

#include <functional>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"

namespace pipeplan::simulate {
namespace {

using namespace pipeplan::testing;
using nlohmann::ordered_json;

// Four one-layer stages with weight gradients on two GPUs, planned by the megatron planner
// under zb-v: stages 0 and 3 on the first GPU, 1 and 2 on the second (a V), split backwards.
struct CheckV3Test : ::testing::Test {
  CheckV3Test() {
    for (model::Layer& layer : model.layers) layer.backward_weight_ms = 2;
    planners::Request request{model, topology, 4};
    request.tensor_parallel = {1};
    request.pipeline_parallel = 2;
    request.virtual_stages = 2;
    plan = planners::make_plan("megatron", request, schedule::Policy::kZbV);
    json = report::plan_to_json(plan, model, topology);
  }

  model::Model model = make_model(
      {{2, 5, 1e6, 1e6, 1e6}, {2, 5, 1e6, 1e6, 1e6}, {2, 5, 1e6, 1e6, 1e6}, {2, 5, 0, 1e6, 1e6}});
  topology::Topology topology = uniform_topology(2, 10e9, 0.005, {}, 1e9);
  Plan plan;
  ordered_json json;

  std::string error_of(const std::function<void(ordered_json&)>& mutate) {
    ordered_json copy = json;
    mutate(copy);
    try {
      check_plan(
          report::read_plan(io::source_from_text("plan.json", io::dump_json(copy)), topology),
          model, topology);
    } catch (const InputError& error) {
      return error.what();
    }
    return "no error";
  }
  // The first compute entry with this op and stage.
  std::size_t compute_index(const std::string& op, int stage) const {
    const auto& compute = json["schedule"]["compute"];
    for (std::size_t i = 0; i < compute.size(); ++i) {
      if (compute[i]["op"] == op && compute[i]["stage"] == stage) return i;
    }
    ADD_FAILURE() << op << " of stage " << stage << " not found";
    return 0;
  }
};

TEST_F(CheckV3Test, TheFixtureIsAV3Plan) {
  EXPECT_EQ(json["schema"], "pipeplan/plan/v3");
  EXPECT_EQ(json["schedule_policy"], "zb-v");
  EXPECT_EQ(json["split_backward"], true);
  EXPECT_EQ(json["virtual_stages"], 2);
  EXPECT_EQ(json["stages"][0]["gpus"], json["stages"][3]["gpus"]);
  EXPECT_EQ(json["stages"][1]["gpus"], json["stages"][2]["gpus"]);
  EXPECT_EQ(json["gpus"][0]["stages"], ordered_json::array({0, 3}));
  // 3 compute tasks per stage and micro-batch; transfers only between the two devices (the
  // boundary after stage 1 lies inside one).
  EXPECT_EQ(json["schedule"]["compute"].size(), 3u * 4 * 4);
  EXPECT_EQ(json["schedule"]["transfers"].size(), 2u * 2 * 4);
  EXPECT_EQ(error_of([](ordered_json&) {}), "no error");
  // What the checker recomputes is what the plan states.
  const Plan again = check_plan(
      report::read_plan(io::source_from_text("plan.json", io::dump_json(json)), topology), model,
      topology);
  EXPECT_EQ(report::plan_to_json(again, model, topology), json);
}

TEST_F(CheckV3Test, AWholeBackwardInASplitPlanIsRefused) {
  const std::size_t i = compute_index("backward_input", 0);
  EXPECT_EQ(error_of([&](ordered_json& j) { j["schedule"]["compute"][i]["op"] = "backward"; }),
            "plan.json: /schedule/compute/" + std::to_string(i) +
                "/op: is \"backward\" but the plan has split_backward: true, so every backward is "
                "\"backward_input\" and \"backward_weight\" (spec 9.2)");
}

TEST_F(CheckV3Test, HalvesWithoutTheSplitAreRefused) {
  // The first entry that is not a forward: an I (a W follows its I).
  const auto& compute = json["schedule"]["compute"];
  std::size_t i = 0;
  while (compute[i]["op"] == "forward") ++i;
  ASSERT_EQ(compute[i]["op"], "backward_input");
  EXPECT_EQ(error_of([](ordered_json& j) { j["split_backward"] = false; }),
            "plan.json: /schedule/compute/" + std::to_string(i) +
                "/op: is \"backward_input\" but the plan does not have split_backward: true (spec "
                "9.2)");
}

TEST_F(CheckV3Test, ATransferInsideADeviceIsRefused) {
  const std::string error = error_of([](ordered_json& j) {
    ordered_json extra = j["schedule"]["transfers"][0];
    extra["stage"] = 1;  // stages 1 and 2 share a device
    j["schedule"]["transfers"].push_back(extra);
  });
  EXPECT_EQ(error,
            "plan.json: /schedule/transfers/16/stage: names the boundary after stage 1, "
            "which lies inside one device (stages 1 and 2 share their GPUs): it has no "
            "transfer (spec 9.3)");
}

TEST_F(CheckV3Test, ADeviceRunsOneTaskAtATimeAcrossItsStages) {
  // Stage 3's W moved to the start, where stage 0 (same device) runs its first forward.
  const std::size_t w = compute_index("backward_weight", 3);
  const std::string error = error_of([&](ordered_json& j) {
    auto& entry = j["schedule"]["compute"][w];
    entry["start_ms"] = 0.0;
    entry["end_ms"] = 2.0;
  });
  EXPECT_EQ(error,
            "plan.json: /schedule/compute/" + std::to_string(w) +
                ": weight-gradient backward of micro-batch 0 on stage 3 starts at 0 ms on GPU "
                "\"g0\" while forward of micro-batch 0 on stage 0 runs there until 2 ms");
}

TEST_F(CheckV3Test, VirtualStagesMustMatchTheStages) {
  EXPECT_EQ(error_of([](ordered_json& j) { j["virtual_stages"] = 3; }),
            "plan.json: /virtual_stages: states 3 but the most stages sharing one GPU list is 2");
}

TEST_F(CheckV3Test, AGpuListsEveryStageItServes) {
  EXPECT_EQ(error_of([](ordered_json& j) {
              j["gpus"][0].erase("stages");
              j["gpus"][0]["stage"] = 0;
            }),
            "plan.json: /gpus/0/stages: GPU \"g0\" serves stages 0, 3");
}

TEST_F(CheckV3Test, AWrongWeightDurationIsRefused) {
  const std::size_t w = compute_index("backward_weight", 0);
  const std::string error = error_of([&](ordered_json& j) {
    j["schedule"]["compute"][w]["end_ms"] = j["schedule"]["compute"][w]["end_ms"].get<double>() - 1;
  });
  EXPECT_NE(error.find("plan.json: /schedule/compute/" + std::to_string(w) +
                       ": weight-gradient backward of micro-batch 0 on stage 0 lasts 1 ms but "
                       "takes 2 ms on GPU \"g0\""),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace pipeplan::simulate
