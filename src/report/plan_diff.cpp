// The one-line difference `plan --check` prints between an existing plan file and the plan
// it regenerated. Linear in the size of the two plans (plus sorting their GPU ids).

#include "pipeplan/report/plan_diff.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "pipeplan/io/format.hpp"

namespace pipeplan::report {

using io::format_ms;

namespace {

// `a, b, c` for a stage's GPU ids, shortened to the first three and the last beyond five.
std::string id_list(const nlohmann::json& gpus) {
  std::vector<std::string> ids;
  if (gpus.is_array()) {
    for (const auto& id : gpus) ids.push_back(id.is_string() ? id.get<std::string>() : id.dump());
  }
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids.size() > 5 && i == 3) {
      out += ", ... " + ids.back() + " (" + std::to_string(ids.size()) + ")";
      break;
    }
    out += (i ? ", " : "") + ids[i];
  }
  return out.empty() ? "none" : out;
}

using nlohmann::json;

// `object[key]`, or null when absent.
json member(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? json() : *it;
}

// A value as the user wrote it: strings without their quotes.
std::string text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Planner, schedule policy and micro-batches.
void settings_changes(const json& existing, const json& fresh, std::vector<std::string>& changes) {
  const std::pair<const char*, const char*> settings[] = {
      {"planner", "planner"}, {"schedule_policy", "schedule"}, {"micro_batches", "micro-batches"}};
  for (const auto& [key, name] : settings) {
    const json before = member(existing, key), after = member(fresh, key);
    if (before != after) {
      changes.push_back(std::string(name) + " " + text(before) + " -> " + text(after));
    }
  }
}

// `0-3 x1 | 4-7 x2`: the stages' layer ranges and replica counts.
std::string stage_text(const json& stages) {
  std::string out;
  if (!stages.is_array()) return out;
  for (const auto& stage : stages) {
    if (!stage.is_object()) continue;
    out += (out.empty() ? "" : " | ") + member(stage, "first_layer").dump() + "-" +
           member(stage, "last_layer").dump() + " x" + std::to_string(member(stage, "gpus").size());
  }
  return out;
}

// Each stage's `gpus` (null for a stage that is not an object).
std::vector<json> gpu_lists(const json& stages) {
  std::vector<json> out;
  if (stages.is_array()) {
    for (const auto& stage : stages)
      out.push_back(stage.is_object() ? member(stage, "gpus") : json());
  }
  return out;
}

// Every GPU id of the lists, sorted.
std::vector<std::string> sorted_ids(const std::vector<json>& lists) {
  std::vector<std::string> ids;
  for (const auto& list : lists) {
    for (const auto& id : list) ids.push_back(text(id));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// GPUs: how many are used, else which ones serve each stage, else whether the set differs.
void gpu_changes(const json& old_stages, const json& new_stages,
                 std::vector<std::string>& changes) {
  const auto old_gpus = gpu_lists(old_stages), new_gpus = gpu_lists(new_stages);
  std::size_t old_used = 0, new_used = 0;
  for (const auto& list : old_gpus) old_used += list.is_array() ? list.size() : 0;
  for (const auto& list : new_gpus) new_used += list.is_array() ? list.size() : 0;
  if (old_used != new_used) {
    changes.push_back("GPUs used " + std::to_string(old_used) + " -> " + std::to_string(new_used));
  } else if (old_gpus.size() == new_gpus.size()) {
    std::vector<std::string> moved;
    for (std::size_t s = 0; s < old_gpus.size(); ++s) {
      if (old_gpus[s] != new_gpus[s]) {
        moved.push_back("stage " + std::to_string(s) + " " + id_list(old_gpus[s]) + " -> " +
                        id_list(new_gpus[s]));
      }
    }
    if (!moved.empty()) {
      std::string line = "GPUs of " + moved[0];
      if (moved.size() > 1) line += ", " + moved[1];
      if (moved.size() > 2) line += " and " + std::to_string(moved.size() - 2) + " more stages";
      changes.push_back(line);
    }
  } else if (sorted_ids(old_gpus) != sorted_ids(new_gpus)) {
    changes.push_back("a different set of GPUs is used");
  }
}

// Same stages, GPUs and time: the other top-level parts that differ.
std::string other_changes(const json& existing, const json& fresh) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : fresh.items()) {
    if (member(existing, key.c_str()) != value) {
      parts.push_back(key == "schedule" ? "the schedule" : key);
    }
  }
  for (const auto& [key, value] : existing.items()) {
    if (!fresh.contains(key)) parts.push_back(key + " (not in the new plan)");
  }
  std::string line;
  for (const auto& part : parts) line += (line.empty() ? "" : ", ") + part;
  return line.empty() ? "formatting only (same content)" : line + " changed";
}

}  // namespace

std::string plan_difference(const std::string& existing_text,
                            const nlohmann::ordered_json& fresh_ordered) {
  json existing;
  try {
    existing = json::parse(existing_text);
  } catch (const json::exception&) {
    return "the existing file is not JSON";
  }
  if (!existing.is_object()) return "the existing file is not a plan (not a JSON object)";
  const json fresh = json::parse(fresh_ordered.dump());
  std::vector<std::string> changes;
  settings_changes(existing, fresh, changes);
  const json old_stages = member(existing, "stages"), new_stages = member(fresh, "stages");
  const std::string before = stage_text(old_stages), after = stage_text(new_stages);
  if (before != after) {
    changes.push_back("stages " + (before.empty() ? "none" : before) + " -> " + after);
  }
  gpu_changes(old_stages, new_stages, changes);
  const json old_time = member(existing, "iteration_ms"), new_time = member(fresh, "iteration_ms");
  if (old_time != new_time) {
    changes.push_back("iteration " +
                      (old_time.is_number() ? format_ms(old_time.get<double>()) : text(old_time)) +
                      " -> " + format_ms(new_time.get<double>()));
  }
  if (changes.empty()) changes.push_back(other_changes(existing, fresh));
  std::string out;
  for (const auto& change : changes) out += (out.empty() ? "" : "; ") + change;
  return out;
}

}  // namespace pipeplan::report
