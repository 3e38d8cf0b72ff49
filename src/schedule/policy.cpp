// The schedule policy table and the name <-> enum functions read from it. Every lookup is a
// linear scan of the (few) rows.

#include "pipeplan/schedule/policy.hpp"

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"

namespace pipeplan::schedule {

const std::vector<PolicyRow>& policy_table() {
  static const std::vector<PolicyRow> kTable{
      {.policy = Policy::kList,
       .name = "list",
       .description = "the paper's list scheduler: an idle GPU starts a ready backward, else a "
                      "ready forward whose stash fits in memory, else a weight gradient",
       .fixed = false,
       .device_stages = DeviceStages::kAny,
       .splits = true},
      {.policy = Policy::kOneFOneB,
       .name = "1f1b",
       .description = "1F1B with a flush (PipeDream-Flush, DAPPLE): warm-up forwards, then a "
                      "forward and a backward in turn",
       .fixed = true,
       .device_stages = DeviceStages::kOne,
       .splits = false},
      {.policy = Policy::kGpipe,
       .name = "gpipe",
       .description = "fill-drain (GPipe): all forwards, then all backwards",
       .fixed = true,
       .device_stages = DeviceStages::kAny,
       .splits = false},
      {.policy = Policy::kInterleaved1F1B,
       .name = "interleaved-1f1b",
       .description = "Megatron-LM's interleaved 1F1B: V stages per device, micro-batches in "
                      "groups of P",
       .fixed = true,
       .device_stages = DeviceStages::kAny,
       .splits = false,
       .version3 = true},
      {.policy = Policy::kLoopedBfs,
       .name = "looped-bfs",
       .description = "torch's ScheduleLoopedBFS: every forward of a device's stages, stage by "
                      "stage, then every backward in reverse",
       .fixed = true,
       .device_stages = DeviceStages::kAny,
       .splits = false,
       .version3 = true},
      {.policy = Policy::kZbH1,
       .name = "zb-h1",
       .description = "zero-bubble ZB-H1 (Qi et al. 2023): 1F1B with weight gradients deferred "
                      "into the bubbles",
       .fixed = true,
       .device_stages = DeviceStages::kOne,
       .splits = true,
       .version3 = true},
      {.policy = Policy::kZbV,
       .name = "zb-v",
       .description = "zero-bubble ZB-V (Qi et al. 2023): two stages per device in a V",
       .fixed = true,
       .device_stages = DeviceStages::kTwo,
       .splits = true,
       .version3 = true},
  };
  return kTable;
}

const PolicyRow& policy_row(Policy policy) {
  for (const PolicyRow& row : policy_table()) {
    if (row.policy == policy) return row;
  }
  throw InternalError("schedule policy " + std::to_string(static_cast<int>(policy)) +
                      " has no row in the policy table");
}

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const PolicyRow& row : policy_table()) names.emplace_back(row.name);
    return names;
  }();
  return kNames;
}

std::vector<Policy> all_policies() {
  std::vector<Policy> policies;
  for (const PolicyRow& row : policy_table()) policies.push_back(row.policy);
  return policies;
}

std::string_view policy_name(Policy policy) { return policy_row(policy).name; }

std::optional<Policy> parse_policy(std::string_view name) {
  for (const PolicyRow& row : policy_table()) {
    if (row.name == name) return row.policy;
  }
  return std::nullopt;
}

std::string policy_names_text() { return io::format_choices(policy_names()); }

const std::vector<ListRule>& other_list_rules() {
  // The alternating rule first: it is what spp's last step tried alone before the replicas'
  // per-task load, so that a plan it chose keeps its bytes (a later rule wins only when
  // strictly faster).
  static const std::vector<ListRule> kRules = {
      {ListPriority::kAlternate, ReplicaLoad::kUntilBackward},
      {ListPriority::kBackwardFirst, ReplicaLoad::kPerTask},
      {ListPriority::kAlternate, ReplicaLoad::kPerTask},
  };
  return kRules;
}

std::string list_rule_words(const ListRule& rule) {
  std::string words;
  if (rule.priority == ListPriority::kAlternate) words += " alternating forwards and backwards";
  if (rule.load == ReplicaLoad::kPerTask) {
    words += words.empty() ? " choosing" : ", choosing";
    words += " replicas by their work left task by task";
  }
  return words;
}

}  // namespace pipeplan::schedule
