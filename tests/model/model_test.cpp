#include "pipeplan/model/model.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"

namespace pipeplan::model {
namespace {

Model read(const std::string& text) { return read_model(io::source_from_text("model.json", text)); }

std::string read_error(const std::string& text) {
  try {
    read(text);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(ModelTest, ReadsEveryField) {
  Model model = read(R"({
    "schema": "pipeplan/model/v1", "name": "bert-24", "micro_batches": 16,
    "profile": {"batch_size": 6, "device": "V100-32GB"}, "parameter_memory_factor": 2,
    "layers": [{"name": "embedding", "forward_ms": 1.9, "backward_ms": 3.1,
                "activation_bytes": 12582912, "parameter_bytes": 125018112, "stash_bytes": 7}]})");
  EXPECT_EQ(model.name, "bert-24");
  EXPECT_EQ(model.micro_batches, 16);
  EXPECT_EQ(model.profile_batch_size, 6);
  EXPECT_EQ(model.profile_device, "V100-32GB");
  EXPECT_EQ(model.parameter_memory_factor, 2);
  ASSERT_EQ(model.layers.size(), 1u);
  const Layer& layer = model.layers[0];
  EXPECT_EQ(layer.name, "embedding");
  EXPECT_EQ(layer.forward_ms, 1.9);
  EXPECT_EQ(layer.backward_ms, 3.1);
  EXPECT_EQ(layer.activation_bytes, 12582912);
  EXPECT_EQ(layer.parameter_bytes, 125018112);
  EXPECT_EQ(layer.stash_bytes, 7);
}

TEST(ModelTest, AppliesDefaults) {
  Model model =
      read(R"({"layers": [{"forward_ms": 1, "backward_ms": 2, "activation_bytes": 300}]})");
  EXPECT_EQ(model.name, "");
  EXPECT_FALSE(model.micro_batches.has_value());
  EXPECT_FALSE(model.profile_batch_size.has_value());
  EXPECT_FALSE(model.profile_device.has_value());
  EXPECT_EQ(model.parameter_memory_factor, 4);
  const Layer& layer = model.layers.at(0);
  EXPECT_EQ(layer.name, "");
  EXPECT_EQ(layer.parameter_bytes, 0);
  EXPECT_EQ(layer.stash_bytes, 300);  // defaults to activation_bytes
}

TEST(ModelTest, AcceptsIntegralFloatsForIntegers) {
  Model model = read(R"({"micro_batches": 16.0, "profile": {"batch_size": 6e0},
    "layers": [{"forward_ms": 0, "backward_ms": 0, "activation_bytes": 0}]})");
  EXPECT_EQ(model.micro_batches, 16);
  EXPECT_EQ(model.profile_batch_size, 6);
  EXPECT_EQ(read_error(R"({"micro_batches": 16.5, "layers": []})"),
            "model.json: /micro_batches: must be an integer from 1 to 1048576, got 16.5");
}

TEST(ModelTest, AcceptsFractionalBytes) {
  Model model = read(R"({"layers": [{"forward_ms": 0.25, "backward_ms": 0,
    "activation_bytes": 0.5, "parameter_bytes": 1e3, "stash_bytes": 2.5}]})");
  EXPECT_EQ(model.layers[0].activation_bytes, 0.5);
  EXPECT_EQ(model.layers[0].parameter_bytes, 1000);
  EXPECT_EQ(model.layers[0].stash_bytes, 2.5);
}

TEST(ModelTest, IgnoresExtensionKeysAnywhere) {
  Model model = read(R"({"x-tool": {"version": [1, 2]}, "profile": {"x-note": "", "device": "d"},
    "layers": [{"x-op": "conv", "forward_ms": 1, "backward_ms": 1, "activation_bytes": 1}]})");
  EXPECT_EQ(model.layers.size(), 1u);
  EXPECT_EQ(model.profile_device, "d");
}

TEST(ModelTest, NamesAreOptionalAndUnique) {
  Model model = read(R"({"layers": [
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1},
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1},
    {"name": "a", "forward_ms": 1, "backward_ms": 1, "activation_bytes": 1},
    {"name": "b", "forward_ms": 1, "backward_ms": 1, "activation_bytes": 1}]})");
  EXPECT_EQ(model.layers.size(), 4u);
  EXPECT_EQ(model.layers[2].name, "a");
  EXPECT_EQ(read_error(R"({"layers": [
    {"name": "a", "forward_ms": 1, "backward_ms": 1, "activation_bytes": 1},
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1},
    {"name": "a", "forward_ms": 1, "backward_ms": 1, "activation_bytes": 1}]})"),
            "model.json: /layers/2/name: duplicate layer name \"a\" (also /layers/0)");
  EXPECT_EQ(read_error(R"({"layers": [{"name": "", "forward_ms": 1, "backward_ms": 1,
    "activation_bytes": 1}]})"),
            "model.json: /layers/0/name: must be a non-empty string");
}

