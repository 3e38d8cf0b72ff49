// Hostile inputs and command lines (issue 18, "Reliability II"): bytes that would drive a
// terminal, numbers at the edges of double, integers in other bases, a second standard input,
// mistyped commands; each must end in one printable line with the right exit code, or in a
// plan whose every figure is finite.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>

#include "../support/cli_run.hpp"
#include "../support/temp_folder.hpp"
#include "../support/xml.hpp"
#include "pipeplan/cli/cli.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;

using Result = pipeplan::testing::CliResult;
using pipeplan::testing::run_cli;

const char* const kModel = R"({"name": "tiny", "micro_batches": 4, "layers": [
  {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 1000, "parameter_bytes": 1000},
  {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 0, "parameter_bytes": 1000}]})";
const char* const kTopology = R"({"gpus": [{"id": "a"}, {"id": "b"}],
  "network": {"bandwidth": "1 GB/s", "latency": "1 us"}})";

class HostileInputTest : public pipeplan::testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    model_ = write("model.json", kModel);
    topology_ = write("topo.json", kTopology);
  }

  std::string model_, topology_;
};

// Every byte of a message is printable ASCII or valid UTF-8: no ESC, BEL, DEL or 0xFF.
bool printable(const std::string& text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n') || byte == 0x7f || byte == 0xff) return false;
  }
  return true;
}

TEST_F(HostileInputTest, ControlBytesInNamesAreEscapedInMessages) {
  // A file name holding ESC, BEL and 0xFF, missing and existing (then named in a summary).
  const std::string name = (folder_ / "m\x1b[2J\x07\xff.json").string();
  const std::string shown = folder_.string() + "/m\\x1B[2J\\x07\\xFF.json";
  Result result = run_cli({"plan", name, topology_});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + shown + ": cannot read: No such file or directory\n");
  write("m\x1b[2J\x07\xff.json", kModel);
  result = run_cli({"validate", name});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_TRUE(printable(result.err)) << result.err;
  EXPECT_NE(result.err.find(shown), std::string::npos) << result.err;
  // Parser messages echo arguments: --planner $'\e[2Jspp'.
  result = run_cli({"plan", model_, topology_, "--planner", "\x1b[2Jspp"});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err,
            "pipeplan: error: --planner: \\x1B[2Jspp not in "
            "{spp,gpipe,pipedream,uniform,data-parallel,megatron} (see pipeplan --help)\n");
  // Valid UTF-8 is kept as it is.
  result = run_cli({"plan", (folder_ / "modèle.json").string(), topology_});
  EXPECT_EQ(result.err, "pipeplan: error: " + (folder_ / "modèle.json").string() +
                            ": cannot read: No such file or directory\n");
}

TEST_F(HostileInputTest, IntegerFlagsAcceptDecimalDigitsOnly) {
  for (const char* value : {"0x10", "1e3", "4.0", "0b101", "+4", "-4", "", "010x"}) {
    SCOPED_TRACE(value);
    const Result result = run_cli({"plan", model_, topology_, "--micro-batches", value});
    EXPECT_EQ(result.code, 2);
    EXPECT_EQ(result.err, std::string("pipeplan: error: --micro-batches: must be an integer from 1 "
                                      "to 1048576, got \"") +
                              value + "\" (see pipeplan --help)\n");
  }
  const std::string graph = write("graph.txt",
                                  "node1 -- L -- forward_compute_time=1.0, "
                                  "backward_compute_time=2.0, activation_size=4.0, "
                                  "parameter_size=8.0\n");
  Result result = run_cli({"import", "pipedream", graph, "--batch-size", "0x10"});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err,
            "pipeplan: error: --batch-size: must be an integer >= 1, got \"0x10\" (see pipeplan "
            "--help)\n");
  result = run_cli({"compare", model_, topology_, "-m", "0b101"});
  EXPECT_EQ(result.code, 2);
  result = run_cli({"--quiet", "plan", model_, topology_, "--micro-batches", "016"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(nlohmann::json::parse(result.out).at("micro_batches"), 16);
}

TEST_F(HostileInputTest, AnEmptyOutputPathIsAUsageError) {
  const std::string plan = (folder_ / "plan.json").string();
  ASSERT_EQ(run_cli({"--quiet", "plan", model_, topology_, "-o", plan}).code, 0);
  const std::string graph = write("graph.txt",
                                  "node1 -- L -- forward_compute_time=1.0, "
                                  "backward_compute_time=2.0, activation_size=4.0, "
                                  "parameter_size=8.0\n");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plan", model_, topology_, "-o", ""},
        {"export", plan, "--format", "svg", "-o", ""},
        {"compare", model_, topology_, "--output", ""},
        {"import", "pipedream", graph, "--batch-size", "1", "-o", ""}}) {
    SCOPED_TRACE(args.front());
    const Result result = run_cli(args);
    EXPECT_EQ(result.code, 2);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err,
              "pipeplan: error: --output: an empty path names no file (use - for standard "
              "output) (see pipeplan --help)\n");
  }
}

