// `pipeplan plan --global-batch N`, in-process: profiled models (M = N / profile.batch_size) and
// models given by their transformer description (the batch-size search), and `micro_batch_size`
// in the plan.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "../support/cli_run.hpp"
#include "../support/temp_folder.hpp"

namespace pipeplan::cli {
namespace {

using pipeplan::testing::run_cli;

class GlobalBatchTest : public pipeplan::testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    write("profiled.json", R"({"name": "toy", "profile": {"batch_size": 6}, "layers": [
      {"forward_ms": 2, "backward_ms": 4, "activation_bytes": 4e6, "parameter_bytes": 1e6},
      {"forward_ms": 6, "backward_ms": 12, "activation_bytes": 2e6, "parameter_bytes": 2e8}]})");
    write("unprofiled.json", R"({"layers": [
      {"forward_ms": 2, "backward_ms": 4, "activation_bytes": 4e6}]})");
    write("gpt.json", R"({"name": "small-gpt", "transformer": {"layers": 4, "hidden": 512,
      "heads": 8, "sequence": 256, "vocab": 5000, "gpu": "A100-80GB"}})");
    write("fixed.json", R"({"transformer": {"layers": 4, "hidden": 512, "heads": 8,
      "sequence": 256, "vocab": 5000, "micro_batch_size": 2}})");
    write("topo.json", R"({"nodes": [{"name": "n", "gpus": 2, "memory": "16 GiB",
      "link": {"bandwidth": "100 GB/s", "latency": "2 us"}}]})");
  }
  std::string path(const std::string& name) const { return (folder_ / name).string(); }
  nlohmann::json plan(const std::vector<std::string>& args) const {
    std::vector<std::string> command = {"plan"};
    command.insert(command.end(), args.begin(), args.end());
    auto result = run_cli(command);
    EXPECT_EQ(result.code, 0) << result.err;
    return result.code == 0 ? nlohmann::json::parse(result.out) : nlohmann::json();
  }
};

TEST_F(GlobalBatchTest, AProfiledModelDividesByItsBatchSize) {
  const nlohmann::json out =
      plan({path("profiled.json"), path("topo.json"), "--global-batch", "48"});
  EXPECT_EQ(out.at("micro_batches"), 8);
  EXPECT_EQ(out.at("micro_batch_size"), 6);
  // Without --global-batch a profiled model's plan has no micro_batch_size (v1 unchanged).
  const nlohmann::json v1 = plan({path("profiled.json"), path("topo.json"), "-m", "8"});
  EXPECT_FALSE(v1.contains("micro_batch_size"));
  EXPECT_EQ(v1.at("schema"), "pipeplan/plan/v1");
}

// Issue 34: Megatron-LM gives each replica the same number of micro-batches. With 2 replicas
// and a global batch of 6, sizes 2 and 6 (3 and 1 micro-batches) are skipped, not planned; given
// a micro-batch count itself, the planner refuses it with a usage error and writes nothing.
TEST_F(GlobalBatchTest, TheMegatronPlannerSkipsSizesItsReplicasCannotShare) {
  const std::vector<std::string> megatron = {
      "--planner", "megatron", "--tensor-parallel", "1", "--pipeline-parallel", "1"};
  std::vector<std::string> args = {path("gpt.json"), path("topo.json"), "--global-batch", "6",
                                   "--verbose"};
  args.insert(args.end(), megatron.begin(), megatron.end());
  std::vector<std::string> command = {"plan"};
  command.insert(command.end(), args.begin(), args.end());
  const auto searched = run_cli(command);
  ASSERT_EQ(searched.code, 0) << searched.err;
  const nlohmann::json out = nlohmann::json::parse(searched.out);
  EXPECT_EQ(out.at("micro_batches").get<int>() % 2, 0);
  EXPECT_NE(searched.err.find("is not a multiple of 2"), std::string::npos) << searched.err;

  std::vector<std::string> fixed = {"plan", path("gpt.json"), path("topo.json"), "-m", "3",
                                    "-o",   path("out.json")};
  fixed.insert(fixed.end(), megatron.begin(), megatron.end());
  const auto refused = run_cli(fixed);
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.err,
            "pipeplan: error: --micro-batches 3: Megatron-LM gives each of the 2 data-parallel "
            "replicas the same number of micro-batches, and 3 is not a multiple of 2; give a "
            "multiple of 2 micro-batches, or --data-parallel D with D dividing 3\n");
  EXPECT_FALSE(std::filesystem::exists(path("out.json")));
}