TEST(ModelTest, FoldsNegativeZero) {
  Model model = read(R"({"parameter_memory_factor": -0.0, "layers": [{"forward_ms": -0.0,
    "backward_ms": -0, "activation_bytes": -0.0, "parameter_bytes": -0.0}]})");
  EXPECT_FALSE(std::signbit(model.layers[0].forward_ms));
  EXPECT_FALSE(std::signbit(model.layers[0].activation_bytes));
  EXPECT_FALSE(std::signbit(model.layers[0].stash_bytes));
  EXPECT_FALSE(std::signbit(model.layers[0].parameter_bytes));
  EXPECT_FALSE(std::signbit(model.parameter_memory_factor));
}

TEST(ModelTest, RejectsTotalsThatOverflow) {
  EXPECT_EQ(read_error(R"({"layers": [
    {"forward_ms": 1e308, "backward_ms": 1e308, "activation_bytes": 1}]})"),
            "model.json: /layers: too large: the sum of forward_ms and backward_ms over all "
            "layers is not finite");
  EXPECT_EQ(read_error(R"({"parameter_memory_factor": 1e10, "layers": [
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1, "parameter_bytes": 1e300}]})"),
            "model.json: /layers: too large: parameter_memory_factor times the sum of "
            "parameter_bytes is not finite");
  // Finite sums beyond kMaxTotal are refused too: M micro-batches of them, divided by slow
  // speeds and narrow links, in microseconds, would overflow (a stash of 1e307 bytes times
  // 100 micro-batches once made "peak_memory_bytes": null).
  EXPECT_EQ(read_error(R"({"layers": [
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1, "stash_bytes": 1e307}]})"),
            "model.json: /layers: too large: the sum of stash_bytes is 1e+307, more than 1e+290 "
            "(figures derived from it would overflow)");
  EXPECT_EQ(read_error(R"({"layers": [
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 5e290, "stash_bytes": 0}]})"),
            "model.json: /layers: too large: the sum of activation_bytes is 5e+290, more than "
            "1e+290 (figures derived from it would overflow)");
  // Up to the limit is fine.
  EXPECT_EQ(
      read(R"({"layers": [{"forward_ms": 1e290, "backward_ms": 0, "activation_bytes": 1e290}]})")
          .layers[0]
          .forward_ms,
      1e290);
}

TEST(ModelTest, RoundTripsThroughJson) {
  const std::string text = R"({"schema": "pipeplan/model/v1", "name": "m", "micro_batches": 4,
    "profile": {"batch_size": 2, "device": "gpu"}, "parameter_memory_factor": 3,
    "layers": [{"name": "a", "forward_ms": 1.5, "backward_ms": 2, "activation_bytes": 10,
                "parameter_bytes": 5, "stash_bytes": 3},
               {"forward_ms": 0.1, "backward_ms": 0.2, "activation_bytes": 0}]})";
  Model model = read(text);
  Model again = read(io::dump_json(model_to_json(model)));
  EXPECT_EQ(io::dump_json(model_to_json(again)), io::dump_json(model_to_json(model)));
  EXPECT_EQ(again.layers[0].stash_bytes, 3);
  EXPECT_EQ(again.layers[1].stash_bytes, 0);
  EXPECT_EQ(again.micro_batches, 4);
  EXPECT_FALSE(model_to_json(model)["layers"][1].contains("stash_bytes"));
}

TEST(ModelTest, TotalComputeSumsForwardAndBackward) {
  Model model = read(R"({"layers": [{"forward_ms": 1, "backward_ms": 2, "activation_bytes": 0},
    {"forward_ms": 0.5, "backward_ms": 0.25, "activation_bytes": 0}]})");
  EXPECT_DOUBLE_EQ(total_compute_ms(model), 3.75);
}

// ---- The additions of spec 8.1.

// A one-layer model whose layer carries `split` as its tensor_parallel object.
std::string with_split(const std::string& split, const std::string& top = "") {
  return "{" + top + R"("layers": [{"forward_ms": 12, "backward_ms": 24, "activation_bytes": 8,
    "parameter_bytes": 400, "stash_bytes": 40, "tensor_parallel": )" +
         split + "}]}";
}

// The spec's decoder7 example, a layer without tensor_parallel, and one with defaults.
const char* const kThreeLayers = R"({"schema": "pipeplan/model/v2", "input_bytes": 64,
  "sharded_memory_factor": 3, "layers": [
  {"name": "decoder7", "forward_ms": 12.0, "backward_ms": 24.0, "activation_bytes": 25165824,
   "parameter_bytes": 402653184, "stash_bytes": 427819008, "update_ms": 2,
   "tensor_parallel": {"degrees": [1, 2, 4, 8], "allreduce_bytes": 25165824,
                       "forward_ms": [12.0, 6.3, 3.4, 1.9], "backward_ms": [24.0, 12.5, 6.6, 3.7]}},
  {"name": "norm", "forward_ms": 1, "backward_ms": 2, "activation_bytes": 100,
   "parameter_bytes": 10, "update_ms": 0.5},
  {"name": "head", "forward_ms": 8, "backward_ms": 16, "activation_bytes": 0,
   "parameter_bytes": 800, "stash_bytes": 80,
   "tensor_parallel": {"degrees": [1, 2], "allreduce_bytes": 1000, "allreduces_forward": 0,
                       "allreduces_backward": 1, "update_ms": [0, 0.25]}}]})";

