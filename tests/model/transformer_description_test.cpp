// A model.json given by its transformer description (`"transformer": {...}` instead of
// `layers`): the layers generated, presets and overrides, and every problem with its pointer.

#include <gtest/gtest.h>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/description.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::model {
namespace {

Model read(const std::string& text) { return read_model(io::source_from_text("m.json", text)); }

std::string read_error(const std::string& text) {
  try {
    read(text);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(TransformerDescriptionTest, GeneratesTheLayersOfTheDescription) {
  const Model model = read(R"({"name": "tiny", "micro_batches": 4, "transformer": {
      "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256, "sequence": 16, "vocab": 100,
      "micro_batch_size": 2}})");
  TransformerConfig config;
  config.name = "tiny";
  config.layers = 2;
  config.hidden = 64;
  config.heads = 4;
  config.ffn_hidden = 256;
  config.sequence = 16;
  config.vocab = 100;
  config.micro_batch_size = 2;
  config.micro_batch_size_fixed = true;
  const TransformerConfig completed = complete_transformer_config(config).first;
  // Exactly what `pipeplan model transformer --micro-batches 4` writes for the same options.
  Model expected = transformer_model(completed);
  expected.micro_batches = 4;
  EXPECT_EQ(io::dump_json(model_to_json(model)), io::dump_json(model_to_json(expected)));
  EXPECT_EQ(model.name, "tiny");
  EXPECT_EQ(model.micro_batches, 4);
  EXPECT_EQ(model.profile_batch_size, 2);
  ASSERT_TRUE(model.transformer.has_value());
  EXPECT_TRUE(model.transformer->micro_batch_size_fixed);
  EXPECT_EQ(model.transformer->kv_heads, 4);                           // completed
  EXPECT_EQ(model.transformer->degrees, (std::vector<int>{1, 2, 4}));  // 8 does not divide 4
  EXPECT_EQ(model.layers.size(), 4u);
  EXPECT_EQ(model.layers[1].forward_ms,
            transformer_layer_costs(completed, TransformerPart::kDecoder, 1).forward_ms);
  EXPECT_EQ(model.transformer->kernel_overhead_us, 10);  // the default
}

TEST(TransformerDescriptionTest, TakesTheFixedTimePerKernel) {
  const Model model = read(R"({"transformer": {"layers": 2, "hidden": 64, "heads": 4,
      "sequence": 16, "vocab": 100, "kernel_overhead_us": 2.5}})");
  ASSERT_TRUE(model.transformer.has_value());
  EXPECT_EQ(model.transformer->kernel_overhead_us, 2.5);
  // 17 forward kernels of a gelu decoder at 2.5 us, above its FLOP and byte time.
  EXPECT_DOUBLE_EQ(model.layers[1].forward_ms, 17 * 0.0025);
  // Written back with the description, and read to the same config.
  const nlohmann::ordered_json written = description_to_json(*model.transformer);
  EXPECT_EQ(written["kernel_overhead_us"], 2.5);
  const Model again = read(R"({"transformer": )" + written.dump() + "}");
  EXPECT_EQ(again.transformer->kernel_overhead_us, 2.5);
  EXPECT_EQ(io::dump_json(model_to_json(again)), io::dump_json(model_to_json(model)));
  // 0 leaves the floor out.
  const Model none = read(R"({"transformer": {"layers": 2, "hidden": 64, "heads": 4,
      "sequence": 16, "vocab": 100, "kernel_overhead_us": 0}})");
  EXPECT_LT(none.layers[1].forward_ms, 0.001);
}

TEST(TransformerDescriptionTest, TakesTheMatmulCeiling) {
  // Without the key (every description written before it) the GEMMs keep Calculon's tables,
  // whatever the GPU's measurement: the file reads as it did.
  const std::string shape = R"("layers": 2, "hidden": 4096, "heads": 32, "sequence": 2048,
      "vocab": 1000, "gpu": "H100")";
  const Model free = read(R"({"transformer": {)" + shape + "}}");
  EXPECT_EQ(free.transformer->matmul_ceiling, 1);
  EXPECT_FALSE(description_to_json(*free.transformer).contains("matmul_ceiling"));
  const Model capped = read(R"({"transformer": {)" + shape + R"(, "matmul_ceiling": 0.5}})");
  EXPECT_EQ(capped.transformer->matmul_ceiling, 0.5);
  EXPECT_GT(capped.layers[1].forward_ms, free.layers[1].forward_ms);
  // Written back with the description, and read to the same model.
  const nlohmann::ordered_json written = description_to_json(*capped.transformer);
  EXPECT_EQ(written["matmul_ceiling"], 0.5);
  const Model again = read(R"({"transformer": )" + written.dump() + "}");
  EXPECT_EQ(io::dump_json(model_to_json(again)), io::dump_json(model_to_json(capped)));
  // 1 is no cap, the same model as none.
  const Model one = read(R"({"transformer": {)" + shape + R"(, "matmul_ceiling": 1}})");
  EXPECT_EQ(io::dump_json(model_to_json(one)), io::dump_json(model_to_json(free)));
}

