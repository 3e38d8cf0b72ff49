// `pipeplan compare`: one row per planner run, in three formats, with infeasible rows marked,
// in-process through cli::run (and once through the binary).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "../support/cli_run.hpp"
#include "../support/temp_folder.hpp"
#include "pipeplan/cli/cli.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;

using Result = pipeplan::testing::CliResult;
using pipeplan::testing::run_cli;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The rows compare prints, in order: each planner under its own schedule, then under the
// others that order its stages differently (a v1 model: list, 1f1b, gpipe; spp also zb-v).
const std::vector<std::pair<std::string, std::string>> kRows{
    {"spp", "list"},           {"spp", "1f1b"},           {"spp", "gpipe"},
    {"spp", "zb-v"},           {"spp --uniform", "list"}, {"gpipe", "gpipe"},
    {"gpipe", "list"},         {"gpipe", "1f1b"},         {"pipedream", "1f1b"},
    {"pipedream", "list"},     {"pipedream", "gpipe"},    {"uniform", "1f1b"},
    {"uniform", "list"},       {"uniform", "gpipe"},      {"data-parallel", "1f1b"},
    {"data-parallel", "list"}, {"data-parallel", "gpipe"}};

// Four layers of 4 x 1 MiB static bytes each on four 12 MiB GPUs: every pipeline fits, the
// whole model on one GPU (16 MiB of static bytes) does not, so data-parallel is infeasible.
class CompareTest : public pipeplan::testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    std::string layers;
    for (int l = 0; l < 4; ++l) {
      layers +=
          std::string(l ? ", " : "") + R"({"forward_ms": )" + std::to_string(1 + l) +
          R"(, "backward_ms": 2, "activation_bytes": 1048576, "parameter_bytes": 1048576, "stash_bytes": 524288})";
    }
    write("model.json", R"({"name": "tiny", "micro_batches": 4, "layers": [)" + layers + "]}");
    write("topo.json", R"({"name": "four", "nodes": [{"name": "n", "gpus": 4, "memory": "12 MiB",
      "link": {"bandwidth": "10 GB/s", "latency": "1 us"}}]})");
    write("small.json", R"({"name": "small", "nodes": [{"name": "n", "gpus": 4, "memory": "1 MiB",
      "link": {"bandwidth": "10 GB/s", "latency": "1 us"}}]})");
  }
  std::string path(const std::string& name) const { return (folder_ / name).string(); }
  Result compare(const std::string& format, bool timing = false,
                 const std::string& topology = "topo.json") const {
    std::vector<std::string> args{"compare", path("model.json"), path(topology), "--format",
                                  format};
    if (!timing) args.emplace_back("--no-timing");
    return run_cli(args);
  }
};

TEST_F(CompareTest, TableIsAlignedAndMarksInfeasibleRows) {
  const Result result = compare("table");
  ASSERT_EQ(result.code, 0) << result.err;
  const auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), kRows.size() + 1);
  EXPECT_EQ(lines[0].rfind("planner", 0), 0u);
  EXPECT_NE(lines[0].find("iteration"), std::string::npos);
  EXPECT_NE(lines[0].find("speed-up"), std::string::npos);
  EXPECT_EQ(lines[0].find("planning"), std::string::npos);  // --no-timing
  const std::size_t policy_column = lines[0].find("policy");
  const std::size_t status_column = lines[0].find("status");
  for (std::size_t x = 0; x < kRows.size(); ++x) {
    const std::string& line = lines[x + 1];
    EXPECT_EQ(line.rfind(kRows[x].first + " ", 0), 0u) << line;
    EXPECT_EQ(line.substr(policy_column, kRows[x].second.size() + 1), kRows[x].second + " ")
        << line;
    const std::string status = line.substr(status_column);
    if (kRows[x].first == "data-parallel") {
      EXPECT_EQ(status,
                "infeasible: data-parallel: stage 0 (layers 0-3) needs 18 MiB (4 x parameters + 1 "
                "stash) but "
                "GPU \"n/gpu0\" has 12 MiB under the " +
                    kRows[x].second + " schedule");
    } else {
      EXPECT_EQ(status, "feasible") << line;
    }
  }
  EXPECT_NE(result.err.find("fastest: "), std::string::npos);
}

