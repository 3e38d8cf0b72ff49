// The export command, in-process through cli::run, plus one run of the binary.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../support/cli_run.hpp"
#include "pipeplan/cli/cli.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using Result = pipeplan::testing::CliResult;
using pipeplan::testing::run_cli;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class ExportCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipeplan-export-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const fs::path data = fs::path(PIPEPLAN_SOURCE_DIR) / "tests/data/exports";
    for (const char* name : {"toy.plan.json", "toy.model.json", "toy.topo.json"}) {
      fs::copy_file(data / name, dir_ / name);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
  }
  std::string read(const std::string& name) const { return slurp(dir_ / name); }
  std::vector<std::string> checked(std::vector<std::string> args) const {
    args.insert(args.end(),
                {"--model", path("toy.model.json"), "--topology", path("toy.topo.json")});
    return args;
  }
  fs::path dir_;
};

TEST_F(ExportCommandTest, EveryFormatWithTheModelAndTopology) {
  for (const char* format : {"chrome-trace", "svg", "html", "ranks", "torch-split"}) {
    SCOPED_TRACE(format);
    const Result stdout_run =
        run_cli(checked({"export", path("toy.plan.json"), "--format", format}));
    ASSERT_EQ(stdout_run.code, 0) << stdout_run.err;
    EXPECT_TRUE(stdout_run.err.empty()) << stdout_run.err;
    const std::string file = std::string("out.") + format;
    const Result file_run =
        run_cli(checked({"export", path("toy.plan.json"), "-f", format, "-o", path(file)}));
    ASSERT_EQ(file_run.code, 0) << file_run.err;
    EXPECT_TRUE(file_run.out.empty());
    EXPECT_EQ(file_run.err,
              path("toy.plan.json") + ": " + format + " written to " + path(file) + "\n");
    EXPECT_EQ(read(file), stdout_run.out);
  }
  EXPECT_EQ(json::parse(read("out.torch-split")).at("split_points"), json::array({"block2"}));
  EXPECT_EQ(read("out.svg").rfind("<?xml", 0), 0u);
}

TEST_F(ExportCommandTest, ThePlanAloneIsEnoughForTheTimelineViews) {
  for (const char* format : {"chrome-trace", "svg", "html"}) {
    const Result alone = run_cli({"export", path("toy.plan.json"), "--format", format});
    EXPECT_EQ(alone.code, 0) << format << ": " << alone.err;
  }
  // The chart is the same either way; the report gains the layer names with the model.
  EXPECT_EQ(run_cli({"export", path("toy.plan.json"), "--format", "svg"}).out,
            run_cli(checked({"export", path("toy.plan.json"), "--format", "svg"})).out);
  EXPECT_EQ(
      run_cli({"export", path("toy.plan.json"), "--format", "html"}).out.find("embed .. block1"),
      std::string::npos);
  // Standard input works too.
  const Result piped = run_cli({"export", "-", "--format", "svg"}, read("toy.plan.json"));
  EXPECT_EQ(piped.code, 0) << piped.err;
}

TEST_F(ExportCommandTest, LauncherFormatsNeedTheModel) {
  for (const char* format : {"ranks", "torch-split"}) {
    const Result result = run_cli({"export", path("toy.plan.json"), "--format", format});
    EXPECT_EQ(result.code, 2);
    EXPECT_EQ(result.err,
              std::string("pipeplan: error: --format ") + format +
                  " needs --model and --topology (the layer names come from the model)\n");
  }
  const Result half = run_cli(
      {"export", path("toy.plan.json"), "--format", "svg", "--model", path("toy.model.json")});
  EXPECT_EQ(half.code, 2);
  EXPECT_EQ(half.err,
            "pipeplan: error: --model and --topology go together: give both to check the plan "
            "against them, or neither\n");
  const Result unknown = run_cli({"export", path("toy.plan.json"), "--format", "pdf"});
  EXPECT_EQ(unknown.code, 2);
  const Result missing = run_cli({"export", path("toy.plan.json")});
  EXPECT_EQ(missing.code, 2);
}

