// Reading and writing model profiles (spec sections 1, 8.1 and 9.1), and the per-GPU values of a
// layer at a tensor-parallel degree (8.1, 9.1). O(layers x degrees).

#include "pipeplan/model/model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/description.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::model {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

// A finite number >= 0, with -0 folded into 0 so that it never prints as "-0".
double nonnegative(const io::Node& node) { return node.as_nonnegative() + 0.0; }

// A number for a message, as the writer prints it (`400`, `6.3`).
std::string number_text(double value) { return io::json_number(value).dump(); }

// `degrees`: integers, strictly ascending, starting at 1.
std::vector<int> read_degrees(const io::Node& node) {
  std::vector<io::Node> entries = node.elements();
  if (entries.empty()) node.fail("must list the allowed degrees, starting at 1");
  std::vector<int> degrees;
  degrees.reserve(entries.size());
  for (const io::Node& entry : entries) {
    const int degree = static_cast<int>(entry.as_integer(1, kMaxTensorParallelDegree));
    if (degrees.empty() && degree != 1) {
      entry.fail("must be 1 (every layer may run on one GPU), got " + std::to_string(degree));
    }
    if (!degrees.empty() && degree <= degrees.back()) {
      entry.fail("must be larger than the degree before it (" + std::to_string(degrees.back()) +
                 "), got " + std::to_string(degree));
    }
    degrees.push_back(degree);
  }
  return degrees;
}

// An optional per-degree array: one finite number >= 0 per degree, the first equal to the
// layer's own field `own` (named `field`).
std::vector<double> read_per_degree(const io::ObjectReader& object, std::string_view field,
                                    std::size_t degree_count, double own) {
  auto node = object.optional(field);
  if (!node) return {};
  std::vector<io::Node> entries = node->elements();
  if (entries.size() != degree_count) {
    node->fail("must have one entry per degree (" + std::to_string(degree_count) + "), got " +
               std::to_string(entries.size()));
  }
  std::vector<double> values;
  values.reserve(entries.size());
  for (const io::Node& entry : entries) values.push_back(nonnegative(entry));
  if (values.front() != own) {
    entries.front().fail("must equal the layer's " + std::string(field) + " (" + number_text(own) +
                         ") at degree 1, got " + io::describe_value(entries.front().json()));
  }
  return values;
}

// A part and the whole it belongs to, at one degree: the weight-gradient part of the backward, or
// the weight stash within the stash (spec 9.1).
struct PartOfWhole {
  const char* part;   // "backward_weight_ms"
  const char* whole;  // "backward_ms"
  double own_part;    // the layer's own fields (degree 1)
  double own_whole;
  const std::vector<double>* parts;  // the per-degree arrays (empty: own field / t)
  const std::vector<double>* wholes;
};

// At every degree above 1 the part is at most the whole, defaults included. A given part entry
// that is too large is named; a defaulted part (own / t) above a given whole entry names the
// whole's entry. O(degrees).
void check_part_of_whole(const io::ObjectReader& object, const std::vector<int>& degrees,
                         const PartOfWhole& rule) {
  for (std::size_t k = 1; k < degrees.size(); ++k) {
    const int t = degrees[k];
    const double part = rule.parts->empty() ? rule.own_part / t : (*rule.parts)[k];
    const double whole = rule.wholes->empty() ? rule.own_whole / t : (*rule.wholes)[k];
    if (part <= whole) continue;
    if (!rule.parts->empty()) {
      const io::Node entry = object.required(rule.part).elements()[k];
      entry.fail(std::string("must be at most the ") + rule.whole + " at degree " +
                 std::to_string(t) + " (" + number_text(whole) + "), got " +
                 io::describe_value(entry.json()));
    }
    const io::Node entry = object.required(rule.whole).elements()[k];
    entry.fail(std::string("must be at least the ") + rule.part + " at degree " +
               std::to_string(t) + " (the layer's " + number_text(rule.own_part) + " / " +
               std::to_string(t) + " = " + number_text(part) + "; or give " + rule.part +
               " per degree), got " + io::describe_value(entry.json()));
  }
}

