// The ranks export, replayed: a round-robin interpreter advances any rank whose next operation
// can proceed (compute always; a send or receive only when the peer's next operation is the
// matching receive or send, as with blocking point-to-point calls; an AllReduce when every
// member is at it) and fails when it gets stuck. For every example model on every example
// topology, the replay must finish and reproduce the plan's schedule: each GPU's compute order
// and each channel's transfer order, with every dependency of spec section 3 met locally.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "../support/examples.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::load;
using testing::source_dir;
using testing::stems;

// After a replay: "" when the compute and transfer orders it saw are the plan's and every
// rank's per-micro-batch peers agree with its operations, else what differs.
std::string reproduced(const json& ranks, const PlanView& view,
                       const std::vector<std::vector<ComputeTask>>& computed,
                       std::map<Channel, std::vector<TransferTask>>& carried) {
  const Plan& plan = view.plan;
  const std::size_t R = ranks.size();
  // The schedule, reproduced.
  for (std::size_t g = 0; g < view.gpu_ids.size(); ++g) {
    if (computed[g] != plan.schedule.gpu_order[g]) {
      return "the compute order of " + view.gpu_ids[g] + " differs";
    }
  }
  for (const auto& [channel, order] : plan.schedule.channel_order) {
    if (carried[channel] != order) {
      return "the transfer order of " + view.gpu_ids[static_cast<std::size_t>(channel.first)] +
             " -> " + view.gpu_ids[static_cast<std::size_t>(channel.second)] + " differs";
    }
  }
  // The per-micro-batch peers agree with the operations.
  for (std::size_t r = 0; r < R; ++r) {
    for (const json& entry : ranks[r].at("micro_batches")) {
      const int m = entry.at("micro_batch").get<int>();
      for (const json& op : ranks[r].at("operations")) {
        if ((op.at("op") != "send" && op.at("op") != "recv") || op.at("micro_batch") != m) continue;
        const std::string key =
            std::string(op.at("kind") == "activation" ? "activations_" : "gradients_") +
            (op.at("op") == "send" ? "to" : "from");
        if (entry.at(key).at("rank") != op.at("peer")) {
          return "rank " + std::to_string(r) + ": " + key + " disagrees";
        }
      }
    }
  }
  return "";
}

// Each rank's GPU index and stage into `gpu` and `stage`; "" when the ranks are in order and
// name known GPUs, else what is wrong.
std::string rank_places(const json& ranks, const PlanView& view, std::vector<int>& gpu,
                        std::vector<int>& stage) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].at("rank") != static_cast<int>(r)) {
      return "rank " + std::to_string(r) + " is out of order";
    }
    const auto id =
        std::find(view.gpu_ids.begin(), view.gpu_ids.end(), ranks[r].at("gpu").get<std::string>());
    if (id == view.gpu_ids.end()) return "unknown GPU " + ranks[r].at("gpu").dump();
    gpu[r] = static_cast<int>(id - view.gpu_ids.begin());
    stage[r] = ranks[r].at("stage").get<int>();
  }
  return "";
}

