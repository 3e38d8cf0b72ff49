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
#include "../support/temp_folder.hpp"
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

class OutputSafetyTest : public pipeplan::testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    // 1024 micro-batches make a plan of about 180 KiB, more than a pipe holds.
    model_ = write("model.json", R"({"name": "m", "micro_batches": 1024, "layers": [
      {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 1000, "parameter_bytes": 1000},
      {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 0, "parameter_bytes": 1000}]})");
    topology_ = write("topo.json", R"({"gpus": [{"id": "a"}]})");
    bad_model_ = write("bad.json", R"({"layers": []})");
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

// plan --trace --report writes three files: a failure at any one of the writes leaves every
// existing output as it was and no temporary file behind.
TEST_F(OutputSafetyTest, PlanWithTraceAndReportWritesAllOrNothing) {
  const std::string previous = "previous content\n";
  const std::string plan = (folder_ / "out.json").string();
  const std::string trace = (folder_ / "trace.json").string();
  const std::string report = (folder_ / "report.html").string();
  const std::string missing = (folder_ / "no-such-dir" / "file").string();
  struct Case {
    std::string plan, trace, report, failing;
  };
  const std::vector<Case> cases{
      {missing, trace, report, missing},          // the plan's write fails
      {plan, missing, report, missing},           // the trace's
      {plan, trace, missing, missing},            // the report's
      {plan, trace, "/dev/full", "/dev/full"},    // a device, written directly
      {"/dev/full", trace, report, "/dev/full"},  // the plan to a device
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.plan + " " + c.trace + " " + c.report);
    for (const std::string& path : {plan, trace, report})
      write(fs::path(path).filename(), previous);
    const std::vector<std::string> before = names();
    const Result result = run_cli({"--quiet", "plan", model_, topology_, "-o", c.plan, "--trace",
                                   c.trace, "--report", c.report});
    EXPECT_EQ(result.code, 5);
    EXPECT_EQ(result.err,
              "pipeplan: error: " + c.failing + ": cannot write: " +
                  (c.failing == missing ? "No such file or directory" : "No space left on device") +
                  "\n");
    for (const std::string& path : {plan, trace, report}) EXPECT_EQ(read(path), previous) << path;
    EXPECT_EQ(names(), before);
  }
  // With the plan on standard output, a failed standard output leaves the files alone too.
  std::istringstream in;
  std::ostringstream out, err;
  out.setstate(std::ios::badbit);
  EXPECT_EQ(cli::run({"--quiet", "plan", model_, topology_, "--trace", trace, "--report", report},
                     in, out, err),
            5);
  EXPECT_EQ(err.str(), "pipeplan: error: cannot write standard output\n");
  EXPECT_EQ(read(trace), previous);
  EXPECT_EQ(read(report), previous);
  // And when every write can succeed, all three are written.
  const Result result = run_cli(
      {"--quiet", "plan", model_, topology_, "-o", plan, "--trace", trace, "--report", report});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(read(plan).rfind("{\n  \"schema\"", 0), 0u);
  EXPECT_EQ(read(trace).rfind("{\n \"traceEvents\"", 0), 0u) << read(trace).substr(0, 40);
  EXPECT_EQ(read(report).rfind("<!DOCTYPE html>", 0), 0u);
}

// The commands that write a file and then say so (`-> FILE`) say it only once it is written:
// a failed write prints its error alone, not a line claiming the file first.
TEST_F(OutputSafetyTest, ALineNamingTheOutputFollowsTheWrite) {
  const std::string missing = (folder_ / "no-such-dir" / "file.json").string();
  const std::string written = (folder_ / "written.json").string();
  const std::vector<std::vector<std::string>> commands{
      {"model", "transformer", "--preset", "opt-350m", "--layers", "2"},
      {"topology", "cluster", "--type", "dgx-h100", "--nodes", "2"}};
  for (std::vector<std::string> args : commands) {
    SCOPED_TRACE(args[0]);
    args.insert(args.end(), {"-o", missing});
    const Result failed = run_cli(args);
    EXPECT_EQ(failed.code, 5);
    EXPECT_EQ(failed.err,
              "pipeplan: error: " + missing + ": cannot write: No such file or directory\n");
    args.back() = written;
    const Result result = run_cli(args);
    ASSERT_EQ(result.code, 0) << result.err;
    EXPECT_NE(result.err.find(" -> " + written + "\n"), std::string::npos) << result.err;
    EXPECT_FALSE(read(written).empty());
  }
}

