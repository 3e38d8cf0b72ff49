// Reading and writing model profiles (spec section 1). O(layers).

#include "pipeplan/model/model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "pipeplan/io/json.hpp"

namespace pipeplan::model {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

// A finite number >= 0, with -0 folded into 0 so that it never prints as "-0".
double nonnegative(const io::Node& node) { return node.as_nonnegative() + 0.0; }

Layer read_layer(const io::Node& node) {
  io::ObjectReader object(node, {"name", "forward_ms", "backward_ms", "activation_bytes",
                                 "parameter_bytes", "stash_bytes"});
  Layer layer;
  if (auto name = object.optional("name")) layer.name = name->as_nonempty_string();
  layer.forward_ms = nonnegative(object.required("forward_ms"));
  layer.backward_ms = nonnegative(object.required("backward_ms"));
  layer.activation_bytes = nonnegative(object.required("activation_bytes"));
  if (auto parameters = object.optional("parameter_bytes")) {
    layer.parameter_bytes = nonnegative(*parameters);
  }
  layer.stash_bytes = layer.activation_bytes;
  if (auto stash = object.optional("stash_bytes")) layer.stash_bytes = nonnegative(*stash);
  return layer;
}

// Every value is finite, but their sums (which the execution model adds up) must be too.
void check_totals(const Model& model, const io::Node& layers) {
  double compute_ms = 0, parameter_bytes = 0, stash_bytes = 0, activation_bytes = 0;
  for (const Layer& layer : model.layers) {
    compute_ms += layer.forward_ms + layer.backward_ms;
    parameter_bytes += layer.parameter_bytes;
    stash_bytes += layer.stash_bytes;
    activation_bytes += layer.activation_bytes;
  }
  auto check = [&](double total, const char* what) {
    if (!std::isfinite(total)) layers.fail(std::string("too large: ") + what + " is not finite");
    if (total > kMaxTotal) {
      layers.fail(std::string("too large: ") + what + " is " +
                  io::describe_value(nlohmann::json(total)) + ", more than " +
                  io::describe_value(nlohmann::json(kMaxTotal)) +
                  " (figures derived from it would overflow)");
    }
  };
  check(compute_ms, "the sum of forward_ms and backward_ms over all layers");
  check(parameter_bytes * model.parameter_memory_factor,
        "parameter_memory_factor times the sum of parameter_bytes");
  check(stash_bytes, "the sum of stash_bytes");
  check(activation_bytes, "the sum of activation_bytes");
}

// When the first unknown key of the root is a topology's, the user probably swapped the files.
void hint_topology_file(const io::Node& root, std::initializer_list<std::string_view> known) {
  if (!root.json().is_object()) return;
  for (const auto& [key, value] : root.json().items()) {
    if (key.rfind("x-", 0) == 0 || std::find(known.begin(), known.end(), key) != known.end()) {
      continue;
    }
    if (key == "nodes" || key == "gpus" || key == "network" || key == "links") {
      io::Node(*root.document_ptr(), value, io::pointer_append("", key))
          .fail("unknown key (is this a topology file?)");
    }
    return;
  }
}

}  // namespace

Model read_model(const io::Source& source) {
  io::Document document = io::parse_json(source);
  io::Node root(document, document.root, "");
  std::initializer_list<std::string_view> known_keys = {
      "schema", "name", "micro_batches", "profile", "parameter_memory_factor", "layers"};
  hint_topology_file(root, known_keys);
  io::ObjectReader object(root, known_keys);
  Model model;
  if (auto schema = object.optional("schema")) {
    std::string text = schema->as_string();
    if (text != kModelSchema) {
      std::string hint = text == "pipeplan/topology/v1" ? " (is this a topology file?)" : "";
      schema->fail(std::string("must be \"") + kModelSchema + "\", got " +
                   io::describe_value(schema->json()) + hint);
    }
  }
  if (auto name = object.optional("name")) model.name = name->as_nonempty_string();
  if (auto micro_batches = object.optional("micro_batches")) {
    model.micro_batches = micro_batches->as_integer(1, kMaxMicroBatches);
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
    model.parameter_memory_factor = nonnegative(*factor);
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
      io::Node(document, elements[i].json().at("name"),
               io::pointer_append(elements[i].pointer(), "name"))
          .fail("duplicate layer name " + io::quote_for_message(name) + " (also /layers/" +
                std::to_string(it->second) + ")");
    }
  }
  check_totals(model, layers);
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
  std::vector<nlohmann::ordered_json> layers;
  layers.reserve(model.layers.size());
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
  out["layers"] = io::json_array(std::move(layers));
  return out;
}

double total_compute_ms(const Model& model) {
  double total = 0;
  for (const Layer& layer : model.layers) total += layer.forward_ms + layer.backward_ms;
  return total;
}

}  // namespace pipeplan::model