TEST(ModelV2Test, AFrameworkReserveIsReadAndWrittenBack) {
  const std::string text = R"({"reserve_bytes": 2e9, "layers": [{"forward_ms": 1,
    "backward_ms": 2, "activation_bytes": 0, "parameter_bytes": 10}]})";
  const Model model = read(text);
  EXPECT_EQ(model.reserve_bytes, 2e9);
  const nlohmann::ordered_json written = model_to_json(model);
  EXPECT_EQ(written["reserve_bytes"], 2e9);
  EXPECT_EQ(written["schema"], "pipeplan/model/v2");  // a v1 reader would not count it
  EXPECT_EQ(read(io::dump_json(written)).reserve_bytes, 2e9);
  // Absent: 0, and not written (a profile stays byte for byte what it was).
  const Model plain = read(R"({"layers": [{"forward_ms": 1, "backward_ms": 2,
    "activation_bytes": 0, "parameter_bytes": 10}]})");
  EXPECT_EQ(plain.reserve_bytes, 0);
  EXPECT_FALSE(model_to_json(plain).contains("reserve_bytes"));
  EXPECT_EQ(read_error(R"({"reserve_bytes": -1, "layers": [{"forward_ms": 1, "backward_ms": 2,
    "activation_bytes": 0, "parameter_bytes": 10}]})"),
            "model.json: /reserve_bytes: must be a finite number >= 0, got -1");
}

