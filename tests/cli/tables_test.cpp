// The command line's choices come from the library's tables: `--schedule` from the policy table,
// `--planner` from the planner table, and `plan --help` names both.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../support/cli_run.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::cli {
namespace {

using pipeplan::testing::run_cli;

const std::string kRoot = PIPEPLAN_SOURCE_DIR;
const std::string kModel = kRoot + "/examples/models/resnet50.json";
const std::string kTopology = kRoot + "/examples/topologies/pcie-server.json";

// `{a,b,c}`, as CLI11 lists the choices of an option.
std::string braced(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ",") + name;
  return "{" + out + "}";
}

TEST(CliTablesTest, ScheduleChoicesAreThePolicyTable) {
  const auto result = run_cli({"plan", kModel, kTopology, "--schedule", "eager"});
  EXPECT_EQ(result.code, 2);
  std::vector<std::string> choices = schedule::policy_names();
  choices.emplace_back("auto");
  EXPECT_EQ(result.err, "pipeplan: error: --schedule: eager not in " + braced(choices) +
                            " (see pipeplan --help)\n");
  for (const schedule::PolicyRow& row : schedule::policy_table()) {
    if (row.device_stages == schedule::DeviceStages::kTwo) {  // gpipe's plans: one per device
      const auto refused = run_cli({"-q", "plan", kModel, kTopology, "--schedule",
                                    std::string(row.name), "-m", "4", "--planner", "gpipe"});
      // A usage error: gpipe never places two stages on a device (the planner table's
      // shares_devices), whatever the input.
      EXPECT_EQ(refused.code, 2);
      EXPECT_EQ(refused.err, "pipeplan: error: --schedule " + std::string(row.name) +
                                 " places 2 stages on each device, but the gpipe planner places "
                                 "one stage per GPU; the spp and megatron planners place "
                                 "several\n");
      continue;
    }
    const auto plan = run_cli({"-q", "plan", kModel, kTopology, "--schedule", std::string(row.name),
                               "-m", "4", "--planner", "gpipe"});
    ASSERT_EQ(plan.code, 0) << row.name << ": " << plan.err;
    EXPECT_EQ(nlohmann::json::parse(plan.out).at("schedule_policy"), row.name);
    // A policy of spec 9.4 makes the plan v3 (spec 9.2), even on one stage per device.
    EXPECT_EQ(nlohmann::json::parse(plan.out).at("schema") == "pipeplan/plan/v3", row.version3)
        << row.name;
  }
}

TEST(CliTablesTest, PlannerChoicesAreThePlannerTable) {
  const auto result = run_cli({"plan", kModel, kTopology, "--planner", "greedy"});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err, "pipeplan: error: --planner: greedy not in " +
                            braced(planners::planner_names()) + " (see pipeplan --help)\n");
}

TEST(CliTablesTest, PlanHelpNamesEveryPolicyAndPlanner) {
  const auto help = run_cli({"plan", "--help"});
  ASSERT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Re-schedule with " + schedule::policy_names_text() +
                          ", or auto (spp: the fastest per candidate)\n"),
            std::string::npos)
      << help.out;
  EXPECT_NE(help.out.find("Planner: " + planners::planner_names_text() + " (default spp)"),
            std::string::npos)
      << help.out;
  const std::size_t block = help.out.find("\nSchedules (--schedule; what each does):\n");
  ASSERT_NE(block, std::string::npos) << help.out;
  for (const schedule::PolicyRow& row : schedule::policy_table()) {
    const std::size_t line = help.out.find("\n  " + std::string(row.name) + " ", block);
    ASSERT_NE(line, std::string::npos) << row.name;
    const std::size_t end = help.out.find('\n', line + 1);
    EXPECT_TRUE(
        help.out.substr(line + 1, end - line - 1).ends_with("  " + std::string(row.description)))
        << row.name;
  }
}

}  // namespace
}  // namespace pipeplan::cli
