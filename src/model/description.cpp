// A model file's `transformer` object (docs/formats.md): read, written, and the profile a file
// carries beside it checked against what it generates.

#include "pipeplan/model/description.hpp"

#include <optional>
#include <string>
#include <utility>

#include "pipeplan/error.hpp"
#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::model {
namespace {

// The shape fields, read over the preset's (when one is named); the five without a default are
// required without a preset.
void read_description_shape(const io::ObjectReader& object, TransformerConfig& config) {
  struct Field {
    const char* key;
    int* target;
    int max;
    bool required;
  };
  const Field fields[] = {
      {"layers", &config.layers, kMaxTransformerLayers, true},
      {"hidden", &config.hidden, kMaxTransformerDimension, true},
      {"heads", &config.heads, kMaxTransformerDimension, true},
      {"kv_heads", &config.kv_heads, kMaxTransformerDimension, false},
      {"ffn_hidden", &config.ffn_hidden, kMaxTransformerDimension, false},
      {"sequence", &config.sequence, kMaxTransformerDimension, true},
      {"vocab", &config.vocab, kMaxTransformerDimension, true},
      {"micro_batch_size", &config.micro_batch_size, kMaxTransformerMicroBatchSize, false}};
  for (const Field& field : fields) {
    if (auto node = object.optional(field.key)) {
      *field.target = static_cast<int>(node->as_integer(1, field.max));
    } else if (field.required && *field.target == 0) {
      object.node().fail(std::string("missing required key \"") + field.key +
                         "\" (or give \"preset\")");
    }
  }
}

// `gradient_dtype` or `optimizer_dtype`: "fp32" or "bf16". O(1).
hardware::DType state_dtype(const io::Node& node) {
  const std::string text = node.as_string();
  if (text == "fp32") return hardware::DType::kFp32;
  if (text == "bf16") return hardware::DType::kBf16;
  node.fail("must be \"fp32\" or \"bf16\", got " + io::describe_value(node.json()));
}

// `gradient_dtype`, `optimizer_dtype` and `attention_dtype`, where given. O(1).
void read_formats(const io::ObjectReader& object, TransformerConfig& config) {
  for (auto [key, target] : {std::pair{"gradient_dtype", &config.gradient_dtype},
                             std::pair{"optimizer_dtype", &config.optimizer_dtype}}) {
    if (auto format = object.optional(key)) *target = state_dtype(*format);
  }
  if (auto format = object.optional("attention_dtype")) {
    const std::string text = format->as_string();
    if (text != "bf16" && text != "fp8") {
      format->fail("must be \"bf16\" or \"fp8\", got " + io::describe_value(format->json()));
    }
    config.attention_dtype = hardware::parse_dtype(text);
  }
}

}  // namespace