TEST(ModelV2Test, ReadsTheSpecExample) {
  const Model model = read(kThreeLayers);
  EXPECT_EQ(model.input_bytes, 64);
  EXPECT_EQ(model.sharded_memory_factor, 3);
  EXPECT_EQ(sharded_factor(model), 3);
  const Layer& decoder = model.layers[0];
  EXPECT_EQ(decoder.update_ms, 2);
  ASSERT_TRUE(decoder.tensor_parallel.has_value());
  const TensorParallel& split = *decoder.tensor_parallel;
  EXPECT_EQ(split.degrees, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(split.allreduce_bytes, 25165824);
  EXPECT_EQ(split.allreduces_forward, 2);
  EXPECT_EQ(split.allreduces_backward, 2);
  EXPECT_EQ(split.forward_ms, (std::vector<double>{12.0, 6.3, 3.4, 1.9}));
  EXPECT_TRUE(split.parameter_bytes.empty());
  EXPECT_FALSE(model.layers[1].tensor_parallel.has_value());
  EXPECT_EQ(model.layers[2].tensor_parallel->allreduces_forward, 0);
  EXPECT_EQ(model.layers[2].tensor_parallel->allreduces_backward, 1);
  EXPECT_TRUE(uses_v2_fields(model));
  EXPECT_TRUE(has_updates(model));
}

TEST(ModelV2Test, DefaultsOfTheNewFields) {
  const Model model = read(R"({"parameter_memory_factor": 1.5, "layers": [{"forward_ms": 1,
    "backward_ms": 1, "activation_bytes": 1}]})");
  EXPECT_EQ(model.input_bytes, 0);
  EXPECT_FALSE(model.sharded_memory_factor.has_value());
  EXPECT_EQ(sharded_factor(model), 0);  // max(0, 1.5 - 2)
  EXPECT_EQ(sharded_factor(read(with_split(R"({"degrees": [1], "allreduce_bytes": 0})"))), 2);
  EXPECT_EQ(model.layers[0].update_ms, 0);
  EXPECT_FALSE(uses_v2_fields(model));
  EXPECT_FALSE(has_updates(model));
  // The v1 schema string may carry v2 fields, and the v2 string may carry none.
  EXPECT_TRUE(uses_v2_fields(read(R"({"schema": "pipeplan/model/v1", "input_bytes": 1,
    "layers": [{"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1}]})")));
  EXPECT_FALSE(uses_v2_fields(read(R"({"schema": "pipeplan/model/v2",
    "layers": [{"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1}]})")));
  // An update time only inside the per-degree array still means update tasks.
  EXPECT_TRUE(has_updates(
      read(with_split(R"({"degrees": [1, 2], "allreduce_bytes": 0, "update_ms": [0, 1]})"))));
}

TEST(ModelV2Test, RejectsBadTensorParallelFields) {
  const std::string at = "model.json: /layers/0/tensor_parallel";
  EXPECT_EQ(read_error(with_split(R"({"allreduce_bytes": 1})")),
            at + ": missing required key \"degrees\"");
  EXPECT_EQ(read_error(with_split(R"({"degrees": [1]})")),
            at + ": missing required key \"allreduce_bytes\"");
  EXPECT_EQ(read_error(with_split(R"({"degree": [1], "allreduce_bytes": 1})")),
            at + "/degree: unknown key (did you mean \"degrees\"?)");
  EXPECT_EQ(read_error(with_split(R"([1, 2])")), at + ": must be an object, got array");
  EXPECT_EQ(read_error(with_split(R"({"degrees": [], "allreduce_bytes": 1})")),
            at + "/degrees: must list the allowed degrees, starting at 1");
  EXPECT_EQ(read_error(with_split(R"({"degrees": [2, 4], "allreduce_bytes": 1})")),
            at + "/degrees/0: must be 1 (every layer may run on one GPU), got 2");
  EXPECT_EQ(read_error(with_split(R"({"degrees": [1, 4, 4], "allreduce_bytes": 1})")),
            at + "/degrees/2: must be larger than the degree before it (4), got 4");
  EXPECT_EQ(read_error(with_split(R"({"degrees": [1, 2.5], "allreduce_bytes": 1})")),
            at + "/degrees/1: must be an integer from 1 to 65536, got 2.5");
  EXPECT_EQ(read_error(with_split(R"({"degrees": [1, 131072], "allreduce_bytes": 1})")),
            at + "/degrees/1: must be an integer from 1 to 65536, got 131072");
  EXPECT_EQ(read_error(with_split(R"({"degrees": [1], "allreduce_bytes": -1})")),
            at + "/allreduce_bytes: must be a finite number >= 0, got -1");
  EXPECT_EQ(
      read_error(with_split(R"({"degrees": [1], "allreduce_bytes": 1, "allreduces_forward": -1})")),
      at + "/allreduces_forward: must be an integer from 0 to 1024, got -1");
  EXPECT_EQ(read_error(with_split(
                R"({"degrees": [1], "allreduce_bytes": 1, "allreduces_backward": 1.5})")),
            at + "/allreduces_backward: must be an integer from 0 to 1024, got 1.5");
  EXPECT_EQ(read_error(with_split(
                R"({"degrees": [1, 2], "allreduce_bytes": 1, "forward_ms": [12, 6, 3]})")),
            at + "/forward_ms: must have one entry per degree (2), got 3");
  EXPECT_EQ(
      read_error(with_split(R"({"degrees": [1, 2], "allreduce_bytes": 1, "forward_ms": [11, 6]})")),
      at + "/forward_ms/0: must equal the layer's forward_ms (12) at degree 1, got 11");
  EXPECT_EQ(read_error(with_split(
                R"({"degrees": [1, 2], "allreduce_bytes": 1, "backward_ms": [24, -1]})")),
            at + "/backward_ms/1: must be a finite number >= 0, got -1");
  EXPECT_EQ(read_error(with_split(
                R"({"degrees": [1, 2], "allreduce_bytes": 1, "parameter_bytes": [401, 200]})")),
            at + "/parameter_bytes/0: must equal the layer's parameter_bytes (400) at degree 1, "
                 "got 401");
  EXPECT_EQ(
      read_error(with_split(R"({"degrees": [1, 2], "allreduce_bytes": 1, "stash_bytes": [8, 4]})")),
      at + "/stash_bytes/0: must equal the layer's stash_bytes (40) at degree 1, got 8");
  EXPECT_EQ(
      read_error(with_split(R"({"degrees": [1, 2], "allreduce_bytes": 1, "update_ms": [1, 0.5]})")),
      at + "/update_ms/0: must equal the layer's update_ms (0) at degree 1, got 1");
  EXPECT_EQ(
      read_error(with_split(R"({"degrees": [1, 2], "allreduce_bytes": 1, "update_ms": {"1": 0}})")),
      at + "/update_ms: must be an array, got object");
}

TEST(ModelV2Test, RejectsBadTopLevelFields) {
  const std::string layers =
      R"("layers": [{"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1}])";
  EXPECT_EQ(read_error("{\"sharded_memory_factor\": 5, " + layers + "}"),
            "model.json: /sharded_memory_factor: must be at most parameter_memory_factor (4), "
            "got 5");
  EXPECT_EQ(read_error("{\"parameter_memory_factor\": 2.5, \"sharded_memory_factor\": 2.75, " +
                       layers + "}"),
            "model.json: /sharded_memory_factor: must be at most parameter_memory_factor (2.5), "
            "got 2.75");
  EXPECT_EQ(read_error("{\"sharded_memory_factor\": -1, " + layers + "}"),
            "model.json: /sharded_memory_factor: must be a finite number >= 0, got -1");
  EXPECT_EQ(read_error("{\"input_bytes\": \"1 MB\", " + layers + "}"),
            "model.json: /input_bytes: must be a finite number >= 0, got string \"1 MB\"");
  EXPECT_EQ(read_error(R"({"layers": [{"forward_ms": 1, "backward_ms": 1,
    "activation_bytes": 1, "update_ms": -2}]})"),
            "model.json: /layers/0/update_ms: must be a finite number >= 0, got -2");
  EXPECT_EQ(read_error("{\"schema\": \"pipeplan/model/v4\", " + layers + "}"),
            "model.json: /schema: must be \"pipeplan/model/v1\", \"pipeplan/model/v2\" or "
            "\"pipeplan/model/v3\", got \"pipeplan/model/v4\"");
  // A factor equal to parameter_memory_factor is allowed: the optimizer shards everything.
  EXPECT_EQ(read("{\"sharded_memory_factor\": 4, " + layers + "}").sharded_memory_factor, 4);
}