TensorParallel read_tensor_parallel(const io::Node& node, const Layer& layer) {
  io::ObjectReader object(
      node, {"degrees", "allreduce_bytes", "allreduces_forward", "allreduces_backward",
             "forward_ms", "backward_ms", "parameter_bytes", "stash_bytes", "update_ms",
             "backward_weight_ms", "weight_stash_bytes", "backward_working_bytes"});
  TensorParallel split;
  split.degrees = read_degrees(object.required("degrees"));
  split.allreduce_bytes = nonnegative(object.required("allreduce_bytes"));
  if (auto count = object.optional("allreduces_forward")) {
    split.allreduces_forward = static_cast<int>(count->as_integer(0, kMaxAllreducesPerPass));
  }
  if (auto count = object.optional("allreduces_backward")) {
    split.allreduces_backward = static_cast<int>(count->as_integer(0, kMaxAllreducesPerPass));
  }
  const std::size_t n = split.degrees.size();
  split.forward_ms = read_per_degree(object, "forward_ms", n, layer.forward_ms);
  split.backward_ms = read_per_degree(object, "backward_ms", n, layer.backward_ms);
  split.parameter_bytes = read_per_degree(object, "parameter_bytes", n, layer.parameter_bytes);
  split.stash_bytes = read_per_degree(object, "stash_bytes", n, layer.stash_bytes);
  split.update_ms = read_per_degree(object, "update_ms", n, layer.update_ms);
  split.backward_weight_ms =
      read_per_degree(object, "backward_weight_ms", n, layer.backward_weight_ms);
  const double weight_stash = layer.weight_stash_bytes.value_or(layer.stash_bytes);
  split.weight_stash_bytes = read_per_degree(object, "weight_stash_bytes", n, weight_stash);
  split.backward_working_bytes =
      read_per_degree(object, "backward_working_bytes", n, layer.backward_working_bytes);
  check_part_of_whole(object, split.degrees,
                      {"backward_weight_ms", "backward_ms", layer.backward_weight_ms,
                       layer.backward_ms, &split.backward_weight_ms, &split.backward_ms});
  // Without either weight-stash field the weight stash is the stash at every degree.
  if (layer.weight_stash_bytes || !split.weight_stash_bytes.empty()) {
    check_part_of_whole(object, split.degrees,
                        {"weight_stash_bytes", "stash_bytes", weight_stash, layer.stash_bytes,
                         &split.weight_stash_bytes, &split.stash_bytes});
  }
  return split;
}

// `context_parallel` (spec 10.1): the allowed degrees and the attention's exchange.
ContextParallel read_context_parallel(const io::Node& node) {
  io::ObjectReader object(node, {"degrees", "exchange_bytes"});
  ContextParallel split;
  split.degrees = read_degrees(object.required("degrees"));
  if (auto bytes = object.optional("exchange_bytes")) split.exchange_bytes = nonnegative(*bytes);
  return split;
}

// An optional part of a layer's own field (spec 9.1): finite, >= 0, at most `whole` (named).
std::optional<double> read_part(const io::ObjectReader& object, std::string_view field,
                                std::string_view whole_field, double whole) {
  auto node = object.optional(field);
  if (!node) return std::nullopt;
  const double part = nonnegative(*node);
  if (part > whole) {
    node->fail("must be at most the layer's " + std::string(whole_field) + " (" +
               number_text(whole) + "), got " + io::describe_value(node->json()));
  }
  return part;
}

Layer read_layer(const io::Node& node) {
  io::ObjectReader object(
      node, {"name", "forward_ms", "backward_ms", "activation_bytes", "parameter_bytes",
             "stash_bytes", "update_ms", "backward_weight_ms", "weight_stash_bytes",
             "backward_working_bytes", "tensor_parallel", "context_parallel"});
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
  if (auto update = object.optional("update_ms")) layer.update_ms = nonnegative(*update);
  layer.backward_weight_ms =
      read_part(object, "backward_weight_ms", "backward_ms", layer.backward_ms).value_or(0);
  layer.weight_stash_bytes =
      read_part(object, "weight_stash_bytes", "stash_bytes", layer.stash_bytes);
  if (auto working = object.optional("backward_working_bytes")) {
    layer.backward_working_bytes = nonnegative(*working);
  }
  if (auto split = object.optional("tensor_parallel")) {
    layer.tensor_parallel = read_tensor_parallel(*split, layer);
  }
  if (auto split = object.optional("context_parallel")) {
    layer.context_parallel = read_context_parallel(*split);
  }
  return layer;
}

