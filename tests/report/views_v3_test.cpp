// The views of spec 9 plans (a split backward, stages that share GPUs), on plans built by hand
// (hand_view_v3.hpp) until the planners make them: `I` and `W` with names, categories and
// colours of their own, every stage of a device in its row (one process, one row, a shade per
// virtual stage), the GPU's stages listed wherever a GPU is named.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../support/builders.hpp"
#include "../support/xml.hpp"
#include "hand_view_v3.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/summary.hpp"

namespace pipeplan::report {
namespace {

using nlohmann::json;
using testing::hand_view_v3;
using testing::HandPlanV3;

// Two devices of two interleaved stages each (stage s on device s mod 2), a split backward.
PlanView interleaved() { return hand_view_v3(HandPlanV3{}); }

std::vector<std::string> texts(const testing::XmlElement& svg, const char* css_class) {
  std::vector<std::string> out;
  for (const auto* e : svg.find("text", css_class)) out.push_back(e->text);
  return out;
}

TEST(ViewsV3Test, RankOrderListsAGpuOnceAtItsFirstStage) {
  const PlanView view = hand_view_v3(HandPlanV3{{1, 0, 0, 1}, 2});
  EXPECT_EQ(rank_order(view), (std::vector<int>{1, 0}));
  EXPECT_EQ(stages_per_gpu(view), (std::vector<std::vector<int>>{{1, 2}, {0, 3}}));
  EXPECT_TRUE(shares_devices(view.plan));
  EXPECT_FALSE(shares_devices(hand_view_v3(HandPlanV3{{0, 1}, 2}).plan));
}

TEST(ViewsV3Test, ChromeTraceHasOneProcessPerDeviceAndIAndWEvents) {
  const PlanView view = interleaved();
  const json trace = chrome_trace(view);
  std::map<int, std::string> processes;
  std::set<std::pair<int, int>> threads;
  std::map<std::string, int> per_category;
  std::map<std::string, std::set<std::string>> colours;        // category -> cname
  std::map<int, std::vector<std::pair<double, double>>> busy;  // pid -> compute spans
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      processes[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
    }
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      EXPECT_TRUE(threads.insert({e.at("pid").get<int>(), e.at("tid").get<int>()}).second)
          << "thread named twice: " << e.dump();
    }
    if (e.at("ph") != "X" || e.at("tid") != 1) continue;
    const std::string category = e.at("cat").get<std::string>();
    ++per_category[category];
    colours[category].insert(e.at("cname").get<std::string>());
    const json& args = e.at("args");
    const int stage = args.at("stage").get<int>();
    // The event names its op, micro-batch and stage, and sits on its stage's device.
    const char letter = category == "forward" ? 'F' : category == "backward_input" ? 'I' : 'W';
    EXPECT_EQ(e.at("name"), std::string(1, letter) + " m" +
                                std::to_string(args.at("micro_batch").get<int>()) + " s" +
                                std::to_string(stage));
    EXPECT_EQ(e.at("pid"), stage % 2 + 1);
    busy[e.at("pid").get<int>()].emplace_back(e.at("ts").get<double>(),
                                              e.at("ts").get<double>() + e.at("dur").get<double>());
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{1, "rank 0: n0/gpu0 (stages 0, 2)"},
                                                   {2, "rank 1: n0/gpu1 (stages 1, 3)"}}));
  EXPECT_EQ(per_category, (std::map<std::string, int>{
                              {"forward", 16}, {"backward_input", 16}, {"backward_weight", 16}}));
  EXPECT_EQ(colours,
            (std::map<std::string, std::set<std::string>>{{"forward", {"rail_response"}},
                                                          {"backward_input", {"rail_animation"}},
                                                          {"backward_weight", {"startup"}}}));
  // A device runs its stages' tasks one at a time: its compute thread never overlaps.
  for (auto& [pid, spans] : busy) {
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) {
      EXPECT_LE(spans[k - 1].second, spans[k].first + 1e-9) << "pid " << pid;
    }
  }
  EXPECT_EQ(trace.at("otherData").at("split_backward"), true);
  EXPECT_EQ(trace.at("otherData").at("virtual_stages"), 2);
}

