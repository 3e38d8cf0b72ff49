#pragma once
/// \file
/// The schedule policies (spec section 5): one table from which the names `--schedule` accepts,
/// their help text, plan.json's `schedule_policy` and the policies `compare` runs come. Adding a
/// policy is adding an enumerator and a row (and teaching the scheduler to run it).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipeplan::schedule {

/// How the work of an iteration is ordered.
enum class Policy {
  kList,             ///< Greedy list scheduling: backward first, then lowest micro-batch;
                     ///< memory-aware; weight gradients as fillers.
  kOneFOneB,         ///< 1F1B with a flush (PipeDream-Flush, DAPPLE), replicas round-robin.
  kGpipe,            ///< Fill-drain: all forwards, then all backwards, replicas round-robin.
  kInterleaved1F1B,  ///< Megatron-LM's interleaved 1F1B over virtual stages (spec 9.4).
  kLoopedBfs,        ///< torch's ScheduleLoopedBFS: every forward of a stage, stage by stage.
  kZbH1,             ///< Qi et al.'s ZB-H1: 1F1B with deferred weight gradients.
  kZbV,              ///< Qi et al.'s ZB-V: two stages per device in a V.
};

/// The list policy's priority rule between a ready backward and a forward a group may start
/// (spec section 5: a greedy scheduler "with a documented priority rule"; docs/algorithms.md,
/// "List scheduling"). Both are non-delay: they only order what may start.
enum class ListPriority {
  /// The paper's rule: a ready backward (`B` or `I`) first, as it frees memory.
  kBackwardFirst,
  /// A group whose last forward-or-backward was a backward starts a forward it may start
  /// before a ready backward, so that forwards and backwards alternate while both are ready, as
  /// in 1F1B's steady state. Where memory holds a stage to the micro-batches its round trip
  /// needs, backward-first lets two replicas' backwards return together and keeps the stages
  /// upstream doing them in pairs, each pair a bubble; alternation keeps them spaced.
  kAlternate,
};

/// How the list policy counts a group's outstanding work when it picks the replica that would
/// finish a micro-batch first (spec section 5: it "picks a replica for each forward").
enum class ReplicaLoad {
  /// A micro-batch's F + B counts against its group until its backward ends.
  kUntilBackward,
  /// Its forward's part leaves the count when the forward ends, the rest when the backward
  /// ends. Replicas of a stage that started at different times then stop looking equally
  /// loaded while one is a forward ahead, so ties to the first replica no longer give it a
  /// micro-batch more than the others (replica groups of different sizes, docs/algorithms.md).
  kPerTask,
};

/// The list policy's rules: its priority and how it weighs replicas. Fixed policies ignore both.
struct ListRule {
  ListPriority priority = ListPriority::kBackwardFirst;
  ReplicaLoad load = ReplicaLoad::kUntilBackward;
  friend bool operator==(const ListRule&, const ListRule&) = default;
};

/// The rules spp's last step tries beyond the searches' default, in the order it tries them
/// (docs/algorithms.md, "List scheduling").
const std::vector<ListRule>& other_list_rules();

/// The rule in words for `--verbose`: empty for the default, else e.g. " alternating forwards
/// and backwards".
std::string list_rule_words(const ListRule& rule);

/// How many stages a policy runs on one device (spec 9.4).
enum class DeviceStages {
  kOne,  ///< Exactly one (`1f1b`, `zb-h1`).
  kAny,  ///< Any number, the same on every device.
  kTwo,  ///< Exactly two, in a V (`zb-v`).
};

/// One policy: everything the library and the command line know of it by name.
struct PolicyRow {
  Policy policy = Policy::kList;
  /// The name `--schedule` takes and plan.json records in `schedule_policy`.
  std::string_view name;
  /// What it does, one line for `--help`.
  std::string_view description;
  /// Whether it is a fixed per-GPU order (spec section 5) that ignores memory, so that the
  /// replay must check it; false for the memory-aware list scheduler.
  bool fixed = true;
  /// The stages it runs on one device.
  DeviceStages device_stages = DeviceStages::kOne;
  /// Whether it uses a split backward (`I`, `W`) when the model has weight gradients
  /// (`--split-backward auto`, spec 9.5); the others run whole backwards.
  bool splits = false;
  /// Whether it is a policy of spec 9.4: a plan that uses it is written as v3 (spec 9.2).
  bool version3 = false;
};

/// Every policy, in the order `--help` names them and `compare` runs the main planner under
/// them: `list` first.
const std::vector<PolicyRow>& policy_table();

/// The row of `policy`. Every enumerator has one.
const PolicyRow& policy_row(Policy policy);

/// The policies' names, in table order (`--schedule`'s choices).
const std::vector<std::string>& policy_names();

/// Every policy, in table order.
std::vector<Policy> all_policies();

/// `list`, `1f1b` or `gpipe`: the row's name.
std::string_view policy_name(Policy policy);

/// The policy named `name` (a row's name, exactly), if any.
std::optional<Policy> parse_policy(std::string_view name);

/// The names in table order as prose, for help text: `list, 1f1b or gpipe`.
std::string policy_names_text();

}  // namespace pipeplan::schedule