TEST_F(ExportCommandTest, AnInvalidPlanIsNeverExported) {
  json plan = json::parse(read("toy.plan.json"));
  plan["schedule"]["compute"][0]["end_ms"] = 9;  // the forward lasts 8 ms
  write("bad.json", plan.dump(1));
  write("keep.svg", "keep me");
  const Result with_model =
      run_cli(checked({"export", path("bad.json"), "--format", "svg", "-o", path("keep.svg")}));
  EXPECT_EQ(with_model.code, 3);
  // The longer forward now overlaps the next one on its GPU: a structural rule, so the message
  // is the one a plan read without the model gets (simulate::check_structure).
  EXPECT_EQ(
      with_model.err.rfind("pipeplan: error: " + path("bad.json") + ": /schedule/compute/2: ", 0),
      0u)
      << with_model.err;
  EXPECT_EQ(read("keep.svg"), "keep me");

  plan = json::parse(read("toy.plan.json"));
  plan["stages"][1]["gpus"][0] = "n0/gpu0";
  write("bad.json", plan.dump(1));
  const Result alone = run_cli({"export", path("bad.json"), "--format", "chrome-trace"});
  EXPECT_EQ(alone.code, 3);
  EXPECT_EQ(alone.err, "pipeplan: error: " + path("bad.json") +
                           ": /stages/1/gpus/0: GPU \"n0/gpu0\" already serves stage 0\n");
  write("broken.json", "{\"stages\": [");
  EXPECT_EQ(run_cli({"export", path("broken.json"), "--format", "svg"}).code, 3);
}

TEST_F(ExportCommandTest, TorchSplitWithoutLayerNamesIsInvalidInput) {
  json model = json::parse(read("toy.model.json"));
  for (json& layer : model["layers"]) layer.erase("name");
  write("unnamed.json", model.dump());
  const Result result =
      run_cli({"export", path("toy.plan.json"), "--format", "torch-split", "--model",
               path("unnamed.json"), "--topology", path("toy.topo.json")});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(
      result.err,
      "pipeplan: error: " + path("unnamed.json") +
          ": /layers/2: has no \"name\"; torch-split needs the name of the layer that begins each "
          "stage after the first (layer 2 begins stage 1)\n");
  // ranks still works: unnamed layers are null.
  const Result ranks = run_cli({"export", path("toy.plan.json"), "--format", "ranks", "--model",
                                path("unnamed.json"), "--topology", path("toy.topo.json")});
  ASSERT_EQ(ranks.code, 0) << ranks.err;
  EXPECT_EQ(json::parse(ranks.out)[0].at("layers").at("names"), json::array({nullptr, nullptr}));
}

// Issue 35: a plan of a model written by `model transformer` exports every option its estimate
// assumed: the shape in its architecture family, the number format, sequence parallelism,
// flash attention and selective recomputation; and the environment tensor parallelism needs.
TEST_F(ExportCommandTest, MegatronStatesWhatTheEstimateAssumed) {
  write("topo.json", R"({"nodes": [{"name": "n", "gpus": 4, "memory": "80 GiB",
    "link": {"bandwidth": "200 GB/s", "latency": "2 us"}}]})");
  ASSERT_EQ(run_cli({"model",
                     "transformer",
                     "--layers",
                     "4",
                     "--hidden",
                     "256",
                     "--heads",
                     "8",
                     "--kv-heads",
                     "2",
                     "--ffn",
                     "swiglu",
                     "--sequence",
                     "128",
                     "--vocab",
                     "1000",
                     "--micro-batch-size",
                     "2",
                     "--dtype",
                     "fp16",
                     "--sequence-parallel",
                     "--selective-recompute",
                     "--flash-attention",
                     "-o",
                     path("llama.json")})
                .code,
            0);
  const Result planned = run_cli({"plan", path("llama.json"), path("topo.json"), "--planner",
                                  "megatron", "--tensor-parallel", "2", "--pipeline-parallel", "2",
                                  "-m", "4", "-o", path("plan.json")});
  ASSERT_EQ(planned.code, 0) << planned.err;
  const Result exported = run_cli({"export", path("plan.json"), "--format", "megatron", "--model",
                                   path("llama.json"), "--topology", path("topo.json")});
  ASSERT_EQ(exported.code, 0) << exported.err;
  const json out = json::parse(exported.out);
  EXPECT_EQ(out.at("arguments"), json({"--tensor-model-parallel-size",
                                       "2",
                                       "--pipeline-model-parallel-size",
                                       "2",
                                       "--num-layers",
                                       "4",
                                       "--micro-batch-size",
                                       "2",
                                       "--global-batch-size",
                                       "8",
                                       "--hidden-size",
                                       "256",
                                       "--num-attention-heads",
                                       "8",
                                       "--ffn-hidden-size",
                                       "768",
                                       "--seq-length",
                                       "128",
                                       "--max-position-embeddings",
                                       "128",
                                       "--group-query-attention",
                                       "--num-query-groups",
                                       "2",
                                       "--swiglu",
                                       "--normalization",
                                       "RMSNorm",
                                       "--position-embedding-type",
                                       "rope",
                                       "--disable-bias-linear",
                                       "--untie-embeddings-and-output-weights",
                                       "--fp16",
                                       "--sequence-parallel",
                                       "--attention-backend",
                                       "flash",
                                       "--recompute-granularity",
                                       "selective"}));
  EXPECT_EQ(out.at("recompute"), "selective");
  EXPECT_EQ(out.at("environment"), json({"CUDA_DEVICE_MAX_CONNECTIONS=1"}));
  EXPECT_NE(out.at("notes").dump().find("the estimate assumed 1000 entries"), std::string::npos);
  // A profile without its description says nothing it does not know, and tensor parallelism of
  // 1 needs no environment.
  const json toy =
      json::parse(run_cli(checked({"export", path("toy.plan.json"), "--format", "megatron"})).out);
  EXPECT_EQ(toy.at("arguments").size(), 4U);
  EXPECT_EQ(toy.at("environment"), json::array());
}

