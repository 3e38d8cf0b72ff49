// Reading and writing model profiles (spec section 1). O(layers).

#include "pipeplan/model/model.hpp"

#include <limits>
#include <unordered_map>

#include "pipeplan/io/json.hpp"

namespace pipeplan::model {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

Layer read_layer(const io::Node& node) {
  io::ObjectReader object(node, {"name", "forward_ms", "backward_ms", "activation_bytes",
                                 "parameter_bytes", "stash_bytes"});
  Layer layer;
  if (auto name = object.optional("name")) layer.name = name->as_nonempty_string();
  layer.forward_ms = object.required("forward_ms").as_nonnegative();
  layer.backward_ms = object.required("backward_ms").as_nonnegative();
  layer.activation_bytes = object.required("activation_bytes").as_nonnegative();
  if (auto parameters = object.optional("parameter_bytes")) {
    layer.parameter_bytes = parameters->as_nonnegative();
  }
  layer.stash_bytes = layer.activation_bytes;
  if (auto stash = object.optional("stash_bytes")) layer.stash_bytes = stash->as_nonnegative();
  return layer;
}

}  // namespace

Model read_model(const io::Source& source) {
  io::Document document = io::parse_json(source);
  io::Node root(document, document.root, "");
  io::ObjectReader object(root, {"schema", "name", "micro_batches", "profile",
                                 "parameter_memory_factor", "layers"});
  Model model;
  if (auto schema = object.optional("schema")) {
    if (schema->as_string() != kModelSchema) {
      schema->fail(std::string("must be \"") + kModelSchema + "\", got " +
                   io::describe_value(schema->json()));
    }
  }
  if (auto name = object.optional("name")) model.name = name->as_nonempty_string();
  if (auto micro_batches = object.optional("micro_batches")) {
    model.micro_batches = micro_batches->as_integer(1, kMaxInt);
  }
  if (auto profile = object.optional("profile")) {
    io::ObjectReader profile_object(*profile, {"batch_size", "device"});
    if (auto batch = profile_object.optional("batch_size")) {
      model.profile_batch_size = batch->as_integer(1, kMaxInt);
    }
    if (auto device = profile_object.optional("device")) {
      model.profile_device = device->as_nonempty_string();
    }
  }
  if (auto factor = object.optional("parameter_memory_factor")) {
    model.parameter_memory_factor = factor->as_nonnegative();
  }
  io::Node layers = object.required("layers");
  std::vector<io::Node> elements = layers.elements();
  if (elements.empty()) layers.fail("must list at least one layer");
  std::unordered_map<std::string, std::size_t> seen;
  model.layers.reserve(elements.size());
  for (std::size_t i = 0; i < elements.size(); ++i) {
    model.layers.push_back(read_layer(elements[i]));
    const std::string& name = model.layers.back().name;
    if (name.empty()) continue;
    auto [it, inserted] = seen.emplace(name, i);
    if (!inserted) {
      io::Node(document, elements[i].json().at("name"), io::pointer_append(elements[i].pointer(), "name"))
          .fail("duplicate layer name \"" + name + "\" (also /layers/" + std::to_string(it->second) +
                ")");
    }
  }
  return model;
}

nlohmann::ordered_json model_to_json(const Model& model) {
  using io::json_number;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["schema"] = kModelSchema;
  if (!model.name.empty()) out["name"] = model.name;
  if (model.micro_batches) out["micro_batches"] = *model.micro_batches;
  if (model.profile_batch_size || model.profile_device) {
    nlohmann::ordered_json profile = nlohmann::ordered_json::object();
    if (model.profile_batch_size) profile["batch_size"] = *model.profile_batch_size;
    if (model.profile_device) profile["device"] = *model.profile_device;
    out["profile"] = profile;
  }
  out["parameter_memory_factor"] = json_number(model.parameter_memory_factor);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const Layer& layer : model.layers) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    if (!layer.name.empty()) entry["name"] = layer.name;
    entry["forward_ms"] = json_number(layer.forward_ms);
    entry["backward_ms"] = json_number(layer.backward_ms);
    entry["activation_bytes"] = json_number(layer.activation_bytes);
    entry["parameter_bytes"] = json_number(layer.parameter_bytes);
    if (layer.stash_bytes != layer.activation_bytes) {
      entry["stash_bytes"] = json_number(layer.stash_bytes);
    }
    layers.push_back(std::move(entry));
  }
  out["layers"] = std::move(layers);
  return out;
}

double total_compute_ms(const Model& model) {
  double total = 0;
  for (const Layer& layer : model.layers) total += layer.forward_ms + layer.backward_ms;
  return total;
}

}  // namespace pipeplan::model
