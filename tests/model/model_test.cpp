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

}  // namespace
}  // namespace pipeplan::model
