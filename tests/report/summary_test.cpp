// The human summaries `plan` and `simulate` print (spec 6: "a short human summary"): a run of
// three or more alike stages, or of three or more alike GPUs next to each other, shares a line;
// shorter runs, and alike GPUs apart, keep a line each. Hand-computed plans.

#include "pipeplan/report/summary.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "../support/builders.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::report {
namespace {

using namespace pipeplan::testing;

// One stage per layer, on the GPUs given, under 1F1B.
Plan one_layer_stages(const model::Model& model, const topology::Topology& topology, int m,
                      const std::vector<std::vector<int>>& gpus) {
  std::vector<int> order(topology.gpus().size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<Stage> stages;
  for (std::size_t s = 0; s < gpus.size(); ++s) {
    stages.push_back(Stage{static_cast<int>(s), static_cast<int>(s), gpus[s]});
  }
  const planners::Request request{model, topology, m};
  return planners::finish_plan("test", planners::Partition{order, stages}, request,
                               schedule::Policy::kOneFOneB);
}

// The lines between the first (the totals) and the last (the iteration).
std::vector<std::string> stage_lines(const std::string& summary) {
  std::vector<std::string> lines;
  std::size_t at = summary.find('\n');
  while (at != std::string::npos) {
    const std::size_t next = summary.find('\n', at + 1);
    lines.push_back(summary.substr(at + 1, next == std::string::npos ? next : next - at - 1));
    at = next;
  }
  lines.pop_back();
  return lines;
}

TEST(SummaryTest, NamesStagesAsTheMemoryLinesDo) {
  EXPECT_EQ(stage_names({3}), "stage 3");
  EXPECT_EQ(stage_names({0, 2}), "stages 0 and 2");
  EXPECT_EQ(stage_names({0, 4, 8, 12}), "stages 0, 4, 8 and 12");
  EXPECT_EQ(stage_names({0, 4, 8, 12, 16}), "stages 0, 4, ..., 16");
  EXPECT_EQ(stage_names({1, 2, 3, 4, 5, 6}), "stages 1 to 6");
  EXPECT_EQ(stage_names({0, 1, 2, 3, 7}), "stages 0, 1, 2, 3 and 7");
}

// Five layers of F 1, B 2 ms, one a GPU: every stage reads "layer s (ls) on 1 GPU [gs], F+B 3
// ms" but for its name, so the five share a line naming their layers and GPUs.
TEST(SummaryTest, AlikeStagesShareALine) {
  const model::Model model = make_model(std::vector<L>(5, L{1, 2, 0, 100, 0}));
  const topology::Topology topology = uniform_topology(5, 1e9, 0);
  const Plan plan = one_layer_stages(model, topology, 4, {{0}, {1}, {2}, {3}, {4}});
  const std::string summary = plan_summary(plan, model, topology);
  EXPECT_EQ(stage_lines(summary),
            std::vector<std::string>{"  stages 0 to 4: layers 0-4 (l0 .. l4), 1 a stage, each on "
                                     "1 GPU [5 in all: g0, g1, g2, g3, ... g4], F+B 3 ms"})
      << summary;
  // (M + S - 1)(F + B) = 8 x 3 ms.
  EXPECT_NE(summary.find("\n  iteration 24 ms: "), std::string::npos) << summary;
}

// Seven layers, the middle one twice as slow: stages 0 to 2 and 4 to 6 read alike, runs of
// three; two alike stages keep a line each.
TEST(SummaryTest, ARunEndsWhereAStageReadsOtherwiseAndTwoKeepTheirLines) {
  std::vector<L> layers(7, L{1, 2, 0, 100, 0});
  layers[3] = L{2, 4, 0, 100, 0};
  const model::Model model = make_model(layers);
  const topology::Topology topology = uniform_topology(7, 1e9, 0);
  const Plan plan = one_layer_stages(model, topology, 4, {{0}, {1}, {2}, {3}, {4}, {5}, {6}});
  EXPECT_EQ(stage_lines(plan_summary(plan, model, topology)),
            (std::vector<std::string>{
                "  stages 0, 1 and 2: layers 0-2 (l0 .. l2), 1 a stage, each on 1 GPU [3 in all: "
                "g0, g1, g2], F+B 3 ms",
                "  stage 3: layer 3 (l3) on 1 GPU [g3], F+B 6 ms",
                "  stages 4, 5 and 6: layers 4-6 (l4 .. l6), 1 a stage, each on 1 GPU [3 in all: "
                "g4, g5, g6], F+B 3 ms"}));
  const model::Model two = make_model(std::vector<L>(2, L{1, 2, 0, 100, 0}));
  const Plan pair = one_layer_stages(two, topology, 4, {{0}, {1}});
  EXPECT_EQ(stage_lines(plan_summary(pair, two, topology)),
            (std::vector<std::string>{"  stage 0: layer 0 (l0) on 1 GPU [g0], F+B 3 ms",
                                      "  stage 1: layer 1 (l1) on 1 GPU [g1], F+B 3 ms"}));
}

// Stage 0 on three replicas (two of the six micro-batches each: busy 2 x 3 = 6 ms), stage 1 on
// two (three each: 9 ms). No parameters: no AllReduce. The three replicas of stage 0 read alike
// and sit next to each other: one line; stage 1's two keep theirs.
TEST(SummaryTest, AlikeGpusNextToEachOtherShareALine) {
  const model::Model model = make_model(std::vector<L>(2, L{1, 2, 0, 0, 0}));
  const topology::Topology topology = uniform_topology(5, 1e9, 0);
  const Plan plan = one_layer_stages(model, topology, 6, {{0, 1, 2}, {3, 4}});
  double iteration = plan.timeline.iteration_ms;
  const auto line = [&](const std::string& gpus, double busy) {
    return gpus + "): busy " + io::format_ms(busy) + ", bubble " +
           io::format_number(100 * (1 - busy / iteration), 3) + "%, peak memory 0 B (unlimited)";
  };
  EXPECT_EQ(gpu_summary(plan, topology), "  g0 .. g2 (3 GPUs, each " + line("stage 0", 6) +
                                             "\n  g3 (" + line("stage 1", 9) + "\n  g4 (" +
                                             line("stage 1", 9));
  // Alike but apart: GPU 2 serves nothing, so GPUs 0, 1 and 3 are not a run (stage 1 on GPU 4
  // alone runs the six micro-batches, 18 ms).
  const Plan apart = one_layer_stages(model, topology, 6, {{0, 1, 3}, {4}});
  iteration = apart.timeline.iteration_ms;
  EXPECT_EQ(gpu_summary(apart, topology), "  g0 (" + line("stage 0", 6) + "\n  g1 (" +
                                              line("stage 0", 6) + "\n  g3 (" + line("stage 0", 6) +
                                              "\n  g4 (" + line("stage 1", 18));
}

}  // namespace
}  // namespace pipeplan::report