// Every memory sample of a device is the sum over its stages of the micro-batches stashed (from
// a forward's start to its I's end) times 4e6 and of those holding a weight stash (from the I's
// end to the W's end) times 1e6, counted here from the timeline.
TEST(ViewsV3Test, ChromeTraceMemoryCountsEveryStageAndTheWeightStash) {
  const PlanView view = interleaved();
  const json trace = chrome_trace(view);
  int samples = 0;
  double peak_weights = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "C") continue;
    const int gpu = e.at("pid").get<int>() - 1;
    const double ts = e.at("ts").get<double>();
    const auto us = [](double ms) { return std::round(ms * 1e6) / 1e3; };
    int stashed = 0, weights = 0;
    std::map<std::pair<int, int>, double> input_end;
    for (const TimedCompute& c : view.plan.timeline.compute) {
      if (c.gpu != gpu) continue;
      if (c.task.op == Op::kForward && us(c.start_ms) <= ts) ++stashed;
      if (c.task.op == Op::kBackwardInput && us(c.end_ms) <= ts) {
        --stashed;
        ++weights;
      }
      if (c.task.op == Op::kBackwardWeight && us(c.end_ms) <= ts) --weights;
    }
    const json& args = e.at("args");
    EXPECT_EQ(args.at("static"), 1.6e9);  // two stages of 8e8
    EXPECT_EQ(args.at("stash"), stashed * 4e6) << e.dump();
    EXPECT_EQ(args.at("weight_stash"), weights * 1e6) << e.dump();
    peak_weights = std::max(peak_weights, args.at("weight_stash").get<double>());
    ++samples;
  }
  EXPECT_GT(samples, 4);
  EXPECT_GT(peak_weights, 0);  // the rule is exercised

  // Without the model: the counts.
  PlanView alone = view;
  alone.memory.reset();
  const json bare = chrome_trace(alone);
  for (const json& e : bare.at("traceEvents")) {
    if (e.at("ph") != "C") continue;
    EXPECT_EQ(e.at("name"), "stashed micro-batches");
    EXPECT_TRUE(e.at("args").contains("weight_stashes")) << e.dump();
  }
}

TEST(ViewsV3Test, ChromeTraceGivesEachStageOfADeviceAThreadForItsUpdates) {
  HandPlanV3 hand;
  hand.updates = true;
  const json trace = chrome_trace(hand_view_v3(hand));
  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::string, std::pair<int, int>> updates;  // name -> pid, tid
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      threads[{e.at("pid").get<int>(), e.at("tid").get<int>()}] =
          e.at("args").at("name").get<std::string>();
    }
    if (e.at("ph") == "X" && e.at("cat") == "update") {
      updates[e.at("name").get<std::string>()] = {e.at("pid").get<int>(), e.at("tid").get<int>()};
    }
  }
  ASSERT_EQ(updates.size(), 4u);
  for (const auto& [name, place] : updates) {
    EXPECT_EQ(threads.at(place), "stage " + name.substr(3)) << name;  // `U s2` on `stage 2`
  }
}

TEST(ViewsV3Test, SvgDrawsIAndWAndEveryStageOfADevice) {
  const PlanView view = interleaved();
  const testing::XmlElement svg = testing::parse_xml(svg_gantt(view));
  EXPECT_EQ(texts(svg, "legend"),
            (std::vector<std::string>{"forward", "input gradient (I)", "weight gradient (W)",
                                      "AllReduce", "activation send", "gradient send", "idle",
                                      "virtual stage 0", "virtual stage 1"}));
  EXPECT_EQ(svg.find("rect", "idle").size(), 2u);  // one row per device
  EXPECT_EQ(svg.find("rect", "fwd").size(), 16u);
  EXPECT_EQ(svg.find("rect", "bwd-input").size(), 16u);
  EXPECT_EQ(svg.find("rect", "bwd-weight").size(), 16u);
  EXPECT_TRUE(svg.find("rect", "bwd").empty());
  EXPECT_EQ(texts(svg, "gpu-label"),
            (std::vector<std::string>{"n0/gpu0 (s0,2)", "n0/gpu1 (s1,3)"}));
  EXPECT_EQ(texts(svg, "stage-label"),
            (std::vector<std::string>{"stages 0, 2", "layers 0-1, 4-5", "stages 1, 3",
                                      "layers 2-3, 6-7"}));
  const std::vector<std::string> details = texts(svg, "details");
  ASSERT_EQ(details.size(), 1u);
  EXPECT_NE(details[0].find("4 stages on 2 of 2 GPUs (up to 2 stages per device), split backward"),
            std::string::npos)
      << details[0];
  // The fill of each kind per virtual stage: one colour each, all six different, the first
  // stage of a device in the kind's own colour.
  std::map<std::pair<std::string, int>, std::set<std::string>> fills;  // (class, slot) -> fill
  for (const char* css_class : {"fwd", "bwd-input", "bwd-weight"}) {
    for (const auto* e : svg.find("rect", css_class)) {
      ASSERT_FALSE(e->children.empty());
      const std::string title = e->children.front().text;  // `I m0 s2 on n0/gpu0: ...`
      const int stage = title[title.find(" s") + 2] - '0';
      fills[{css_class, stage / 2}].insert(e->attributes.at("fill"));
    }
  }
  std::set<std::string> all;
  for (const auto& [key, colours] : fills) {
    EXPECT_EQ(colours.size(), 1u) << key.first << " " << key.second;
    all.insert(*colours.begin());
  }
  EXPECT_EQ(all.size(), 6u);
  auto first = [&](const char* css_class) { return *fills[{css_class, 0}].begin(); };
  EXPECT_EQ(first("fwd"), "#4c78a8");
  EXPECT_EQ(first("bwd-input"), "#e45756");
  EXPECT_EQ(first("bwd-weight"), "#eeca3b");
}