TEST_F(CompareTest, JsonIsAnArrayOfRows) {
  const Result result = compare("json");
  ASSERT_EQ(result.code, 0) << result.err;
  const auto rows = nlohmann::json::parse(result.out);
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), kRows.size());
  double best_baseline = 1e300;
  for (std::size_t x = 0; x < kRows.size(); ++x) {
    const auto& row = rows[x];
    // A run with options (spp --uniform) names them beside the planner.
    const std::string label =
        row.at("planner").get<std::string>() +
        (row.contains("options") ? " " + row.at("options").get<std::string>() : std::string());
    EXPECT_EQ(label, kRows[x].first);
    EXPECT_EQ(row.at("policy").get<std::string>(), kRows[x].second);
    EXPECT_FALSE(row.contains("planning_ms"));
    const bool feasible = kRows[x].first != "data-parallel";
    EXPECT_EQ(row.at("feasible").get<bool>(), feasible);
    if (!feasible) {
      EXPECT_TRUE(row.at("iteration_ms").is_null());
      EXPECT_TRUE(row.at("stages").is_null());
      EXPECT_EQ(
          row.at("error").get<std::string>().rfind("data-parallel: stage 0 (layers 0-3) needs", 0),
          0u);
      continue;
    }
    EXPECT_TRUE(row.at("error").is_null());
    const double iteration = row.at("iteration_ms").get<double>();
    EXPECT_GT(iteration, 0);
    EXPECT_GE(row.at("partition_ratio").get<double>(), 1 - 1e-9);
    EXPECT_GE(row.at("any_plan_ratio").get<double>(), 1 - 1e-9);
    EXPECT_LE(row.at("peak_memory").at("fraction").get<double>(), 1 + 1e-9);
    EXPECT_EQ(row.at("peak_memory").at("memory_bytes").get<double>(), 12 * 1048576.0);
    ASSERT_TRUE(row.at("stages").is_array());
    EXPECT_EQ(row.at("stages").front().at("first_layer").get<int>(), 0);
    EXPECT_EQ(row.at("stages").back().at("last_layer").get<int>(), 3);
    if (kRows[x].first.rfind("spp", 0) != 0) best_baseline = std::min(best_baseline, iteration);
  }
  // Speed-ups are against the best baseline row.
  for (const auto& row : rows) {
    if (!row.at("feasible").get<bool>()) continue;
    EXPECT_NEAR(row.at("speedup").get<double>(),
                best_baseline / row.at("iteration_ms").get<double>(), 1e-12);
  }
  // With timing, each row has its planning time.
  const auto timed = nlohmann::json::parse(compare("json", true).out);
  for (const auto& row : timed) EXPECT_TRUE(row.at("planning_ms").is_number());
}

TEST_F(CompareTest, CsvHasAHeaderRow) {
  const Result result = compare("csv");
  ASSERT_EQ(result.code, 0) << result.err;
  const auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), kRows.size() + 1);
  EXPECT_EQ(
      lines[0],
      "planner,policy,stages,iteration_ms,speedup,partition_ratio,any_plan_ratio,peak_memory_bytes,"
      "memory_bytes,memory_fraction,status,error");
  for (std::size_t x = 0; x < kRows.size(); ++x) {
    const std::string& line = lines[x + 1];
    EXPECT_EQ(line.rfind(kRows[x].first + "," + kRows[x].second + ",", 0), 0u) << line;
    if (kRows[x].first == "data-parallel") {
      // The message holds quotes, so the field is quoted with doubled quotes.
      EXPECT_EQ(line, "data-parallel," + kRows[x].second +
                          ",,,,,,,,,infeasible,\"data-parallel: stage 0 (layers 0-3) needs 18 "
                          "MiB (4 x "
                          "parameters + 1 stash) but GPU \"\"n/gpu0\"\" has 12 MiB under the " +
                          kRows[x].second + " schedule\"");
    } else {
      EXPECT_EQ(line.substr(line.size() - 10), ",feasible,") << line;
      EXPECT_EQ(std::count(line.begin(), line.end(), ','), 11) << line;
    }
  }
  const auto timed = lines_of(compare("csv", true).out);
  EXPECT_NE(timed[0].find(",planning_ms,status,error"), std::string::npos);
}

TEST_F(CompareTest, OutputIsDeterministicWithoutTiming) {
  for (const char* format : {"table", "json", "csv"}) {
    const Result first = compare(format);
    const Result second = compare(format);
    ASSERT_EQ(first.code, 0);
    EXPECT_EQ(first.out, second.out) << format;
  }
}

TEST_F(CompareTest, NothingFeasibleExitsFour) {
  const Result result = compare("csv", false, "small.json");
  EXPECT_EQ(result.code, 4);
  const auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), kRows.size() + 1);
  for (std::size_t x = 1; x < lines.size(); ++x) {
    EXPECT_NE(lines[x].find(",infeasible,"), std::string::npos);
  }
  EXPECT_EQ(result.err.rfind("pipeplan: error: no planner found a plan that fits; spp: ", 0), 0u)
      << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1);
}