TEST(TransformerDescriptionTest, TakesDropout) {
  // On without the key, even for a preset published without dropout (the key's absence means
  // what it meant before the key); `model transformer` writes the preset's setting instead.
  const Model named = read(R"({"transformer": {"preset": "llama3-8b", "layers": 2}})");
  EXPECT_TRUE(named.transformer->dropout);
  EXPECT_FALSE(description_to_json(*named.transformer).contains("dropout"));
  const Model off =
      read(R"({"transformer": {"preset": "llama3-8b", "layers": 2, "dropout": false}})");
  EXPECT_FALSE(off.transformer->dropout);
  EXPECT_LT(off.layers[1].stash_bytes, named.layers[1].stash_bytes);
  const nlohmann::ordered_json written = description_to_json(*off.transformer);
  EXPECT_EQ(written["dropout"], false);
  Model again = read(R"({"transformer": )" + written.dump() + "}");
  again.name = off.name;  // the preset's name, which the description does not write
  EXPECT_EQ(io::dump_json(model_to_json(again)), io::dump_json(model_to_json(off)));
}

// `gradient_dtype` and `optimizer_dtype`: fp32 without the keys (every description written
// before them), written only when bf16, read back to the same model.
TEST(TransformerDescriptionTest, TakesGradientAndOptimizerFormats) {
  const Model plain = read(R"({"transformer": {"preset": "llama3-8b", "layers": 2}})");
  EXPECT_EQ(plain.parameter_memory_factor, 9);
  EXPECT_FALSE(description_to_json(*plain.transformer).contains("gradient_dtype"));
  EXPECT_FALSE(description_to_json(*plain.transformer).contains("optimizer_dtype"));
  const Model both = read(R"({"transformer": {"preset": "llama3-8b", "layers": 2,
      "gradient_dtype": "bf16", "optimizer_dtype": "bf16"}})");
  EXPECT_EQ(both.parameter_memory_factor, 4);
  EXPECT_EQ(both.sharded_memory_factor, 2);
  const nlohmann::ordered_json written = description_to_json(*both.transformer);
  EXPECT_EQ(written["gradient_dtype"], "bf16");
  EXPECT_EQ(written["optimizer_dtype"], "bf16");
  Model again = read(R"({"transformer": )" + written.dump() + "}");
  again.name = both.name;  // the preset's name, which the description does not write
  EXPECT_EQ(io::dump_json(model_to_json(again)), io::dump_json(model_to_json(both)));
  const Model fp32 = read(R"({"transformer": {"preset": "llama3-8b", "layers": 2,
      "gradient_dtype": "fp32"}})");
  EXPECT_EQ(io::dump_json(model_to_json(fp32)), io::dump_json(model_to_json(plain)));
}

// `attention_dtype`, fp8 training only: without the key (every description written before it)
// the attention runs in fp8 as before; "bf16" (what `model transformer --dtype fp8` writes) runs
// it at the BF16 rate, so the decoders are slower and nothing else changes; read back the same.
TEST(TransformerDescriptionTest, TakesTheAttentionFormatOfFp8Training) {
  const std::string fp8 =
      R"({"transformer": {"preset": "llama3-8b", "layers": 2, "gpu": "H100", "dtype": "fp8")";
  const Model before = read(fp8 + "}}");
  EXPECT_FALSE(before.transformer->attention_dtype.has_value());
  EXPECT_FALSE(description_to_json(*before.transformer).contains("attention_dtype"));
  const Model bf16 = read(fp8 + R"(, "attention_dtype": "bf16"}})");
  EXPECT_EQ(bf16.transformer->attention_dtype, hardware::DType::kBf16);
  EXPECT_GT(bf16.layers[1].forward_ms, before.layers[1].forward_ms);
  EXPECT_EQ(bf16.layers[0].forward_ms, before.layers[0].forward_ms);  // the embedding
  EXPECT_EQ(bf16.layers[3].forward_ms, before.layers[3].forward_ms);  // the output layer
  const nlohmann::ordered_json written = description_to_json(*bf16.transformer);
  EXPECT_EQ(written["attention_dtype"], "bf16");
  Model again = read(R"({"transformer": )" + written.dump() + "}");
  again.name = bf16.name;  // the preset's name, which the description does not write
  EXPECT_EQ(io::dump_json(model_to_json(again)), io::dump_json(model_to_json(bf16)));
  const Model fp8_attention = read(fp8 + R"(, "attention_dtype": "fp8"}})");
  EXPECT_EQ(fp8_attention.layers[1].forward_ms, before.layers[1].forward_ms);
}

