// `pipeplan model transformer` and `pipeplan model gpus`, in-process, and a transformer model
// planned on a topology whose GPUs name catalogue types.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/cli_run.hpp"
#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;
using pipeplan::testing::run_cli;

class ModelCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() /
              ("pipeplan-model-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  // The description `model transformer -q ARGS` writes, read back (the run must succeed).
  static model::TransformerConfig written(std::vector<std::string> args) {
    args.insert(args.begin(), {"model", "transformer", "-q"});
    auto result = run_cli(args);
    EXPECT_EQ(result.code, 0) << result.err;
    return *model::read_model(io::source_from_text("out", result.out)).transformer;
  }
  std::string path(const std::string& name) const { return (folder_ / name).string(); }
  static std::string contents(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  fs::path folder_;
};

TEST_F(ModelCommandTest, WritesAPresetThatPipeplanReads) {
  const std::string file = path("llama.json");
  auto result = run_cli({"model", "transformer", "--preset", "llama3-8b", "--gpu", "H100",
                         "--sequence-parallel", "--micro-batches", "16", "-o", file});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err.rfind("model \"llama3-8b\": 32 decoder layers, ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(" per micro-batch of 1 on one H100-SXM, tensor-parallel degrees 1, 2, "
                            "4, 8, no dropout, GEMMs at most 80.3% of the bf16 peak -> " +
                            file),
            std::string::npos)
      << result.err;
  const model::Model model = model::read_model(io::source_from_text("llama.json", contents(file)));
  EXPECT_EQ(model.layers.size(), 34u);
  EXPECT_EQ(model.micro_batches, 16);
  EXPECT_EQ(model.profile_device, "H100-SXM");
  EXPECT_EQ(model.layers[5].tensor_parallel->degrees, (std::vector<int>{1, 2, 4, 8}));
  // Standard output gets the same bytes when there is no -o.
  auto again = run_cli({"model", "transformer", "--preset", "llama3-8b", "--gpu", "H100",
                        "--sequence-parallel", "--micro-batches", "16", "--quiet"});
  EXPECT_EQ(again.out, contents(file));
  EXPECT_EQ(again.err, "");
}

// torchtitan's per-operator checkpointing: the summary says so, the file carries the key, and
// reading it back keeps the smaller stash; without fused attention the option is refused.
TEST_F(ModelCommandTest, WritesAPerOperatorRecomputingModel) {
  const std::string file = path("titan.json");
  auto result = run_cli({"model", "transformer", "--preset", "llama3.1-8b", "--gpu", "H100",
                         "--flash-attention", "--per-op-recompute", "-o", file});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_NE(result.err.find(", no dropout, per-operator recomputation, GEMMs at most "),
            std::string::npos)
      << result.err;
  const model::Model model = model::read_model(io::source_from_text("titan.json", contents(file)));
  ASSERT_TRUE(model.transformer.has_value());
  EXPECT_TRUE(model.transformer->per_op_recompute);
  // 63,616 bytes per token at b = 1, s = 8,192 (docs/transformer-model.md).
  EXPECT_EQ(model.layers[1].stash_bytes, 63616.0 * 8192);
  auto refused = run_cli({"model", "transformer", "--preset", "llama3.1-8b", "--per-op-recompute",
                          "-o", path("refused.json")});
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.err,
            "pipeplan: error: --per-op-recompute: needs --flash-attention: the policy keeps the "
            "fused attention's output and recomputes nothing of it\n");
  EXPECT_FALSE(fs::exists(path("refused.json")));
}

TEST_F(ModelCommandTest, ExplicitShapeAndOverrides) {
  auto result = run_cli({"model", "transformer", "--layers", "2", "--hidden", "64", "--heads", "4",
                         "--sequence", "16", "--vocab", "100", "--degrees", "1,2", "--name", "tiny",
                         "--quiet"});
  ASSERT_EQ(result.code, 0) << result.err;
  const model::Model model = model::read_model(io::source_from_text("out", result.out));
  EXPECT_EQ(model.name, "tiny");
  EXPECT_EQ(model.layers.size(), 4u);
  EXPECT_EQ(model.layers[1].tensor_parallel->degrees, (std::vector<int>{1, 2}));
  // A preset's field given on the command line wins.
  auto shorter = run_cli({"model", "transformer", "--preset", "opt-350m", "--layers", "3", "-q"});
  ASSERT_EQ(shorter.code, 0) << shorter.err;
  EXPECT_EQ(model::read_model(io::source_from_text("out", shorter.out)).layers.size(), 5u);
}