TransformerConfig read_description(const io::Node& node) {
  // `pipeplan model transformer`'s options, snake case.
  io::ObjectReader object(node, {"preset",
                                 "layers",
                                 "hidden",
                                 "heads",
                                 "kv_heads",
                                 "ffn_hidden",
                                 "ffn",
                                 "sequence",
                                 "vocab",
                                 "micro_batch_size",
                                 "dtype",
                                 "gpu",
                                 "sequence_parallel",
                                 "selective_recompute",
                                 "per_op_recompute",
                                 "cross_entropy",
                                 "flash_attention",
                                 "dropout",
                                 "degrees",
                                 "kernel_overhead_us",
                                 "matmul_ceiling",
                                 "gradient_dtype",
                                 "optimizer_dtype",
                                 "attention_dtype"});
  TransformerConfig config;
  if (auto preset = object.optional("preset")) {
    const std::string name = preset->as_nonempty_string();
    const TransformerPreset* found = find_transformer_preset(name);
    if (found == nullptr) {
      std::string names;
      for (const auto& known : transformer_presets()) {
        names += (names.empty() ? "" : ", ") + known.name;
      }
      preset->fail("unknown preset " + io::quote_for_message(name) + " (known: " + names + ")");
    }
    config = found->config;
  }
  read_description_shape(object, config);
  config.micro_batch_size_fixed = object.optional("micro_batch_size").has_value();
  if (auto ffn = object.optional("ffn")) {
    const std::string text = ffn->as_string();
    if (text == "gelu") {
      config.ffn = Ffn::kGelu;
    } else if (text == "swiglu") {
      config.ffn = Ffn::kSwiglu;
    } else if (text == "relu2") {
      config.ffn = Ffn::kRelu2;
    } else {
      ffn->fail("must be \"gelu\", \"swiglu\" or \"relu2\", got " +
                io::describe_value(ffn->json()));
    }
  }
  if (auto dtype = object.optional("dtype")) {
    auto parsed = hardware::parse_dtype(dtype->as_string());
    if (!parsed) {
      dtype->fail("must be one of \"fp32\", \"tf32\", \"bf16\", \"fp16\", \"fp8\", got " +
                  io::describe_value(dtype->json()));
    }
    config.dtype = *parsed;
  }
  if (auto gpu = object.optional("gpu")) config.gpu = gpu->as_nonempty_string();
  if (auto flag = object.optional("sequence_parallel")) config.sequence_parallel = flag->as_bool();
  if (auto flag = object.optional("selective_recompute")) {
    config.selective_recompute = flag->as_bool();
  }
  if (auto flag = object.optional("per_op_recompute")) config.per_op_recompute = flag->as_bool();
  if (auto loss = object.optional("cross_entropy")) {
    const std::optional<CrossEntropy> parsed = parse_cross_entropy(loss->as_string());
    if (!parsed) {
      loss->fail("must be \"megatron\" or \"torch-fp32\", got " + io::describe_value(loss->json()));
    }
    config.cross_entropy = *parsed;
  }
  if (auto flag = object.optional("flash_attention")) config.flash_attention = flag->as_bool();
  if (auto flag = object.optional("dropout")) config.dropout = flag->as_bool();
  if (auto overhead = object.optional("kernel_overhead_us")) {
    config.kernel_overhead_us = overhead->as_nonnegative();
  }
  if (auto ceiling = object.optional("matmul_ceiling"))
    config.matmul_ceiling = ceiling->as_number();
  read_formats(object, config);
  if (auto degrees = object.optional("degrees")) {
    std::vector<io::Node> entries = degrees->elements();
    if (entries.empty()) degrees->fail("must list the allowed degrees, starting at 1");
    config.degrees.clear();
    for (const io::Node& entry : entries) {
      config.degrees.push_back(static_cast<int>(entry.as_integer(1, kMaxTensorParallelDegree)));
    }
  }
  auto [completed, problem] = check_transformer_config(config, FieldSpelling::kKey);
  if (problem) {
    if (auto field = object.optional(problem->field)) field->fail(problem->message);
    node.fail(problem->field + ": " + problem->message);
  }
  return completed;
}

nlohmann::ordered_json description_to_json(const TransformerConfig& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["layers"] = config.layers;
  out["hidden"] = config.hidden;
  out["heads"] = config.heads;
  out["kv_heads"] = config.kv_heads;
  out["ffn_hidden"] = config.ffn_hidden;
  switch (config.ffn) {
    case Ffn::kGelu:
      out["ffn"] = "gelu";
      break;
    case Ffn::kSwiglu:
      out["ffn"] = "swiglu";
      break;
    case Ffn::kRelu2:
      out["ffn"] = "relu2";
      break;
  }
  out["sequence"] = config.sequence;
  out["vocab"] = config.vocab;
  if (config.micro_batch_size_fixed) out["micro_batch_size"] = config.micro_batch_size;
  out["dtype"] = std::string(hardware::dtype_name(config.dtype));
  out["gpu"] = config.gpu;
  out["sequence_parallel"] = config.sequence_parallel;
  out["selective_recompute"] = config.selective_recompute;
  // Written only when on, so that a description without it reads as before.
  if (config.per_op_recompute) out["per_op_recompute"] = true;
  // Written only when not Megatron-LM's, so that a description without it reads as before.
  if (config.cross_entropy != CrossEntropy::kMegatron) {
    out["cross_entropy"] = std::string(cross_entropy_name(config.cross_entropy));
  }
  out["flash_attention"] = config.flash_attention;
  // Written only when off, so that a description without it reads as before (dropout on).
  if (!config.dropout) out["dropout"] = false;
  out["degrees"] = config.degrees;
  out["kernel_overhead_us"] = config.kernel_overhead_us;
  // Written only where it caps something, so that a description without it reads as before.
  if (config.matmul_ceiling < 1) out["matmul_ceiling"] = config.matmul_ceiling;
  // Written only when bf16, so that a description without them reads as before (fp32).
  if (config.gradient_dtype != hardware::DType::kFp32) out["gradient_dtype"] = "bf16";
  if (config.optimizer_dtype != hardware::DType::kFp32) out["optimizer_dtype"] = "bf16";
  // Written only when set (fp8 training), so that a description without it reads as before.
  if (config.attention_dtype) {
    out["attention_dtype"] = std::string(hardware::dtype_name(*config.attention_dtype));
  }
  return out;
}