// Replays `ranks` (the export of `view`); returns "" when every rank finishes and the plan's
// schedule is reproduced, else what went wrong.
std::string replay(const json& ranks, const PlanView& view) {
  const Plan& plan = view.plan;
  const std::size_t R = ranks.size();
  const int S = static_cast<int>(plan.stages.size());
  std::vector<std::size_t> next(R, 0);
  std::vector<int> gpu(R), stage(R);
  if (std::string error = rank_places(ranks, view, gpu, stage); !error.empty()) return error;
  // What each rank has done, for the local dependency checks: (op or kind, micro-batch).
  std::vector<std::set<std::pair<std::string, int>>> done(R);
  std::vector<std::vector<ComputeTask>> computed(view.gpu_ids.size());
  std::map<Channel, std::vector<TransferTask>> carried;
  auto op_at = [&](std::size_t r) -> const json* {
    const json& ops = ranks[r].at("operations");
    return next[r] < ops.size() ? &ops[next[r]] : nullptr;
  };
  std::string error;
  auto need = [&](std::size_t r, const std::string& what, int m, const std::string& before) {
    if (!done[r].count({what, m})) {
      error = "rank " + std::to_string(r) + " runs " + before + " of micro-batch " +
              std::to_string(m) + " before its " + what;
    }
  };
  for (bool progress = true; progress && error.empty();) {
    progress = false;
    for (std::size_t r = 0; r < R && error.empty(); ++r) {
      const json* op = op_at(r);
      if (!op) continue;
      const std::string name = op->at("op").get<std::string>();
      if (name == "forward" || name == "backward") {
        const int m = op->at("micro_batch").get<int>();
        const int s = stage[r];
        if (name == "forward" && s > 0) need(r, "recv activation", m, "forward");
        if (name == "backward") need(r, s == S - 1 ? "forward" : "recv gradient", m, "backward");
        done[r].insert({name, m});
        computed[static_cast<std::size_t>(gpu[r])].push_back(
            {name == "forward" ? Op::kForward : Op::kBackward, s, m});
        ++next[r];
        progress = true;
      } else if (name == "send" || name == "recv") {
        const auto p = static_cast<std::size_t>(op->at("peer").get<int>());
        if (p >= R) return "rank " + std::to_string(r) + " names peer " + std::to_string(p);
        const json* other = op_at(p);
        const bool matches = other && other->at("op") == (name == "send" ? "recv" : "send") &&
                             other->at("kind") == op->at("kind") &&
                             other->at("micro_batch") == op->at("micro_batch") &&
                             other->at("peer") == static_cast<int>(r) &&
                             other->at("bytes") == op->at("bytes");
        if (!matches) continue;  // blocked until the peer gets there
        const std::size_t from = name == "send" ? r : p, to = name == "send" ? p : r;
        const std::string kind = op->at("kind").get<std::string>();
        const int m = op->at("micro_batch").get<int>();
        need(from, kind == "activation" ? "forward" : "backward", m, "send " + kind);
        done[to].insert({"recv " + kind, m});
        const int lower = std::min(stage[from], stage[to]);
        carried[{gpu[from], gpu[to]}].push_back(
            {kind == "activation" ? TransferKind::kActivation : TransferKind::kGradient, lower, m});
        ++next[r];
        ++next[p];
        progress = true;
      } else if (name == "allreduce") {
        const json& group = op->at("ranks");
        bool all_there = true;
        for (const json& member : group) {
          const json* other = op_at(member.get<std::size_t>());
          all_there =
              all_there && other && other->at("op") == "allreduce" && other->at("ranks") == group;
        }
        if (!all_there) continue;
        for (const json& member : group) {
          const auto q = member.get<std::size_t>();
          for (const json& entry : ranks[q].at("micro_batches")) {
            need(q, "backward", entry.at("micro_batch").get<int>(), "allreduce");
          }
          ++next[q];
        }
        progress = true;
      } else {
        return "unknown operation " + op->dump();
      }
    }
  }
  if (!error.empty()) return error;
  for (std::size_t r = 0; r < R; ++r) {
    if (const json* op = op_at(r)) {
      return "stuck: rank " + std::to_string(r) + " waits at " + op->dump();
    }
  }
  return reproduced(ranks, view, computed, carried);
  return "";
}

class RanksReplayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RanksReplayTest, EveryExampleRunsWithoutDeadlockAndReproducesTheSchedule) {
  const topology::Topology topology =
      topology::read_topology(load(source_dir() / "examples/topologies" / (GetParam() + ".json")));
  for (const std::string& name : stems("examples/models")) {
    SCOPED_TRACE(name);
    const model::Model model =
        model::read_model(load(source_dir() / "examples/models" / (name + ".json")));
    const Plan made =
        planners::make_plan("spp", {model, topology, static_cast<int>(*model.micro_batches)});
    // As the command does it: through plan.json and the checker.
    const std::string text = io::dump_json(plan_to_json(made, model, topology));
    const Plan plan = simulate::check_plan(
        read_plan(io::source_from_text("plan.json", text), topology), model, topology);
    const PlanView view = make_view(plan, model, topology, name + ".json");
    const json ranks = json::parse(export_plan(view, ExportFormat::kRanks));
    std::size_t used = 0;
    for (const Stage& stage : plan.stages) used += stage.gpus.size();
    ASSERT_EQ(ranks.size(), used);
    EXPECT_EQ(replay(ranks, view), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Topologies, RanksReplayTest,
                         ::testing::ValuesIn(stems("examples/topologies")), testing::StemName());

// The toy plan under every schedule policy.
TEST(RanksTest, EverySchedulePolicyReplays) {
  const fs::path data = source_dir() / "tests/data/exports";
  const model::Model model = model::read_model(load(data / "toy.model.json"));
  const topology::Topology topology = topology::read_topology(load(data / "toy.topo.json"));
  for (const char* planner : {"spp", "gpipe", "pipedream", "data-parallel"}) {
    for (auto policy :
         {schedule::Policy::kList, schedule::Policy::kOneFOneB, schedule::Policy::kGpipe}) {
      SCOPED_TRACE(std::string(planner) + " " + std::to_string(static_cast<int>(policy)));
      const Plan plan = planners::make_plan(planner, {model, topology, 6}, policy);
      const PlanView view = make_view(plan, model, topology);
      EXPECT_EQ(replay(ranks_json(view), view), "");
    }
  }
}

TEST(RanksTest, ListsRanksStageByStageWithTheirLayersAndGroups) {
  const fs::path data = source_dir() / "tests/data/exports";
  const model::Model model = model::read_model(load(data / "toy.model.json"));
  const topology::Topology topology = topology::read_topology(load(data / "toy.topo.json"));
  const Plan plan =
      simulate::check_plan(read_plan(load(data / "toy.plan.json"), topology), model, topology);
  const json ranks = ranks_json(make_view(plan, model, topology));
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[2].at("gpu"), "n1/gpu0");
  EXPECT_EQ(ranks[2].at("stage"), 1);
  EXPECT_EQ(ranks[2].at("layers"),
            json({{"first", 2}, {"last", 3}, {"names", {"block2", "head"}}}));
  EXPECT_EQ(ranks[2].at("data_parallel_group").at("ranks"), json({2, 3}));
  EXPECT_EQ(ranks[2].at("micro_batches")[0],
            json({{"micro_batch", 0},
                  {"activations_from", {{"rank", 0}, {"gpu", "n0/gpu0"}}},
                  {"activations_to", nullptr},
                  {"gradients_from", nullptr},
                  {"gradients_to", {{"rank", 0}, {"gpu", "n0/gpu0"}}}}));
  EXPECT_EQ(ranks[2].at("operations").back(),
            json({{"op", "allreduce"}, {"ranks", {2, 3}}, {"bytes", 600000000}}));
}

// The interpreter is real: it notices a rank that waits for a message nobody sends yet.
TEST(RanksTest, ReplayFindsDeadlocksAndMissingMessages) {
  const fs::path data = source_dir() / "tests/data/exports";
  const model::Model model = model::read_model(load(data / "toy.model.json"));
  const topology::Topology topology = topology::read_topology(load(data / "toy.topo.json"));
  const Plan plan =
      simulate::check_plan(read_plan(load(data / "toy.plan.json"), topology), model, topology);
  const PlanView view = make_view(plan, model, topology);
  const json ranks = ranks_json(view);
  ASSERT_EQ(replay(ranks, view), "");

  // Rank 0 sends the activation of micro-batch 0 only at the end, after waiting for its
  // gradient; stage 1 waits for that activation first: deadlock.
  json late = ranks;
  json& ops = late[0]["operations"];
  const auto send =
      std::find_if(ops.begin(), ops.end(), [](const json& op) { return op.at("op") == "send"; });
  const json moved = *send;
  ops.erase(send);
  ops.push_back(moved);
  const std::string stuck = replay(late, view);
  EXPECT_EQ(stuck.rfind("stuck: rank 0 waits at {", 0), 0u) << stuck;
  EXPECT_NE(stuck.find("\"kind\":\"activation\",\"micro_batch\":2,\"op\":\"send\""),
            std::string::npos)
      << stuck;

  // A receive nobody sends.
  json lost = ranks;
  json& stage1 = lost[2]["operations"];
  stage1.erase(std::find_if(stage1.begin(), stage1.end(),
                            [](const json& op) { return op.at("op") == "send"; }));
  EXPECT_EQ(replay(lost, view).rfind("stuck: ", 0), 0u);

  // A send before the forward that produces it.
  json early = ranks;
  std::swap(early[0]["operations"][0], early[0]["operations"][1]);
  EXPECT_EQ(replay(early, view), "rank 0 runs send activation of micro-batch 0 before its forward");

  // Operations that run but in another order than the plan's.
  PlanView other = view;
  auto& order = other.plan.schedule.gpu_order[0];
  std::swap(order[0], order[1]);
  EXPECT_EQ(replay(ranks, other), "the compute order of n0/gpu0 differs");
}

}  // namespace
}  // namespace pipeplan::report