// The largest value of one per-GPU figure over the layer's degrees.
double largest(const Layer& layer, double (*at)(const Layer&, int)) {
  double most = at(layer, 1);
  if (layer.tensor_parallel) {
    for (int t : layer.tensor_parallel->degrees) most = std::max(most, at(layer, t));
  }
  return most;
}

// Every value is finite, but their sums (which the execution model adds up) must be too, at
// every degree: each layer is counted at its largest per-degree value.
void check_totals(const Model& model, const io::Node& layers) {
  double compute_ms = 0, parameter_bytes = 0, stash_bytes = 0, activation_bytes = 0;
  double update_ms = 0, allreduce_bytes = 0, weight_ms = 0, weight_stash_bytes = 0;
  double exchange_bytes = 0, working_bytes = 0;
  for (const Layer& layer : model.layers) {
    compute_ms += largest(layer, forward_ms_at) + largest(layer, backward_ms_at);
    weight_ms += largest(layer, backward_weight_ms_at);
    weight_stash_bytes += largest(layer, weight_stash_bytes_at);
    parameter_bytes += largest(layer, parameter_bytes_at);
    stash_bytes += largest(layer, stash_bytes_at);
    working_bytes += largest(layer, backward_working_bytes_at);
    activation_bytes += layer.activation_bytes;
    update_ms += largest(layer, update_ms_at);
    if (layer.context_parallel) exchange_bytes += layer.context_parallel->exchange_bytes;
    if (layer.tensor_parallel) {
      const TensorParallel& split = *layer.tensor_parallel;
      allreduce_bytes +=
          split.allreduce_bytes * std::max(split.allreduces_forward, split.allreduces_backward);
    }
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
  check(working_bytes, "the sum of backward_working_bytes");
  check(activation_bytes, "the sum of activation_bytes");
  check(activation_bytes + model.input_bytes, "input_bytes plus the sum of activation_bytes");
  check(update_ms, "the sum of update_ms");
  check(model.reserve_bytes, "reserve_bytes");
  // Spec 9.1's parts: the reader keeps each at most its whole at every degree, so these hold
  // whenever the sums above do; checked all the same, so that the bound does not rest on it.
  check(weight_ms, "the sum of backward_weight_ms");
  check(weight_stash_bytes, "the sum of weight_stash_bytes");
  check(allreduce_bytes, "the sum of tensor-parallel all-reduce bytes");
  check(exchange_bytes, "the sum of context-parallel exchange_bytes");
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

// The index of degree `t` in the layer's `degrees`; an `InternalError` when it is not listed.
std::size_t degree_index(const Layer& layer, int t) {
  const std::vector<int>& degrees = layer.tensor_parallel->degrees;
  auto it = std::lower_bound(degrees.begin(), degrees.end(), t);
  if (it == degrees.end() || *it != t) {
    throw InternalError("layer " + (layer.name.empty() ? std::string("(unnamed)") : layer.name) +
                        " does not allow tensor-parallel degree " + std::to_string(t));
  }
  return static_cast<std::size_t>(it - degrees.begin());
}

// The per-GPU value at degree `t`: the layer's own field when it is not split, else the
// per-degree array's entry, else the field divided by t.
double at_degree(const Layer& layer, int t, double own,
                 std::vector<double> TensorParallel::*per_degree) {
  if (t < 1) throw InternalError("tensor-parallel degree " + std::to_string(t) + " is below 1");
  if (!layer.tensor_parallel || t == 1) return own;
  const std::size_t index = degree_index(layer, t);
  const std::vector<double>& values = (*layer.tensor_parallel).*per_degree;
  return values.empty() ? own / t : values[index];
}

bool lists_degree(const Layer& layer, int t) {
  const std::vector<int>& degrees = layer.tensor_parallel->degrees;
  return std::binary_search(degrees.begin(), degrees.end(), t);
}

}  // namespace

Model read_model(const io::Source& source) {
  io::Document document = io::parse_json(source);
  io::Node root(document, document.root, "");
  std::initializer_list<std::string_view> known_keys = {"schema",
                                                        "name",
                                                        "micro_batches",
                                                        "profile",
                                                        "parameter_memory_factor",
                                                        "sharded_memory_factor",
                                                        "input_bytes",
                                                        "reserve_bytes",
                                                        "layers",
                                                        "transformer"};
  hint_topology_file(root, known_keys);
  io::ObjectReader object(root, known_keys);
  Model model;
  if (auto schema = object.optional("schema")) {
    std::string text = schema->as_string();
    if (text != kModelSchema && text != kModelSchemaV2 && text != kModelSchemaV3) {
      std::string hint =
          text.rfind("pipeplan/topology/", 0) == 0 ? " (is this a topology file?)" : "";
      schema->fail("must be " +
                   io::format_choices({io::quote_for_message(kModelSchema),
                                       io::quote_for_message(kModelSchemaV2),
                                       io::quote_for_message(kModelSchemaV3)}) +
                   ", got " + io::describe_value(schema->json()) + hint);
    }
  }
  if (auto name = object.optional("name")) model.name = name->as_nonempty_string();
  if (auto micro_batches = object.optional("micro_batches")) {
    model.micro_batches = micro_batches->as_integer(1, kMaxMicroBatches);
  }
  if (auto description = object.optional("transformer")) {
    TransformerConfig config = read_description(*description);
    if (!model.name.empty()) config.name = model.name;
    config.micro_batch_size = written_micro_batch_size(object, config);
    Model generated = transformer_model(config);
    generated.micro_batches = model.micro_batches;
    check_totals(generated, *description);
    check_written_profile(object, generated);
    return generated;
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
  if (auto factor = object.optional("sharded_memory_factor")) {
    model.sharded_memory_factor = nonnegative(*factor);
    if (*model.sharded_memory_factor > model.parameter_memory_factor) {
      factor->fail("must be at most parameter_memory_factor (" +
                   number_text(model.parameter_memory_factor) + "), got " +
                   io::describe_value(factor->json()));
    }
  }
  if (auto input = object.optional("input_bytes")) model.input_bytes = nonnegative(*input);
  if (auto reserve = object.optional("reserve_bytes")) model.reserve_bytes = nonnegative(*reserve);
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

namespace {

nlohmann::ordered_json numbers_to_json(const std::vector<double>& values) {
  std::vector<nlohmann::ordered_json> out;
  out.reserve(values.size());
  for (double value : values) out.push_back(io::json_number(value));
  return io::json_array(std::move(out));
}

nlohmann::ordered_json tensor_parallel_to_json(const TensorParallel& split) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  std::vector<nlohmann::ordered_json> degrees(split.degrees.begin(), split.degrees.end());
  out["degrees"] = io::json_array(std::move(degrees));
  out["allreduce_bytes"] = io::json_number(split.allreduce_bytes);
  if (split.allreduces_forward != 2) out["allreduces_forward"] = split.allreduces_forward;
  if (split.allreduces_backward != 2) out["allreduces_backward"] = split.allreduces_backward;
  auto optional_array = [&](const char* key, const std::vector<double>& values) {
    if (!values.empty()) out[key] = numbers_to_json(values);
  };
  optional_array("forward_ms", split.forward_ms);
  optional_array("backward_ms", split.backward_ms);
  optional_array("parameter_bytes", split.parameter_bytes);
  optional_array("stash_bytes", split.stash_bytes);
  optional_array("update_ms", split.update_ms);
  optional_array("backward_weight_ms", split.backward_weight_ms);
  optional_array("weight_stash_bytes", split.weight_stash_bytes);
  optional_array("backward_working_bytes", split.backward_working_bytes);
  return out;
}

nlohmann::ordered_json context_parallel_to_json(const ContextParallel& split) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  std::vector<nlohmann::ordered_json> degrees(split.degrees.begin(), split.degrees.end());
  out["degrees"] = io::json_array(std::move(degrees));
  out["exchange_bytes"] = io::json_number(split.exchange_bytes);
  return out;
}

}  // namespace

nlohmann::ordered_json model_to_json(const Model& model) {
  using io::json_number;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (uses_v3_fields(model)) {
    out["schema"] = kModelSchemaV3;
  } else {
    out["schema"] = uses_v2_fields(model) ? kModelSchemaV2 : kModelSchema;
  }
  if (!model.name.empty()) out["name"] = model.name;
  if (model.micro_batches) out["micro_batches"] = *model.micro_batches;
  if (model.transformer) out["transformer"] = description_to_json(*model.transformer);
  if (model.profile_batch_size || model.profile_device) {
    nlohmann::ordered_json profile = nlohmann::ordered_json::object();
    if (model.profile_batch_size) profile["batch_size"] = *model.profile_batch_size;
    if (model.profile_device) profile["device"] = *model.profile_device;
    out["profile"] = profile;
  }
  out["parameter_memory_factor"] = json_number(model.parameter_memory_factor);
  if (model.sharded_memory_factor) {
    out["sharded_memory_factor"] = json_number(*model.sharded_memory_factor);
  }
  if (model.input_bytes != 0) out["input_bytes"] = json_number(model.input_bytes);
  if (model.reserve_bytes != 0) out["reserve_bytes"] = json_number(model.reserve_bytes);
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
    if (layer.update_ms != 0) entry["update_ms"] = json_number(layer.update_ms);
    if (layer.backward_weight_ms != 0) {
      entry["backward_weight_ms"] = json_number(layer.backward_weight_ms);
    }
    if (layer.weight_stash_bytes) {
      entry["weight_stash_bytes"] = json_number(*layer.weight_stash_bytes);
    }
    if (layer.backward_working_bytes != 0) {
      entry["backward_working_bytes"] = json_number(layer.backward_working_bytes);
    }
    if (layer.tensor_parallel) {
      entry["tensor_parallel"] = tensor_parallel_to_json(*layer.tensor_parallel);
    }
    if (layer.context_parallel) {
      entry["context_parallel"] = context_parallel_to_json(*layer.context_parallel);
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

bool uses_v2_fields(const Model& model) {
  if (model.sharded_memory_factor || model.input_bytes != 0 || model.reserve_bytes != 0) {
    return true;
  }
  return std::any_of(model.layers.begin(), model.layers.end(), [](const Layer& layer) {
    return layer.update_ms != 0 || layer.tensor_parallel.has_value();
  });
}

bool uses_v3_fields(const Model& model) {
  return std::any_of(model.layers.begin(), model.layers.end(), [](const Layer& layer) {
    return layer.backward_weight_ms != 0 || layer.weight_stash_bytes.has_value() ||
           layer.backward_working_bytes != 0 || layer.context_parallel.has_value() ||
           (layer.tensor_parallel && (!layer.tensor_parallel->backward_weight_ms.empty() ||
                                      !layer.tensor_parallel->weight_stash_bytes.empty() ||
                                      !layer.tensor_parallel->backward_working_bytes.empty()));
  });
}

bool has_weight_gradients(const Model& model) {
  return std::any_of(model.layers.begin(), model.layers.end(),
                     [](const Layer& layer) { return largest(layer, backward_weight_ms_at) > 0; });
}

bool has_backward_working_bytes(const Model& model) {
  return std::any_of(model.layers.begin(), model.layers.end(), [](const Layer& layer) {
    return largest(layer, backward_working_bytes_at) > 0;
  });
}

double sharded_factor(const Model& model) {
  return model.sharded_memory_factor.value_or(std::max(0.0, model.parameter_memory_factor - 2));
}

FactorSplit factor_split(const Model& model) {
  const double phi = model.parameter_memory_factor;
  const double unsharded = phi - sharded_factor(model);
  FactorSplit split;
  split.weights = std::min(1.0, unsharded);
  split.gradients = unsharded - split.weights;
  split.optimizer = phi - unsharded;
  return split;
}

bool has_updates(const Model& model) {
  return std::any_of(model.layers.begin(), model.layers.end(),
                     [](const Layer& layer) { return largest(layer, update_ms_at) > 0; });
}

bool has_tensor_parallel_layers(const Model& model) {
  return std::any_of(model.layers.begin(), model.layers.end(),
                     [](const Layer& layer) { return layer.tensor_parallel.has_value(); });
}

bool is_split(const Layer& layer, int t) {
  return layer.tensor_parallel.has_value() && t > 1 && lists_degree(layer, t);
}

double forward_ms_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.forward_ms, &TensorParallel::forward_ms);
}

double backward_ms_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.backward_ms, &TensorParallel::backward_ms);
}

