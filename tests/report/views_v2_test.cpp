// The views of plans with groups (spec 8.2: tensor-parallel groups, recomputation, a sharded
// optimizer, optimizer steps), on a plan built by hand (hand_view.hpp) until the planners make
// such plans: one row or process per group named by its GPUs, the recomputation and
// tensor-parallel shares, the optimizer steps, and a ranks export that lists every GPU of a
// group and still runs without deadlock. Golden files in tests/data/exports/hand-v2.*;
// regenerate them with PIPEPLAN_REGENERATE=1 after checking that a change is intended.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "../support/examples.hpp"
#include "../support/same_json.hpp"
#include "../support/xml.hpp"
#include "hand_view.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::hand_view;
using testing::HandPlan;

fs::path data_dir() { return testing::source_dir() / "tests/data/exports"; }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Two stages of two groups of two GPUs; stage 1 recomputes; a sharded optimizer with steps.
HandPlan groups_plan() {
  HandPlan hand;
  hand.replicas = {2, 2};
  hand.degrees = {2, 2};
  hand.recompute = {false, true};
  hand.optimizer = Optimizer::kSharded;
  hand.updates = true;
  hand.micro_batches = 4;
  hand.gpus_per_node = 4;
  return hand;
}

TEST(ViewsV2Test, AV1PlanIsNoV2Plan) {
  HandPlan hand;
  EXPECT_FALSE(is_v2_plan(hand_view(hand).plan));
  hand.recompute = {false, true};
  EXPECT_TRUE(is_v2_plan(hand_view(hand).plan));
  hand = HandPlan{};
  hand.optimizer = Optimizer::kSharded;
  EXPECT_TRUE(is_v2_plan(hand_view(hand).plan));
  hand = HandPlan{};
  hand.updates = true;
  EXPECT_TRUE(is_v2_plan(hand_view(hand).plan));
}

TEST(ViewsV2Test, GoldenFiles) {
  const PlanView view = hand_view(groups_plan());
  const bool regenerate = std::getenv("PIPEPLAN_REGENERATE") != nullptr;
  for (const char* format : {"chrome-trace", "ranks", "svg"}) {
    SCOPED_TRACE(format);
    const std::string text = export_plan(view, *parse_export_format(format));
    const fs::path golden =
        data_dir() / (std::string("hand-v2.") + format + (format[0] == 's' ? "" : ".json"));
    if (regenerate) std::ofstream(golden, std::ios::binary) << text;
    if (format[0] == 's') {
      EXPECT_EQ(text, slurp(golden));
    } else {
      std::string mismatch;
      EXPECT_TRUE(testing::same_json(json::parse(text), json::parse(slurp(golden)), "", mismatch))
          << mismatch;
    }
  }
}

TEST(ViewsV2Test, ChromeTraceHasOneProcessPerGroupWithSharesAndUpdates) {
  const PlanView view = hand_view(groups_plan());
  const json trace = chrome_trace(view);
  std::map<int, std::string> processes;
  int updates = 0, recomputing = 0, allreduces = 0;
  double peak_transient = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      processes[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
    }
    if (e.at("ph") == "X" && e.at("cat") == "update") ++updates;
    if (e.at("ph") == "X" && e.at("cat") == "allreduce") ++allreduces;
    if (e.at("ph") == "X" && e.at("cat") == "backward") {
      const json& args = e.at("args");
      EXPECT_EQ(args.at("gpus").size(), 2u);
      if (args.at("recompute").get<bool>()) {
        ++recomputing;
        EXPECT_EQ(args.at("recompute_ms"), 2.0);
        EXPECT_EQ(args.at("tensor_parallel_allreduce_ms"), 2.0);
      } else {
        EXPECT_EQ(args.at("recompute_ms"), 0.0);
        EXPECT_EQ(args.at("tensor_parallel_allreduce_ms"), 1.0);
      }
    }
    if (e.at("ph") == "C") {
      peak_transient = std::max(peak_transient, e.at("args").at("transient").get<double>());
    }
  }
  EXPECT_EQ(processes,
            (std::map<int, std::string>{{1, "ranks 0-1: n0/gpu0, n0/gpu1 (stage 0, group 0)"},
                                        {3, "ranks 2-3: n0/gpu2, n0/gpu3 (stage 0, group 1)"},
                                        {5, "ranks 4-5: n1/gpu0, n1/gpu1 (stage 1, group 0)"},
                                        {7, "ranks 6-7: n1/gpu2, n1/gpu3 (stage 1, group 1)"}}));
  EXPECT_EQ(updates, 4);
  EXPECT_EQ(allreduces, 4);   // one per group
  EXPECT_EQ(recomputing, 4);  // the backwards of stage 1
  EXPECT_EQ(peak_transient, 2e6);
  EXPECT_EQ(trace.at("otherData").at("optimizer"), "sharded");
}