TEST_F(HostileInputTest, StandardInputCanBeReadOnce) {
  const std::string plan = (folder_ / "plan.json").string();
  ASSERT_EQ(run_cli({"--quiet", "plan", model_, topology_, "-o", plan}).code, 0);
  const std::string model_text = read(model_);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"export", "-", "--model", "-", "--topology", topology_, "--format", "svg"},
            "PLAN and --model cannot both be - (standard input)"},
           {{"export", plan, "--model", "-", "--topology", "-", "--format", "svg"},
            "--model and --topology cannot both be - (standard input)"},
           {{"plan", "-", topology_, "--check", "-"},
            "MODEL and --check cannot both be - (standard input)"},
           {{"plan", "-", "-"}, "MODEL and TOPO cannot both be - (standard input)"},
           {{"simulate", "-", "-", topology_}, "PLAN and MODEL cannot both be - (standard input)"},
           {{"compare", "-", "-"}, "MODEL and TOPO cannot both be - (standard input)"},
       }) {
    SCOPED_TRACE(c.args.front());
    const Result result = run_cli(c.args, model_text);
    EXPECT_EQ(result.code, 2);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err, "pipeplan: error: " + c.message + "\n");
  }
}

TEST_F(HostileInputTest, AMistypedCommandIsNamedWithTheNearestCommand) {
  Result result = run_cli({"plna", model_, topology_});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err,
            "pipeplan: error: unknown command \"plna\" (did you mean \"plan\"?) (see pipeplan "
            "--help)\n");
  result = run_cli({"--quiet", "simulat", "x"});
  EXPECT_EQ(result.err,
            "pipeplan: error: unknown command \"simulat\" (did you mean \"simulate\"?) (see "
            "pipeplan --help)\n");
  result = run_cli({"frobnicate"});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err,
            "pipeplan: error: unknown command \"frobnicate\"; the commands are plan, simulate, "
            "validate, import, compare, export, model, topology (see pipeplan --help)\n");
}

TEST_F(HostileInputTest, OverflowingNumbersNameFileAndPointer) {
  const std::string model = write("big.json", R"({"micro_batches": 2, "layers": [
    {"forward_ms": 1, "backward_ms": 1e400, "activation_bytes": 0}]})");
  Result result = run_cli({"validate", model});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + model +
                            ": /layers/0/backward_ms: must be a finite number, got 1e400\n");
  const std::string topology =
      write("big-topo.json", R"({"gpus": [{"id": "a", "speed": -1e999}]})");
  result = run_cli({"--quiet", "validate", model_, topology});
  EXPECT_EQ(result.err, "pipeplan: error: " + topology +
                            ": /gpus/0/speed: must be a finite number, got -1e999\n");
}

TEST_F(HostileInputTest, FiguresThatWouldOverflowAreRefusedUpFront) {
  // A stash of 1e307 bytes times 100 micro-batches once wrote "peak_memory_bytes": null.
  const std::string model = write("stash.json", R"({"layers": [
    {"forward_ms": 1, "backward_ms": 2, "activation_bytes": 1000, "stash_bytes": 1e307}]})");
  Result result = run_cli({"plan", model, topology_, "--micro-batches", "100"});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + model +
                            ": /layers: too large: the sum of stash_bytes is 1e+307, more than "
                            "1e+290 (figures derived from it would overflow)\n");
  // Times near the largest double once gave a Chrome trace with "dur": null.
  const std::string slow = write("slow.json", R"({"micro_batches": 1, "layers": [
    {"forward_ms": 8e307, "backward_ms": 8e307, "activation_bytes": 0}]})");
  result = run_cli({"validate", slow});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + slow +
                            ": /layers: too large: the sum of forward_ms and backward_ms over all "
                            "layers is 1.6e+308, more than 1e+290 (figures derived from it would "
                            "overflow)\n");
}