TEST_F(GlobalBatchTest, RefusesGlobalBatchesThatDoNotDivide) {
  auto result = run_cli({"plan", path("profiled.json"), path("topo.json"), "--global-batch", "50"});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err,
            "pipeplan: error: --global-batch: 50 is not a multiple of the profiled "
            "batch size 6 (profile.batch_size in " +
                path("profiled.json") + ")\n");
  result = run_cli({"plan", path("unprofiled.json"), path("topo.json"), "--global-batch", "50"});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err,
            "pipeplan: error: --global-batch needs the micro-batch size the model was "
            "profiled at: " +
                path("unprofiled.json") +
                " has no \"profile\": {\"batch_size\": ...} (or pass --micro-batches)\n");
  result = run_cli({"plan", path("fixed.json"), path("topo.json"), "--global-batch", "7"});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err,
            "pipeplan: error: --global-batch: 7 is not a multiple of the micro-batch "
            "size 2 (transformer.micro_batch_size in " +
                path("fixed.json") + ")\n");
  result = run_cli(
      {"plan", path("profiled.json"), path("topo.json"), "--global-batch", "48", "-m", "8"});
  EXPECT_EQ(result.code, 2);
  EXPECT_NE(result.err.find("excludes"), std::string::npos) << result.err;
  result = run_cli({"plan", path("profiled.json"), path("topo.json"), "--global-batch", "0"});
  EXPECT_EQ(result.code, 2);
}

TEST_F(GlobalBatchTest, ATransformerDescriptionIsSearchedAndRecordsTheChosenSize) {
  const nlohmann::json out = plan({path("gpt.json"), path("topo.json"), "--global-batch", "32"});
  const int size = out.at("micro_batch_size").get<int>();
  EXPECT_EQ(size * out.at("micro_batches").get<int>(), 32);
  // The search's choice is the fastest of the sizes planned one by one.
  for (int b : {1, 2, 4, 8, 16, 32}) {
    write("at.json", R"({"transformer": {"layers": 4, "hidden": 512, "heads": 8,
      "sequence": 256, "vocab": 5000, "micro_batch_size": )" +
                         std::to_string(b) + "}}");
    const nlohmann::json alone =
        plan({path("at.json"), path("topo.json"), "-m", std::to_string(32 / b)});
    EXPECT_EQ(alone.at("micro_batch_size"), b);
    EXPECT_GE(alone.at("iteration_ms").get<double>(),
              out.at("iteration_ms").get<double>() * (1 - 1e-9))
        << b;
    if (b == size) {
      EXPECT_EQ(alone.at("iteration_ms"), out.at("iteration_ms"));
    }
  }
  // A description planned without --global-batch records its own size.
  const nlohmann::json fixed = plan({path("fixed.json"), path("topo.json"), "-m", "4"});
  EXPECT_EQ(fixed.at("micro_batch_size"), 2);
}