TEST(ViewsV2Test, SvgHasOneRowPerGroupWithSharesAndUpdates) {
  const PlanView view = hand_view(groups_plan());
  const testing::XmlElement svg = testing::parse_xml(svg_gantt(view));
  EXPECT_EQ(svg.find("rect", "idle").size(), 4u);
  std::vector<std::string> labels;
  for (const auto* e : svg.find("text", "gpu-label")) labels.push_back(e->text);
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_NE(labels[0].find("n0/gpu0,gpu1"), std::string::npos) << labels[0];
  EXPECT_NE(labels[3].find("n1/gpu2,gpu3"), std::string::npos) << labels[3];
  EXPECT_EQ(svg.find("rect", "update").size(), 4u);
  EXPECT_EQ(svg.find("rect", "recompute").size(), 4u);  // the backwards of stage 1
  EXPECT_EQ(svg.find("rect", "tp").size(), 16u);        // every task (t = 2 everywhere)
  EXPECT_EQ(svg.find("rect", "ar").size(), 4u);
  EXPECT_EQ(svg.find("rect", "legend").size(), 9u);
  std::vector<std::string> stage_labels;
  for (const auto* e : svg.find("text", "stage-label")) stage_labels.push_back(e->text);
  EXPECT_EQ(stage_labels,
            (std::vector<std::string>{"stage 0", "layers 0-1", "2 x 2 GPUs", "stage 1",
                                      "layers 2-3", "2 x 2 GPUs, recompute"}));
  // Without the group figures (a plan file read alone) there are no strips, the rest stays.
  PlanView alone = view;
  alone.group_figures.reset();
  const testing::XmlElement bare = testing::parse_xml(svg_gantt(alone));
  EXPECT_TRUE(bare.find("rect", "tp").empty());
  EXPECT_EQ(bare.find("rect", "update").size(), 4u);
}

TEST(ViewsV2Test, HtmlShowsDegreesGroupsAndTheOptimizer) {
  const std::string html = html_report(hand_view(groups_plan()));
  EXPECT_NE(html.find("<th class=\"n\">replicas x t</th><th>recompute</th>"), std::string::npos);
  EXPECT_NE(html.find("4: n0/gpu0, n0/gpu1; n0/gpu2, n0/gpu3</td><td class=\"n\">2 x 2</td>"
                      "<td>no</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td>1 (leader)</td>"), std::string::npos);
  EXPECT_NE(html.find("the optimizer is sharded among replicas"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n\">0.25 ms</td></tr>"), std::string::npos);  // update
}

// A blocking interpreter of a ranks export: compute and updates always run; a send and a
// receive run together when both ranks are at them; an AllReduce when every rank of its ring is
// at it with the same ring. Returns "" when every rank finishes.
std::string run_ranks(const json& ranks) {
  const std::size_t R = ranks.size();
  std::vector<std::size_t> next(R, 0);
  auto at = [&](std::size_t r) -> const json* {
    const json& ops = ranks[r].at("operations");
    return next[r] < ops.size() ? &ops[next[r]] : nullptr;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t r = 0; r < R; ++r) {
      const json* op = at(r);
      if (!op) continue;
      const std::string name = op->at("op").get<std::string>();
      if (name == "forward" || name == "backward" || name == "update") {
        ++next[r];
        progress = true;
      } else if (name == "send" || name == "recv") {
        const auto peer = op->at("peer").get<std::size_t>();
        const json* other = at(peer);
        if (other && other->at("op") == (name == "send" ? "recv" : "send") &&
            other->at("peer") == r && other->at("kind") == op->at("kind") &&
            other->at("micro_batch") == op->at("micro_batch")) {
          ++next[r];
          ++next[peer];
          progress = true;
        }
      } else if (name == "allreduce") {
        bool all = true;
        for (const json& member : op->at("ranks")) {
          const json* other = at(member.get<std::size_t>());
          all = all && other && other->at("op") == "allreduce" &&
                other->at("ranks") == op->at("ranks");
        }
        if (all) {
          for (const json& member : op->at("ranks")) ++next[member.get<std::size_t>()];
          progress = true;
        }
      }
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    if (at(r)) return "rank " + std::to_string(r) + " stuck at " + at(r)->dump();
  }
  return "";
}

TEST(ViewsV2Test, RanksListEveryGpuOfAGroupAndRunWithoutDeadlock) {
  const PlanView view = hand_view(groups_plan());
  const json ranks = ranks_json(view);
  ASSERT_EQ(ranks.size(), 8u);
  EXPECT_EQ(run_ranks(ranks), "");
  // The second GPU of group 1 of stage 0 (rank 3): the leader's compute, its ring, its pieces.
  const json& member = ranks[3];
  EXPECT_EQ(member.at("gpu"), "n0/gpu3");
  EXPECT_EQ(member.at("tensor_parallel_group"),
            json({{"ranks", {2, 3}}, {"gpus", {"n0/gpu2", "n0/gpu3"}}}));
  EXPECT_EQ(member.at("data_parallel_group").at("ranks"), json({1, 3}));
  auto compute_of = [](const json& entry) {
    std::vector<json> out;
    for (const json& op : entry.at("operations")) {
      if (op.at("op") == "forward" || op.at("op") == "backward") out.push_back(op);
    }
    return out;
  };
  EXPECT_EQ(compute_of(member), compute_of(ranks[2]));
  const json& first_send =
      *std::find_if(member.at("operations").begin(), member.at("operations").end(),
                    [](const json& op) { return op.at("op") == "send"; });
  EXPECT_EQ(first_send.at("peer"), 7);  // the second GPU of group 1 of stage 1
  EXPECT_EQ(member.at("operations").back(), json({{"op", "update"}}));
  EXPECT_EQ(member.at("micro_batches")[0].at("activations_to"),
            json({{"rank", 7}, {"gpu", "n1/gpu3"}}));

  // Groups of different sizes: the GPUs beyond the smaller group take no part in transfers.
  HandPlan uneven;
  uneven.replicas = {1, 1};
  uneven.degrees = {4, 2};
  const json pieces = ranks_json(hand_view(uneven));
  ASSERT_EQ(pieces.size(), 6u);
  EXPECT_EQ(run_ranks(pieces), "");
  for (std::size_t r : {2u, 3u}) {
    for (const json& op : pieces[r].at("operations")) {
      EXPECT_TRUE(op.at("op") == "forward" || op.at("op") == "backward") << r << op.dump();
    }
    EXPECT_EQ(pieces[r].at("micro_batches")[0].at("activations_to"), nullptr);
  }
}

}  // namespace
}  // namespace pipeplan::report
