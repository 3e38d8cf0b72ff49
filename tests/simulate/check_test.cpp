#include "pipeplan/simulate/check.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"

namespace pipeplan::simulate {
namespace {

using namespace pipeplan::testing;
using nlohmann::ordered_json;

// Three layers on four GPUs: the planner replicates something and pipelines the rest, so the
// plan has activations, gradients and an AllReduce.
struct CheckTest : ::testing::Test {
  model::Model model =
      make_model({{2, 4, 4e6, 1e6, 1e6}, {6, 12, 2e6, 2e6, 1e6}, {2, 4, 0, 4e7, 1e6}});
  topology::Topology topology = uniform_topology(4, 10e9, 0.005, {}, 1e9);
  Plan plan = planners::make_plan("spp", planners::Request{model, topology, 6});
  ordered_json json = report::plan_to_json(plan, model, topology);

  Plan read_and_check(const ordered_json& document, const topology::Topology& topo) {
    io::Source source = io::source_from_text("plan.json", io::dump_json(document));
    return check_plan(report::read_plan(source, topo), model, topo);
  }
  std::string error_of(const std::function<void(ordered_json&)>& mutate) {
    ordered_json copy = json;
    mutate(copy);
    try {
      read_and_check(copy, topology);
    } catch (const InputError& error) {
      return error.what();
    }
    return "no error";
  }
  // Index of the first compute entry matching.
  std::size_t compute_index(const std::string& op, int stage) {
    const auto& compute = json["schedule"]["compute"];
    for (std::size_t i = 0; i < compute.size(); ++i) {
      if (compute[i]["op"] == op && compute[i]["stage"] == stage) return i;
    }
    return 0;
  }
};

TEST_F(CheckTest, PlanRoundTripsAndChecks) {
  ASSERT_GE(plan.stages.size(), 2u) << "the fixture needs a pipeline";
  Plan again = read_and_check(json, topology);
  EXPECT_DOUBLE_EQ(again.timeline.iteration_ms, plan.timeline.iteration_ms);
  EXPECT_EQ(report::plan_to_json(again, model, topology), json);
  // Deterministic bytes.
  EXPECT_EQ(io::dump_json(json),
            io::dump_json(report::plan_to_json(planners::make_plan("spp", {model, topology, 6}),
                                               model, topology)));
}

TEST_F(CheckTest, EachMutationHasItsOwnMessage) {
  const std::size_t last = json["schedule"]["compute"].size() - 1;
  // Moving the last task later (and the iteration with it) keeps every structural rule, so the
  // replay of the orders is what refuses it.
  auto shift_last = [&](ordered_json& j, double start_by, double end_by) {
    auto& e = j["schedule"]["compute"][last];
    e["start_ms"] = e["start_ms"].get<double>() + start_by;
    e["end_ms"] = e["end_ms"].get<double>() + end_by;
    j["iteration_ms"] = std::max(j["iteration_ms"].get<double>(), e["end_ms"].get<double>());
    for (auto& allreduce : j["schedule"]["allreduces"]) {
      allreduce["start_ms"] = allreduce["start_ms"].get<double>() + end_by;
      allreduce["end_ms"] = allreduce["end_ms"].get<double>() + end_by;
      j["iteration_ms"] =
          std::max(j["iteration_ms"].get<double>(), allreduce["end_ms"].get<double>());
    }
  };
  std::string shifted = error_of([&](ordered_json& j) { shift_last(j, 1, 1); });
  EXPECT_EQ(shifted.find("plan.json: /schedule/compute/" + std::to_string(last) + ": "), 0u)
      << shifted;
  EXPECT_NE(shifted.find("but the replay of the orders starts it at"), std::string::npos)
      << shifted;

  std::string missing = error_of([&](ordered_json& j) { j["schedule"]["compute"].erase(last); });
  EXPECT_NE(
      missing.find(
          "plan.json: /schedule/compute: lists 23 tasks but 2 stages and 6 micro-batches make 24"),
      std::string::npos)
      << missing;

  std::string longer = error_of([&](ordered_json& j) { shift_last(j, 0, 0.5); });
  EXPECT_EQ(longer.find("plan.json: /schedule/compute/" + std::to_string(last) +
                        ": backward of micro-batch"),
            0u)
      << longer;
  EXPECT_NE(longer.find(" lasts "), std::string::npos) << longer;

  std::string wrong_gpu = error_of([&](ordered_json& j) {
    const std::size_t b = compute_index("backward", 0);
    const auto other = j["stages"][1]["gpus"][0].get<std::string>();
    j["schedule"]["compute"][b]["gpu"] = other;
  });
  EXPECT_NE(wrong_gpu.find("does not serve stage 0"), std::string::npos) << wrong_gpu;

  std::string stated = error_of(
      [&](ordered_json& j) { j["iteration_ms"] = j["iteration_ms"].get<double>() * 1.01; });
  EXPECT_NE(stated.find("plan.json: /iteration_ms: states"), std::string::npos) << stated;

  std::string bytes =
      error_of([&](ordered_json& j) { j["schedule"]["transfers"][0]["bytes"] = 17; });
  EXPECT_NE(bytes.find("plan.json: /schedule/transfers/0: "), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("states 17 bytes but the boundary carries"), std::string::npos) << bytes;

  std::string bound = error_of([&](ordered_json& j) { j["bounds"]["partition_ms"] = 1; });
  EXPECT_NE(bound.find("plan.json: /bounds/partition_ms: states 1 ms but the bound is"),
            std::string::npos)
      << bound;

  std::string figures = error_of([&](ordered_json& j) { j["stages"][0]["forward_ms"] = 99; });
  EXPECT_EQ(figures.find("plan.json: /stages/0/forward_ms: states 99 but the model gives"), 0u)
      << figures;

  std::string unknown =
      error_of([&](ordered_json& j) { j["schedule"]["compute"][0]["gpu"] = "nope"; });
  EXPECT_EQ(unknown,
            "plan.json: /schedule/compute/0/gpu: unknown GPU \"nope\" (not in the topology)");

  std::string stage_gpus =
      error_of([&](ordered_json& j) { j["stages"][1]["gpus"][0] = j["stages"][0]["gpus"][0]; });
  EXPECT_EQ(stage_gpus.find("plan.json: /stages/1/gpus/0: GPU \""), 0u) << stage_gpus;

  std::string extra_keys = error_of([&](ordered_json& j) {
    j["x-launcher"] = 1;
    j["future_field"] = 2;
  });
  EXPECT_EQ(extra_keys, "no error");  // plan readers ignore unknown keys
}

TEST_F(CheckTest, OverlapsAndDependenciesAreNamed) {
  // Move a forward of stage 1 to start before its activation arrives (keeping its duration).
  std::string early = error_of([&](ordered_json& j) {
    const std::size_t f = compute_index("forward", 1);
    auto& e = j["schedule"]["compute"][f];
    const double d = e["end_ms"].get<double>() - e["start_ms"].get<double>();
    e["start_ms"] = 0.0;
    e["end_ms"] = d;
  });
  EXPECT_NE(early.find("before activation transfer of micro-batch"), std::string::npos) << early;
  // Two forwards of the same GPU on top of each other.
  std::string overlap = error_of([&](ordered_json& j) {
    auto& compute = j["schedule"]["compute"];
    const auto gpu = compute[0]["gpu"].get<std::string>();
    for (std::size_t i = 1; i < compute.size(); ++i) {
      if (compute[i]["gpu"] == gpu && compute[i]["op"] == "forward") {
        const double d = compute[i]["end_ms"].get<double>() - compute[i]["start_ms"].get<double>();
        compute[i]["start_ms"] = compute[0]["start_ms"].get<double>() + d / 4;
        compute[i]["end_ms"] = compute[i]["start_ms"].get<double>() + d;
        break;
      }
    }
  });
  EXPECT_NE(overlap.find("runs there until"), std::string::npos) << overlap;
}

TEST_F(CheckTest, MemoryOverflowIsRejected) {
  // The same plan on GPUs with less memory than its peak.
  double peak = 0;
  for (const auto& g : plan.timeline.gpus) peak = std::max(peak, g.peak_memory_bytes);
  topology::Topology small = uniform_topology(4, 10e9, 0.005, {}, peak * 0.9);
  ordered_json copy = json;
  try {
    read_and_check(copy, small);
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("at its peak but has"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace pipeplan::simulate