TEST(TransformerDescriptionTest, StartsFromAPresetAndTakesOverrides) {
  const Model model = read(R"({"transformer": {"preset": "llama3-8b", "layers": 4,
      "gpu": "H100", "dtype": "bf16", "ffn": "swiglu", "sequence_parallel": true,
      "selective_recompute": true, "flash_attention": true, "degrees": [1, 2]}})");
  ASSERT_TRUE(model.transformer.has_value());
  const TransformerConfig& config = *model.transformer;
  EXPECT_EQ(config.name, "llama3-8b");
  EXPECT_EQ(config.layers, 4);
  EXPECT_EQ(config.hidden, 4096);
  EXPECT_EQ(config.kv_heads, 8);
  EXPECT_EQ(config.gpu, "H100-SXM");
  EXPECT_TRUE(config.sequence_parallel && config.selective_recompute && config.flash_attention);
  EXPECT_EQ(config.micro_batch_size, 1);  // the default, which the search may change
  EXPECT_FALSE(config.micro_batch_size_fixed);
  EXPECT_EQ(model.layers.size(), 6u);
  EXPECT_EQ(model.layers[1].tensor_parallel->degrees, (std::vector<int>{1, 2}));
  EXPECT_EQ(model.profile_device, "H100-SXM");
}

TEST(TransformerDescriptionTest, NamesTheFieldOfEveryProblem) {
  const std::string shape =
      R"("layers": 2, "hidden": 64, "heads": 4, "sequence": 16, "vocab": 100)";
  auto error = [&](const std::string& fields, const std::string& top = "") {
    return read_error("{" + top + R"("transformer": {)" + fields + "}}");
  };
  EXPECT_EQ(error(shape + R"(, "head": 4)"),
            "m.json: /transformer/head: unknown key (did you mean \"heads\"?)");
  EXPECT_EQ(error(R"("layers": 2, "hidden": 64, "heads": 4, "sequence": 16)"),
            "m.json: /transformer: missing required key \"vocab\" (or give \"preset\")");
  EXPECT_EQ(error(R"("layers": 2, "hidden": 64, "heads": 3, "sequence": 16, "vocab": 100)"),
            "m.json: /transformer/heads: must divide hidden (64), got 3");
  EXPECT_EQ(error(shape + R"(, "kv_heads": 3)"),
            "m.json: /transformer/kv_heads: must divide heads (4), got 3");
  EXPECT_EQ(error(R"("layers": 0, "hidden": 64, "heads": 4, "sequence": 16, "vocab": 100)"),
            "m.json: /transformer/layers: must be an integer from 1 to 65536, got 0");
  EXPECT_EQ(error(shape + R"(, "micro_batch_size": 1.5)"),
            "m.json: /transformer/micro_batch_size: must be an integer from 1 to 1048576, got 1.5");
  EXPECT_EQ(error(shape + R"(, "ffn": "relu")"),
            "m.json: /transformer/ffn: must be \"gelu\", \"swiglu\" or \"relu2\", got "
            "\"relu\"");
  EXPECT_EQ(error(shape + R"(, "dtype": "int8")"),
            "m.json: /transformer/dtype: must be one of \"fp32\", \"tf32\", \"bf16\", \"fp16\", "
            "\"fp8\", got \"int8\"");
  EXPECT_EQ(error(shape + R"(, "gpu": "TPU")"),
            "m.json: /transformer/gpu: unknown GPU \"TPU\" (known: V100-32GB, A100-40GB, "
            "A100-80GB, H100-SXM, H200, GH200, B200, MI300X)");
  // The default dtype (bf16) is not in the file: the problem is named on the object.
  EXPECT_EQ(error(shape + R"(, "gpu": "V100")"),
            "m.json: /transformer: dtype: V100-32GB has no bf16 peak in the catalogue");
  EXPECT_EQ(error(shape + R"(, "degrees": [1, 8])"),
            "m.json: /transformer/degrees: 8 must divide heads, kv_heads and ffn_hidden (4, 4, "
            "256)");
  EXPECT_EQ(error(shape + R"(, "degrees": [])"),
            "m.json: /transformer/degrees: must list the allowed degrees, starting at 1");
  EXPECT_EQ(error(shape + R"(, "flash_attention": 1)"),
            "m.json: /transformer/flash_attention: must be true or false, got number 1");
  EXPECT_EQ(error(shape + R"(, "kernel_overhead_us": -1)"),
            "m.json: /transformer/kernel_overhead_us: must be a finite number >= 0, got -1");
  EXPECT_EQ(error(shape + R"(, "kernel_overhead_us": "10")"),
            "m.json: /transformer/kernel_overhead_us: must be a finite number >= 0, got string "
            "\"10\"");
  EXPECT_EQ(error(shape + R"(, "kernel_overhead_us": 2e6)"),
            "m.json: /transformer/kernel_overhead_us: must be from 0 to 1000000 microseconds, got "
            "2000000");
  EXPECT_EQ(error(shape + R"(, "dropout": "off")"),
            "m.json: /transformer/dropout: must be true or false, got string \"off\"");
  EXPECT_EQ(error(shape + R"(, "matmul_ceiling": 0)"),
            "m.json: /transformer/matmul_ceiling: must be a fraction of the peak above 0 and at "
            "most 1, got 0");
  EXPECT_EQ(error(shape + R"(, "matmul_ceiling": 1.25)"),
            "m.json: /transformer/matmul_ceiling: must be a fraction of the peak above 0 and at "
            "most 1, got 1.25");
  EXPECT_EQ(error(shape + R"(, "gradient_dtype": "fp16")"),
            "m.json: /transformer/gradient_dtype: must be \"fp32\" or \"bf16\", got \"fp16\"");
  EXPECT_EQ(error(shape + R"(, "optimizer_dtype": 16)"),
            "m.json: /transformer/optimizer_dtype: must be a string, got number 16");
  EXPECT_EQ(error(shape + R"(, "dtype": "fp32", "gradient_dtype": "bf16")"),
            "m.json: /transformer/gradient_dtype: bf16 needs dtype bf16 or fp8, got fp32");
  EXPECT_EQ(error(shape + R"(, "dtype": "fp8", "gpu": "H100", "attention_dtype": "fp16")"),
            "m.json: /transformer/attention_dtype: must be \"bf16\" or \"fp8\", got \"fp16\"");
  EXPECT_EQ(error(shape + R"(, "attention_dtype": "bf16")"),
            "m.json: /transformer/attention_dtype: only with dtype fp8 (attention runs in the "
            "training format), got bf16");
  EXPECT_EQ(error(shape + R"(, "matmul_ceiling": "0.8")"),
            "m.json: /transformer/matmul_ceiling: must be a number, got string \"0.8\"");
  EXPECT_EQ(error(R"("preset": "gpt5")"),
            "m.json: /transformer/preset: unknown preset \"gpt5\" (known: gpt3-175b, gpt3-13b, "
            "mt-nlg-530b, llama3-8b, llama3-70b, llama3.1-8b, llama3.1-70b, llama3.1-405b, "
            "qwen2.5-72b, mistral-large-2, nemotron4-15b, nemotron4-340b, opt-350m, opt-1.3b)");
  EXPECT_EQ(read_error(R"({"transformer": [1]})"),
            "m.json: /transformer: must be an object, got array");
  // Beside the description, a file holds exactly the profile it generates, or none.
  const std::string rule =
      ": a file with \"transformer\" holds the profile it generates, or none (remove "
      "\"transformer\" to plan edited layers as a profile)";
  EXPECT_EQ(error(shape, R"("layers": [], )"),
            "m.json: /layers: has 0 entries where the description generates 4" + rule);
  EXPECT_EQ(error(shape, R"("parameter_memory_factor": 4, )"),
            "m.json: /parameter_memory_factor: is 4 where the description generates 9" + rule);
  EXPECT_EQ(error(shape, R"("profile": {"batch_size": 2}, )"),
            "m.json: /profile: missing \"device\"" + rule);
  // Without either, the message of a model without layers stays.
  EXPECT_EQ(read_error(R"({"name": "m"})"), "m.json: missing required key \"layers\"");
}