TEST(ModelV2Test, RejectsPerDegreeTotalsThatOverflow) {
  EXPECT_EQ(read_error(R"({"layers": [
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1,
     "tensor_parallel": {"degrees": [1, 2], "allreduce_bytes": 0, "forward_ms": [1, 1e308],
                         "backward_ms": [1, 1e308]}}]})"),
            "model.json: /layers: too large: the sum of forward_ms and backward_ms over all "
            "layers is not finite");
  EXPECT_EQ(read_error(R"({"layers": [
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1, "update_ms": 1e308},
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1, "update_ms": 1e308}]})"),
            "model.json: /layers: too large: the sum of update_ms is not finite");
  EXPECT_EQ(read_error(R"({"input_bytes": 1e308, "layers": [
    {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1e308}]})"),
            "model.json: /layers: too large: the sum of stash_bytes is 1e+308, more than 1e+290 "
            "(figures derived from it would overflow)");
}

TEST(ModelV2Test, PerGpuValuesAtADegree) {
  const Model model = read(kThreeLayers);
  const Layer& decoder = model.layers[0];
  EXPECT_EQ(forward_ms_at(decoder, 1), 12.0);
  EXPECT_EQ(forward_ms_at(decoder, 4), 3.4);  // from the array
  EXPECT_EQ(backward_ms_at(decoder, 8), 3.7);
  EXPECT_EQ(parameter_bytes_at(decoder, 4), 402653184.0 / 4);  // own field / t
  EXPECT_EQ(stash_bytes_at(decoder, 2), 427819008.0 / 2);
  EXPECT_EQ(update_ms_at(decoder, 8), 0.25);
  EXPECT_TRUE(is_split(decoder, 2));
  EXPECT_FALSE(is_split(decoder, 1));
  EXPECT_EQ(allreduces_forward_at(decoder, 4), 2);
  EXPECT_EQ(allreduces_forward_at(decoder, 1), 0);
  EXPECT_EQ(allreduce_bytes(decoder), 25165824);
  // A layer without tensor_parallel runs whole at any stage degree, without all-reduces.
  const Layer& norm = model.layers[1];
  EXPECT_EQ(forward_ms_at(norm, 8), 1);
  EXPECT_EQ(parameter_bytes_at(norm, 8), 10);
  EXPECT_EQ(stash_bytes_at(norm, 8), 100);
  EXPECT_EQ(update_ms_at(norm, 8), 0.5);
  EXPECT_FALSE(is_split(norm, 8));
  EXPECT_EQ(allreduces_backward_at(norm, 8), 0);
  EXPECT_EQ(allreduce_bytes(norm), 0);
  const Layer& head = model.layers[2];
  EXPECT_EQ(update_ms_at(head, 2), 0.25);
  EXPECT_EQ(allreduces_backward_at(head, 2), 1);
  // A degree the layer does not list is a caller's bug.
  try {
    (void)forward_ms_at(head, 4);
    ADD_FAILURE() << "no error";
  } catch (const InternalError& error) {
    EXPECT_STREQ(error.what(),
                 "internal error: layer head does not allow tensor-parallel degree 4");
  }
}