TEST(ViewsV3Test, SvgOfASharedDeviceWithoutASplitDrawsBackwards) {
  HandPlanV3 hand;
  hand.split_backward = false;
  const testing::XmlElement svg = testing::parse_xml(svg_gantt(hand_view_v3(hand)));
  EXPECT_EQ(
      texts(svg, "legend"),
      (std::vector<std::string>{"forward", "backward", "AllReduce", "activation send",
                                "gradient send", "idle", "virtual stage 0", "virtual stage 1"}));
  EXPECT_EQ(svg.find("rect", "bwd").size(), 16u);
  // A split backward alone: no shades, no virtual stages in the legend.
  HandPlanV3 split;
  split.device_of = {0, 1};
  const testing::XmlElement plain = testing::parse_xml(svg_gantt(hand_view_v3(split)));
  EXPECT_EQ(texts(plain, "legend"),
            (std::vector<std::string>{"forward", "input gradient (I)", "weight gradient (W)",
                                      "AllReduce", "activation send", "gradient send", "idle"}));
  EXPECT_EQ(texts(plain, "gpu-label"), (std::vector<std::string>{"n0/gpu0", "n0/gpu1"}));
}

TEST(ViewsV3Test, SvgLegendWrapsAboveThePlot) {
  HandPlanV3 hand;
  hand.updates = true;  // the optimizer's entries too
  hand.device_of = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  hand.devices = 4;
  const testing::XmlElement svg = testing::parse_xml(svg_gantt(hand_view_v3(hand)));
  std::set<std::string> lines;
  double right = 0;
  for (const auto* e : svg.find("text", "legend")) {
    lines.insert(e->attributes.at("y"));
    right = std::max(right, std::stod(e->attributes.at("x")) + 7.0 * e->text.size());
  }
  EXPECT_EQ(lines.size(), 2u);
  EXPECT_LE(right, 1200);
  // The rows start below the last legend line.
  double legend_bottom = 0, first_row = 1e9;
  for (const auto* e : svg.find("rect", "legend")) {
    legend_bottom = std::max(legend_bottom, std::stod(e->attributes.at("y")) + 12);
  }
  for (const auto* e : svg.find("rect", "idle")) {
    first_row = std::min(first_row, std::stod(e->attributes.at("y")));
  }
  EXPECT_GT(first_row, legend_bottom + 8);
}

TEST(ViewsV3Test, HtmlListsEveryStageOfAGpuAndBusyTimeWithIAndW) {
  const PlanView view = interleaved();
  const std::string html = html_report(view);
  EXPECT_NE(html.find("<th class=\"n\">stages</th>"), std::string::npos);
  for (int g = 0; g < 2; ++g) {
    double busy = 0;  // every F, I and W of the device
    for (const TimedCompute& e : view.plan.timeline.compute) {
      if (e.gpu == g) busy += e.end_ms - e.start_ms;
    }
    EXPECT_EQ(busy, 2 * 4 * (2 + 3 + 1));
    const std::string row = "<td>n0/gpu" + std::to_string(g) + "</td><td class=\"n\">" +
                            (g == 0 ? "0, 2" : "1, 3") + "</td><td class=\"n\">" +
                            io::format_ms(busy) + "</td>";
    EXPECT_NE(html.find(row), std::string::npos) << row;
  }
  EXPECT_NE(html.find("input-gradient half I and its weight-gradient half W"), std::string::npos);
  EXPECT_NE(html.find("up to 2 stages per device"), std::string::npos);
}

TEST(ViewsV3Test, SummariesListEveryStageOfAGpu) {
  const PlanView view = interleaved();
  const topology::Topology topology = testing::uniform_topology(2, 1e9, 0);
  const std::string text = gpu_summary(view.plan, topology);
  const double busy = 2 * 4 * (2 + 3 + 1);  // F, I and W of two stages
  EXPECT_EQ(text.find("  g0 (stages 0 and 2): busy " + io::format_ms(busy) + ", bubble "), 0u)
      << text;
  EXPECT_NE(text.find("\n  g1 (stages 1 and 3): busy " + io::format_ms(busy) + ", bubble "),
            std::string::npos)
      << text;
  const nlohmann::ordered_json figures = simulation_figures(view.plan, topology);
  EXPECT_EQ(figures.at("gpus")[0].at("stages"), json({0, 2}));
  EXPECT_FALSE(figures.at("gpus")[0].contains("stage"));
  // One stage per GPU: as before.
  const PlanView plain = hand_view_v3(HandPlanV3{{0, 1}, 2});
  EXPECT_EQ(gpu_summary(plain.plan, topology).find("  g0 (stage 0): busy "), 0u);
  EXPECT_EQ(simulation_figures(plain.plan, topology).at("gpus")[1].at("stage"), 1);
}

}  // namespace
}  // namespace pipeplan::report