// Issue 35: compare's megatron rows are every configuration using every GPU, so the options of
// one configuration are refused, not ignored.
TEST(CompareOptionsTest, OneMegatronConfigurationsOptionsAreRefused) {
  const std::string root = PIPEPLAN_SOURCE_DIR;
  for (const char* option : {"--pipeline-parallel", "--data-parallel"}) {
    const Result result = run_cli({"compare", root + "/examples/models/llm/gpt3-13b-mb8.json",
                                   root + "/examples/topologies/llm/dgx-a100-40gb-2x8.json", option,
                                   "2", "--no-timing"});
    EXPECT_EQ(result.code, 2);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err, "pipeplan: error: " + std::string(option) +
                              ": compare runs every megatron configuration that uses every GPU; "
                              "plan one configuration with plan --planner megatron\n");
  }
}

// Under --uniform, data-parallel's 16 replicas cannot share 7 micro-batches: its rows are
// infeasible and say why; the comparison goes on (issue 34).
TEST(CompareOptionsTest, ARefusedPlannerIsAnInfeasibleRow) {
  const std::string root = PIPEPLAN_SOURCE_DIR;
  const Result result = run_cli({"compare", root + "/examples/models/bert-48.json",
                                 root + "/examples/topologies/two-node-nvlink-ib.json", "--uniform",
                                 "-m", "7", "--format", "json", "--no-timing"});
  ASSERT_EQ(result.code, 0) << result.err;
  int refused = 0;
  for (const auto& row : nlohmann::json::parse(result.out)) {
    if (row.at("planner") != "data-parallel") continue;
    EXPECT_FALSE(row.at("feasible").get<bool>());
    EXPECT_EQ(row.at("error").get<std::string>(),
              "--micro-batches 7: under --uniform every replica takes the same number of "
              "micro-batches, and the data-parallel planner's 16 replicas (every GPU) cannot "
              "share 7; give a multiple of 16 micro-batches");
    ++refused;
  }
  EXPECT_GT(refused, 0);
}

// `--virtual-stages 2` is for spp and megatron; the planners that place one stage per GPU are
// compared as they plan (before, gpipe's refusal stopped the comparison with exit 2, and spp's
// uniform row read past its GPU order).
TEST(CompareOptionsTest, VirtualStagesLeaveTheOneStagePerGpuBaselinesAlone) {
  const std::string root = PIPEPLAN_SOURCE_DIR;
  const Result result = run_cli({"compare", root + "/examples/models/bert-24.json",
                                 root + "/examples/topologies/two-node-nvlink-ib.json",
                                 "--virtual-stages", "2", "--format", "json", "--no-timing"});
  ASSERT_EQ(result.code, 0) << result.err;
  std::set<std::string> policies, baselines;
  for (const auto& row : nlohmann::json::parse(result.out)) {
    if (row.at("planner") == "spp") policies.insert(row.at("policy").get<std::string>());
    if (row.at("planner") != "spp" && row.at("feasible").get<bool>()) {
      baselines.insert(row.at("planner").get<std::string>());
    }
  }
  EXPECT_EQ(policies.count("interleaved-1f1b"), 1U);
  EXPECT_EQ(policies.count("looped-bfs"), 1U);
  EXPECT_EQ(baselines, (std::set<std::string>{"gpipe", "pipedream", "uniform", "data-parallel"}));
}

