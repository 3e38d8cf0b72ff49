// report/compare: scoring planner runs (speed-ups against the fastest baseline, ratios to the
// bounds, the GPU closest to its capacity) and the three renderings, on hand-made plans whose
// figures are known.

#include "pipeplan/report/compare.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../support/builders.hpp"

namespace pipeplan::report {
namespace {

using pipeplan::testing::uniform_topology;
using schedule::Policy;

constexpr double kKiB = 1024;

// A plan with the given stages, iteration time and bounds, and per-GPU peaks (0: unused).
Plan plan_of(std::vector<Stage> stages, double iteration_ms, double any_plan_ms,
             double partition_ms, const std::vector<double>& peaks) {
  Plan plan;
  plan.stages = std::move(stages);
  plan.timeline.iteration_ms = iteration_ms;
  plan.bounds = {any_plan_ms, partition_ms};
  for (std::size_t g = 0; g < peaks.size(); ++g) {
    GpuUsage usage;
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      for (int gpu : plan.stages[s].gpus) {
        if (gpu == static_cast<int>(g)) usage.stages = {static_cast<int>(s)};
      }
    }
    usage.peak_memory_bytes = peaks[g];
    plan.timeline.gpus.push_back(usage);
  }
  return plan;
}

CompareRow row(std::string planner, Policy policy, bool baseline, std::optional<Plan> plan,
               std::string error = {}) {
  return CompareRow{std::move(planner), {}, policy, baseline, std::move(plan), std::move(error), 0};
}

// Three GPUs of 4 KiB. spp (not a baseline) at 100 ms; gpipe at 125 ms, the fastest baseline;
// data-parallel infeasible; pipedream at 150 ms.
class ComparisonTest : public ::testing::Test {
 protected:
  topology::Topology topology_ = uniform_topology(3, 1e9, 0, {}, 4 * kKiB);
  Comparison comparison_ = score_comparison(
      {row("spp", Policy::kList, false,
           plan_of({{0, 1, {0}}, {2, 3, {1, 2}}}, 100, 50, 80, {2 * kKiB, kKiB, 3 * kKiB})),
       row("gpipe", Policy::kGpipe, true, plan_of({{0, 3, {0}}}, 125, 50, 100, {4 * kKiB, 0, 0})),
       row("data-parallel", Policy::kOneFOneB, true, std::nullopt, "needs \"x\", 2 GiB"),
       row("pipedream", Policy::kOneFOneB, true,
           plan_of({{0, 1, {0}}, {2, 3, {1}}}, 150, 50, 100, {kKiB, 2 * kKiB, 0}))},
      topology_);
};

TEST_F(ComparisonTest, ScoresAgainstTheFastestBaseline) {
  ASSERT_EQ(comparison_.rows.size(), 4u);
  ASSERT_EQ(comparison_.figures.size(), 4u);
  EXPECT_EQ(comparison_.fastest, 0u);
  EXPECT_EQ(comparison_.fastest_baseline, 1u);
  EXPECT_DOUBLE_EQ(*comparison_.figures[0].speedup, 1.25);
  EXPECT_DOUBLE_EQ(*comparison_.figures[1].speedup, 1.0);
  EXPECT_FALSE(comparison_.figures[2].speedup);
  EXPECT_DOUBLE_EQ(*comparison_.figures[3].speedup, 125.0 / 150);
  EXPECT_DOUBLE_EQ(*comparison_.figures[0].partition_ratio, 1.25);
  EXPECT_DOUBLE_EQ(*comparison_.figures[0].any_plan_ratio, 2.0);
  // The GPU closest to its capacity: g2 at 3 of 4 KiB, not g0 (2 KiB) or g1 (1 KiB).
  EXPECT_EQ(comparison_.figures[0].memory.gpu, 2);
  EXPECT_DOUBLE_EQ(*comparison_.figures[0].memory.fraction(), 0.75);
  EXPECT_EQ(comparison_.figures[2].memory.gpu, -1);
  EXPECT_EQ(*comparison_summary(comparison_),
            "fastest: spp (list) 100 ms; best baseline: gpipe (gpipe) 125 ms");
}

TEST_F(ComparisonTest, WithoutAPlanThereIsNoSummary) {
  const Comparison none =
      score_comparison({row("spp", Policy::kList, false, std::nullopt, "no")}, topology_);
  EXPECT_FALSE(none.fastest);
  EXPECT_FALSE(none.fastest_baseline);
  EXPECT_FALSE(comparison_summary(none));
  // Without a baseline plan there are no speed-ups, and the summary names no baseline.
  const Comparison alone = score_comparison(
      {row("spp", Policy::kList, false, plan_of({{0, 3, {0}}}, 10, 5, 5, {kKiB, 0, 0}))},
      topology_);
  EXPECT_FALSE(alone.figures[0].speedup);
  EXPECT_EQ(*comparison_summary(alone), "fastest: spp (list) 10 ms");
}

TEST_F(ComparisonTest, PeakMemoryWithoutCapacitiesIsTheLargestPeak) {
  const topology::Topology unlimited = uniform_topology(3, 1e9, 0);
  const PeakMemory peak =
      peak_memory(plan_of({{0, 1, {0, 1}}}, 1, 1, 1, {kKiB, 2 * kKiB, 0}), unlimited);
  EXPECT_EQ(peak.gpu, 1);
  EXPECT_EQ(peak.peak_bytes, 2 * kKiB);
  EXPECT_FALSE(peak.capacity_bytes);
  EXPECT_FALSE(peak.fraction());
}

TEST_F(ComparisonTest, TableAlignsItsColumns) {
  EXPECT_EQ(comparison_table(comparison_, false),
            "planner        policy  stages       iteration  speed-up  vs partition  vs any-plan  "
            "peak memory             status\n"
            "spp            list    0-1x1 2-3x2     100 ms     1.25x          1.25         2.00  "
            "3 KiB / 4 KiB (75.0%)   feasible\n"
            "gpipe          gpipe   0-3x1           125 ms     1.00x          1.25         2.50  "
            "4 KiB / 4 KiB (100.0%)  feasible\n"
            "data-parallel  1f1b    -                    -         -             -            -  "
            "-                       infeasible: needs \"x\", 2 GiB\n"
            "pipedream      1f1b    0-1x1 2-3x1     150 ms     0.83x          1.50         3.00  "
            "2 KiB / 4 KiB (50.0%)   feasible\n");
  // With timing, a planning column before the status.
  const std::string timed = comparison_table(comparison_, true);
  EXPECT_NE(timed.find("peak memory             planning  status\n"), std::string::npos) << timed;
  EXPECT_NE(timed.find("(75.0%)       0 ms  feasible\n"), std::string::npos) << timed;
}

TEST_F(ComparisonTest, CsvQuotesFieldsWithCommasAndQuotes) {
  EXPECT_EQ(comparison_csv(comparison_, false),
            "planner,policy,stages,iteration_ms,speedup,partition_ratio,any_plan_ratio,"
            "peak_memory_bytes,memory_bytes,memory_fraction,status,error\n"
            "spp,list,0-1x1 2-3x2,100,1.25,1.25,2,3072,4096,0.75,feasible,\n"
            "gpipe,gpipe,0-3x1,125,1,1.25,2.5,4096,4096,1,feasible,\n"
            "data-parallel,1f1b,,,,,,,,,infeasible,\"needs \"\"x\"\", 2 GiB\"\n"
            "pipedream,1f1b,0-1x1 2-3x1,150,0.8333333333333334,1.5,3,2048,4096,0.5,feasible,\n");
  const std::string timed = comparison_csv(comparison_, true);
  EXPECT_EQ(timed.substr(0, timed.find('\n')),
            "planner,policy,stages,iteration_ms,speedup,partition_ratio,any_plan_ratio,"
            "peak_memory_bytes,memory_bytes,memory_fraction,planning_ms,status,error");
  EXPECT_NE(timed.find("\nspp,list,0-1x1 2-3x2,100,1.25,1.25,2,3072,4096,0.75,0,feasible,\n"),
            std::string::npos)
      << timed;
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a\nb"), "\"a\nb\"");
}