// Issue 35: `model_to_json` writes the description beside its layers, and `read_model` reads the
// file back to the same model, at the size its profile holds; an edited profile is refused at the
// first number that differs, and keys starting with `x-` are ignored.
TEST(TransformerDescriptionTest, AFileHoldsTheProfileItGenerates) {
  TransformerConfig config;
  config.layers = 3;
  config.hidden = 64;
  config.heads = 4;
  config.sequence = 16;
  config.vocab = 100;
  config.sequence_parallel = true;
  for (const int size : {1, 3}) {
    config.micro_batch_size = size;
    const Model written = transformer_model(complete_transformer_config(config).first);
    const std::string text = io::dump_json(model_to_json(written));
    const Model again = read(text);
    EXPECT_EQ(io::dump_json(model_to_json(again)), text);
    ASSERT_TRUE(again.transformer.has_value());
    EXPECT_EQ(again.transformer->micro_batch_size, size);
    EXPECT_FALSE(again.transformer->micro_batch_size_fixed);
    EXPECT_TRUE(again.transformer->sequence_parallel);
  }
  nlohmann::json file = nlohmann::json::parse(
      io::dump_json(model_to_json(transformer_model(complete_transformer_config(config).first))));
  file["x-note"] = "kept";
  file["layers"][1]["x-source"] = "hand";
  EXPECT_NO_THROW(read(file.dump()));
  file["layers"][2]["tensor_parallel"]["stash_bytes"][1] = 1;
  EXPECT_EQ(read_error(file.dump()),
            "m.json: /layers/2/tensor_parallel/stash_bytes/1: is 1 where the description "
            "generates " +
                file["layers"][1]["tensor_parallel"]["stash_bytes"][1].dump() +
                ": a file with \"transformer\" holds the profile it generates, or none (remove "
                "\"transformer\" to plan edited layers as a profile)");
  file["layers"][2]["extra"] = 1;
  file.erase("transformer");
  EXPECT_NE(read_error(file.dump()).find("/layers/2/extra"), std::string::npos);
}

