// Every bad input gets its own one-line message and exit code 3 (spec section 7), through
// `pipeplan validate` run in-process.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../support/cli_run.hpp"
#include "../support/sanitized_share.hpp"
#include "../support/temp_folder.hpp"
#include "pipeplan/cli/cli.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;

const char* const kLayer = R"({"forward_ms": 1, "backward_ms": 2, "activation_bytes": 3})";
const char* const kNetwork = R"("network": {"bandwidth": "10 GB/s", "latency": "1 us"})";

std::string model_with(const std::string& members) {
  return "{" + members + (members.empty() ? "" : ", ") + R"("layers": [)" + kLayer + "]}";
}

enum class Input { kModel, kTopology };

struct BadInput {
  Input input;
  std::string text;
  std::string message;  // after "pipeplan: error: "
};

using Result = pipeplan::testing::CliResult;
using pipeplan::testing::run_cli;

// A folder of its own for each test, removed afterwards.
class InputErrorsTest : public pipeplan::testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    model_path_ = write("model.json", model_with(""));
  }

  std::string model_path_;
};

const std::vector<BadInput>& bad_inputs() {
  static const std::vector<BadInput> cases = {
      // Malformed JSON.
      {Input::kModel, std::string(R"({"layers": [)") + kLayer,
       "<stdin>: malformed JSON: at line 1, column 71: syntax error while parsing array - "
       "unexpected end of input; expected ']'"},
      {Input::kModel, std::string(R"({"layers": [)") + kLayer + ",]}",
       "<stdin>: malformed JSON: at line 1, column 72: syntax error while parsing value - "
       "unexpected ']'; expected '[', '{', or a literal"},
      {Input::kModel,
       std::string("\x7f"
                   "ELF\x02\x01\x01\x00\x00\x00",
                   10),
       "<stdin>: malformed JSON: at line 1, column 8: NUL byte"},
      {Input::kModel, model_with("") + std::string("\n\0trailing", 10),
       "<stdin>: malformed JSON: at line 2, column 1: NUL byte"},
      {Input::kModel, "{\"layers\": \xFF\xFE[]}",
       "<stdin>: malformed JSON: at line 1, column 12: syntax error while parsing value - "
       "invalid literal; last read: '\"layers\": \\xFF'"},
      {Input::kModel, "",
       "<stdin>: malformed JSON: at line 1, column 1: syntax error while parsing value - "
       "unexpected end of input; expected '[', '{', or a literal"},
      {Input::kModel, "{\"layers\": \xEF\xBB\xBF[]}",
       "<stdin>: malformed JSON: at line 1, column 12: syntax error while parsing value - "
       "invalid literal; last read: '\"layers\": \\xEF'"},
      {Input::kModel, "{\"name\": \"a\xC3(\", \"layers\": []}",
       "<stdin>: malformed JSON: at line 1, column 13: syntax error while parsing value - "
       "invalid string: ill-formed UTF-8 byte; last read: '\"a\\xC3('"},
      {Input::kModel, R"({"x-deep": )" + std::string(200, '[') + std::string(200, ']') + "}",
       "<stdin>: /x-deep" +
           [] {
             std::string pointer;
             for (int i = 0; i < 127; ++i) pointer += "/0";
             return pointer;
           }() +
           ": nesting deeper than 128 levels"},
      {Input::kModel, model_with("") + " {}",
       "<stdin>: malformed JSON: at line 1, column 74: syntax error while parsing value - "
       "unexpected '{'; expected end of input"},
      {Input::kModel, R"({"layers": [], /* note */})",
       "<stdin>: malformed JSON: at line 1, column 16: syntax error while parsing object key - "
       "invalid literal; last read: '\"layers\": [], /'; expected string literal"},
      {Input::kModel, R"({"micro_batches": NaN, "layers": []})",
       "<stdin>: malformed JSON: at line 1, column 19: syntax error while parsing value - "
       "invalid literal; last read: '\"micro_batches\": N'"},
      {Input::kModel, R"({"micro_batches": 1e400, "layers": []})",
       "<stdin>: /micro_batches: must be a finite number, got 1e400"},
      {Input::kModel, R"({"layers": [], "layers": []})",
       "<stdin>: /layers: duplicate key \"layers\""},
      // Wrong types, missing and unknown keys.
      {Input::kModel, "[1, 2]", "<stdin>: must be an object, got array"},
      {Input::kModel, R"({"layers": {}})", "<stdin>: /layers: must be an array, got object"},
      {Input::kModel, R"({"layers": [3]})", "<stdin>: /layers/0: must be an object, got number"},
      {Input::kModel, R"({"name": "m"})", "<stdin>: missing required key \"layers\""},
      {Input::kModel, R"({"layers": [{"backward_ms": 1, "activation_bytes": 1}]})",
       "<stdin>: /layers/0: missing required key \"forward_ms\""},
      {Input::kModel,
       R"({"layers": [{"forward_ms": "1 ms", "backward_ms": 1, "activation_bytes": 1}]})",
       "<stdin>: /layers/0/forward_ms: must be a finite number >= 0, got string \"1 ms\""},
      {Input::kModel,
       R"({"layers": [{"forward_ms": null, "backward_ms": 1, "activation_bytes": 1}]})",
       "<stdin>: /layers/0/forward_ms: must be a finite number >= 0, got null"},
      {Input::kModel,
       R"({"layers": [{"forward_ms": 1, "backward_ms": "Infinity", "activation_bytes": 1}]})",
       "<stdin>: /layers/0/backward_ms: must be a finite number >= 0, got string \"Infinity\""},
      {Input::kModel,
       R"({"layers": [{"forward_ms": 1, "backward_ms": 1, "activation_bytes": -1}]})",
       "<stdin>: /layers/0/activation_bytes: must be a finite number >= 0, got -1"},
      {Input::kModel, R"({"layers": [{"forward_ms": 1, "backward_ms": 1, "activaton_bytes": 1}]})",
       "<stdin>: /layers/0/activaton_bytes: unknown key (did you mean \"activation_bytes\"?)"},
      {Input::kModel, model_with(R"("microbatches": 4)"),
       "<stdin>: /microbatches: unknown key (did you mean \"micro_batches\"?)"},
      {Input::kModel, model_with("\"a\\u001b[31m\": 1"), "<stdin>: /a\\x1B[31m: unknown key"},
      {Input::kModel, model_with(R"("profile": {"batch_size": 6, "gpu": "V100"})"),
       "<stdin>: /profile/gpu: unknown key"},
      {Input::kModel, R"({"nodes": [], "schema": "pipeplan/topology/v1"})",
       "<stdin>: /nodes: unknown key (is this a topology file?)"},
      {Input::kModel, model_with(R"("schema": "pipeplan/topology/v1")"),
       "<stdin>: /schema: must be \"pipeplan/model/v1\", \"pipeplan/model/v2\" or "
       "\"pipeplan/model/v3\", got \"pipeplan/topology/v1\" (is this a topology file?)"},
      {Input::kModel, model_with(R"("schema": "pipeplan/model/v4")"),
       "<stdin>: /schema: must be \"pipeplan/model/v1\", \"pipeplan/model/v2\" or "
       "\"pipeplan/model/v3\", got \"pipeplan/model/v4\""},
      {Input::kModel, model_with(R"("name": "")"), "<stdin>: /name: must be a non-empty string"},
      // Layers and counts.
      {Input::kModel, R"({"layers": []})", "<stdin>: /layers: must list at least one layer"},
      {Input::kModel, std::string(R"({"layers": [{"name": "a", "forward_ms": 1, "backward_ms": 1,
          "activation_bytes": 1}, {"name": "a", "forward_ms": 1, "backward_ms": 1,
          "activation_bytes": 1}]})"),
       "<stdin>: /layers/1/name: duplicate layer name \"a\" (also /layers/0)"},
      {Input::kModel, model_with(R"("micro_batches": 0)"),
       "<stdin>: /micro_batches: must be an integer from 1 to 1048576, got 0"},
      {Input::kModel, model_with(R"("micro_batches": -4)"),
       "<stdin>: /micro_batches: must be an integer from 1 to 1048576, got -4"},
      {Input::kModel, model_with(R"("micro_batches": 2.5)"),
       "<stdin>: /micro_batches: must be an integer from 1 to 1048576, got 2.5"},
      {Input::kModel, model_with(R"("micro_batches": 1e30)"),
       "<stdin>: /micro_batches: must be an integer from 1 to 1048576, got 1e+30"},
      {Input::kModel, model_with(R"("micro_batches": 9223372036854775808)"),
       "<stdin>: /micro_batches: must be an integer from 1 to 1048576, got 9223372036854775808"},
      {Input::kModel, model_with(R"("micro_batches": "16")"),
       "<stdin>: /micro_batches: must be an integer from 1 to 1048576, got string \"16\""},
      {Input::kModel, model_with(R"("profile": {"batch_size": true})"),
       "<stdin>: /profile/batch_size: must be an integer >= 1, got boolean true"},
      {Input::kModel,
       R"({"layers": [{"forward_ms": 1e308, "backward_ms": 1e308, "activation_bytes": 0}]})",
       "<stdin>: /layers: too large: the sum of forward_ms and backward_ms over all layers is "
       "not finite"},

      // Topologies.
      {Input::kTopology, "{}", "<stdin>: the topology has no GPUs (give \"nodes\" or \"gpus\")"},
      {Input::kTopology, R"({"layers": []})",
       "<stdin>: /layers: unknown key (is this a model file?)"},
      {Input::kTopology, R"({"schema": "pipeplan/model/v1", "gpus": [{"id": "a"}]})",
       "<stdin>: /schema: must be \"pipeplan/topology/v1\", got \"pipeplan/model/v1\" (is this a "
       "model file?)"},
      {Input::kTopology, R"({"nodes": [{"name": "n", "gpu": 2}]})",
       "<stdin>: /nodes/0/gpu: unknown key (did you mean \"gpus\"?)"},
      {Input::kTopology, R"({"nodes": [{"gpus": 2}]})",
       "<stdin>: /nodes/0: missing required key \"name\""},
      {Input::kTopology, R"({"nodes": [{"name": "n", "gpus": 0}]})",
       "<stdin>: /nodes/0/gpus: must be an integer >= 1, got 0"},
      {Input::kTopology, R"({"nodes": [{"name": "n", "gpus": 1.5}]})",
       "<stdin>: /nodes/0/gpus: must be an integer >= 1, got 1.5"},
      {Input::kTopology, R"({"nodes": [{"name": "n", "count": -1, "gpus": 1}]})",
       "<stdin>: /nodes/0/count: must be an integer >= 1, got -1"},
      {Input::kTopology, R"({"nodes": [{"name": "n", "count": 18446744073709551615, "gpus": 8}]})",
       "<stdin>: /nodes/0/count: must be an integer >= 1, got 18446744073709551615"},
      {Input::kTopology, R"({"nodes": [{"name": "n", "count": 9223372036854775807, "gpus": 8}]})",
       "<stdin>: /nodes/0: too many GPUs: pipeplan handles at most 131072"},
      {Input::kTopology, R"({"nodes": [{"name": ")" + std::string(300, 'n') + R"(", "gpus": 2}]})",
       "<stdin>: /nodes/0/name: must be at most 256 bytes long, got 300"},
      {Input::kTopology, R"({"gpus": [{"id": "a"}, {"id": "a"}], )" + std::string(kNetwork) + "}",
       "<stdin>: /gpus/1/id: duplicate GPU id \"a\" (also /gpus/0)"},
      {Input::kTopology,
       R"({"nodes": [{"name": "n", "gpus": 2}], "gpus": [{"id": "n/gpu1"}], )" +
           std::string(kNetwork) + "}",
       "<stdin>: /gpus/0/id: GPU id \"n/gpu1\" is already generated by /nodes/0"},
      {Input::kTopology,
       R"({"nodes": [{"name": "a", "count": 11, "gpus": 1}, {"name": "a1", "gpus": 1}], )" +
           std::string(kNetwork) + "}",
       "<stdin>: /nodes/1/name: generated node name \"a1\" collides with the one from /nodes/0"},
      {Input::kTopology,
       R"({"nodes": [{"name": "dgx", "gpus": 2}], "gpus": [{"id": "dgx"}], )" +
           std::string(kNetwork) + "}",
       "<stdin>: /gpus/0/id: a GPU without \"node\" is a node of its own named after its id, "
       "but node \"dgx\" already exists (from /nodes/0)"},
      {Input::kTopology,
       R"({"gpus": [{"id": "a"}, {"id": "b"}],
           "links": [{"between": ["a", "c"], "bandwidth": 1, "latency": 0}]})",
       "<stdin>: /links/0/between/1: unknown GPU \"c\""},
      {Input::kTopology,
       R"({"gpus": [{"id": "a"}, {"id": "b"}],
           "links": [{"between": ["a", "a"], "bandwidth": 1, "latency": 0}]})",
       "<stdin>: /links/0/between: a link needs two different GPUs"},
      {Input::kTopology,
       R"({"gpus": [{"id": "a"}, {"id": "b"}], "links": [{"between": ["a", "b"], "bandwidth": 1,
           "latency": 0}, {"between": ["b", "a"], "bandwidth": 2, "latency": 0}]})",
       "<stdin>: /links/1: second link between \"a\" and \"b\" (first at /links/0)"},
      {Input::kTopology,
       R"({"gpus": [{"id": "a"}, {"id": "b"}],
           "links": [{"between": ["a", "b"], "bandwidth": 1}]})",
       "<stdin>: /links/0: missing required key \"latency\""},
      {Input::kTopology,
       R"({"nodes": [{"name": "n", "gpus": 2, "link": {"bandwidth": 0, "latency": 0}}]})",
       "<stdin>: /nodes/0/link/bandwidth: must be a bandwidth > 0, got 0"},
      {Input::kTopology,
       R"({"nodes": [{"name": "n", "gpus": 2, "link": {"bandwidth": "0 GB/s", "latency": 0}}]})",
       "<stdin>: /nodes/0/link/bandwidth: must be a bandwidth > 0, got \"0 GB/s\""},
      {Input::kTopology,
       R"({"nodes": [{"name": "n", "gpus": 2, "link": {"bandwidth": -5, "latency": 0}}]})",
       "<stdin>: /nodes/0/link/bandwidth: must be a bandwidth > 0, got -5"},
      {Input::kTopology,
       R"({"network": {"bandwidth": 1, "latency": -1e-6}, "gpus": [{"id": "a"}]})",
       "<stdin>: /network/latency: must be a latency >= 0, got -1e-06"},
      {Input::kTopology,
       R"({"network": {"bandwidth": 1, "latency": 1e306}, "gpus": [{"id": "a"}]})",
       "<stdin>: /network/latency: latency out of range, got 1e+306"},
      {Input::kTopology, R"({"gpus": [{"id": "a", "speed": 0}]})",
       "<stdin>: /gpus/0/speed: must be a finite number > 0, got 0"},
      {Input::kTopology, R"({"gpus": [{"id": "a", "speed": -1.5}]})",
       "<stdin>: /gpus/0/speed: must be a finite number > 0, got -1.5"},
      {Input::kTopology, R"({"gpus": [{"id": 7}]})",
       "<stdin>: /gpus/0/id: must be a string, got number 7"},
      {Input::kTopology, R"({"gpus": [{"id": "a", "memory": true}]})",
       "<stdin>: /gpus/0/memory: must be a number or a string with a unit such as \"32 GiB\", got "
       "boolean true"},
      {Input::kTopology, R"({"gpus": [{"id": "a", "memory": "32 GiBs"}]})",
       "<stdin>: /gpus/0/memory: unknown memory unit in \"32 GiBs\"; accepted: B kB MB GB TB KiB "
       "MiB GiB TiB"},
      {Input::kTopology,
       R"({"network": {"bandwidth": "10 gb/s", "latency": 0}, "gpus": [{"id": "a"}]})",
       "<stdin>: /network/bandwidth: unknown bandwidth unit in \"10 gb/s\"; accepted: B/s kB/s "
       "MB/s GB/s TB/s KiB/s MiB/s GiB/s bit/s kbit/s Mbit/s Gbit/s Tbit/s b/s kb/s Mb/s Gb/s "
       "Tb/s bps kbps Mbps Gbps Tbps"},
      {Input::kTopology,
       R"({"network": {"bandwidth": 1, "latency": "2 GB/s"}, "gpus": [{"id": "a"}]})",
       "<stdin>: /network/latency: unknown latency unit in \"2 GB/s\"; accepted: s ms us \xC2\xB5s "
       "\xCE\xBCs ns"},
      {Input::kTopology, R"({"gpus": [{"id": "a", "memory": "100"}]})",
       "<stdin>: /gpus/0/memory: \"100\" has no unit; accepted: B kB MB GB TB KiB MiB GiB TiB"},
      {Input::kTopology, R"({"gpus": [{"id": "a", "memory": "1e999 GB"}]})",
       "<stdin>: /gpus/0/memory: \"1e999 GB\" is out of range"},
      {Input::kTopology, R"({"gpus": [{"id": "a"}, {"id": "b"}]})",
       "<stdin>: topology is not connected: no path between \"a\" and \"b\" (add a link, a node "
       "link or a network)"},
      {Input::kTopology,
       R"({"nodes": [{"name": "x", "gpus": 2, "link": {"bandwidth": 1, "latency": 0}},
           {"name": "y", "gpus": 2, "link": {"bandwidth": 1, "latency": 0}}]})",
       "<stdin>: topology is not connected: no path between \"x/gpu0\" and \"y/gpu0\" (add a "
       "link, a node link or a network)"},
  };
  return cases;
}