int written_micro_batch_size(const io::ObjectReader& file, const TransformerConfig& config) {
  if (config.micro_batch_size_fixed) return config.micro_batch_size;
  const std::optional<io::Node> profile = file.optional("profile");
  if (!profile || !profile->json().is_object()) return config.micro_batch_size;
  const auto size = profile->json().find("batch_size");
  if (size == profile->json().end() || !size->is_number_integer()) return config.micro_batch_size;
  const auto b = size->get<std::int64_t>();
  return b >= 1 && b <= kMaxTransformerMicroBatchSize ? static_cast<int>(b)
                                                      : config.micro_batch_size;
}

namespace {

// The model file's keys that a description generates.
constexpr const char* kProfileKeys[] = {
    "profile",     "parameter_memory_factor", "sharded_memory_factor",
    "input_bytes", "reserve_bytes",           "layers"};

struct Difference {
  io::Node where;
  std::string what;
};

io::Node child(const io::Node& parent, const nlohmann::json& value, const std::string& pointer) {
  return {*parent.document_ptr(), value, pointer};
}

// The first place where `file` differs from `expected`, members in `expected`'s order, then the
// file's extra members (`x-` keys aside). Numbers compare by value (`12` equals `12.0`).
// O(size of the values).
std::optional<Difference> first_difference(const io::Node& file, const nlohmann::json& expected) {
  const nlohmann::json& value = file.json();
  if (value.is_object() && expected.is_object()) {
    for (const auto& [key, member] : expected.items()) {
      const auto it = value.find(key);
      if (it == value.end()) return Difference{file, "missing \"" + key + "\""};
      if (auto found =
              first_difference(child(file, *it, io::pointer_append(file.pointer(), key)), member)) {
        return found;
      }
    }
    for (const auto& [key, member] : value.items()) {
      if (key.rfind("x-", 0) == 0 || expected.contains(key)) continue;
      return Difference{child(file, member, io::pointer_append(file.pointer(), key)),
                        "not generated by the description"};
    }
    return std::nullopt;
  }
  if (value.is_array() && expected.is_array()) {
    if (value.size() != expected.size()) {
      return Difference{file, "has " + std::to_string(value.size()) +
                                  (value.size() == 1 ? " entry" : " entries") +
                                  " where the description generates " +
                                  std::to_string(expected.size())};
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (auto found = first_difference(
              child(file, value[i], io::pointer_append(file.pointer(), i)), expected[i])) {
        return found;
      }
    }
    return std::nullopt;
  }
  if (value == expected) return std::nullopt;
  return Difference{file, "is " + io::describe_value(value) + " where the description generates " +
                              io::describe_value(expected)};
}

}  // namespace

void check_written_profile(const io::ObjectReader& file, const Model& generated) {
  bool any = false;
  for (const char* key : kProfileKeys) any = any || file.optional(key).has_value();
  if (!any) return;
  // Through text, so that the numbers are those a reader of the written file sees.
  const nlohmann::json expected = nlohmann::json::parse(io::dump_json(model_to_json(generated)));
  std::optional<Difference> found;
  // The keys given first, so that a partial profile is named by what it holds.
  for (const char* key : kProfileKeys) {
    const std::optional<io::Node> given = file.optional(key);
    const auto wanted = expected.find(key);
    if (found || !given) continue;
    found = wanted == expected.end() ? Difference{*given, "not generated by the description"}
                                     : first_difference(*given, *wanted);
  }
  for (const char* key : kProfileKeys) {
    if (found || file.optional(key) || !expected.contains(key)) continue;
    found = Difference{file.node(), "missing \"" + std::string(key) + "\""};
  }
  if (found) {
    found->where.fail(found->what +
                      ": a file with \"transformer\" holds the profile it generates, or none "
                      "(remove \"transformer\" to plan edited layers as a profile)");
  }
}

}  // namespace pipeplan::model