// Issue 33: the relu2 family reads from "ffn" and is written back as "relu2"; a preset of it
// needs no other key.
TEST(TransformerDescriptionTest, RoundTripsTheRelu2Family) {
  const Model model = read(R"({"transformer": {"layers": 2, "hidden": 64, "heads": 4,
      "kv_heads": 2, "ffn": "relu2", "sequence": 16, "vocab": 100}})");
  ASSERT_TRUE(model.transformer.has_value());
  EXPECT_EQ(model.transformer->ffn, Ffn::kRelu2);
  EXPECT_EQ(model.transformer->ffn_hidden, 256);  // 4h
  const nlohmann::ordered_json written = description_to_json(*model.transformer);
  EXPECT_EQ(written.at("ffn"), "relu2");
  const std::string text = io::dump_json(model_to_json(model));
  const Model again = read(text);
  ASSERT_TRUE(again.transformer.has_value());
  EXPECT_EQ(again.transformer->ffn, Ffn::kRelu2);
  EXPECT_EQ(io::dump_json(model_to_json(again)), text);
  const Model nemotron = read(R"({"transformer": {"preset": "nemotron4-15b"}})");
  ASSERT_TRUE(nemotron.transformer.has_value());
  EXPECT_EQ(nemotron.transformer->ffn, Ffn::kRelu2);
  EXPECT_EQ(nemotron.layers.size(), 34u);
}

TEST(TransformerDescriptionTest, RefusesSizesBeyondItsBounds) {
  EXPECT_EQ(read_error(R"({"transformer": {"layers": 2, "hidden": 33554432, "heads": 4,
      "sequence": 16, "vocab": 100}})"),
            "m.json: /transformer/hidden: must be an integer from 1 to 16777216, got 33554432");
  EXPECT_EQ(read_error(R"({"transformer": {"layers": 2, "hidden": 64, "heads": 4,
      "sequence": 16, "vocab": 100, "degrees": [1,2,4,8,16,32,64,128,256,512,1024,2048,4096,
      8192,16384,32768,65536]}})"),
            "m.json: /transformer/degrees: must list at most 16 degrees");
}

}  // namespace
}  // namespace pipeplan::model
