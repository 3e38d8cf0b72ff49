// schedule/policy: the one table of schedule policies, and the name <-> enum functions read
// from it.

#include "pipeplan/schedule/policy.hpp"

#include <gtest/gtest.h>

#include <set>

namespace pipeplan::schedule {
namespace {

TEST(PolicyTableTest, EveryRowParsesBackToItself) {
  ASSERT_FALSE(policy_table().empty());
  for (const PolicyRow& row : policy_table()) {
    EXPECT_EQ(parse_policy(row.name), row.policy) << row.name;
    EXPECT_EQ(policy_name(row.policy), row.name);
    EXPECT_EQ(&policy_row(row.policy), &row) << row.name;
    EXPECT_FALSE(row.description.empty()) << row.name;
  }
}

TEST(PolicyTableTest, EveryPolicyHasOneRow) {
  std::set<Policy> policies;
  std::set<std::string_view> names;
  for (const PolicyRow& row : policy_table()) {
    EXPECT_TRUE(policies.insert(row.policy).second) << row.name;
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
  }
  for (Policy policy : {Policy::kList, Policy::kOneFOneB, Policy::kGpipe}) {
    EXPECT_EQ(policy_row(policy).policy, policy);
  }
}

TEST(PolicyTableTest, NamesAndPoliciesFollowTheTable) {
  ASSERT_EQ(policy_names().size(), policy_table().size());
  ASSERT_EQ(all_policies().size(), policy_table().size());
  for (std::size_t x = 0; x < policy_table().size(); ++x) {
    EXPECT_EQ(policy_names()[x], policy_table()[x].name);
    EXPECT_EQ(all_policies()[x], policy_table()[x].policy);
  }
  // The spec's names (plan.json's schedule_policy), list first.
  EXPECT_EQ(policy_names(), (std::vector<std::string>{"list", "1f1b", "gpipe", "interleaved-1f1b",
                                                      "looped-bfs", "zb-h1", "zb-v"}));
  EXPECT_EQ(policy_names_text(), "list, 1f1b, gpipe, interleaved-1f1b, looped-bfs, zb-h1 or zb-v");
  // Spec 9.4's stages per device and 9.5's split.
  EXPECT_EQ(policy_row(Policy::kZbV).device_stages, DeviceStages::kTwo);
  EXPECT_EQ(policy_row(Policy::kOneFOneB).device_stages, DeviceStages::kOne);
  EXPECT_EQ(policy_row(Policy::kZbH1).device_stages, DeviceStages::kOne);
  EXPECT_EQ(policy_row(Policy::kInterleaved1F1B).device_stages, DeviceStages::kAny);
  for (const Policy policy : all_policies()) {
    const bool splits =
        policy == Policy::kList || policy == Policy::kZbH1 || policy == Policy::kZbV;
    EXPECT_EQ(policy_row(policy).splits, splits) << policy_name(policy);
    const bool section5 =
        policy == Policy::kList || policy == Policy::kOneFOneB || policy == Policy::kGpipe;
    EXPECT_EQ(policy_row(policy).version3, !section5) << policy_name(policy);
  }
}

TEST(PolicyTableTest, UnknownNamesAreRefused) {
  for (const char* name : {"", "eager", "List", "1F1B", " gpipe", "list ", "1f1b\n"}) {
    EXPECT_FALSE(parse_policy(name).has_value()) << name;
  }
}

TEST(PolicyTableTest, OnlyTheListSchedulerWatchesMemory) {
  EXPECT_FALSE(policy_row(Policy::kList).fixed);
  EXPECT_TRUE(policy_row(Policy::kOneFOneB).fixed);
  EXPECT_TRUE(policy_row(Policy::kGpipe).fixed);
}

}  // namespace
}  // namespace pipeplan::schedule