// Issue 33: a Nemotron-4 style model (`--ffn relu2`) exports its family: squared ReLU,
// LayerNorm, rotary positions, no biases, untied embeddings; and, trained without dropout as
// Nemotron-4 is, dropouts of 0 (Megatron-LM's default is 0.1).
TEST_F(ExportCommandTest, MegatronStatesTheRelu2Family) {
  write("topo.json", R"({"nodes": [{"name": "n", "gpus": 4, "memory": "80 GiB",
    "link": {"bandwidth": "200 GB/s", "latency": "2 us"}}]})");
  ASSERT_EQ(run_cli({"model", "transformer", "--layers",   "4",          "--hidden",
                     "256",   "--heads",     "8",          "--kv-heads", "2",
                     "--ffn", "relu2",       "--sequence", "128",        "--vocab",
                     "1000",  "--dropout",   "off",        "-o",         path("nemotron.json")})
                .code,
            0);
  const Result planned = run_cli({"plan", path("nemotron.json"), path("topo.json"), "--planner",
                                  "megatron", "--tensor-parallel", "2", "--pipeline-parallel", "2",
                                  "-m", "4", "-o", path("plan.json")});
  ASSERT_EQ(planned.code, 0) << planned.err;
  const Result exported = run_cli({"export", path("plan.json"), "--format", "megatron", "--model",
                                   path("nemotron.json"), "--topology", path("topo.json")});
  ASSERT_EQ(exported.code, 0) << exported.err;
  const json arguments = json::parse(exported.out).at("arguments");
  std::vector<std::string> after;
  bool found = false;
  for (const json& argument : arguments) {
    found = found || argument == "--ffn-hidden-size";
    if (found) after.push_back(argument.get<std::string>());
  }
  EXPECT_EQ(after, (std::vector<std::string>{"--ffn-hidden-size",
                                             "1024",
                                             "--seq-length",
                                             "128",
                                             "--max-position-embeddings",
                                             "128",
                                             "--group-query-attention",
                                             "--num-query-groups",
                                             "2",
                                             "--squared-relu",
                                             "--normalization",
                                             "LayerNorm",
                                             "--position-embedding-type",
                                             "rope",
                                             "--disable-bias-linear",
                                             "--untie-embeddings-and-output-weights",
                                             "--bf16",
                                             "--attention-dropout",
                                             "0.0",
                                             "--hidden-dropout",
                                             "0.0"}));
}

