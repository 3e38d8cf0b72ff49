// The export writers on a small plan (tests/data/exports/toy.*): golden files for the JSON
// formats, structure for the SVG and HTML, the Chrome trace against the Trace Event Format's
// rules, and the plan-only reader's checks.

#include "pipeplan/report/export.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "../../src/report/export_util.hpp"
#include "../support/same_json.hpp"
#include "../support/xml.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path data_dir() { return fs::path(PIPEPLAN_SOURCE_DIR) / "tests/data/exports"; }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

io::Source load(const std::string& name) {
  return io::source_from_text(name, slurp(data_dir() / name));
}

struct Toy {
  model::Model model;
  topology::Topology topology;
  PlanView view;
};

// The toy plan checked against its model and topology: 2 stages of 2 GPUs, 6 micro-batches.
const Toy& toy() {
  static const Toy kToy = [] {
    Toy t;
    t.model = model::read_model(load("toy.model.json"));
    t.topology = topology::read_topology(load("toy.topo.json"));
    const Plan plan =
        simulate::check_plan(read_plan(load("toy.plan.json"), t.topology), t.model, t.topology);
    t.view = make_view(plan, t.model, t.topology, "toy.model.json");
    return t;
  }();
  return kToy;
}

PlanView plan_only() { return read_plan_view(load("toy.plan.json")); }

// Regenerate with: pipeplan export tests/data/exports/toy.plan.json --format F
//   --model tests/data/exports/toy.model.json --topology tests/data/exports/toy.topo.json
//   -o tests/data/exports/toy.F.json  (after checking the change is intended).
TEST(ExportTest, JsonFormatsMatchTheirGoldenFiles) {
  for (const char* name : {"chrome-trace", "ranks", "torch-split"}) {
    SCOPED_TRACE(name);
    const std::string text = export_plan(toy().view, *parse_export_format(name));
    const json golden = json::parse(slurp(data_dir() / (std::string("toy.") + name + ".json")));
    std::string mismatch;
    EXPECT_TRUE(testing::same_json(json::parse(text), golden, "", mismatch)) << mismatch;
  }
}

TEST(ExportTest, OutputIsDeterministic) {
  for (const std::string& name : export_format_names()) {
    const ExportFormat format = *parse_export_format(name);
    EXPECT_EQ(export_plan(toy().view, format), export_plan(toy().view, format)) << name;
  }
}

TEST(ExportTest, FormatNamesRoundTrip) {
  for (const std::string& name : export_format_names()) {
    EXPECT_TRUE(parse_export_format(name).has_value()) << name;
  }
  EXPECT_FALSE(parse_export_format("pdf").has_value());
  EXPECT_TRUE(export_needs_model(ExportFormat::kRanks));
  EXPECT_TRUE(export_needs_model(ExportFormat::kTorchSplit));
  EXPECT_FALSE(export_needs_model(ExportFormat::kHtml));
}

// `F m3 s1` or `B m3 s1`.
bool is_compute_name(const std::string& name) {
  std::size_t at = 0;
  auto number = [&] {
    const std::size_t begin = at;
    while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at]))) ++at;
    return at > begin;
  };
  if (name.size() < 6 || (name[0] != 'F' && name[0] != 'B') || name.compare(1, 2, " m") != 0) {
    return false;
  }
  at = 3;
  if (!number() || name.compare(at, 2, " s") != 0) return false;
  at += 2;
  return number() && at == name.size();
}