TEST_F(ComparisonTest, JsonHasEveryKeyInOrder) {
  const std::string text = comparison_json(comparison_, false, topology_);
  ASSERT_EQ(text.back(), '\n');
  const auto rows = nlohmann::ordered_json::parse(text);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].dump(),
            R"({"planner":"spp","policy":"list","feasible":true,"stages":[{"first_layer":0,)"
            R"("last_layer":1,"gpus":["g0"]},{"first_layer":2,"last_layer":3,"gpus":["g1","g2"]}],)"
            R"("iteration_ms":100,"speedup":1.25,"bounds":{"any_plan_ms":50,"partition_ms":80},)"
            R"("partition_ratio":1.25,"any_plan_ratio":2,"peak_memory":{"gpu":"g2",)"
            R"("peak_memory_bytes":3072,"memory_bytes":4096,"fraction":0.75},"error":null})");
  EXPECT_EQ(rows[2].dump(),
            R"({"planner":"data-parallel","policy":"1f1b","feasible":false,"stages":null,)"
            R"("iteration_ms":null,"speedup":null,"bounds":null,"partition_ratio":null,)"
            R"("any_plan_ratio":null,"peak_memory":null,"error":"needs \"x\", 2 GiB"})");
  const auto timed = nlohmann::ordered_json::parse(comparison_json(comparison_, true, topology_));
  for (const auto& item : timed) {
    EXPECT_TRUE(item.at("planning_ms").is_number());
    // planning_ms comes just before the error.
    EXPECT_EQ(std::prev(item.end(), 2).key(), "planning_ms");
  }
}

}  // namespace
}  // namespace pipeplan::report