TEST_F(HostileInputTest, AChromeTraceIsNeverWrittenWithNull) {
  // A plan read alone whose times are near the largest double: its microseconds overflow.
  const std::string plan = (folder_ / "plan.json").string();
  ASSERT_EQ(run_cli({"--quiet", "plan", model_, topology_, "-o", plan}).code, 0);
  nlohmann::json json = nlohmann::json::parse(read(plan));
  const double scale = 1e305;
  json["iteration_ms"] = json["iteration_ms"].get<double>() * scale;
  for (auto& task : json["schedule"]["compute"]) {
    task["start_ms"] = task["start_ms"].get<double>() * scale;
    task["end_ms"] = task["end_ms"].get<double>() * scale;
  }
  for (const char* kind : {"transfers", "allreduces"}) {
    for (auto& task : json["schedule"][kind]) {
      task["start_ms"] = task["start_ms"].get<double>() * scale;
      task["end_ms"] = task["end_ms"].get<double>() * scale;
    }
  }
  const std::string huge = write("huge.json", json.dump());
  const Result result = run_cli({"export", huge, "--format", "chrome-trace"});
  EXPECT_EQ(result.out.find("null"), std::string::npos);
  EXPECT_EQ(result.code, 3) << result.err;
  // Spec 7: the file and the JSON pointer are named (issue 34).
  EXPECT_EQ(result.err.rfind("pipeplan: error: " + huge + ": /iteration_ms: ", 0), 0u)
      << result.err;
  EXPECT_NE(result.err.find(" is too long for a Chrome trace: its times in microseconds would "
                            "overflow\n"),
            std::string::npos)
      << result.err;
}

TEST_F(HostileInputTest, GpusWithoutMemoryAreNamed) {
  for (const char* memory : {"-0.0", "0", "\"0 B\""}) {
    SCOPED_TRACE(memory);
    const std::string topology =
        write("zero.json", std::string(R"({"gpus": [{"id": "first", "memory": )") + memory +
                               R"(}, {"id": "second", "memory": "0 B"}],
          "network": {"bandwidth": "1 GB/s", "latency": "1 us"}})");
    const Result result = run_cli({"plan", model_, topology});
    EXPECT_EQ(result.code, 4);
    EXPECT_NE(result.err.find("the largest GPU, \"first\", has 0 B"), std::string::npos)
        << result.err;
  }
}

TEST_F(HostileInputTest, DenormalTimesDrawABoundedTimeAxis) {
  // Layer times of 5e-324 ms once made --report and the SVG export allocate without end.
  const std::string model = write("tiny.json", R"({"micro_batches": 2, "layers": [
    {"forward_ms": 5e-324, "backward_ms": 5e-324, "activation_bytes": 0},
    {"forward_ms": 5e-324, "backward_ms": 5e-324, "activation_bytes": 0}]})");
  const std::string plan = (folder_ / "plan.json").string();
  const std::string report = (folder_ / "report.html").string();
  Result result = run_cli({"--quiet", "plan", model, topology_, "-o", plan, "--report", report});
  ASSERT_EQ(result.code, 0) << result.err;
  result = run_cli({"export", plan, "--format", "svg"});
  ASSERT_EQ(result.code, 0) << result.err;
  const testing::XmlElement svg = testing::parse_xml(result.out);
  const auto ticks = svg.find("text", "tick");
  EXPECT_GE(ticks.size(), 1u);
  EXPECT_LE(ticks.size(), 65u);
  for (const auto* tick : ticks) EXPECT_LE(tick->text.size(), 12u) << tick->text;
  EXPECT_LT(read(report).size(), std::size_t{1} << 20);
  // The iteration (1 us of latency) over a bound of 2e-323 ms has no finite ratio: no null,
  // no "inf", anywhere.
  const auto ratios_are_numbers = [&] {
    const Result figures = run_cli({"--quiet", "simulate", plan, model, topology_, "--json"});
    ASSERT_EQ(figures.code, 0) << figures.err;
    const nlohmann::json ratios = nlohmann::json::parse(figures.out).at("ratio_to_bounds");
    EXPECT_TRUE(ratios.at("any_plan").is_number()) << ratios;
    EXPECT_TRUE(ratios.at("partition").is_number()) << ratios;
  };
  ratios_are_numbers();
  for (const char* planner : {"gpipe", "pipedream", "uniform"}) {
    SCOPED_TRACE(planner);
    result = run_cli({"plan", model, topology_, "-o", plan, "--planner", planner});
    ASSERT_EQ(result.code, 0) << result.err;
    EXPECT_EQ(result.err.find("inf"), std::string::npos) << result.err;
    ratios_are_numbers();
    result = run_cli({"export", plan, "--format", "svg"});
    EXPECT_EQ(result.out.find("inf"), std::string::npos);
  }
  result = run_cli({"compare", model, topology_, "--format", "json", "--no-timing"});
  EXPECT_EQ(result.out.find("inf"), std::string::npos) << result.out;
}

TEST_F(HostileInputTest, TheSummaryShowsRatiosWithTwoDecimalsAndSaysWhatIsSummed) {
  const Result result = run_cli({"plan", model_, topology_});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_TRUE(std::regex_search(result.err, std::regex(R"(: \d+\.\d\dx the partition bound \()")))
      << result.err;
  EXPECT_NE(result.err.find(" summed over threads)"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("planned in "), std::string::npos) << result.err;
}

}  // namespace
}  // namespace pipeplan::cli