TEST_F(GlobalBatchTest, SimulateAndExportCheckThePlanAtItsMicroBatchSize) {
  auto made = run_cli({"plan", path("gpt.json"), path("topo.json"), "--global-batch", "32", "-o",
                       path("plan.json")});
  ASSERT_EQ(made.code, 0) << made.err;
  const nlohmann::json plan = nlohmann::json::parse(read(path("plan.json")));
  ASSERT_NE(plan.at("micro_batch_size"), 1);  // else this test proves nothing
  // The model file describes micro-batch size 1; the plan is checked against the size it records.
  auto checked = run_cli({"simulate", path("plan.json"), path("gpt.json"), path("topo.json")});
  EXPECT_EQ(checked.code, 0) << checked.err;
  auto exported = run_cli({"export", path("plan.json"), "--format", "ranks", "--model",
                           path("gpt.json"), "--topology", path("topo.json")});
  EXPECT_EQ(exported.code, 0) << exported.err;
  // `model transformer` writes the description beside the layers of size 1, so its file is
  // regenerated at the plan's size too; without the description the layers of size 1 do not pass.
  // gpt.json's description has no `matmul_ceiling` (Calculon's tables alone): the command is
  // told the same, since its default is the GPU's measured maximum.
  auto layers = run_cli({"model", "transformer", "--layers", "4", "--hidden", "512", "--heads", "8",
                         "--sequence", "256", "--vocab", "5000", "--matmul-ceiling", "1", "-o",
                         path("layers.json")});
  ASSERT_EQ(layers.code, 0) << layers.err;
  auto regenerated =
      run_cli({"simulate", path("plan.json"), path("layers.json"), path("topo.json")});
  EXPECT_EQ(regenerated.code, 0) << regenerated.err;
  nlohmann::json profile = nlohmann::json::parse(read(path("layers.json")));
  ASSERT_EQ(profile.erase("transformer"), 1U);
  write("profile.json", profile.dump());
  auto mismatch = run_cli({"simulate", path("plan.json"), path("profile.json"), path("topo.json")});
  EXPECT_EQ(mismatch.code, 3) << mismatch.err;
}

// Issue 35: a model written by `pipeplan model transformer` keeps its description beside the
// layers, so it plans byte for byte like the description itself: the batch-size search tries every
// size, or only the size given with --micro-batch-size. Before, the file held only the layers and
// `--global-batch` planned size 1.
TEST_F(GlobalBatchTest, AWrittenTransformerModelPlansLikeItsDescription) {
  const std::vector<std::string> shape = {"--layers", "4",    "--hidden",   "512",
                                          "--heads",  "8",    "--sequence", "256",
                                          "--vocab",  "5000", "--name",     "small-gpt"};
  for (const std::string size : {"", "2"}) {
    SCOPED_TRACE("--micro-batch-size " + size);
    std::vector<std::string> written = {"model", "transformer", "-o", path("written.json")};
    written.insert(written.end(), shape.begin(), shape.end());
    if (!size.empty()) written.insert(written.end(), {"--micro-batch-size", size});
    ASSERT_EQ(run_cli(written).code, 0);
    const std::string described = size.empty() ? "gpt.json" : "fixed2.json";
    write("fixed2.json", R"({"name": "small-gpt", "transformer": {"layers": 4, "hidden": 512,
      "heads": 8, "sequence": 256, "vocab": 5000, "micro_batch_size": 2}})");
    for (const std::vector<std::string>& options :
         {std::vector<std::string>{"--global-batch", "24"},
          std::vector<std::string>{"--global-batch", "8", "--planner", "megatron",
                                   "--tensor-parallel", "1", "--pipeline-parallel", "2"},
          std::vector<std::string>{"-m", "4"}}) {
      std::vector<std::string> from_file = {path("written.json"), path("topo.json")};
      std::vector<std::string> from_description = {path(described), path("topo.json")};
      from_file.insert(from_file.end(), options.begin(), options.end());
      from_description.insert(from_description.end(), options.begin(), options.end());
      const nlohmann::json a = plan(from_file);
      EXPECT_EQ(a, plan(from_description));
      if (!size.empty()) {
        EXPECT_EQ(a.at("micro_batch_size"), 2);
      } else if (options.front() == "--global-batch") {
        EXPECT_GT(a.at("micro_batch_size").get<int>(), 1) << "the search chose size 1";
      }
    }
  }
}