// The rules of the Trace Event Format that Perfetto and chrome://tracing rely on; returns the
// first broken rule, or "".
std::string trace_violation(const json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace.at("traceEvents").is_array()) {
    return "no traceEvents array";
  }
  if (trace.value("displayTimeUnit", "") != "ms") return "displayTimeUnit is not ms";
  std::set<int> processes_named;
  std::set<std::pair<int, int>> threads_named, threads_used;
  std::set<int> processes_used;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const json& e : trace.at("traceEvents")) {
    const std::string where = e.dump();
    for (const char* key : {"name", "ph", "pid", "tid", "ts"}) {
      if (!e.contains(key)) return std::string("missing ") + key + ": " + where;
    }
    if (!e.at("name").is_string() || !e.at("ph").is_string() || !e.at("pid").is_number_integer() ||
        !e.at("tid").is_number_integer() || !e.at("ts").is_number()) {
      return "wrong types: " + where;
    }
    if (e.at("ts").get<double>() < 0) return "negative ts: " + where;
    const std::string ph = e.at("ph").get<std::string>();
    const int pid = e.at("pid").get<int>(), tid = e.at("tid").get<int>();
    if (ph == "M") {
      const std::string name = e.at("name").get<std::string>();
      if (!e.contains("args") || !e.at("args").is_object()) {
        return "metadata without args: " + where;
      }
      if (name == "process_name") processes_named.insert(pid);
      if (name == "thread_name") threads_named.insert({pid, tid});
      continue;
    }
    processes_used.insert(pid);
    if (ph == "X") {
      if (!e.contains("dur") || !e.at("dur").is_number()) {
        return "complete event without dur: " + where;
      }
      if (e.at("dur").get<double>() < 0) return "negative dur: " + where;
      const std::string category = e.value("cat", "");
      if ((category == "forward" || category == "backward") &&
          !is_compute_name(e.at("name").get<std::string>())) {
        return "compute name not like 'F m3 s1': " + where;
      }
      threads_used.insert({pid, tid});
      spans[{pid, tid}].emplace_back(e.at("ts").get<double>(),
                                     e.at("ts").get<double>() + e.at("dur").get<double>());
    } else if (ph == "C") {
      if (!e.contains("args") || !e.at("args").is_object() || e.at("args").empty()) {
        return "counter without args: " + where;
      }
      for (const auto& [key, value] : e.at("args").items()) {
        if (!value.is_number()) return "counter value not a number: " + where;
      }
    } else {
      return "unexpected phase " + ph;
    }
  }
  for (int pid : processes_used) {
    if (!processes_named.count(pid)) {
      return "process " + std::to_string(pid) + " has no process_name";
    }
  }
  for (const auto& thread : threads_used) {
    if (!threads_named.count(thread)) {
      return "thread " + std::to_string(thread.second) + " of process " +
             std::to_string(thread.first) + " has no thread_name";
    }
  }
  // Complete events on one thread must not overlap, or the viewers misdraw them.
  for (auto& [thread, list] : spans) {
    std::sort(list.begin(), list.end());
    for (std::size_t k = 1; k < list.size(); ++k) {
      if (list[k].first < list[k - 1].second - 1e-3) {
        return "overlapping events on thread " + std::to_string(thread.second) + " of process " +
               std::to_string(thread.first);
      }
    }
  }
  return "";
}

TEST(ChromeTraceTest, FollowsTheTraceEventFormat) {
  EXPECT_EQ(trace_violation(chrome_trace(toy().view)), "");
  EXPECT_EQ(trace_violation(chrome_trace(plan_only())), "");
  // And on a larger real plan: BERT-24 on the PCIe server.
  const fs::path examples = fs::path(PIPEPLAN_SOURCE_DIR) / "examples";
  const model::Model model =
      model::read_model(io::source_from_text("m", slurp(examples / "models/bert-24.json")));
  const topology::Topology topology = topology::read_topology(
      io::source_from_text("t", slurp(examples / "topologies/two-node-nvlink-ib.json")));
  const Plan plan =
      planners::make_plan("spp", {model, topology, static_cast<int>(*model.micro_batches)});
  EXPECT_EQ(trace_violation(chrome_trace(make_view(plan, model, topology))), "");
}