TEST_F(OutputSafetyTest, TwoOutputsOrAnOutputAndAnInputCannotNameOneFile) {
  const std::string previous = "previous content\n";
  const std::string same = write("same.json", previous);
  const std::string other = (folder_ / "." / "same.json").string();
  ASSERT_EQ(::symlink("same.json", (folder_ / "link.json").c_str()), 0);
  const std::string link = (folder_ / "link.json").string();
  Result result = run_cli({"plan", model_, topology_, "-o", same, "--report", other});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err, "pipeplan: error: " + other +
                            ": both -o and --report name this file; give each output a file of "
                            "its own\n");
  result = run_cli({"plan", model_, topology_, "-o", same, "--trace", link});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err, "pipeplan: error: " + link +
                            ": both -o and --trace name this file; give each output a file of "
                            "its own\n");
  // Not yet existing: the same name after `.` is resolved.
  const std::string fresh = (folder_ / "fresh.json").string();
  result = run_cli({"plan", model_, topology_, "--trace", fresh, "--report",
                    (folder_ / "." / "fresh.json").string()});
  EXPECT_EQ(result.code, 2);
  result = run_cli({"plan", model_, topology_, "-o", model_});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err, "pipeplan: error: " + model_ +
                            ": both MODEL and -o name this file; an output cannot overwrite an "
                            "input\n");
  result = run_cli({"export", same, "--format", "svg", "-o", link});
  EXPECT_EQ(result.code, 2);
  // --check writes nothing: its file may be the one -o would name.
  const std::string plan = (folder_ / "plan.json").string();
  ASSERT_EQ(run_cli({"--quiet", "plan", model_, topology_, "-o", plan}).code, 0);
  result = run_cli({"--quiet", "plan", model_, topology_, "-o", plan, "--check", plan});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(read(same), previous);
  EXPECT_FALSE(fs::exists(fresh));
  // Devices are not files: /dev/null may take two outputs.
  result = run_cli({"--quiet", "plan", model_, topology_, "--trace", "/dev/null", "--report",
                    "/dev/null", "-o", "/dev/null"});
  EXPECT_EQ(result.code, 0) << result.err;
}

TEST_F(OutputSafetyTest, LongOutputNamesAreWrittenWithShortTemporaryNames) {
  // 250 bytes: legal (NAME_MAX is 255), but `.NAME.tmp.XXXXXX` would not be.
  for (const std::size_t length : {240u, 242u, 250u, 255u}) {
    const std::string name = std::string(length - 5, 'p') + ".json";
    const std::string path = (folder_ / name).string();
    const Result result = run_cli({"--quiet", "plan", model_, topology_, "-o", path});
    EXPECT_EQ(result.code, 0) << length << ": " << result.err;
    EXPECT_EQ(read(path).rfind("{\n  \"schema\"", 0), 0u);
    fs::remove(path);
  }
  EXPECT_EQ(names(), (std::vector<std::string>{"bad.json", "model.json", "topo.json"}));
}

TEST_F(OutputSafetyTest, HelpAndVersionThatCannotBeWrittenExitFive) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"--version"}, {"plan", "--help"}}) {
    SCOPED_TRACE(args.front());
    std::istringstream in;
    std::ostringstream out, err;
    out.setstate(std::ios::badbit);
    EXPECT_EQ(cli::run(args, in, out, err), 5);
    EXPECT_EQ(err.str(), "pipeplan: error: cannot write standard output\n");
  }
  // The real binary, `pipeplan --help > /dev/full`.
  const int fd = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(fd, 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(fd, 1);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execl(PIPEPLAN_BINARY, PIPEPLAN_BINARY, "--help", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 5);
}

}  // namespace
}  // namespace pipeplan::cli