// A profiled model cannot be re-costed at another micro-batch size: `--global-batch` plans its
// profiled size and says so on standard error.
TEST_F(GlobalBatchTest, AProfileThatCannotBeRecostedSaysSo) {
  const auto result =
      run_cli({"plan", path("profiled.json"), path("topo.json"), "--global-batch", "48"});
  ASSERT_EQ(result.code, 0) << result.err;
  // The warning's line, before the plan's summary.
  EXPECT_EQ(result.err.substr(0, result.err.find('\n') + 1),
            "pipeplan: warning: --global-batch: " + path("profiled.json") +
                " is a profile measured at micro-batch size 6, so only that size was planned "
                "(8 micro-batches); a model with its transformer description (as pipeplan model "
                "transformer writes it) is planned at every size that divides 48\n");
}

// The summary's phase times: `ordering 1 ms (3 runs), DP 2 ms (6 runs), scheduling 3 ms (90 runs)
// summed over threads`, where `runs` counts what ran.
std::map<std::string, long> phase_runs(const std::string& summary) {
  std::map<std::string, long> runs;
  const std::regex phase(R"((ordering|DP|scheduling) [0-9.]+ m?s \((\d+) runs?\))");
  for (std::sregex_iterator it(summary.begin(), summary.end(), phase), end; it != end; ++it) {
    runs[(*it)[1]] = std::stol((*it)[2]);
  }
  return runs;
}

// The summary's phases are those of everything the planner tried: the batch-size search planned
// several sizes, and its orderings and schedules are more than those of planning the size it chose
// alone (until 2026-12-07 the summary gave the chosen size's last search only, 0.2 s of a 16.8 s
// planning on Llama 3.1 70B). The counts are deterministic: the search's budgets count work.
TEST_F(GlobalBatchTest, TheSummaryTimesEverySizeTheSearchPlanned) {
  const auto searched = run_cli({"plan", path("gpt.json"), path("topo.json"), "--global-batch", "8",
                                 "-o", path("searched.json")});
  ASSERT_EQ(searched.code, 0) << searched.err;
  const int size =
      nlohmann::json::parse(read(path("searched.json"))).at("micro_batch_size").get<int>();
  write("chosen.json", R"({"name": "small-gpt", "transformer": {"layers": 4, "hidden": 512,
      "heads": 8, "sequence": 256, "vocab": 5000, "gpu": "A100-80GB", "micro_batch_size": )" +
                           std::to_string(size) + "}}");
  const auto alone = run_cli({"plan", path("chosen.json"), path("topo.json"), "--global-batch", "8",
                              "-o", path("alone.json")});
  ASSERT_EQ(alone.code, 0) << alone.err;
  const nlohmann::json chosen = nlohmann::json::parse(read(path("searched.json")));
  const nlohmann::json planned_alone = nlohmann::json::parse(read(path("alone.json")));
  EXPECT_EQ(planned_alone.at("stages"), chosen.at("stages"));
  EXPECT_EQ(planned_alone.at("iteration_ms"), chosen.at("iteration_ms"));
  const auto all = phase_runs(searched.err);
  const auto one = phase_runs(alone.err);
  // So few shapes that spp replays them all (no DP): its orderings and schedules.
  ASSERT_EQ(all.size(), 2U) << searched.err;
  ASSERT_EQ(one.size(), 2U) << alone.err;
  EXPECT_GT(all.at("ordering"), one.at("ordering")) << searched.err << alone.err;
  EXPECT_GT(all.at("scheduling"), one.at("scheduling")) << searched.err << alone.err;
  EXPECT_EQ(phase_runs(run_cli({"plan", path("gpt.json"), path("topo.json"), "--global-batch", "8",
                                "-o", path("again.json")})
                           .err),
            all);
  // A planner without a search: its one schedule.
  const auto megatron = run_cli({"plan", path("chosen.json"), path("topo.json"), "--global-batch",
                                 "8", "--planner", "megatron", "--tensor-parallel", "1",
                                 "--pipeline-parallel", "2", "-o", path("megatron.json")});
  ASSERT_EQ(megatron.code, 0) << megatron.err;
  EXPECT_EQ(phase_runs(megatron.err), (std::map<std::string, long>{{"scheduling", 1}}))
      << megatron.err;
}

}  // namespace
}  // namespace pipeplan::cli