TEST(ChromeTraceTest, TextHasOneEventPerLine) {
  // The writer streams its events as text; the layout is the one every other export uses
  // (objects and arrays opened up to depth 2, compact below), so parsing and dumping the trace
  // that way gives the same bytes.
  const auto with_model = toy();
  const PlanView without_model = plan_only();
  for (const PlanView* view : {&with_model.view, &without_model}) {
    const std::string text = chrome_trace_text(*view);
    EXPECT_EQ(text, report::detail::dump_compact_below(nlohmann::ordered_json::parse(text), 2));
    EXPECT_EQ(text.rfind("{\n \"traceEvents\": [\n  {\"name\":", 0), 0U) << text.substr(0, 80);
    EXPECT_EQ(text.back(), '\n');
  }
}

TEST(ChromeTraceTest, ValidatorSeesBrokenTraces) {
  json trace = chrome_trace(toy().view);
  json broken = trace;
  broken["traceEvents"].push_back(
      {{"name", "x"}, {"ph", "X"}, {"pid", 99}, {"tid", 1}, {"ts", 0}, {"dur", 1}});
  EXPECT_EQ(trace_violation(broken), "process 99 has no process_name");
  broken = trace;
  broken["traceEvents"].push_back(
      {{"name", "x"}, {"ph", "X"}, {"pid", 1}, {"tid", 77}, {"ts", 0}, {"dur", 1}});
  EXPECT_EQ(trace_violation(broken), "thread 77 of process 1 has no thread_name");
  broken = trace;
  broken["traceEvents"].push_back(
      {{"name", "x"}, {"ph", "X"}, {"pid", 1}, {"tid", 1}, {"ts", 0}, {"dur", -1}});
  EXPECT_NE(trace_violation(broken).find("negative dur"), std::string::npos);
  broken = trace;
  broken["traceEvents"].push_back({{"name", "F m3"},
                                   {"cat", "forward"},
                                   {"ph", "X"},
                                   {"pid", 1},
                                   {"tid", 1},
                                   {"ts", 1e9},
                                   {"dur", 1}});
  EXPECT_NE(trace_violation(broken).find("compute name not like"), std::string::npos);
  broken = trace;
  broken["traceEvents"].push_back(
      {{"name", "x"}, {"ph", "X"}, {"pid", 1}, {"tid", 1}, {"ts", 100}, {"dur", 5000}});
  EXPECT_EQ(trace_violation(broken), "overlapping events on thread 1 of process 1");
}

TEST(ChromeTraceTest, HasEveryTaskAndAMemoryCounterThatPeaksAtThePlansPeak) {
  const PlanView& view = toy().view;
  const json trace = chrome_trace(view);
  std::size_t compute = 0, sends = 0, allreduces = 0;
  std::map<int, double> peak;  // per pid: static + stash
  for (const json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph").get<std::string>();
    if (ph == "X") {
      const std::string category = e.at("cat").get<std::string>();
      if (category == "forward" || category == "backward") ++compute;
      if (category == "activation" || category == "gradient") ++sends;
      if (category == "allreduce") ++allreduces;
      if (category == "activation") {
        for (const char* key : {"micro_batch", "stage", "bytes", "from", "to", "peer"}) {
          EXPECT_TRUE(e.at("args").contains(key)) << key;
        }
      }
    } else if (ph == "C") {
      EXPECT_EQ(e.at("name"), "memory (bytes)");
      const double total =
          e.at("args").at("static").get<double>() + e.at("args").at("stash").get<double>();
      peak[e.at("pid").get<int>()] = std::max(peak[e.at("pid").get<int>()], total);
    }
  }
  EXPECT_EQ(compute, 2u * 2u * 6u);
  EXPECT_EQ(sends, 2u * view.plan.timeline.transfers.size());  // once as send, once as receive
  EXPECT_EQ(allreduces, 4u);
  const std::vector<int> ranks = rank_order(view);
  ASSERT_EQ(peak.size(), ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_DOUBLE_EQ(peak[static_cast<int>(r) + 1],
                     view.plan.timeline.gpus[static_cast<std::size_t>(ranks[r])].peak_memory_bytes)
        << "rank " << r;
  }
}