TEST_F(InputErrorsTest, EveryBadInputHasItsOwnMessageAndExitCode3) {
  std::set<std::string> messages;
  for (const BadInput& bad : bad_inputs()) {
    SCOPED_TRACE(bad.message);
    std::vector<std::string> args = {"--quiet", "validate"};
    if (bad.input == Input::kTopology) args.push_back(model_path_);
    args.push_back("-");
    Result result = run_cli(args, bad.text);
    EXPECT_EQ(result.code, 3);
    EXPECT_EQ(result.err, "pipeplan: error: " + bad.message + "\n");
    EXPECT_EQ(result.out, "");
    messages.insert(bad.message);
  }
  EXPECT_EQ(messages.size(), bad_inputs().size());  // each its own message
  EXPECT_GE(messages.size(), 30u);
}

TEST_F(InputErrorsTest, BadFilesAreNamedInMessages) {
  std::string model = write("bad model.json", R"({"layers": [{"forward_ms": -1, "backward_ms": 1,
    "activation_bytes": 1}]})");
  Result result = run_cli({"validate", model});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + model +
                            ": /layers/0/forward_ms: must be a finite number >= 0, got -1\n");

  std::string topology = write("topo.json", R"({"gpus": [{"id": "a", "speed": 0}]})");
  result = run_cli({"--quiet", "validate", model_path_, topology});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + topology +
                            ": /gpus/0/speed: must be a finite number > 0, got 0\n");
}