double parameter_bytes_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.parameter_bytes, &TensorParallel::parameter_bytes);
}

double stash_bytes_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.stash_bytes, &TensorParallel::stash_bytes);
}

double update_ms_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.update_ms, &TensorParallel::update_ms);
}

double backward_weight_ms_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.backward_weight_ms, &TensorParallel::backward_weight_ms);
}

double weight_stash_bytes_at(const Layer& layer, int t) {
  const bool per_degree =
      layer.tensor_parallel && !layer.tensor_parallel->weight_stash_bytes.empty();
  if (!layer.weight_stash_bytes && !per_degree) return stash_bytes_at(layer, t);
  return at_degree(layer, t, layer.weight_stash_bytes.value_or(layer.stash_bytes),
                   &TensorParallel::weight_stash_bytes);
}

double backward_recompute_ms_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.backward_recompute_ms, &TensorParallel::backward_recompute_ms);
}

double backward_working_bytes_at(const Layer& layer, int t) {
  return at_degree(layer, t, layer.backward_working_bytes, &TensorParallel::backward_working_bytes);
}

double backward_transient_bytes_at(const Layer& layer, int t, bool recompute) {
  return backward_working_bytes_at(layer, t) + (recompute ? stash_bytes_at(layer, t) : 0);
}

int allreduces_forward_at(const Layer& layer, int t) {
  return is_split(layer, t) ? layer.tensor_parallel->allreduces_forward : 0;
}