TEST(ChromeTraceTest, WithoutTheModelCountsMicroBatchesInFlight) {
  const json with_model = chrome_trace(toy().view);
  const json without = chrome_trace(plan_only());
  ASSERT_EQ(with_model.at("traceEvents").size(), without.at("traceEvents").size());
  for (std::size_t i = 0; i < without.at("traceEvents").size(); ++i) {
    const json& a = with_model.at("traceEvents")[i];
    const json& b = without.at("traceEvents")[i];
    if (a.at("ph") != "C") {
      EXPECT_EQ(a, b) << i;
    } else {
      EXPECT_EQ(b.at("name"), "stashed micro-batches");
      EXPECT_EQ(a.at("ts"), b.at("ts"));
    }
  }
}

TEST(SvgTest, IsWellFormedAndDrawsEveryTask) {
  const PlanView& view = toy().view;
  const std::string text = export_plan(view, ExportFormat::kSvg);
  EXPECT_EQ(text.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u);
  const testing::XmlElement svg = testing::parse_xml(text);
  EXPECT_EQ(svg.name, "svg");
  EXPECT_EQ(svg.attribute("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(svg.attribute("width"), "1200");
  EXPECT_EQ(svg.find("rect", "fwd").size(), 12u);
  EXPECT_EQ(svg.find("rect", "bwd").size(), 12u);
  EXPECT_EQ(svg.find("rect", "ar").size(), 4u);
  EXPECT_EQ(svg.find("rect", "act").size() + svg.find("rect", "grad").size(),
            view.plan.timeline.transfers.size());
  EXPECT_EQ(svg.find("rect", "idle").size(), 4u);
  EXPECT_EQ(svg.find("rect", "legend").size(), 6u);

  std::vector<std::string> gpu_labels, stage_labels, ticks;
  for (const auto* e : svg.find("text", "gpu-label")) gpu_labels.push_back(e->text);
  for (const auto* e : svg.find("text", "stage-label")) stage_labels.push_back(e->text);
  for (const auto* e : svg.find("text", "tick")) ticks.push_back(e->text);
  EXPECT_EQ(gpu_labels, (std::vector<std::string>{"n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"}));
  EXPECT_EQ(stage_labels,
            (std::vector<std::string>{"stage 0", "layers 0-1", "stage 1", "layers 2-3"}));
  EXPECT_EQ(ticks, (std::vector<std::string>{"0", "10", "20", "30", "40", "50", "60", "70", "80"}));
  // Every micro-batch labelled twice (forward and backward) on this roomy chart.
  std::multiset<std::string> labels;
  for (const auto* e : svg.find("text", "mb")) labels.insert(e->text);
  for (int m = 0; m < 6; ++m) EXPECT_EQ(labels.count(std::to_string(m)), 4u) << m;

  ASSERT_EQ(svg.find("text", "title").size(), 1u);
  EXPECT_EQ(svg.find("text", "title")[0]->text, "toy on pair of pairs");
  EXPECT_EQ(
      svg.find("text", "subtitle")[0]->text,
      "iteration 89.43 ms, 1x the partition bound (89.43 ms), 1.32x the any-plan bound (67.5 ms)");
  ASSERT_EQ(svg.find("title").size() > 0, true);
  EXPECT_EQ(svg.children[0].name, "title");
  EXPECT_EQ(svg.find("text", "axis-title")[0]->text, "time (ms)");
}

TEST(SvgTest, IsTheSameFromThePlanAlone) {
  EXPECT_EQ(svg_gantt(plan_only()), svg_gantt(toy().view));
}

TEST(SvgTest, EscapesNamesAndStaysWellFormed) {
  PlanView view = toy().view;
  view.model_name = "a <b> & \"c\"";
  view.gpu_ids[0] = "x<y>&'z'";
  const testing::XmlElement svg = testing::parse_xml(svg_gantt(view));
  EXPECT_EQ(svg.find("text", "title")[0]->text, "a <b> & \"c\" on pair of pairs");
  EXPECT_EQ(svg.find("text", "gpu-label")[0]->text, "x<y>&'z'");
}

// Plans with one stage per GPU on `n` GPUs, to see how the chart scales.
PlanView chain_view(int n) {
  model::Model model;
  model.name = "chain";
  for (int l = 0; l < n; ++l) {
    model::Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.forward_ms = 1;
    layer.backward_ms = 2;
    layer.activation_bytes = 1e6;
    layer.stash_bytes = 1e6;
    model.layers.push_back(layer);
  }
  std::vector<topology::Gpu> gpus;
  std::vector<topology::Link> links;
  for (int g = 0; g < n; ++g) {
    gpus.push_back({"gpu" + std::to_string(g), "node" + std::to_string(g), 1.0, std::nullopt});
    if (g > 0) links.push_back({g - 1, g, 1e10, 0.01});
  }
  const topology::Topology topology = topology::Topology::build("line", gpus, links, "test");
  const Plan plan = planners::make_plan("gpipe", {model, topology, 8});
  return make_view(plan, model, topology);
}

TEST(SvgTest, ThinsOutLabelsOnLargePlans) {
  for (int n : {8, 64, 160}) {
    SCOPED_TRACE(n);
    const testing::XmlElement svg = testing::parse_xml(svg_gantt(chain_view(n)));
    EXPECT_EQ(svg.find("rect", "fwd").size(), static_cast<std::size_t>(8 * n));
    // Every text legible, GPU labels never closer than their size.
    for (const auto* text : svg.find("text")) {
      EXPECT_GE(std::stoi(text->attribute("font-size")), 7) << text->text;
    }
    const auto labels = svg.find("text", "gpu-label");
    EXPECT_GE(labels.size(), std::min<std::size_t>(static_cast<std::size_t>(n), 50));
    for (std::size_t k = 1; k < labels.size(); ++k) {
      EXPECT_GE(std::stod(labels[k]->attribute("y")) - std::stod(labels[k - 1]->attribute("y")),
                std::stod(labels[k]->attribute("font-size")));
    }
    // Micro-batch labels only where rows are tall enough.
    if (n > 64) {
      EXPECT_TRUE(svg.find("text", "mb").empty());
    }
  }
}

TEST(HtmlTest, IsOneSelfContainedPage) {
  const PlanView& view = toy().view;
  const std::string html = export_plan(view, ExportFormat::kHtml);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  for (const char* external :
       {"<script", "src=", "href=", "url(", "@import", "@font-face", "<link", "https:"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
  // The only "http" is the SVG namespace name, which is never fetched.
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("http://", html.find("http://") + 1), std::string::npos);
  // The chart is the SVG export, embedded as well-formed XML.
  const auto begin = html.find("<svg "), end = html.find("</svg>");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(html.find("<svg ", begin + 1), std::string::npos);
  EXPECT_EQ(html.substr(begin, end + 6 - begin) + "\n", svg_gantt(view));
  // Tables: a header and a row per stage; a header and a row per GPU.
  auto count = [&](const std::string& needle, std::size_t from, std::size_t to) {
    std::size_t n = 0;
    for (auto at = html.find(needle, from); at < to; at = html.find(needle, at + 1)) ++n;
    return n;
  };
  const auto stages = html.find("<table class=\"stages\">"),
             gpus = html.find("<table class=\"gpus\">");
  ASSERT_NE(stages, std::string::npos);
  ASSERT_NE(gpus, std::string::npos);
  EXPECT_EQ(count("<tr>", stages, gpus), 3u);
  EXPECT_EQ(count("<tr", gpus, html.size()), 5u);
  EXPECT_NE(html.find("<h1>toy on pair of pairs</h1>"), std::string::npos);
  EXPECT_NE(html.find("0-1 (embed .. block1)"), std::string::npos);
  EXPECT_NE(html.find("2.014 ms"), std::string::npos);   // stage 0's AllReduce
  EXPECT_NE(html.find("1.907 MiB"), std::string::npos);  // stage 0's boundary
  EXPECT_NE(html.find("783.9 MiB"), std::string::npos);  // stage 0's peak memory
  EXPECT_NE(html.find("4.78%"), std::string::npos);      // of 16 GiB
  EXPECT_NE(html.find("80.5%"), std::string::npos);      // utilisation of stage 0's GPUs
}

TEST(HtmlTest, ListsUnusedGpusLast) {
  PlanView view = toy().view;
  view.gpu_ids.push_back("spare");
  view.memory_bytes.push_back(std::nullopt);
  view.plan.timeline.gpus.emplace_back();
  const std::string html = html_report(view);
  EXPECT_NE(
      html.find(
          "<tr class=\"unused\"><td class=\"n\">-</td><td>spare</td><td class=\"n\">unused</td>"),
      std::string::npos);
}

TEST(TorchSplitTest, NamesTheLayerThatBeginsEachStage) {
  const json split = torch_split_json(toy().view);
  EXPECT_EQ(split.at("split_points"), json::array({"block2"}));
  EXPECT_EQ(split.at("split_spec"), json({{"block2", "BEGINNING"}}));
  EXPECT_EQ(split.at("num_stages"), 2);
}

TEST(TorchSplitTest, NeedsNamesForTheLayersThatBeginStages) {
  PlanView view = toy().view;
  (*view.layer_names)[2].clear();
  try {
    (void)torch_split_json(view);
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "toy.model.json: /layers/2: has no \"name\"; torch-split needs the name of the "
                 "layer that begins "
                 "each stage after the first (layer 2 begins stage 1)");
  }
  // Names inside stages are not needed.
  (*view.layer_names)[2] = "block2";
  (*view.layer_names)[1].clear();
  EXPECT_NO_THROW((void)torch_split_json(view));
  try {
    (void)torch_split_json(plan_only());
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "model: torch-split needs the model's layer names, and no model was given");
  }
}

// The plan-only reader: a mutation of the toy plan and the one-line error it must give.
struct Broken {
  const char* what;
  std::function<void(json&)> mutate;
  const char* message;
};

TEST(PlanViewTest, ReadsThePlanAloneLikeTheCheckedOne) {
  const PlanView alone = plan_only();
  const PlanView& checked = toy().view;
  EXPECT_EQ(alone.gpu_ids, checked.gpu_ids);
  EXPECT_EQ(alone.memory_bytes, checked.memory_bytes);
  EXPECT_EQ(alone.model_name, "toy");
  EXPECT_FALSE(alone.layer_names.has_value());
  EXPECT_FALSE(alone.memory.has_value());
  ASSERT_EQ(alone.plan.timeline.compute.size(), checked.plan.timeline.compute.size());
  for (std::size_t i = 0; i < alone.plan.timeline.compute.size(); ++i) {
    EXPECT_EQ(alone.plan.timeline.compute[i].task, checked.plan.timeline.compute[i].task) << i;
    EXPECT_EQ(alone.plan.timeline.compute[i].gpu, checked.plan.timeline.compute[i].gpu) << i;
  }
  EXPECT_EQ(alone.plan.schedule.gpu_order, checked.plan.schedule.gpu_order);
  EXPECT_EQ(alone.plan.schedule.channel_order, checked.plan.schedule.channel_order);
  for (std::size_t g = 0; g < alone.gpu_ids.size(); ++g) {
    EXPECT_DOUBLE_EQ(alone.plan.timeline.gpus[g].busy_ms, checked.plan.timeline.gpus[g].busy_ms);
  }
}

TEST(PlanViewTest, RejectsBrokenPlansWithOneLine) {
  const json plan = json::parse(slurp(data_dir() / "toy.plan.json"));
  auto find = [](json& list, const std::function<bool(const json&)>& match) -> json& {
    for (json& e : list) {
      if (match(e)) return e;
    }
    throw std::logic_error("no such entry");
  };
  auto compute = [&](json& p, const char* op, int stage, int m) -> json& {
    return find(p["schedule"]["compute"], [&](const json& e) {
      return e["op"] == op && e["stage"] == stage && e["micro_batch"] == m;
    });
  };
  const std::vector<Broken> cases = {
      {"not JSON", [](json& p) { p = "x"; }, "toy.plan.json: must be an object, got string"},
      {"no GPU list", [](json& p) { p.erase("gpus"); },
       "toy.plan.json: missing required key \"gpus\""},
      {"GPU listed twice", [](json& p) { p["gpus"][1]["id"] = "n0/gpu0"; },
       "toy.plan.json: /gpus/1/id: GPU \"n0/gpu0\" is listed twice"},
      {"unknown GPU", [](json& p) { p["stages"][0]["gpus"][0] = "ghost"; },
       "toy.plan.json: /stages/0/gpus/0: unknown GPU \"ghost\" (not in /gpus)"},
      {"gap between stages", [](json& p) { p["stages"][1]["first_layer"] = 3; },
       "toy.plan.json: /stages/1/first_layer: must be 2, the layer after the last of stage 0"},
      {"GPU in two stages", [](json& p) { p["stages"][1]["gpus"][0] = "n0/gpu0"; },
       "toy.plan.json: /stages/1/gpus/0: GPU \"n0/gpu0\" already serves stage 0"},
      {"no stage figures",
       [](json& p) {
         for (const char* key :
              {"forward_ms", "backward_ms", "parameter_bytes", "boundary_bytes", "allreduce_ms"}) {
           p["stages"][1].erase(key);
         }
       },
       "toy.plan.json: /stages/1: missing required key \"forward_ms\" (needed without --model)"},
      {"negative figure", [](json& p) { p["stages"][0]["forward_ms"] = -1; },
       "toy.plan.json: /stages/0/forward_ms: must be >= 0, got -1"},
      {"task on a GPU of another stage",
       [&](json& p) { compute(p, "forward", 0, 0)["gpu"] = "n1/gpu0"; },
       "toy.plan.json: /schedule/compute/0/gpu: GPU \"n1/gpu0\" does not serve stage 0"},
      {"task missing", [](json& p) { p["schedule"]["compute"].erase(3); },
       "toy.plan.json: /schedule/compute: lists 23 tasks but 2 stages and 6 micro-batches make 24 "
       "(a forward and "
       "a backward each)"},
      {"micro-batch out of range", [](json& p) { p["schedule"]["compute"][0]["micro_batch"] = 6; },
       "toy.plan.json: /schedule/compute/0/micro_batch: must be < micro_batches (6)"},
      {"ends before it starts", [](json& p) { p["schedule"]["compute"][0]["end_ms"] = -0.5; },
       "toy.plan.json: /schedule/compute/0/end_ms: forward of micro-batch 0 on stage 0 ends at "
       "-0.5 ms, before "
       "it starts at 0 ms"},
      {"transfer from the wrong GPU",
       [](json& p) { p["schedule"]["transfers"][0]["from"] = "n0/gpu1"; },
       "toy.plan.json: /schedule/transfers/0/from: activation transfer of micro-batch 0 from stage "
       "0 to stage 1 "
       "must leave from GPU \"n0/gpu0\", which runs micro-batch 0 on stage 0"},
      {"overlap on a GPU", [&](json& p) { compute(p, "forward", 0, 2)["start_ms"] = 3; },
       "toy.plan.json: /schedule/compute/2: forward of micro-batch 2 on stage 0 starts at 3 ms on "
       "GPU "
       "\"n0/gpu0\" while forward of micro-batch 0 on stage 0 runs there until 8 ms"},
      {"dependency",
       [&](json& p) {
         json& e = compute(p, "forward", 1, 0);
         e["start_ms"] = 7;
         e["end_ms"] = 7 + 3.5;
       },
       "toy.plan.json: /schedule/compute/4: forward of micro-batch 0 on stage 1 starts at 7 ms "
       "before "
       "activation transfer of micro-batch 0 from stage 0 to stage 1 ends at 8.21 ms"},
      {"AllReduce missing", [](json& p) { p["schedule"]["allreduces"].erase(1); },
       "toy.plan.json: /schedule/allreduces: the AllReduce of stage 1 is missing"},
      {"iteration too long", [](json& p) { p["iteration_ms"] = 100; },
       "toy.plan.json: /iteration_ms: states 100 ms but the last task ends at 89.434 ms"},
      {"GPU's stage", [](json& p) { p["gpus"][0]["stage"] = 1; },
       "toy.plan.json: /gpus/0/stage: GPU \"n0/gpu0\" serves stage 0"},
  };
  for (const Broken& c : cases) {
    SCOPED_TRACE(c.what);
    json copy = plan;
    c.mutate(copy);
    try {
      (void)read_plan_view(io::source_from_text("toy.plan.json", copy.dump(1)));
      ADD_FAILURE() << "no error";
    } catch (const InputError& error) {
      EXPECT_EQ(error.code(), ExitCode::kInvalidInput);
      EXPECT_STREQ(error.what(), c.message);
    }
  }
}

// Random damage to the plan: either a one-line input error or exports that work. Fixed seed.
TEST(PlanViewTest, NeverCrashesOnDamagedPlans) {
  const json plan = json::parse(slurp(data_dir() / "toy.plan.json"));
  std::mt19937 random(20240611);
  const json values[] = {json(-1),        json(0),       json(1e300),   json(2.5),      json(7),
                         json("n1/gpu1"), json(nullptr), json::array(), json::object(), json(true)};
  int accepted = 0;
  for (int trial = 0; trial < 400; ++trial) {
    json copy = plan;
    // Walk to a random value and replace or delete it.
    json* at = &copy;
    json* parent = nullptr;
    std::string key;
    std::size_t index = 0;
    while ((at->is_object() || at->is_array()) && !at->empty() && random() % 4 != 0) {
      parent = at;
      if (at->is_object()) {
        auto it = at->begin();
        std::advance(it, static_cast<long>(random() % at->size()));
        key = it.key();
        at = &*it;
      } else {
        key.clear();
        index = random() % at->size();
        at = &(*at)[index];
      }
    }
    if (parent && random() % 5 == 0) {
      if (parent->is_object()) {
        parent->erase(key);
      } else {
        parent->erase(index);
      }
    } else {
      *at = values[random() % std::size(values)];
    }
    try {
      const PlanView view = read_plan_view(io::source_from_text("damaged.json", copy.dump()));
      ++accepted;
      for (ExportFormat format :
           {ExportFormat::kChromeTrace, ExportFormat::kSvg, ExportFormat::kHtml}) {
        EXPECT_NO_THROW((void)export_plan(view, format));
      }
    } catch (const InputError& error) {
      EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos);
    }
  }
  EXPECT_GT(accepted, 0);  // some damage is harmless (a planner name, an unknown key)
}

// Drawings of more than kMaxViewTasks tasks are refused before anything is drawn, with the
// limit and the way under it; the machine formats of the same plan are not.
TEST(ViewLimitTest, DrawingsRefusePlansBeyondTheirLimit) {
  PlanView view;
  view.plan.timeline.compute.resize(static_cast<std::size_t>(kMaxViewTasks) - 2);
  view.plan.timeline.transfers.resize(3);
  const std::string expected =
      "cannot draw a plan of 262145 tasks as an SVG: drawings show at most 262144; plan fewer "
      "micro-batches or stages, or leave the drawing out (see \"Limits\" in docs/errors.md)";
  try {
    (void)export_plan(view, ExportFormat::kSvg);
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& error) {
    EXPECT_EQ(error.what(), expected);
  }
  EXPECT_THROW((void)export_plan(view, ExportFormat::kChromeTrace), InfeasibleError);
  EXPECT_THROW((void)export_plan(view, ExportFormat::kHtml), InfeasibleError);
}

}  // namespace
}  // namespace pipeplan::report
