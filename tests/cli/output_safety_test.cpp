// Output safety (spec section 7): an output file is written completely or not at all, a failed
// run leaves an existing file untouched, and a closed standard output ends the real process
// quietly with exit 5 (one line on standard error, no death by SIGPIPE).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "../support/cli_run.hpp"
#include "pipeplan/cli/cli.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;

using Result = pipeplan::testing::CliResult;
using pipeplan::testing::run_cli;

// How a real process of the binary ended.
struct Process {
  bool exited = false;  // false: killed by a signal
  int code = -1;        // exit code, or the signal's number
  std::string err;      // all of its standard error
};

// How standard output of the process is set up.
enum class Stdout {
  kClosedPipe,  // a pipe whose reading end is closed before the process starts
  kReadSome,    // a pipe from which 100 bytes are read, then the reading end is closed
  kClosed,      // no file descriptor 1 at all
};

// Runs the binary with `args`, standard output set up as `mode`, standard error captured.
Process run_binary(const std::vector<std::string>& args, Stdout mode) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) return {};
  if (mode == Stdout::kClosedPipe) ::close(out_pipe[0]);
  const pid_t child = ::fork();
  if (child == 0) {
    // The child: default SIGPIPE behaviour, as a shell pipeline gives it.
    std::signal(SIGPIPE, SIG_DFL);
    ::dup2(err_pipe[1], 2);
    if (mode == Stdout::kClosed) {
      ::close(1);
    } else {
      ::dup2(out_pipe[1], 1);
    }
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    std::vector<char*> argv{const_cast<char*>(PIPEPLAN_BINARY)};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execv(PIPEPLAN_BINARY, argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (mode == Stdout::kReadSome) {
    char buffer[100];
    std::size_t got = 0;
    while (got < sizeof buffer) {
      const ssize_t n = ::read(out_pipe[0], buffer + got, sizeof buffer - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(out_pipe[0]);
  } else if (mode == Stdout::kClosed) {
    ::close(out_pipe[0]);
  }
  Process process;
  char buffer[4096];
  for (ssize_t n; (n = ::read(err_pipe[0], buffer, sizeof buffer)) > 0;) {
    process.err.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  process.exited = WIFEXITED(status);
  process.code = process.exited ? WEXITSTATUS(status) : WTERMSIG(status);
  return process;
}

class OutputSafetyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() /
              ("pipeplan-output-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    // 1024 micro-batches make a plan of about 180 KiB, more than a pipe holds.
    model_ = write("model.json", R"({"name": "m", "micro_batches": 1024, "layers": [
      {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 1000, "parameter_bytes": 1000},
      {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 0, "parameter_bytes": 1000}]})");
    topology_ = write("topo.json", R"({"gpus": [{"id": "a"}]})");
    bad_model_ = write("bad.json", R"({"layers": []})");
  }
  void TearDown() override { fs::remove_all(folder_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = folder_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  static std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // The names in the folder, to see that no temporary file is left behind.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(folder_)) {
      out.push_back(entry.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path folder_;
  std::string model_, topology_, bad_model_;
};

TEST_F(OutputSafetyTest, FailedRunsLeaveExistingOutputsUntouched) {
  const std::string previous = "previous content\n";
  const std::string plan = write("plan.json", previous);
  const std::string imported = write("imported.json", previous);
  const std::string graph = write("graph.txt", "a -- x -- forward_compute_time=1\n");
  const auto before = fs::last_write_time(plan);

  Result result = run_cli({"plan", bad_model_, topology_, "-o", plan});
  EXPECT_EQ(result.code, 3);
  result = run_cli({"plan", model_, topology_, "-o", plan, "--planner", "no-such-planner"});
  EXPECT_EQ(result.code, 2);
  result = run_cli({"import", "pipedream", graph, "--batch-size", "1", "-o", imported});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(read(plan), previous);
  EXPECT_EQ(read(imported), previous);
  EXPECT_EQ(fs::last_write_time(plan), before);
  EXPECT_EQ(names(), (std::vector<std::string>{"bad.json", "graph.txt", "imported.json",
                                               "model.json", "plan.json", "topo.json"}));
}

TEST_F(OutputSafetyTest, CompareWithoutAnyPlanLeavesItsOutputFileUntouched) {
  const std::string previous = "previous comparison\n";
  const std::string output = write("comparison.csv", previous);
  const std::string small = write("small.json", R"({"gpus": [{"id": "a", "memory": "1 kB"}]})");
  Result result = run_cli({"compare", model_, small, "--format", "csv", "-o", output});
  EXPECT_EQ(result.code, 4);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(read(output), previous);
  // Without -o, the rows that explain the failure still go to standard output.
  result = run_cli({"--quiet", "compare", model_, small, "--format", "csv", "--no-timing"});
  EXPECT_EQ(result.code, 4);
  EXPECT_NE(result.out.find(",infeasible,"), std::string::npos) << result.out;
}

TEST_F(OutputSafetyTest, SuccessfulRunsReplaceOutputsWithoutLeftovers) {
  const std::string plan = write("plan.json", "previous content\n");
  ::chmod(plan.c_str(), 0640);
  Result result = run_cli({"--quiet", "plan", model_, topology_, "-o", plan});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(read(plan).rfind("{\n  \"schema\": \"pipeplan/plan/v1\"", 0), 0u);
  EXPECT_EQ(fs::status(plan).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(names(),
            (std::vector<std::string>{"bad.json", "model.json", "plan.json", "topo.json"}));
}

TEST_F(OutputSafetyTest, ClosedStandardOutputEndsWithExitFiveAndOneLine) {
  const std::vector<std::string> plan{"plan", model_, topology_};
  const std::vector<std::string> compare{"compare", model_, topology_, "--format", "json"};
  // `pipeplan plan ... | head -c 100`: the plan is larger than a pipe holds. The comparison is
  // not, so it only meets readers that are gone before it writes.
  for (const auto& [args, mode] :
       std::vector<std::pair<std::vector<std::string>, Stdout>>{{plan, Stdout::kReadSome},
                                                                {plan, Stdout::kClosedPipe},
                                                                {plan, Stdout::kClosed},
                                                                {compare, Stdout::kClosedPipe},
                                                                {compare, Stdout::kClosed}}) {
    SCOPED_TRACE(args.front() + " with stdout mode " + std::to_string(static_cast<int>(mode)));
    const Process process = run_binary(args, mode);
    EXPECT_TRUE(process.exited) << "killed by signal " << process.code;
    EXPECT_EQ(process.code, 5);
    EXPECT_EQ(process.err, "pipeplan: error: cannot write standard output\n");
  }
}

TEST_F(OutputSafetyTest, SimulateJsonToAClosedPipeExitsFive) {
  const std::string plan = (folder_ / "plan.json").string();
  ASSERT_EQ(run_cli({"--quiet", "plan", model_, topology_, "-o", plan}).code, 0);
  const Process process =
      run_binary({"--quiet", "simulate", plan, model_, topology_, "--json"}, Stdout::kClosedPipe);
  EXPECT_TRUE(process.exited) << "killed by signal " << process.code;
  EXPECT_EQ(process.code, 5);
  EXPECT_EQ(process.err, "pipeplan: error: cannot write standard output\n");
}

}  // namespace
}  // namespace pipeplan::cli