// `--virtual-stages 3` applies to the policies of any number of stages per device; zb-v keeps
// its own two (before 2026-12-07 its row made the whole comparison fail with "stage 4 has no
// GPUs"). Under `plan` the same V with `--schedule zb-v` is a usage error.
TEST(CompareOptionsTest, ZbVKeepsItsTwoStagesPerDeviceUnderVirtualStages) {
  const std::string root = PIPEPLAN_SOURCE_DIR;
  const std::string model = root + "/examples/models/bert-24.json";
  const std::string topology = root + "/examples/topologies/pcie-server.json";
  const Result result = run_cli(
      {"compare", model, topology, "--virtual-stages", "3", "--format", "json", "--no-timing"});
  ASSERT_EQ(result.code, 0) << result.err;
  // spp's feasible rows: policy -> the stages on each device (stages with the same GPUs).
  std::map<std::string, std::set<std::size_t>> per_device;
  for (const auto& row : nlohmann::json::parse(result.out)) {
    if (row.at("planner") != "spp" || !row.at("feasible").get<bool>()) continue;
    std::map<std::string, std::size_t> devices;
    for (const auto& stage : row.at("stages")) ++devices[stage.at("gpus").dump()];
    for (const auto& [gpus, count] : devices) {
      per_device[row.at("policy").get<std::string>()].insert(count);
    }
  }
  EXPECT_EQ(per_device["zb-v"], (std::set<std::size_t>{2}));
  EXPECT_EQ(per_device["interleaved-1f1b"], (std::set<std::size_t>{3}));
  const Result refused = run_cli(
      {"plan", model, topology, "--schedule", "zb-v", "--virtual-stages", "3", "-o", "/dev/null"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.err,
            "pipeplan: error: --virtual-stages 3: --schedule zb-v runs two stages per device, in "
            "a V (give --virtual-stages 2, or leave it out)\n");
}

TEST_F(CompareTest, BinaryPrintsTheSameBytes) {
  const std::string command = std::string("'") + PIPEPLAN_BINARY + "' compare '" +
                              path("model.json") + "' '" + path("topo.json") +
                              "' --format csv --no-timing -q";
  const Result binary = pipeplan::testing::run_shell(command);
  EXPECT_EQ(binary.code, 0);
  EXPECT_EQ(binary.out, compare("csv").out);
}

// Spec 8: for a model whose layers split over tensor-parallel groups, compare adds the megatron
// configurations that use every GPU; spp --uniform is listed for every model.
TEST(CompareV2Test, ListsMegatronConfigurationsAndSppUniform) {
  const std::string root = PIPEPLAN_SOURCE_DIR;
  const Result result = run_cli({"compare", root + "/examples/models/llm/gpt3-13b-mb8.json",
                                 root + "/examples/topologies/llm/dgx-a100-40gb-2x8.json",
                                 "--format", "json", "--no-timing"});
  ASSERT_EQ(result.code, 0) << result.err;
  const auto rows = nlohmann::json::parse(result.out);
  std::map<std::string, nlohmann::json> by_label;
  for (const auto& row : rows) {
    by_label[row.at("planner").get<std::string>() +
             (row.contains("options") ? " " + row.at("options").get<std::string>() : "") + " (" +
             row.at("policy").get<std::string>() + ")"] = row;
  }
  ASSERT_TRUE(by_label.count("spp --uniform (list)"));
  // 16 GPUs: degrees 1, 2, 4, 8 and depths with t p dividing 16, and (issue 34) data-parallel
  // degrees that share the 8 micro-batches equally, as Megatron-LM needs.
  for (const char* label : {"megatron t1 p2 d8 (1f1b)", "megatron t2 p8 d1 (1f1b)",
                            "megatron t4 p2 d2 (1f1b)", "megatron t8 p2 d1 (1f1b)"}) {
    EXPECT_TRUE(by_label.count(label)) << label;
  }
  EXPECT_FALSE(by_label.count("megatron t4 p3 d1 (1f1b)"));   // 12 GPUs: not every GPU
  EXPECT_FALSE(by_label.count("megatron t1 p1 d16 (1f1b)"));  // 16 replicas, 8 micro-batches
  // Two GPUs hold no full copy of the model, even recomputing.
  EXPECT_FALSE(by_label.at("megatron t1 p2 d8 (1f1b)").at("feasible").get<bool>());
  ASSERT_TRUE(by_label.at("megatron t4 p2 d2 (1f1b)").at("feasible").get<bool>());
  // spp (list) is the fastest of the rows with one stage per device (on this profile spp's
  // default keeps one; its zb-v row, two stages per device, is faster here once the optimizer is
  // sharded), and spp --uniform (list) never slower than any megatron configuration (1F1B).
  const double spp = by_label.at("spp (list)").at("iteration_ms").get<double>();
  const double uniform = by_label.at("spp --uniform (list)").at("iteration_ms").get<double>();
  for (const auto& [label, row] : by_label) {
    if (!row.at("feasible").get<bool>()) continue;
    if (label.find("(zb-v)") == std::string::npos) {
      EXPECT_LE(spp, row.at("iteration_ms").get<double>() * (1 + 1e-9)) << label;
    }
    if (label.rfind("megatron", 0) == 0 && row.at("policy") == "1f1b") {
      EXPECT_LE(uniform, row.at("iteration_ms").get<double>() * (1 + 1e-9)) << label;
    }
  }
}

}  // namespace
}  // namespace pipeplan::cli
