// The command line: `validate` summaries, standard input, help, version and usage errors,
// in-process through cli::run and, for exit codes, through real runs of the binary.

#include "pipeplan/cli/cli.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/cli_run.hpp"
#include "../support/temp_folder.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/version.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;

using Result = pipeplan::testing::CliResult;
using pipeplan::testing::run_cli;

const char* const kModel = R"({"name": "tiny", "micro_batches": 8, "layers": [
  {"forward_ms": 1.5, "backward_ms": 3, "activation_bytes": 1024, "parameter_bytes": 1048576},
  {"forward_ms": 2.5, "backward_ms": 5, "activation_bytes": 1024, "parameter_bytes": 2097152}]})";

const char* const kTopology = R"({"name": "two boxes",
  "nodes": [{"name": "box", "count": 2, "gpus": 2, "memory": "16 GiB",
             "link": {"bandwidth": "50 GB/s", "latency": "1 us"}}],
  "network": {"bandwidth": "100 Gbit/s", "latency": "5 us"},
  "gpus": [{"id": "spare", "speed": 0.5}]})";

class CliTest : public pipeplan::testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    model_ = write("model.json", kModel);
    topology_ = write("topo.json", kTopology);
  }

  // Runs the real binary through the shell and returns its exit code.
  int run_binary(const std::string& arguments) {
    std::string command = std::string("'") + PIPEPLAN_BINARY + "' " + arguments;
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string model_;
  std::string topology_;
};

TEST_F(CliTest, ValidateSummarisesModelAndTopology) {
  Result result = run_cli({"validate", model_, topology_});
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err,
            model_ +
                ": model \"tiny\", 2 layers, forward 4 ms and backward 8 ms per micro-batch, "
                "3 MiB of parameters, 8 micro-batches\n" +
                topology_ +
                ": topology \"two boxes\", 5 GPUs on 3 nodes, pair bandwidth 12.5 GB/s to "
                "50 GB/s, speed 0.5 to 1, memory 16 GiB to unlimited\n");
}

TEST_F(CliTest, ValidateSummarisesMinimalInputs) {
  std::string model = write("m.json", R"({"layers": [{"forward_ms": 1, "backward_ms": 2,
    "activation_bytes": 0}]})");
  std::string topology = write("t.json", R"({"gpus": [{"id": "only"}]})");
  Result result = run_cli({"validate", model, topology});
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.err, model +
                            ": model, 1 layer, forward 1 ms and backward 2 ms per micro-batch, "
                            "0 B of parameters\n" +
                            topology + ": topology, 1 GPU on 1 node, speed 1, memory unlimited\n");
}

TEST_F(CliTest, ValidateReadsStandardInput) {
  Result result = run_cli({"validate", "-", topology_}, kModel);
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.err.rfind("<stdin>: model \"tiny\", 2 layers", 0), 0u) << result.err;
  result = run_cli({"validate", model_, "-"}, kTopology);
  EXPECT_EQ(result.code, 0);
  EXPECT_NE(result.err.find("\n<stdin>: topology \"two boxes\", 5 GPUs"), std::string::npos)
      << result.err;
}

TEST_F(CliTest, ValidateCannotReadBothFromStandardInput) {
  Result result = run_cli({"validate", "-", "-"}, kModel);
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err, "pipeplan: error: MODEL and TOPO cannot both be - (standard input)\n");
}

TEST_F(CliTest, QuietValidatePrintsNothing) {
  Result result = run_cli({"--quiet", "validate", model_, topology_});
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out, "");
}

TEST_F(CliTest, ValidateAcceptsEveryShippedExample) {
  const fs::path examples = fs::path(PIPEPLAN_SOURCE_DIR) / "examples";
  std::vector<fs::path> models, topologies;
  for (const char* folder : {"models", "topologies"}) {
    if (!fs::is_directory(examples / folder)) continue;
    for (const auto& entry : fs::directory_iterator(examples / folder)) {
      if (entry.path().extension() != ".json") continue;
      (std::string(folder) == "models" ? models : topologies).push_back(entry.path());
    }
  }
  if (models.empty()) GTEST_SKIP() << "no examples/models/*.json yet";
  std::sort(models.begin(), models.end());
  std::sort(topologies.begin(), topologies.end());
  for (const fs::path& model : models) {
    Result result = run_cli({"validate", model.string()});
    EXPECT_EQ(result.code, 0) << result.err;
    EXPECT_EQ(result.err.rfind(model.string() + ": model", 0), 0u) << result.err;
  }
  for (const fs::path& topology : topologies) {
    Result result = run_cli({"validate", models.front().string(), topology.string()});
    EXPECT_EQ(result.code, 0) << result.err;
    EXPECT_NE(result.err.find("\n" + topology.string() + ": topology"), std::string::npos)
        << result.err;
    EXPECT_NE(result.err.find(" GPUs on "), std::string::npos) << result.err;
  }
}

