#pragma once
// Parsed JSON equality with a float tolerance, for golden files.

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace pipeplan::testing {

/// Parsed JSON equality with a relative tolerance of 1e-9 on numbers; `mismatch` names the
/// JSON pointer of the first difference (`/a/1: 2.001 vs 2`).
inline bool same_json(const nlohmann::json& a, const nlohmann::json& b, const std::string& where,
                      std::string& mismatch) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    if (std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y)) + 1e-12) return true;
    mismatch = where + ": " + a.dump() + " vs " + b.dump();
    return false;
  }
  if (a.type() != b.type()) {
    mismatch = where + ": " + a.dump() + " vs " + b.dump();
    return false;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) {
      mismatch = where + ": different keys";
      return false;
    }
    for (const auto& [key, value] : a.items()) {
      if (!b.contains(key)) {
        mismatch = where + "/" + key + ": missing";
        return false;
      }
      if (!same_json(value, b.at(key), where + "/" + key, mismatch)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) {
      mismatch =
          where + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " elements";
      return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!same_json(a[i], b[i], where + "/" + std::to_string(i), mismatch)) return false;
    }
    return true;
  }
  if (a != b) {
    mismatch = where + ": " + a.dump() + " vs " + b.dump();
    return false;
  }
  return true;
}

}  // namespace pipeplan::testing