// bf16 gradients are Megatron-LM's --grad-reduce-in-bf16; an optimizer without master weights
// (optimizer_dtype bf16) is none of Megatron-LM's, and the export refuses it (exit 3).
TEST_F(ExportCommandTest, MegatronStatesBf16GradientsAndRefusesABf16Optimizer) {
  write("topo.json", R"({"nodes": [{"name": "n", "gpus": 4, "memory": "80 GiB",
    "link": {"bandwidth": "200 GB/s", "latency": "2 us"}}]})");
  const std::vector<std::string> shape = {"model",      "transformer", "--layers", "4",
                                          "--hidden",   "256",         "--heads",  "8",
                                          "--sequence", "128",         "--vocab",  "1000"};
  auto exported = [&](const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> args = shape;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"-o", path(name + ".json")});
    EXPECT_EQ(run_cli(args).code, 0);
    EXPECT_EQ(run_cli({"plan", path(name + ".json"), path("topo.json"), "--planner", "megatron",
                       "--tensor-parallel", "2", "--pipeline-parallel", "2", "-m", "4", "-o",
                       path(name + ".plan.json")})
                  .code,
              0);
    return run_cli({"export", path(name + ".plan.json"), "--format", "megatron", "--model",
                    path(name + ".json"), "--topology", path("topo.json")});
  };
  const Result grads = exported("grads", {"--gradient-dtype", "bf16"});
  ASSERT_EQ(grads.code, 0) << grads.err;
  const auto arguments = nlohmann::json::parse(grads.out)["arguments"];
  EXPECT_NE(std::find(arguments.begin(), arguments.end(), "--grad-reduce-in-bf16"),
            arguments.end());
  const Result plain = exported("plain", {});
  EXPECT_EQ(plain.out.find("--grad-reduce-in-bf16"), std::string::npos);
  const Result optimizer = exported("optimizer", {"--optimizer-dtype", "bf16"});
  EXPECT_EQ(optimizer.code, 3);
  EXPECT_EQ(optimizer.err, "pipeplan: error: " + path("optimizer.json") +
                               ": /transformer/optimizer_dtype: the model's optimizer keeps bf16 "
                               "moments and no master weights, and Megatron-LM's keeps master "
                               "weights (--main-params-dtype fp32 or fp16): describe the model "
                               "with --optimizer-dtype fp32\n");
}

TEST_F(ExportCommandTest, UnwritableOutputIsExitFive) {
  const Result result = run_cli(
      {"export", path("toy.plan.json"), "--format", "svg", "-o", path("no/such/dir/x.svg")});
  EXPECT_EQ(result.code, 5);
}

TEST_F(ExportCommandTest, BinaryWritesTheSameBytes) {
  const std::string command = std::string("'") + PIPEPLAN_BINARY + "' export '" +
                              path("toy.plan.json") + "' --format chrome-trace";
  const Result binary = pipeplan::testing::run_shell(command);
  EXPECT_EQ(binary.code, 0);
  EXPECT_EQ(binary.out, run_cli({"export", path("toy.plan.json"), "--format", "chrome-trace"}).out);
}