TEST(ModelV2Test, DegreesAStageAllows) {
  const Model model = read(kThreeLayers);
  EXPECT_EQ(stage_degrees(model, 0, 0), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(stage_degrees(model, 1, 1), (std::vector<int>{1}));  // no split layer
  EXPECT_EQ(stage_degrees(model, 0, 1), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(stage_degrees(model, 1, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(stage_degrees(model, 0, 2), (std::vector<int>{1, 2}));  // every split layer lists t
  EXPECT_TRUE(stage_allows_degree(model, 1, 1, 1));
  EXPECT_FALSE(stage_allows_degree(model, 1, 1, 2));
  EXPECT_FALSE(stage_allows_degree(model, 0, 2, 4));
  EXPECT_TRUE(stage_allows_degree(model, 0, 1, 8));
  EXPECT_FALSE(stage_allows_degree(model, 0, 0, 3));
}

TEST(ModelV2Test, StageCostSumsPerGpuValues) {
  const Model model = read(kThreeLayers);
  const StageCost cost = stage_cost(model, 0, 2, 2);
  EXPECT_DOUBLE_EQ(cost.forward_ms, 6.3 + 1 + 4);
  EXPECT_DOUBLE_EQ(cost.backward_ms, 12.5 + 2 + 8);
  EXPECT_DOUBLE_EQ(cost.parameter_bytes, 201326592 + 10 + 400);
  EXPECT_DOUBLE_EQ(cost.stash_bytes, 213909504 + 100 + 40);
  EXPECT_DOUBLE_EQ(cost.max_stash_bytes, 213909504);
  EXPECT_DOUBLE_EQ(cost.update_ms, 1 + 0.5 + 0.25);
  EXPECT_DOUBLE_EQ(cost.recompute_input_bytes, 64 + 25165824 + 100);  // input_bytes first
  EXPECT_EQ(cost.forward_allreduces, 2);
  EXPECT_DOUBLE_EQ(cost.forward_allreduce_bytes, 2 * 25165824.0);
  EXPECT_EQ(cost.backward_allreduces, 3);
  EXPECT_DOUBLE_EQ(cost.backward_allreduce_bytes, 2 * 25165824.0 + 1000);
  const StageCost whole = stage_cost(model, 1, 2, 1);
  EXPECT_DOUBLE_EQ(whole.forward_ms, 9);
  EXPECT_DOUBLE_EQ(whole.recompute_input_bytes, 25165824 + 100);
  EXPECT_EQ(whole.forward_allreduces + whole.backward_allreduces, 0);
  EXPECT_DOUBLE_EQ(whole.update_ms, 0.5);
  EXPECT_THROW((void)stage_cost(model, 1, 1, 2), InternalError);
}

TEST(ModelV2Test, WritesV2AndReadsItBack) {
  const Model model = read(kThreeLayers);
  const nlohmann::ordered_json json = model_to_json(model);
  EXPECT_EQ(json["schema"], "pipeplan/model/v2");
  EXPECT_EQ(json["sharded_memory_factor"], 3);
  EXPECT_EQ(json["input_bytes"], 64);
  EXPECT_FALSE(json["layers"][0]["tensor_parallel"].contains("allreduces_forward"));
  EXPECT_EQ(json["layers"][2]["tensor_parallel"]["allreduces_forward"], 0);
  EXPECT_FALSE(json["layers"][2]["tensor_parallel"].contains("forward_ms"));
  EXPECT_FALSE(json["layers"][2].contains("update_ms"));
  const std::string text = io::dump_json(json);
  EXPECT_EQ(io::dump_json(model_to_json(read(text))), text);
}

TEST(ModelV2Test, WritesAModelWithoutV2FieldsAsV1) {
  const std::string text = R"({"schema": "pipeplan/model/v2", "layers": [{"forward_ms": 1,
    "backward_ms": 1, "activation_bytes": 1}]})";
  const nlohmann::ordered_json json = model_to_json(read(text));
  EXPECT_EQ(json["schema"], "pipeplan/model/v1");
  EXPECT_EQ(io::dump_json(json),
            "{\n  \"schema\": \"pipeplan/model/v1\",\n  \"parameter_memory_factor\": 4,\n"
            "  \"layers\": [\n    {\n      \"forward_ms\": 1,\n      \"backward_ms\": 1,\n"
            "      \"activation_bytes\": 1,\n      \"parameter_bytes\": 0\n    }\n  ]\n}\n");
}

// ---- The additions of spec 9.1.

// One layer (backward 24, stash 40, activation 8) with extra layer fields `fields` (each followed
// by a comma) and, when given, `split` as its tensor_parallel object.
std::string with_weight(const std::string& fields, const std::string& split = "") {
  return R"({"layers": [{"forward_ms": 12, "backward_ms": 24, "activation_bytes": 8,
    "stash_bytes": 40, )" +
         fields + R"("parameter_bytes": 400)" +
         (split.empty() ? "" : ", \"tensor_parallel\": " + split) + "}]}";
}

// A split layer with the new fields at the layer and per degree, and one without them.
const char* const kSplitBackward = R"({"schema": "pipeplan/model/v3", "layers": [
  {"name": "decoder", "forward_ms": 12, "backward_ms": 24, "activation_bytes": 8,
   "stash_bytes": 40, "backward_weight_ms": 10, "weight_stash_bytes": 30,
   "tensor_parallel": {"degrees": [1, 2, 4], "allreduce_bytes": 8,
                       "backward_ms": [24, 13, 7], "backward_weight_ms": [10, 6, 7],
                       "stash_bytes": [40, 20, 10], "weight_stash_bytes": [30, 20, 2]}},
  {"name": "head", "forward_ms": 1, "backward_ms": 2, "activation_bytes": 0, "stash_bytes": 5,
   "backward_weight_ms": 2, "tensor_parallel": {"degrees": [1, 2], "allreduce_bytes": 0}},
  {"name": "loss", "forward_ms": 1, "backward_ms": 1, "activation_bytes": 0}]})";

