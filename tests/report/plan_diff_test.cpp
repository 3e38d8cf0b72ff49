// report/plan_diff: the one line `plan --check` prints, part by part, on hand-made plans.

#include "pipeplan/report/plan_diff.hpp"

#include <gtest/gtest.h>

namespace pipeplan::report {
namespace {

using nlohmann::ordered_json;

// A plan's top level as plan_to_json orders it, with the stages given as
// (first, last, gpu ids) and a schedule placeholder.
ordered_json plan(const std::vector<std::tuple<int, int, std::vector<std::string>>>& stages,
                  double iteration_ms, const std::string& planner = "spp", int micro_batches = 4) {
  ordered_json out;
  out["schema"] = "pipeplan/plan/v1";
  out["planner"] = planner;
  out["schedule_policy"] = "list";
  out["micro_batches"] = micro_batches;
  out["iteration_ms"] = iteration_ms;
  out["stages"] = ordered_json::array();
  for (const auto& [first, last, gpus] : stages) {
    out["stages"].push_back({{"first_layer", first}, {"last_layer", last}, {"gpus", gpus}});
  }
  out["schedule"] = {{"compute", ordered_json::array()}};
  return out;
}

TEST(PlanDiffTest, NamesSettingsStagesAndTime) {
  const auto before = plan({{0, 3, {"a"}}, {4, 7, {"b"}}}, 10, "gpipe", 4);
  const auto after = plan({{0, 7, {"a", "b"}}}, 12.5, "spp", 8);
  EXPECT_EQ(plan_difference(before.dump(), after),
            "planner gpipe -> spp; micro-batches 4 -> 8; stages 0-3 x1 | 4-7 x1 -> 0-7 x2; "
            "iteration 10 ms -> 12.5 ms");
}

TEST(PlanDiffTest, GpusUsedThenGpusPerStage) {
  const auto base = plan({{0, 3, {"a"}}, {4, 7, {"b"}}}, 10);
  // Same stages, one GPU more: the count.
  EXPECT_EQ(plan_difference(base.dump(), plan({{0, 3, {"a", "c"}}, {4, 7, {"b"}}}, 10)),
            "stages 0-3 x1 | 4-7 x1 -> 0-3 x2 | 4-7 x1; GPUs used 2 -> 3");
  // Same shape, other GPUs: the stages whose GPUs moved.
  EXPECT_EQ(plan_difference(base.dump(), plan({{0, 3, {"c"}}, {4, 7, {"d"}}}, 10)),
            "GPUs of stage 0 a -> c, stage 1 b -> d");
  std::vector<std::tuple<int, int, std::vector<std::string>>> four, moved;
  for (int s = 0; s < 4; ++s) {
    four.emplace_back(s, s, std::vector<std::string>{"g" + std::to_string(s)});
    moved.emplace_back(s, s, std::vector<std::string>{"h" + std::to_string(s)});
  }
  EXPECT_EQ(plan_difference(plan(four, 1).dump(), plan(moved, 1)),
            "GPUs of stage 0 g0 -> h0, stage 1 g1 -> h1 and 2 more stages");
  // Long GPU lists are shortened to the first three and the last.
  std::vector<std::string> six{"a", "b", "c", "d", "e", "f"}, other = six;
  other[5] = "z";
  EXPECT_EQ(plan_difference(plan({{0, 7, six}}, 1).dump(), plan({{0, 7, other}}, 1)),
            "GPUs of stage 0 a, b, c, ... f (6) -> a, b, c, ... z (6)");
  // Another split of the same GPU count over more stages: the set, when it differs.
  EXPECT_EQ(plan_difference(plan({{0, 7, {"a", "b"}}}, 1).dump(),
                            plan({{0, 3, {"a"}}, {4, 7, {"c"}}}, 1)),
            "stages 0-7 x2 -> 0-3 x1 | 4-7 x1; a different set of GPUs is used");
  EXPECT_EQ(plan_difference(plan({{0, 7, {"a", "b"}}}, 1).dump(),
                            plan({{0, 3, {"b"}}, {4, 7, {"a"}}}, 1)),
            "stages 0-7 x2 -> 0-3 x1 | 4-7 x1");
}

TEST(PlanDiffTest, OtherwiseTheOtherParts) {
  const auto base = plan({{0, 7, {"a"}}}, 10);
  auto changed = base;
  changed["schedule"]["compute"].push_back(1);
  changed["schema"] = "pipeplan/plan/v2";
  EXPECT_EQ(plan_difference(base.dump(), changed), "the schedule, schema changed");
  auto extra = base;
  extra["x-note"] = true;
  EXPECT_EQ(plan_difference(extra.dump(), base), "x-note (not in the new plan) changed");
  EXPECT_EQ(plan_difference(base.dump(4), base), "formatting only (same content)");
}

TEST(PlanDiffTest, AnExistingFileThatIsNoPlan) {
  const auto fresh = plan({{0, 7, {"a"}}}, 10);
  EXPECT_EQ(plan_difference("{", fresh), "the existing file is not JSON");
  EXPECT_EQ(plan_difference("[1]", fresh), "the existing file is not a plan (not a JSON object)");
  // An object without the plan's parts: every part is new, the time printed as it stood.
  EXPECT_EQ(plan_difference(R"({"iteration_ms": "soon"})", fresh),
            "planner null -> spp; schedule null -> list; micro-batches null -> 4; "
            "stages none -> 0-7 x1; GPUs used 0 -> 1; iteration soon -> 10 ms");
}

}  // namespace
}  // namespace pipeplan::report