// `plan --trace --report` and `plan --check`, on the toy model.
class PlanExtrasTest : public ExportCommandTest {
 protected:
  std::vector<std::string> plan(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"-q", "plan", path("toy.model.json"), path("toy.topo.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

TEST_F(PlanExtrasTest, WritesTheTraceAndTheReportAlongsideThePlan) {
  const Result result = run_cli(
      plan({"-o", path("p.json"), "--trace", path("p.trace.json"), "--report", path("p.html")}));
  ASSERT_EQ(result.code, 0) << result.err;
  const Result trace = run_cli(checked({"export", path("p.json"), "--format", "chrome-trace"}));
  const Result html = run_cli(checked({"export", path("p.json"), "--format", "html"}));
  EXPECT_EQ(read("p.trace.json"), trace.out);
  EXPECT_EQ(read("p.html"), html.out);
  // The plan itself still goes to standard output when -o is absent.
  const Result to_stdout = run_cli(plan({"--report", path("q.html")}));
  EXPECT_EQ(json::parse(to_stdout.out).at("schema"), "pipeplan/plan/v1");
  EXPECT_EQ(read("q.html"), html.out);
}

TEST_F(PlanExtrasTest, TraceAndReportNeedFilesAndNoCheck) {
  EXPECT_EQ(run_cli(plan({"--trace", "-"})).code, 2);
  EXPECT_EQ(run_cli(plan({"--report", ""})).code, 2);
  ASSERT_EQ(run_cli(plan({"-o", path("p.json")})).code, 0);
  EXPECT_EQ(run_cli(plan({"--check", path("p.json"), "--trace", path("t.json")})).code, 2);
  EXPECT_FALSE(fs::exists(path("t.json")));
}

TEST_F(PlanExtrasTest, CheckSaysWhatChanged) {
  ASSERT_EQ(run_cli(plan({"-o", path("p.json")})).code, 0);
  const json fresh = json::parse(read("p.json"));
  ASSERT_EQ(run_cli(plan({"--check", path("p.json")})).code, 0);
  auto differs = [&](const std::function<void(json&)>& change) {
    json existing = fresh;
    change(existing);
    write("old.json", existing.dump(2));
    const Result result = run_cli(plan({"--check", path("old.json")}));
    EXPECT_EQ(result.code, 6);
    const std::string prefix = "pipeplan: " + path("old.json") + " differs: ";
    EXPECT_EQ(result.err.rfind(prefix, 0), 0u) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    return result.err.substr(prefix.size(), result.err.size() - prefix.size() - 1);
  };
  auto ids = [](const json& list) {
    std::string out;
    for (const json& id : list) out += (out.empty() ? "" : ", ") + id.get<std::string>();
    return out;
  };
  auto layout = [](const json& stages) {
    std::string out;
    for (const json& s : stages) {
      out += (out.empty() ? "" : " | ") + s.at("first_layer").dump() + "-" +
             s.at("last_layer").dump() + " x" + std::to_string(s.at("gpus").size());
    }
    return out;
  };
  const json& stage0 = fresh.at("stages")[0];
  ASSERT_GE(stage0.at("gpus").size(), 2u);
  ASSERT_EQ(fresh.at("stages").size(), 2u);

  // The same GPUs in another order.
  json reversed = stage0.at("gpus");
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(differs([&](json& p) { p["stages"][0]["gpus"] = reversed; }),
            "GPUs of stage 0 " + ids(reversed) + " -> " + ids(stage0.at("gpus")));
  // Fewer GPUs.
  json fewer = fresh.at("stages");
  fewer[0]["gpus"].erase(0);
  EXPECT_EQ(differs([&](json& p) { p["stages"] = fewer; }),
            "stages " + layout(fewer) + " -> " + layout(fresh.at("stages")) + "; GPUs used " +
                std::to_string(fresh.at("gpus").size() - 1) + " -> " +
                std::to_string(fresh.at("gpus").size()));
  // Other layer ranges.
  json moved = fresh.at("stages");
  moved[0]["last_layer"] = 0;
  moved[1]["first_layer"] = 1;
  EXPECT_EQ(differs([&](json& p) { p["stages"] = moved; }),
            "stages " + layout(moved) + " -> " + layout(fresh.at("stages")));
  // The iteration time, the planner, the micro-batches.
  EXPECT_EQ(differs([](json& p) { p["iteration_ms"] = 100; }), "iteration 100 ms -> 89.43 ms");
  EXPECT_EQ(differs([](json& p) { p["planner"] = "gpipe"; }), "planner gpipe -> spp");
  EXPECT_EQ(differs([](json& p) {
              p["micro_batches"] = 4;
              p["iteration_ms"] = 50.5;
            }),
            "micro-batches 4 -> 6; iteration 50.5 ms -> 89.43 ms");
  // Only the schedule, only the formatting, not JSON.
  EXPECT_EQ(differs([](json& p) { p["schedule"]["compute"][0]["start_ms"] = 0.5; }),
            "the schedule changed");
  write("old.json", fresh.dump(4));
  EXPECT_EQ(run_cli(plan({"--check", path("old.json")})).err,
            "pipeplan: " + path("old.json") + " differs: formatting only (same content)\n");
  write("old.json", "{");
  EXPECT_EQ(run_cli(plan({"--check", path("old.json")})).err,
            "pipeplan: " + path("old.json") + " differs: the existing file is not JSON\n");
}

}  // namespace
}  // namespace pipeplan::cli