TEST(ModelV3Test, ReadsTheSplitBackwardFields) {
  const Model model = read(kSplitBackward);
  const Layer& decoder = model.layers[0];
  EXPECT_EQ(decoder.backward_weight_ms, 10);
  EXPECT_EQ(decoder.weight_stash_bytes, 30);
  EXPECT_EQ(decoder.tensor_parallel->backward_weight_ms, (std::vector<double>{10, 6, 7}));
  EXPECT_EQ(decoder.tensor_parallel->weight_stash_bytes, (std::vector<double>{30, 20, 2}));
  EXPECT_EQ(backward_weight_ms_at(decoder, 4), 7);   // equal to that degree's backward
  EXPECT_EQ(weight_stash_bytes_at(decoder, 2), 20);  // equal to that degree's stash
  // Without arrays: the layer's values divided by t; without any weight stash: the stash.
  const Layer& head = model.layers[1];
  EXPECT_EQ(backward_weight_ms_at(head, 2), 1);
  EXPECT_FALSE(head.weight_stash_bytes.has_value());
  EXPECT_EQ(weight_stash_bytes_at(head, 2), 2.5);
  const Layer& loss = model.layers[2];
  EXPECT_EQ(loss.backward_weight_ms, 0);
  EXPECT_EQ(weight_stash_bytes_at(loss, 1), 0);  // stash_bytes defaults to activation_bytes
  EXPECT_TRUE(uses_v3_fields(model));
  EXPECT_TRUE(has_weight_gradients(model));
  const StageCost cost = stage_cost(model, 0, 2, 2);
  EXPECT_EQ(cost.backward_weight_ms, 6 + 1 + 0);
  EXPECT_EQ(cost.weight_stash_bytes, 20 + 2.5 + 0);
}

TEST(ModelV3Test, AcceptsEverySchemaStringWithOrWithoutTheFields) {
  const std::string layer = R"("layers": [{"forward_ms": 1, "backward_ms": 2,
    "activation_bytes": 1, "backward_weight_ms": 1}])";
  for (const char* schema : {"pipeplan/model/v1", "pipeplan/model/v2", "pipeplan/model/v3"}) {
    EXPECT_TRUE(
        uses_v3_fields(read("{\"schema\": \"" + std::string(schema) + "\", " + layer + "}")))
        << schema;
  }
  const Model plain = read(R"({"schema": "pipeplan/model/v3", "layers": [{"forward_ms": 1,
    "backward_ms": 2, "activation_bytes": 1}]})");
  EXPECT_FALSE(uses_v3_fields(plain));
  EXPECT_FALSE(has_weight_gradients(plain));
  // A weight-gradient part only inside the per-degree array still counts.
  EXPECT_TRUE(has_weight_gradients(read(with_weight(
      "", R"({"degrees": [1, 2], "allreduce_bytes": 0, "backward_weight_ms": [0, 1]})"))));
  // A part equal to its whole is allowed: a backward that is all weight gradient.
  const Model whole = read(with_weight(R"("backward_weight_ms": 24, "weight_stash_bytes": 40, )"));
  EXPECT_EQ(whole.layers[0].backward_weight_ms, 24);
  EXPECT_EQ(whole.layers[0].weight_stash_bytes, 40);
  // Without weight-stash fields a per-degree stash may be anything: the weight stash follows it.
  EXPECT_EQ(weight_stash_bytes_at(read(with_weight("", R"({"degrees": [1, 2], "allreduce_bytes": 0,
    "stash_bytes": [40, 1]})"))
                                      .layers[0],
                                  2),
            1);
}

TEST(ModelV3Test, RejectsBadLayerFields) {
  const std::string at = "model.json: /layers/0/";
  EXPECT_EQ(read_error(with_weight(R"("backward_weight_ms": 25, )")),
            at + "backward_weight_ms: must be at most the layer's backward_ms (24), got 25");
  EXPECT_EQ(read_error(with_weight(R"("backward_weight_ms": -1, )")),
            at + "backward_weight_ms: must be a finite number >= 0, got -1");
  EXPECT_EQ(read_error(with_weight(R"("backward_weight_ms": "3 ms", )")),
            at + "backward_weight_ms: must be a finite number >= 0, got string \"3 ms\"");
  EXPECT_EQ(read_error(with_weight(R"("weight_stash_bytes": 40.5, )")),
            at + "weight_stash_bytes: must be at most the layer's stash_bytes (40), got 40.5");
  EXPECT_EQ(read_error(with_weight(R"("weight_stash_bytes": -2, )")),
            at + "weight_stash_bytes: must be a finite number >= 0, got -2");
  EXPECT_EQ(read_error(with_weight(R"("backward_weights_ms": 1, )")),
            at + "backward_weights_ms: unknown key (did you mean \"backward_weight_ms\"?)");
  // stash_bytes at its default, activation_bytes.
  EXPECT_EQ(read_error(R"({"layers": [{"forward_ms": 1, "backward_ms": 1, "activation_bytes": 8,
    "weight_stash_bytes": 9}]})"),
            at + "weight_stash_bytes: must be at most the layer's stash_bytes (8), got 9");
}

