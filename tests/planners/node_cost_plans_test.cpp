// A node-cost topology (a file without links, issue 33 item 2) is planned through fast paths that
// read its nodes: the DP's worst pairs (`Topology::worst_pair`) and the list scheduler's replica
// choice (a tree over the alike groups of a stage, scheduler.cpp). Each must give exactly what
// the general code gives on the same file's dense pair costs (`PairLayout::kDense`): the same
// worst pairs, the same schedules to the last task, the same plan files byte for byte.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../support/builders.hpp"
#include "../support/random_clusters.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan {
namespace {

using topology::PairLayout;
using topology::Topology;

// The cluster `text` read both ways; false when it is not connected (a lone node without a
// link), which the dense reader refuses.
bool read_both(const std::string& text, Topology& by_node, Topology& dense) {
  try {
    dense = topology::read_topology(io::source_from_text("topo.json", text), std::nullopt,
                                    PairLayout::kDense);
  } catch (const InputError&) {
    return false;
  }
  by_node = topology::read_topology(io::source_from_text("topo.json", text));
  return by_node.costs_by_node() && !dense.costs_by_node();
}

// The GPUs 0..n-1 in a random order.
std::vector<int> shuffled(std::mt19937& rng, int n) {
  std::vector<int> gpus(static_cast<std::size_t>(n));
  for (int g = 0; g < n; ++g) gpus[static_cast<std::size_t>(g)] = g;
  std::shuffle(gpus.begin(), gpus.end(), rng);
  return gpus;
}

TEST(NodeCostPlansTest, WorstPairsAreEveryPairsWorst) {
  std::mt19937 rng(2026);
  int compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    Topology by_node, dense;
    if (!read_both(testing::random_cluster(rng, 4 + trial), by_node, dense)) continue;
    const int n = by_node.size();
    if (n < 2) continue;
    for (int draw = 0; draw < 20; ++draw) {
      const std::vector<int> gpus = shuffled(rng, n);
      const auto split = std::uniform_int_distribution<std::size_t>(1, gpus.size() - 1)(rng);
      const auto end = std::uniform_int_distribution<std::size_t>(split + 1, gpus.size())(rng);
      const std::vector<int> from(gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(split));
      const std::vector<int> to(gpus.begin() + static_cast<std::ptrdiff_t>(split),
                                gpus.begin() + static_cast<std::ptrdiff_t>(end));
      double bandwidth = std::numeric_limits<double>::infinity(), latency = 0;
      for (const int u : from) {
        for (const int v : to) {
          bandwidth = std::min(bandwidth, dense.bandwidth_bytes_per_s(u, v));
          latency = std::max(latency, dense.latency_ms(u, v));
        }
      }
      for (const Topology* topology : {&by_node, &dense}) {
        const topology::PairCost worst = topology->worst_pair(from, to);
        EXPECT_EQ(worst.bandwidth_bytes_per_s, bandwidth);
        EXPECT_EQ(worst.latency_ms, latency);
      }
      ++compared;
    }
    const topology::PairCost none = by_node.worst_pair({}, {0});
    EXPECT_EQ(none.bandwidth_bytes_per_s, std::numeric_limits<double>::infinity());
    EXPECT_EQ(none.latency_ms, 0);
  }
  EXPECT_GT(compared, 500);
}

// Random replicated stages over a random order of the cluster's GPUs (a node's groups spread over
// several stages and interleaved with other nodes'), scheduled by the list policy both ways.
TEST(NodeCostPlansTest, ListSchedulesAreTheScansSchedules) {
  std::mt19937 rng(33);
  int compared = 0;
  for (int trial = 0; trial < 80; ++trial) {
    Topology by_node, dense;
    if (!read_both(testing::random_cluster(rng, 8 + trial), by_node, dense)) continue;
    const int n = by_node.size();
    const int S = std::uniform_int_distribution<int>(1, std::min(4, n))(rng);
    const std::vector<int> gpus = shuffled(rng, n);
    std::vector<Stage> stages;
    std::size_t next = 0;
    for (int s = 0; s < S; ++s) {
      const auto left = gpus.size() - next - static_cast<std::size_t>(S - 1 - s);
      const auto r =
          std::uniform_int_distribution<std::size_t>(1, std::max<std::size_t>(1, left))(rng);
      Stage stage{2 * s, 2 * s + 1, {}};
      stage.gpus.assign(gpus.begin() + static_cast<std::ptrdiff_t>(next),
                        gpus.begin() + static_cast<std::ptrdiff_t>(next + r));
      next += r;
      stages.push_back(stage);
    }
    const model::Model model = testing::random_model(rng, 2 * S, 4e6);
    const int M = std::uniform_int_distribution<int>(1, 48)(rng);
    const bool split = trial % 3 == 0;
    const auto fast = schedule::make_schedule(model, by_node, stages, M, schedule::Policy::kList,
                                              Optimizer::kReplicated, split);
    const auto scan = schedule::make_schedule(model, dense, stages, M, schedule::Policy::kList,
                                              Optimizer::kReplicated, split);
    EXPECT_EQ(fast.schedule.gpu_order, scan.schedule.gpu_order) << testing::stages_text(stages);
    EXPECT_EQ(fast.schedule.channel_order, scan.schedule.channel_order);
    EXPECT_EQ(fast.iteration_ms, scan.iteration_ms);
    ++compared;
  }
  EXPECT_GT(compared, 60);
}

TEST(NodeCostPlansTest, SppPlansAreTheDensePlans) {
  std::mt19937 rng(7);
  int compared = 0;
  for (int trial = 0; trial < 16; ++trial) {
    Topology by_node, dense;
    if (!read_both(testing::random_cluster(rng, 8 + 3 * trial), by_node, dense)) continue;
    const model::Model model = testing::random_model(rng, 10, 4e6);
    const int M = std::uniform_int_distribution<int>(4, 32)(rng);
    const Plan fast = planners::make_plan("spp", planners::Request{model, by_node, M});
    const Plan general = planners::make_plan("spp", planners::Request{model, dense, M});
    EXPECT_EQ(report::plan_json_text(fast, model, by_node),
              report::plan_json_text(general, model, dense));
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

}  // namespace
}  // namespace pipeplan