// Issue 34: integers as `plan` reads them (decimal digits only, sizes from 1), and an empty
// name or output path is a usage error naming the option.
TEST_F(ModelCommandTest, ReadsOptionsLikePlan) {
  auto check = [](const std::vector<std::string>& extra, const std::string& message) {
    std::vector<std::string> args{"model", "transformer", "--preset", "opt-350m"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto result = run_cli(args);
    EXPECT_EQ(result.code, 2) << message;
    EXPECT_EQ(result.err, "pipeplan: error: " + message + " (see pipeplan --help)\n");
    EXPECT_EQ(result.out, "");
  };
  check({"--micro-batches", "0x8"},
        "--micro-batches: must be an integer from 1 to 1048576, got \"0x8\"");
  check({"--micro-batch-size", "0x2"},
        "--micro-batch-size: must be an integer from 1 to 1048576, got \"0x2\"");
  check({"--kv-heads", "0"}, "--kv-heads: must be an integer from 1 to 2147483647, got \"0\"");
  check({"--ffn-hidden", "0"}, "--ffn-hidden: must be an integer from 1 to 2147483647, got \"0\"");
  check({"--degrees", "1,0x2"}, "--degrees: must be an integer from 1 to 65536, got \"0x2\"");
  check({"--name", ""}, "--name: an empty name names no model");
  check({"-o", ""}, "--output: an empty path names no file (use - for standard output)");
  // A leading zero is decimal, not octal: 010 layers are ten.
  auto ten = run_cli({"model", "transformer", "--preset", "opt-350m", "--layers", "010", "-q"});
  ASSERT_EQ(ten.code, 0) << ten.err;
  EXPECT_EQ(model::read_model(io::source_from_text("out", ten.out)).layers.size(), 12u);
}

TEST_F(ModelCommandTest, RejectsBadShapesAsUsageErrors) {
  auto check = [](const std::vector<std::string>& args, const std::string& message) {
    auto result = run_cli(args);
    EXPECT_EQ(result.code, 2) << message;
    EXPECT_EQ(result.err, "pipeplan: error: " + message + "\n");
    EXPECT_EQ(result.out, "");
  };
  check({"model", "transformer", "--preset", "gpt3-175b", "--heads", "7"},
        "--heads: must divide --hidden (12288), got 7");
  check({"model", "transformer", "--preset", "opt-350m", "--layers", "70000"},
        "--layers: must be at most 65536");
  check({"model", "transformer", "--preset", "opt-350m", "--micro-batch-size", "0"},
        "--micro-batch-size: must be an integer from 1 to 1048576, got \"0\" (see pipeplan "
        "--help)");
  check({"model", "transformer", "--preset", "opt-350m", "--gpu", "TPUv4"},
        "--gpu: unknown GPU \"TPUv4\" (known: " + hardware::catalogue_names() + ")");
  check({"model", "transformer", "--preset", "llama3-8b", "--degrees", "1,3"},
        "--degrees: 3 must divide --heads, --kv-heads and --ffn-hidden (32, 8, 14336)");
  EXPECT_EQ(run_cli({"model", "transformer", "--preset", "opt-350m", "--dtype", "int8"}).code, 2);
  EXPECT_EQ(run_cli({"model", "transformer", "--preset", "opt-350m", "--ffn", "relu"}).code, 2);
  EXPECT_EQ(run_cli({"model"}).code, 2);
}

// Issue 33 item 7: the GEMMs are capped at the GPU's measured maximum unless told otherwise.
TEST_F(ModelCommandTest, CapsTheGemmsAtTheMeasuredMaximum) {
  auto ceiling_of = [](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--preset", "gpt3-13b"});
    return written(extra).matmul_ceiling;
  };
  EXPECT_DOUBLE_EQ(ceiling_of({}), 271.2 / 312);  // the default A100-80GB
  EXPECT_DOUBLE_EQ(ceiling_of({"--gpu", "H100"}), 794.5 / 989.4);
  EXPECT_DOUBLE_EQ(ceiling_of({"--gpu", "H100", "--dtype", "fp8"}), 1402.6 / 1978.9);
  EXPECT_EQ(ceiling_of({"--gpu", "H100", "--dtype", "tf32"}), 1);  // none measured
  EXPECT_EQ(ceiling_of({"--gpu", "B200"}), 1);
  EXPECT_EQ(ceiling_of({"--gpu", "H100", "--matmul-ceiling", "0.7"}), 0.7);
  EXPECT_EQ(ceiling_of({"--matmul-ceiling", "1"}), 1);
  auto beyond =
      run_cli({"model", "transformer", "--preset", "gpt3-13b", "--matmul-ceiling", "1.5"});
  EXPECT_EQ(beyond.code, 2);
  EXPECT_EQ(beyond.err,
            "pipeplan: error: --matmul-ceiling: must be a fraction of the peak above 0 and at most "
            "1, got 1.5\n");
  auto zero = run_cli({"model", "transformer", "--preset", "gpt3-13b", "--matmul-ceiling", "0"});
  EXPECT_EQ(zero.code, 2);
  auto text = run_cli({"model", "transformer", "--preset", "gpt3-13b", "--matmul-ceiling", "0.8x"});
  EXPECT_EQ(text.err,
            "pipeplan: error: --matmul-ceiling: must be a fraction of the peak above 0 and at most "
            "1, got \"0.8x\"\n");
}

// FP8 training's attention: bf16 unless told (Transformer Engine's default recipe), and the
// option only with --dtype fp8.
TEST_F(ModelCommandTest, Fp8TrainingRunsItsAttentionInBf16UnlessTold) {
  auto attention_of = [](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--preset", "gpt3-13b"});
    return written(extra).attention_dtype;
  };
  EXPECT_FALSE(attention_of({}).has_value());  // bf16 training: its own format
  EXPECT_EQ(attention_of({"--gpu", "H100", "--dtype", "fp8"}), hardware::DType::kBf16);
  EXPECT_EQ(attention_of({"--gpu", "H100", "--dtype", "fp8", "--attention-dtype", "fp8"}),
            hardware::DType::kFp8);
  // The summary line says so (`validate` prints the same settings).
  auto said = run_cli({"model", "transformer", "--preset", "gpt3-13b", "--gpu", "H100", "--dtype",
                       "fp8", "-o", "-"});
  EXPECT_NE(said.err.find(", GEMMs at most 70.9% of the fp8 peak, attention in bf16\n"),
            std::string::npos)
      << said.err;
  auto refused =
      run_cli({"model", "transformer", "--preset", "gpt3-13b", "--attention-dtype", "bf16"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.err,
            "pipeplan: error: --attention-dtype: only with --dtype fp8 (attention runs in the "
            "training format), got bf16\n");
  EXPECT_EQ(run_cli({"model", "transformer", "--preset", "gpt3-13b", "--gpu", "H100", "--dtype",
                     "fp8", "--attention-dtype", "fp16"})
                .code,
            2);
}

// Dropout as each preset's model was trained: off for Llama, Qwen, Mistral and Nemotron-4.
TEST_F(ModelCommandTest, DropoutAsThePresetWasTrained) {
  auto dropout_of = [](const std::vector<std::string>& extra) { return written(extra).dropout; };
  for (const model::TransformerPreset& preset : model::transformer_presets()) {
    const bool published = preset.name.rfind("gpt3", 0) == 0 || preset.name.rfind("opt", 0) == 0 ||
                           preset.name == "mt-nlg-530b";
    EXPECT_EQ(dropout_of({"--preset", preset.name, "--layers", "1"}), published) << preset.name;
  }
  EXPECT_TRUE(dropout_of({"--preset", "llama3-8b", "--layers", "1", "--dropout", "on"}));
  EXPECT_FALSE(dropout_of({"--preset", "gpt3-13b", "--layers", "1", "--dropout", "off"}));
  EXPECT_TRUE(dropout_of(
      {"--layers", "1", "--hidden", "64", "--heads", "4", "--sequence", "16", "--vocab", "100"}));
  EXPECT_EQ(run_cli({"model", "transformer", "--preset", "gpt3-13b", "--dropout", "0"}).code, 2);
}

TEST_F(ModelCommandTest, ListsTheCatalogue) {
  auto table = run_cli({"model", "gpus"});
  ASSERT_EQ(table.code, 0) << table.err;
  for (const hardware::GpuType& gpu : hardware::gpu_catalogue()) {
    EXPECT_NE(table.out.find("\n" + gpu.name + " "), std::string::npos) << gpu.name;
  }
  auto json = run_cli({"model", "gpus", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  ASSERT_EQ(parsed.size(), hardware::gpu_catalogue().size());
  EXPECT_EQ(parsed[2]["name"], "A100-80GB");
  EXPECT_EQ(parsed[2]["dense_tflops"]["bf16"], 312);
  EXPECT_EQ(parsed[2]["source"], hardware::find_gpu("A100-80GB")->source);
}

TEST_F(ModelCommandTest, TopologyTypesTakeTheirSpeedFromTheModelsGpu) {
  const std::string model = path("m.json");
  ASSERT_EQ(run_cli({"model", "transformer", "--preset", "opt-350m", "--micro-batches", "8", "-q",
                     "-o", model})
                .code,
            0);
  const std::string topo = path("topo.json");
  std::ofstream(topo) << R"({"nodes": [{"name": "h", "count": 2, "gpus": 2, "type": "H100-SXM",
    "link": {"bandwidth": "450 GB/s", "latency": "2 us"}}],
    "network": {"bandwidth": "50 GB/s", "latency": "5 us"}})";
  auto validate = run_cli({"validate", model, topo});
  ASSERT_EQ(validate.code, 0) << validate.err;
  EXPECT_NE(validate.err.find(", speed " + io::format_number(989.4 / 312) + ", memory " +
                              io::format_bytes(80.0 * (1 << 30))),
            std::string::npos)
      << validate.err;
  EXPECT_NE(validate.err.find(", tensor-parallel up to degree 8 on 26 of 26 layers, optimizer "
                              "step "),
            std::string::npos)
      << validate.err;
  EXPECT_NE(validate.err.find(", input 16 KiB, sharded memory factor 6, kernel floor 1110 kernels "
                              "x 10 us = 11.1 ms per micro-batch (4.28 ms forward, 6.82 ms "
                              "backward), above the FLOP and byte time on 1 of 26 layers at "
                              "degree 1 and 1 at degree 8, GEMMs at most 86.9% of the bf16 "
                              "peak\n"),
            std::string::npos)
      << validate.err;
  auto plan = run_cli({"plan", model, topo, "-q", "-o", path("plan.json")});
  EXPECT_EQ(plan.code, 0) << plan.err;
}

