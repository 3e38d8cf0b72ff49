#pragma once
// For the fuzz targets: how many GPUs a topology text asks for, before reading it, so that a
// target can skip inputs that are merely slow (tens of thousands of GPUs) rather than wrong.

#include <cstdint>
#include <limits>

#include "pipeplan/io/files.hpp"
#include "pipeplan/io/json.hpp"

namespace pipeplan::fuzz {

/// GPUs requested by the `nodes` shorthand (count x gpus per entry) and the `gpus` list of a
/// topology text; 0 when the text is not a JSON object (the reader then fails quickly).
inline std::int64_t requested_gpus(const io::Source& source) {
  nlohmann::json root;
  try {
    root = io::parse_json(source).root;
  } catch (const std::exception&) {
    return 0;
  }
  if (!root.is_object()) return 0;
  // Numbers that are not small positive integers are left to the reader to refuse.
  auto small = [](const nlohmann::json& value, std::int64_t fallback) -> std::int64_t {
    if (!value.is_number()) return fallback;
    const double number = value.get<double>();
    if (!(number >= 1)) return 1;
    return number > 1e6 ? std::int64_t{1000000} : static_cast<std::int64_t>(number);
  };
  std::int64_t total = 0;
  if (auto nodes = root.find("nodes"); nodes != root.end() && nodes->is_array()) {
    for (const auto& entry : *nodes) {
      if (!entry.is_object()) continue;
      const auto count = entry.find("count");
      const auto gpus = entry.find("gpus");
      total += (count == entry.end() ? 1 : small(*count, 1)) *
               (gpus == entry.end() ? 1 : small(*gpus, 1));
    }
  }
  if (auto gpus = root.find("gpus"); gpus != root.end() && gpus->is_array()) {
    total += static_cast<std::int64_t>(gpus->size());
  }
  return total;
}

}  // namespace pipeplan::fuzz