TEST(ModelV3Test, RejectsBadPerDegreeFields) {
  const std::string at = "model.json: /layers/0/tensor_parallel/";
  auto error = [](const std::string& fields, const std::string& split) {
    return read_error(
        with_weight(fields, R"({"degrees": [1, 2], "allreduce_bytes": 0, )" + split + "}"));
  };
  EXPECT_EQ(error("", R"("backward_weight_ms": [0, 1, 2])"),
            at + "backward_weight_ms: must have one entry per degree (2), got 3");
  EXPECT_EQ(error("", R"("backward_weight_ms": [1, 1])"),
            at + "backward_weight_ms/0: must equal the layer's backward_weight_ms (0) at degree 1, "
                 "got 1");
  EXPECT_EQ(error("", R"("backward_weight_ms": [0, -1])"),
            at + "backward_weight_ms/1: must be a finite number >= 0, got -1");
  // Above the backward at that degree: the layer's 24 / 2, or the array's entry.
  EXPECT_EQ(error("", R"("backward_weight_ms": [0, 13])"),
            at + "backward_weight_ms/1: must be at most the backward_ms at degree 2 (12), got 13");
  EXPECT_EQ(
      error(R"("backward_weight_ms": 4, )",
            R"("backward_ms": [24, 10], "backward_weight_ms": [4, 10.5])"),
      at + "backward_weight_ms/1: must be at most the backward_ms at degree 2 (10), got 10.5");
  // The layer's part divided by t above the backward the array gives at that degree.
  EXPECT_EQ(error(R"("backward_weight_ms": 16, )", R"("backward_ms": [24, 7])"),
            at + "backward_ms/1: must be at least the backward_weight_ms at degree 2 (the layer's "
                 "16 / 2 = 8; or give backward_weight_ms per degree), got 7");
  // The same rules for the weight stash within the stash.
  EXPECT_EQ(error("", R"("weight_stash_bytes": [39, 10])"),
            at + "weight_stash_bytes/0: must equal the layer's weight_stash_bytes (40) at degree "
                 "1, got 39");
  EXPECT_EQ(error(R"("weight_stash_bytes": 30, )", R"("weight_stash_bytes": [30])"),
            at + "weight_stash_bytes: must have one entry per degree (2), got 1");
  EXPECT_EQ(error("", R"("weight_stash_bytes": [40, 21])"),
            at + "weight_stash_bytes/1: must be at most the stash_bytes at degree 2 (20), got 21");
  EXPECT_EQ(error("", R"("stash_bytes": [40, 8], "weight_stash_bytes": [40, 9])"),
            at + "weight_stash_bytes/1: must be at most the stash_bytes at degree 2 (8), got 9");
  EXPECT_EQ(error(R"("weight_stash_bytes": 30, )", R"("stash_bytes": [40, 14])"),
            at + "stash_bytes/1: must be at least the weight_stash_bytes at degree 2 (the layer's "
                 "30 / 2 = 15; or give weight_stash_bytes per degree), got 14");
}

TEST(ModelV3Test, WritesV3OnlyWithTheFields) {
  const Model model = read(kSplitBackward);
  const nlohmann::ordered_json json = model_to_json(model);
  EXPECT_EQ(json["schema"], "pipeplan/model/v3");
  EXPECT_EQ(json["layers"][0]["backward_weight_ms"], 10);
  EXPECT_EQ(json["layers"][0]["weight_stash_bytes"], 30);
  EXPECT_EQ(json["layers"][0]["tensor_parallel"]["weight_stash_bytes"],
            nlohmann::ordered_json::parse("[30, 20, 2]"));
  EXPECT_FALSE(json["layers"][1].contains("weight_stash_bytes"));
  EXPECT_FALSE(json["layers"][1]["tensor_parallel"].contains("backward_weight_ms"));
  EXPECT_FALSE(json["layers"][2].contains("backward_weight_ms"));
  const std::string text = io::dump_json(json);
  EXPECT_EQ(io::dump_json(model_to_json(read(text))), text);
  // A given weight stash alone makes a v3 file (v1 fields otherwise), written where it was.
  EXPECT_EQ(io::dump_json(model_to_json(read(R"({"layers": [{"forward_ms": 1,
    "backward_ms": 1, "activation_bytes": 1, "weight_stash_bytes": 1}]})"))),
            "{\n  \"schema\": \"pipeplan/model/v3\",\n  \"parameter_memory_factor\": 4,\n"
            "  \"layers\": [\n    {\n      \"forward_ms\": 1,\n      \"backward_ms\": 1,\n"
            "      \"activation_bytes\": 1,\n      \"parameter_bytes\": 0,\n"
            "      \"weight_stash_bytes\": 1\n    }\n  ]\n}\n");
  // A v3 file without the fields is written as v1, a zero part left out.
  EXPECT_EQ(model_to_json(read(R"({"schema": "pipeplan/model/v3", "layers": [{"forward_ms": 1,
    "backward_ms": 1, "activation_bytes": 1, "backward_weight_ms": 0}]})"))["schema"],
            "pipeplan/model/v1");
}

}  // namespace
}  // namespace pipeplan::model