TEST_F(ModelCommandTest, TheShippedDgxA100TopologyTakesSpeedAndMemoryFromItsType) {
  const std::string topo =
      std::string(PIPEPLAN_SOURCE_DIR) + "/examples/topologies/llm/dgx-a100-8x8.json";
  for (const char* gpu : {"A100-80GB", "H100-SXM"}) {
    const std::string model = path(std::string(gpu) + ".json");
    ASSERT_EQ(
        run_cli({"model", "transformer", "--preset", "llama3-8b", "--gpu", gpu, "-q", "-o", model})
            .code,
        0);
    auto validate = run_cli({"validate", model, topo});
    ASSERT_EQ(validate.code, 0) << validate.err;
    const double speed = hardware::training_peak_flops_per_s(*hardware::find_gpu("A100-80GB")) /
                         hardware::training_peak_flops_per_s(*hardware::find_gpu(gpu));
    EXPECT_NE(validate.err.find(": topology \"8x DGX A100 (64 A100-80GB), NVSwitch inside, 8x HDR "
                                "InfiniBand between\", 64 GPUs on 8 nodes, pair bandwidth " +
                                io::format_bandwidth(25e9) + " to " + io::format_bandwidth(300e9) +
                                ", speed " + io::format_number(speed) + ", memory " +
                                io::format_bytes(80.0 * (1 << 30)) + "\n"),
              std::string::npos)
        << validate.err;
  }
}

}  // namespace
}  // namespace pipeplan::cli