TEST_F(CliTest, VersionAndHelpExitZero) {
  Result version = run_cli({"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out, std::string("pipeplan ") + kVersion + "\n");
  Result help = run_cli({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("validate"), std::string::npos);
  EXPECT_NE(help.out.find("Exit codes:"), std::string::npos);
  Result validate_help = run_cli({"validate", "--help"});
  EXPECT_EQ(validate_help.code, 0);
  EXPECT_NE(validate_help.out.find("MODEL"), std::string::npos);
  EXPECT_NE(validate_help.out.find("TOPO"), std::string::npos);
}

TEST_F(CliTest, HelpListsThePlannersOfTheTable) {
  const Result plan = run_cli({"plan", "--help"});
  ASSERT_EQ(plan.code, 0);
  const Result compare = run_cli({"compare", "--help"});
  ASSERT_EQ(compare.code, 0);
  EXPECT_NE(plan.out.find("\nPlanners (--planner; the default schedule, then what it does):\n"
                          "  spp            list   the paper's: min-cut GPU order"),
            std::string::npos)
      << plan.out;
  EXPECT_NE(compare.out.find("\nRows (a planner under each of its schedules, then what it does):\n"
                             "  spp            list, 1f1b, gpipe  the paper's: min-cut GPU order"),
            std::string::npos)
      << compare.out;
  // A line per planner: its name, its schedule (for compare: its schedules), its description.
  auto line_of = [](const std::string& help, std::string_view name) {
    const std::size_t start = help.find("\n  " + std::string(name) + " ");
    if (start == std::string::npos) return std::string();
    return help.substr(start + 1, help.find('\n', start + 1) - start - 1);
  };
  for (const planners::PlannerRow& row : planners::planner_table()) {
    const std::string line = line_of(plan.out, row.name);
    const std::string policy(schedule::policy_name(row.default_policy));
    EXPECT_NE(line.find(" " + policy + " "), std::string::npos) << line;
    EXPECT_TRUE(line.ends_with("  " + std::string(row.description))) << line;
    EXPECT_EQ(line_of(compare.out, row.name).empty(), row.compare_policies.empty()) << row.name;
  }
  // The shared footer follows.
  EXPECT_NE(plan.out.find("\nExit codes:"), std::string::npos);
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{},
                                             {"frobnicate"},
                                             {"--frobnicate", "validate", "x.json"},
                                             {"validate"},
                                             {"validate", "--frobnicate", "x.json"},
                                             {"validate", "a.json", "b.json", "c.json"}}) {
    Result result = run_cli(args);
    EXPECT_EQ(result.code, 2) << (args.empty() ? "" : args.front());
    EXPECT_EQ(result.err.rfind("pipeplan: error: ", 0), 0u) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.out, "");
  }
}

TEST_F(CliTest, BinaryExitCodes) {
  const std::string quiet = " >/dev/null 2>&1";
  EXPECT_EQ(run_binary("--version" + quiet), 0);
  EXPECT_EQ(run_binary("--help" + quiet), 0);
  EXPECT_EQ(run_binary("frobnicate" + quiet), 2);
  EXPECT_EQ(run_binary("validate '" + model_ + "' '" + topology_ + "'" + quiet), 0);
  EXPECT_EQ(run_binary("validate - < '" + model_ + "'" + quiet), 0);
  EXPECT_EQ(run_binary("validate '" + (folder_ / "missing.json").string() + "'" + quiet), 3);
  std::string bad = write("bad.json", R"({"layers": []})");
  EXPECT_EQ(run_binary("validate '" + bad + "'" + quiet), 3);
}

TEST_F(CliTest, BinaryPrintsOneErrorLine) {
  std::string bad = write("bad.json",
                          "{\"layers\": [{\"forward_ms\": -1,\n\"backward_ms\": 1, "
                          "\"activation_bytes\": 1}]}");
  std::string captured = (folder_ / "stderr.txt").string();
  EXPECT_EQ(run_binary("validate '" + bad + "' 2>'" + captured + "' >/dev/null"), 3);
  std::ifstream in(captured);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "pipeplan: error: " + bad +
                            ": /layers/0/forward_ms: must be a finite number >= 0, got -1\n");
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// keep_freed_memory: a 24 MiB block (past glibc's default mmap threshold of 128 KiB, and past
// what its dynamic threshold reaches in a fresh process) comes from the heap, not a mapping of
// its own, and freeing it leaves it with the process for the next one. (The sanitizers bring
// their own allocator; mallinfo2 says nothing there.)
TEST(KeepFreedMemory, LargeBlocksComeFromTheHeapAndStayAfterFree) {
  keep_freed_memory();
  const std::size_t size = std::size_t{24} << 20;
  const std::size_t mapped_before = mallinfo2().hblkhd;
  auto* block = static_cast<char*>(std::malloc(size));
  ASSERT_NE(block, nullptr);
  block[0] = block[size - 1] = 1;
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before);
  std::free(block);
  EXPECT_GE(mallinfo2().fordblks, size);
}
#endif

}  // namespace
}  // namespace pipeplan::cli
