// report::compare_planners makes its runs from the planner table: each row under its
// compare_policies_for, then its variants (planners::compare_variants), in table order.

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "../support/builders_v2.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/report/compare.hpp"

namespace pipeplan::report {
namespace {

using pipeplan::testing::uniform_topology;

// The runs the table asks for, as `label (policy)`.
std::vector<std::string> table_runs(const planners::Request& request) {
  std::vector<std::string> out;
  for (const planners::PlannerRow& row : planners::planner_table()) {
    for (schedule::Policy policy : planners::compare_policies_for(row, request)) {
      out.push_back(std::string(row.name) + " (" + std::string(schedule::policy_name(policy)) +
                    ")");
    }
    for (const planners::CompareVariant& variant : planners::compare_variants(row, request)) {
      out.push_back(std::string(row.name) + " " + variant.label + " (" +
                    std::string(schedule::policy_name(
                        planners::default_policy_for(row.name, variant.request))) +
                    ")");
    }
  }
  return out;
}

TEST(CompareRowsTest, RowsFollowThePlannerTable) {
  std::mt19937 rng(3);
  const model::Model model = pipeplan::testing::random_v2_model(rng, 6, 1e5);
  const topology::Topology topology = uniform_topology(4, 1e9, 0);
  for (bool uniform : {false, true}) {
    planners::Request request{model, topology, 4};
    request.uniform = uniform;
    std::size_t done = 0;
    const std::vector<CompareRow> rows =
        compare_planners(request, [&](const CompareRow&) { ++done; });
    std::vector<std::string> labels;
    for (const CompareRow& row : rows) {
      labels.push_back(row.label() + " (" + std::string(schedule::policy_name(row.policy)) + ")");
      EXPECT_EQ(row.baseline, planners::find_planner(row.planner).baseline) << row.label();
    }
    EXPECT_EQ(labels, table_runs(request));
    EXPECT_EQ(done, rows.size());
    // The variants are there: spp --uniform unless uniform, megatron configurations always.
    EXPECT_EQ(std::count(labels.begin(), labels.end(), "spp --uniform (list)"), uniform ? 0 : 1);
    EXPECT_TRUE(std::any_of(labels.begin(), labels.end(), [](const std::string& label) {
      return label.starts_with("megatron t");
    }));
  }
}

// Each planner under each policy that orders its stages differently here (issue 32): the
// section-9 policies join with weight gradients (zb-h1) and --virtual-stages (the multi-stage
// ones), and only for the planners that place several stages per device.
TEST(CompareRowsTest, EveryPolicyThatAppliesToAPlanner) {
  using schedule::Policy;
  std::vector<pipeplan::testing::L> layers(4, pipeplan::testing::L{1, 2});
  model::Model model = pipeplan::testing::make_model(layers);
  const topology::Topology topology = uniform_topology(2, 1e9, 0);
  planners::Request request{model, topology, 4};
  const planners::PlannerRow& spp = planners::find_planner("spp");
  const planners::PlannerRow& gpipe = planners::find_planner("gpipe");
  const planners::PlannerRow& megatron = planners::find_planner("megatron");
  EXPECT_EQ(planners::compare_policies_for(spp, request),
            (std::vector<Policy>{Policy::kList, Policy::kOneFOneB, Policy::kGpipe, Policy::kZbV}));
  EXPECT_EQ(planners::compare_policies_for(gpipe, request),
            (std::vector<Policy>{Policy::kGpipe, Policy::kList, Policy::kOneFOneB}));
  EXPECT_TRUE(planners::compare_policies_for(megatron, request).empty());
  for (model::Layer& layer : model.layers) layer.backward_weight_ms = 1;
  const planners::Request split{model, topology, 4};
  EXPECT_EQ(planners::compare_policies_for(gpipe, split),
            (std::vector<Policy>{Policy::kGpipe, Policy::kList, Policy::kOneFOneB, Policy::kZbH1}));
  planners::Request both = split;
  both.virtual_stages = 2;
  EXPECT_EQ(planners::compare_policies_for(spp, both),
            (std::vector<Policy>{Policy::kList, Policy::kOneFOneB, Policy::kGpipe,
                                 Policy::kInterleaved1F1B, Policy::kLoopedBfs, Policy::kZbH1,
                                 Policy::kZbV}));
}

TEST(CompareRowsTest, FormatsByName) {
  const topology::Topology topology = uniform_topology(2, 1e9, 0);
  const model::Model model = pipeplan::testing::make_model({{1, 2}, {3, 4}});
  const planners::Request request{model, topology, 2};
  const Comparison comparison =
      score_comparison(compare_planners(request, [](const CompareRow&) {}), topology);
  EXPECT_EQ(comparison_format_names(), (std::vector<std::string>{"table", "json", "csv"}));
  EXPECT_EQ(comparison_text(comparison, "table", false, topology),
            comparison_table(comparison, false));
  EXPECT_EQ(comparison_text(comparison, "json", true, topology),
            comparison_json(comparison, true, topology));
  EXPECT_EQ(comparison_text(comparison, "csv", false, topology), comparison_csv(comparison, false));
  EXPECT_THROW(comparison_text(comparison, "xml", false, topology), UsageError);
}

}  // namespace
}  // namespace pipeplan::report