int allreduces_backward_at(const Layer& layer, int t) {
  return is_split(layer, t) ? layer.tensor_parallel->allreduces_backward : 0;
}

double allreduce_bytes(const Layer& layer) {
  return layer.tensor_parallel ? layer.tensor_parallel->allreduce_bytes : 0;
}

bool stage_allows_degree(const Model& model, int first, int last, int t) {
  if (t == 1) return true;
  if (t < 1) return false;
  bool any_split = false;
  for (int l = first; l <= last; ++l) {
    const Layer& layer = model.layers.at(static_cast<std::size_t>(l));
    if (!layer.tensor_parallel) continue;
    if (!lists_degree(layer, t)) return false;
    any_split = true;
  }
  return any_split;
}

std::vector<int> stage_degrees(const Model& model, int first, int last) {
  // The candidates are the degrees of the first layer that has tensor_parallel.
  for (int l = first; l <= last; ++l) {
    const Layer& layer = model.layers.at(static_cast<std::size_t>(l));
    if (!layer.tensor_parallel) continue;
    std::vector<int> allowed;
    for (int t : layer.tensor_parallel->degrees) {
      if (stage_allows_degree(model, l, last, t)) allowed.push_back(t);
    }
    return allowed;
  }
  return {1};
}

StageCost stage_cost(const Model& model, int first, int last, int t) {
  if (!stage_allows_degree(model, first, last, t)) {
    throw InternalError("layers " + std::to_string(first) + " to " + std::to_string(last) +
                        " do not allow tensor-parallel degree " + std::to_string(t));
  }
  StageCost cost;
  for (int l = first; l <= last; ++l) {
    const Layer& layer = model.layers[static_cast<std::size_t>(l)];
    cost.forward_ms += forward_ms_at(layer, t);
    cost.backward_ms += backward_ms_at(layer, t);
    const double parameters = parameter_bytes_at(layer, t);
    cost.parameter_bytes += parameters;
    cost.max_parameter_bytes = std::max(cost.max_parameter_bytes, parameters);
    const double stash = stash_bytes_at(layer, t);
    cost.stash_bytes += stash;
    cost.max_stash_bytes = std::max(cost.max_stash_bytes, stash);
    cost.max_transient_bytes =
        std::max(cost.max_transient_bytes, backward_transient_bytes_at(layer, t, false));
    cost.max_recompute_transient_bytes =
        std::max(cost.max_recompute_transient_bytes, backward_transient_bytes_at(layer, t, true));
    cost.update_ms += update_ms_at(layer, t);
    cost.backward_weight_ms += backward_weight_ms_at(layer, t);
    cost.backward_recompute_ms += backward_recompute_ms_at(layer, t);
    cost.weight_stash_bytes += weight_stash_bytes_at(layer, t);
    cost.recompute_input_bytes +=
        l == 0 ? model.input_bytes : model.layers[static_cast<std::size_t>(l - 1)].activation_bytes;
    const int forward = allreduces_forward_at(layer, t);
    const int backward = allreduces_backward_at(layer, t);
    cost.forward_allreduces += forward;
    cost.backward_allreduces += backward;
    cost.forward_allreduce_bytes += forward * allreduce_bytes(layer);
    cost.backward_allreduce_bytes += backward * allreduce_bytes(layer);
  }
  return cost;
}