TEST_F(InputErrorsTest, UnreadablePathsAreInputErrors) {
  const std::string missing = (folder_ / "missing.json").string();
  Result result = run_cli({"validate", missing});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err,
            "pipeplan: error: " + missing + ": cannot read: No such file or directory\n");

  result = run_cli({"--quiet", "validate", model_path_, folder_.string()});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + folder_.string() + ": cannot read: is a directory\n");

  result = run_cli({"validate", folder_.string()});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + folder_.string() + ": cannot read: is a directory\n");

  const std::string through_file = model_path_ + "/x.json";
  result = run_cli({"--quiet", "validate", model_path_, through_file});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err, "pipeplan: error: " + through_file + ": cannot read: Not a directory\n");
}

TEST_F(InputErrorsTest, HugeClustersFailFastInsteadOfAllocating) {
  // A small file that asks for billions of GPUs or gigabytes of ids is refused up front.
  Result result = run_cli({"--quiet", "validate", model_path_, "-"},
                          R"({"nodes": [{"name": "n", "count": 100000, "gpus": 100000}]})");
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err,
            "pipeplan: error: <stdin>: /nodes/0: too many GPUs: pipeplan handles at most 131072\n");
  result =
      run_cli({"--quiet", "validate", model_path_, "-"},
              R"({"nodes": [{"name": "n", "count": 65536, "gpus": 2}, {"name": "m", "gpus": 1}]})");
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.err,
            "pipeplan: error: <stdin>: /nodes/1: too many GPUs: pipeplan handles at most 131072\n");
}

TEST_F(InputErrorsTest, DisconnectedClustersAreRefusedBeforeThePairCostsAreAllocated) {
  if (testing::kSanitized) {
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit below";
  }
  // 8,192 one-GPU nodes and no network: the pair matrices would take 600 MB; the real binary,
  // limited to 400 MB of address space, must refuse the cluster as disconnected (exit 3), not
  // run out of memory first (exit 1).
  const std::string topology =
      write("disconnected.json", R"({"nodes": [{"name": "n", "count": 8192, "gpus": 1}]})");
  const std::string command = "ulimit -v 400000 && '" + std::string(PIPEPLAN_BINARY) +
                              "' --quiet validate '" + model_path_ + "' '" + topology + "' 2> '" +
                              (folder_ / "err.txt").string() + "'";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_EQ(read(folder_ / "err.txt"),
            "pipeplan: error: " + topology +
                ": topology is not connected: no path between \"n0/gpu0\" and \"n1/gpu0\" (add "
                "a link, a node link or a network)\n");
}

}  // namespace
}  // namespace pipeplan::cli
