// The plan and simulate commands, in-process through cli::run.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../support/cli_run.hpp"
#include "pipeplan/cli/cli.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;

using Result = pipeplan::testing::CliResult;
using pipeplan::testing::run_cli;

class PlanCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipeplan-plan-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    write("model.json", R"({"name": "toy", "micro_batches": 8, "layers": [
      {"name": "a", "forward_ms": 2, "backward_ms": 4, "activation_bytes": 4e6, "parameter_bytes": 1e6},
      {"name": "b", "forward_ms": 6, "backward_ms": 12, "activation_bytes": 2e6, "parameter_bytes": 2e8},
      {"name": "c", "forward_ms": 2, "backward_ms": 4, "activation_bytes": 1e3, "parameter_bytes": 4e8}]})");
    write("topo.json", R"({"name": "pair of pairs", "nodes": [{"name": "n", "count": 2, "gpus": 2,
      "memory": "16 GiB", "link": {"bandwidth": "100 GB/s", "latency": "2 us"}}],
      "network": {"bandwidth": "10 GB/s", "latency": "10 us"}})");
    write("tiny.json", R"({"gpus": [{"id": "small", "memory": "1 MiB"}]})");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name));
    return {std::istreambuf_iterator<char>(in), {}};
  }
  fs::path dir_;
};

TEST_F(PlanCommandTest, PlanThenSimulate) {
  Result plan = run_cli({"plan", path("model.json"), path("topo.json"), "-o", path("plan.json")});
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_TRUE(plan.out.empty());
  EXPECT_NE(plan.err.find("iteration"), std::string::npos);
  EXPECT_NE(plan.err.find("planned in"), std::string::npos);
  Result check =
      run_cli({"simulate", path("plan.json"), path("model.json"), path("topo.json"), "--json"});
  ASSERT_EQ(check.code, 0) << check.err;
  auto figures = nlohmann::json::parse(check.out);
  EXPECT_EQ(figures.at("valid"), true);
  EXPECT_TRUE(figures.at("iteration_ms").is_number());
  EXPECT_EQ(figures.at("gpus").size(), 4u);
  for (const char* key :
       {"id", "busy_ms", "bubble_fraction", "peak_memory_bytes", "memory_bytes"}) {
    EXPECT_TRUE(figures.at("gpus")[0].contains(key)) << key;
  }
}

TEST_F(PlanCommandTest, PlanGoesToStandardOutputAndIsDeterministic) {
  Result first = run_cli({"plan", path("model.json"), path("topo.json")});
  Result second = run_cli({"plan", path("model.json"), path("topo.json")});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(nlohmann::json::parse(first.out).at("schema"), "pipeplan/plan/v1");
}

TEST_F(PlanCommandTest, EverySchedulePolicyPassesSimulate) {
  for (const char* policy : {"list", "1f1b", "gpipe"}) {
    Result plan = run_cli({"-q", "plan", path("model.json"), path("topo.json"), "--schedule",
                           policy, "-o", path("p.json")});
    ASSERT_EQ(plan.code, 0) << policy << ": " << plan.err;
    EXPECT_TRUE(plan.err.empty()) << plan.err;
    Result check =
        run_cli({"simulate", path("p.json"), path("model.json"), path("topo.json"), "--quiet"});
    EXPECT_EQ(check.code, 0) << policy << ": " << check.err;
    EXPECT_EQ(nlohmann::json::parse(read("p.json")).at("schedule_policy"), policy);
  }
}

TEST_F(PlanCommandTest, CheckComparesWithAnExistingPlan) {
  ASSERT_EQ(run_cli({"plan", path("model.json"), path("topo.json"), "-o", path("plan.json")}).code,
            0);
  Result same =
      run_cli({"plan", path("model.json"), path("topo.json"), "--check", path("plan.json")});
  EXPECT_EQ(same.code, 0) << same.err;
  Result differs = run_cli(
      {"plan", path("model.json"), path("topo.json"), "-m", "2", "--check", path("plan.json")});
  EXPECT_EQ(differs.code, 6);
  EXPECT_EQ(differs.err.find("pipeplan: " + path("plan.json") + " differs: "), 0u) << differs.err;
  EXPECT_NE(differs.err.find("iteration"), std::string::npos) << differs.err;
}

TEST_F(PlanCommandTest, MicroBatchesComeFromFlagOrModel) {
  write("bare.json", R"({"layers": [{"forward_ms": 1, "backward_ms": 1, "activation_bytes": 0}]})");
  Result none = run_cli({"plan", path("bare.json"), path("topo.json")});
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(
      none.err,
      "pipeplan: error: no micro-batch count: pass --micro-batches or set \"micro_batches\" in " +
          path("bare.json") + "\n");
  Result flag = run_cli({"plan", path("bare.json"), path("topo.json"), "--micro-batches", "3"});
  EXPECT_EQ(flag.code, 0) << flag.err;
  EXPECT_EQ(nlohmann::json::parse(flag.out).at("micro_batches"), 3);
  Result zero = run_cli({"plan", path("bare.json"), path("topo.json"), "--micro-batches", "0"});
  EXPECT_EQ(zero.code, 2);
}

TEST_F(PlanCommandTest, NothingFitsIsExitFourAndLeavesOutputUntouched) {
  write("plan.json", "keep me");
  Result result = run_cli({"plan", path("model.json"), path("tiny.json"), "-o", path("plan.json")});
  EXPECT_EQ(result.code, 4);
  EXPECT_EQ(
      result.err,
      "pipeplan: error: no placement fits in GPU memory: layer 2 (\"c\") alone needs 1.49 GiB "
      "(4 x parameters + one stash) but the largest GPU, \"small\", has 1 MiB\n");
  EXPECT_EQ(read("plan.json"), "keep me");
}

TEST_F(PlanCommandTest, UnknownPlannerIsUsage) {
  Result result = run_cli({"plan", path("model.json"), path("topo.json"), "--planner", "magic"});
  EXPECT_EQ(result.code, 2);
}

TEST_F(PlanCommandTest, SimulateRejectsAPlanForAnotherModel) {
  ASSERT_EQ(run_cli({"plan", path("model.json"), path("topo.json"), "-o", path("plan.json")}).code,
            0);
  write("other.json",
        R"({"layers": [{"forward_ms": 1, "backward_ms": 1, "activation_bytes": 0}]})");
  Result result = run_cli({"simulate", path("plan.json"), path("other.json"), path("topo.json")});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err.find("pipeplan: error: " + path("plan.json") + ": /stages: "), 0u)
      << result.err;
}

}  // namespace
}  // namespace pipeplan::cli
