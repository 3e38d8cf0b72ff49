// planners::PlannerRow's compare fields: the runs `compare` makes of each planner come from its
// row (compare_policies, compare_uniform, compare_variants), not from its name.

#include <gtest/gtest.h>

#include <algorithm>

#include "../support/builders.hpp"
#include "../support/builders_v2.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::planners {
namespace {

using pipeplan::testing::L;
using pipeplan::testing::make_model;
using pipeplan::testing::uniform_topology;

TEST(PlannerTableTest, NamesTextListsTheTableInOrder) {
  std::string expected;
  for (const PlannerRow& row : planner_table()) {
    expected += (expected.empty() ? "" : ", ") + std::string(row.name);
  }
  EXPECT_EQ(planner_names_text(), expected);
  EXPECT_EQ(planner_names_text(), "spp, gpipe, pipedream, uniform, data-parallel, megatron");
}

TEST(PlannerTableTest, CompareRunsEveryPlanner) {
  for (const PlannerRow& row : planner_table()) {
    EXPECT_TRUE(!row.compare_policies.empty() || row.compare_variants != nullptr) << row.name;
  }
  // The main planner under the policies of spec section 5 (its plans have one stage per device
  // and the section-9 policies need --virtual-stages or weight gradients to differ).
  EXPECT_EQ(find_planner("spp").compare_policies,
            (std::vector<schedule::Policy>{schedule::Policy::kList, schedule::Policy::kOneFOneB,
                                           schedule::Policy::kGpipe}));
}

// Issue 34: each planner declares the planning options it takes; `plan` refuses the others.
TEST(PlannerTableTest, PlannersDeclareTheirOptions) {
  const std::vector<std::string_view> known{"--tensor-parallel",
                                            "--context-parallel",
                                            "--recompute",
                                            "--uniform",
                                            "--pipeline-parallel",
                                            "--data-parallel",
                                            "--first-stage-layers",
                                            "--last-stage-layers",
                                            "--account-for-embedding",
                                            "--account-for-loss"};
  for (const PlannerRow& row : planner_table()) {
    for (std::string_view option : row.options) {
      EXPECT_NE(std::find(known.begin(), known.end(), option), known.end())
          << row.name << ": " << option;
    }
  }
  EXPECT_EQ(planners_taking("--pipeline-parallel"), std::vector<std::string>{"megatron"});
  EXPECT_EQ(planners_taking("--context-parallel"), (std::vector<std::string>{"spp", "megatron"}));
  EXPECT_EQ(planners_taking("--tensor-parallel"), (std::vector<std::string>{"spp", "megatron"}));
  EXPECT_EQ(planners_taking("--uniform").size(), planner_table().size());
}

TEST(PlannerTableTest, UniformVariantUnlessTheRequestIsUniform) {
  const model::Model model = make_model({L{}, L{}});
  const topology::Topology topology = uniform_topology(2, 1e9, 0);
  Request request{model, topology, 2};
  for (const PlannerRow& row : planner_table()) {
    const std::vector<CompareVariant> variants = compare_variants(row, request);
    // A v1 model has no tensor-parallel layers: no megatron configurations.
    ASSERT_EQ(variants.size(), row.compare_uniform ? 1u : 0u) << row.name;
    if (!row.compare_uniform) continue;
    EXPECT_EQ(variants.front().label, "--uniform");
    EXPECT_TRUE(variants.front().request.uniform);
    EXPECT_EQ(variants.front().request.micro_batches, 2);
  }
  request.uniform = true;
  for (const PlannerRow& row : planner_table()) {
    EXPECT_TRUE(compare_variants(row, request).empty()) << row.name;
  }
}

TEST(PlannerTableTest, MegatronVariantsAreItsConfigurationsOnEveryGpu) {
  std::mt19937 rng(7);
  const model::Model model = pipeplan::testing::random_v2_model(rng, 8, 1e6);
  const topology::Topology topology = uniform_topology(8, 1e9, 0);
  const Request request{model, topology, 4};
  const std::vector<CompareVariant> variants = compare_variants(find_planner("megatron"), request);
  ASSERT_FALSE(variants.empty());
  for (const CompareVariant& variant : variants) {
    const Request& fixed = variant.request;
    ASSERT_EQ(fixed.tensor_parallel.size(), 1u) << variant.label;
    ASSERT_TRUE(fixed.pipeline_parallel && fixed.data_parallel) << variant.label;
    const int t = fixed.tensor_parallel.front();
    EXPECT_EQ(variant.label, "t" + std::to_string(t) + " p" +
                                 std::to_string(*fixed.pipeline_parallel) + " d" +
                                 std::to_string(*fixed.data_parallel));
    EXPECT_EQ(t * *fixed.pipeline_parallel * *fixed.data_parallel, topology.size())
        << variant.label;
  }
}

}  // namespace
}  // namespace pipeplan::planners