bool allows_context_degree(const Model& model, int c) {
  if (c < 1) return false;
  return std::all_of(model.layers.begin(), model.layers.end(), [c](const Layer& layer) {
    if (!layer.context_parallel) return true;
    const std::vector<int>& degrees = layer.context_parallel->degrees;
    return std::binary_search(degrees.begin(), degrees.end(), c);
  });
}

bool has_context_parallel_layers(const Model& model) {
  return std::any_of(model.layers.begin(), model.layers.end(),
                     [](const Layer& layer) { return layer.context_parallel.has_value(); });
}

namespace {

// Every entry of a per-degree array divided by `c`.
void divide_all(std::vector<double>& values, double c) {
  for (double& value : values) value /= c;
}

// Layer `layer` as one GPU of a context-parallel group of `c` sees it (spec 10.1).
Layer layer_at_context_degree(Layer layer, double c) {
  layer.forward_ms /= c;
  layer.backward_ms /= c;
  layer.activation_bytes /= c;
  layer.stash_bytes /= c;
  layer.backward_weight_ms /= c;
  if (layer.weight_stash_bytes) *layer.weight_stash_bytes /= c;
  layer.backward_working_bytes /= c;
  layer.backward_recompute_ms /= c;
  if (layer.tensor_parallel) {
    TensorParallel& split = *layer.tensor_parallel;
    split.allreduce_bytes /= c;
    divide_all(split.forward_ms, c);
    divide_all(split.backward_ms, c);
    divide_all(split.stash_bytes, c);
    divide_all(split.backward_weight_ms, c);
    divide_all(split.weight_stash_bytes, c);
    divide_all(split.backward_working_bytes, c);
    divide_all(split.backward_recompute_ms, c);
  }
  return layer;
}

}  // namespace

Model at_context_degree(const Model& model, int c) {
  if (!allows_context_degree(model, c)) {
    throw InternalError("the model does not allow context-parallel degree " + std::to_string(c));
  }
  if (c == 1) return model;
  Model divided = model;
  const double cc = c;
  divided.input_bytes /= cc;
  for (Layer& layer : divided.layers) layer = layer_at_context_degree(std::move(layer), cc);
  return divided;
}

double ring_step_bytes(const Layer& layer, int t, int c) {
  if (!layer.context_parallel || c < 2) return 0;
  return layer.context_parallel->exchange_bytes / (static_cast<double>(c) * t);
}

}  // namespace pipeplan::model
