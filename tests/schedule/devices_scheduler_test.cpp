// Property tests of the scheduler on spec 9's plans: random devices (1-3 replicas), 1-3 stages
// per device placed as each policy places them, random weight-gradient shares and memory from
// tight to unlimited. Every policy that can run the stages must produce orders whose replay
// agrees with the engine's clock and stays above the partition bound; the list scheduler must
// also never deadlock (the engine throws if it stops early) and never exceed memory.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "../support/builders.hpp"
#include "pipeplan/schedule/fixed_orders.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::schedule {
namespace {

struct DeviceInstance {
  model::Model model;
  topology::Topology topology;
  std::vector<Stage> stages;
  int micro_batches;
};

// P devices of r GPUs each, v one-or-two-layer stages per device placed as `policy` places them.
DeviceInstance random_devices(std::mt19937& rng, Policy policy, int P, int v) {
  std::uniform_int_distribution<int> replicas(1, 3), batches(1, 12), width(1, 2);
  std::uniform_real_distribution<double> time(0.5, 3), share(0, 0.6), bytes(1e6, 4e6);
  const int r = replicas(rng);
  const int S = P * v;
  std::vector<int> widths(static_cast<std::size_t>(S));
  std::vector<testing::L> layers;
  for (int& w : widths) {
    w = width(rng);
    for (int k = 0; k < w; ++k)
      layers.push_back({time(rng), 2 * time(rng), bytes(rng), bytes(rng), bytes(rng)});
  }
  model::Model model = testing::make_model(layers);
  for (model::Layer& layer : model.layers)
    layer.backward_weight_ms = share(rng) * layer.backward_ms;
  // Memory from about one micro-batch per device to unlimited.
  std::uniform_real_distribution<double> room(1.5, 12);
  const double memory = room(rng) * 4 * 4e6 * v * 2;
  const bool unlimited = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
  DeviceInstance out{std::move(model),
                     testing::uniform_topology(P * r, 5e9, 0.01, {},
                                               unlimited ? std::nullopt : std::optional(memory)),
                     std::vector<Stage>(static_cast<std::size_t>(S)), batches(rng)};
  int first = 0;
  std::vector<int> firsts;
  for (const int w : widths) {
    firsts.push_back(first);
    first += w;
  }
  for (int p = 0; p < P; ++p) {
    std::vector<int> gpus;
    for (int i = 0; i < r; ++i) gpus.push_back(p * r + i);
    for (int c = 0; c < v; ++c) {
      const int s = placed_stage(policy, P, p, c);
      const auto k = static_cast<std::size_t>(s);
      out.stages[k] = Stage{firsts[k], firsts[k] + widths[k] - 1, gpus};
    }
  }
  return out;
}

TEST(DevicesSchedulerTest, EveryPolicyReplaysItsClockAndListFitsMemory) {
  std::mt19937 rng(32);
  int scheduled_count = 0;
  for (int trial = 0; trial < 150; ++trial) {
    for (const Policy policy : all_policies()) {
      const DeviceStages kind = policy_row(policy).device_stages;
      const int v = kind == DeviceStages::kOne   ? 1
                    : kind == DeviceStages::kTwo ? 2
                                                 : std::uniform_int_distribution<int>(1, 3)(rng);
      const int P = std::uniform_int_distribution<int>(1, 3)(rng);
      const DeviceInstance in = random_devices(rng, policy, P, v);
      SCOPED_TRACE("trial " + std::to_string(trial) + " " + std::string(policy_name(policy)));
      if (policy_refusal(policy, in.stages, in.micro_batches)) continue;
      const bool split = policy_row(policy).splits && trial % 2 == 0;
      const ScheduleAttempt attempt =
          try_make_schedule(in.model, in.topology, in.stages, in.micro_batches, policy,
                            Optimizer::kReplicated, split);
      if (!attempt.scheduled) continue;  // a device that cannot hold one micro-batch
      ++scheduled_count;
      const Timeline t =
          simulate::replay(in.model, in.topology, in.stages, attempt.scheduled->schedule);
      double last = 0;
      for (const auto& e : t.compute) last = std::max(last, e.end_ms);
      for (const auto& e : t.transfers) last = std::max(last, e.end_ms);
      EXPECT_NEAR(attempt.scheduled->iteration_ms, last, 1e-9 * last);
      const Bounds bounds = simulate::compute_bounds(
          in.model, in.topology, in.stages, in.micro_batches, Optimizer::kReplicated, split);
      EXPECT_GE(t.iteration_ms, bounds.partition_ms * (1 - 1e-9));
      if (policy == Policy::kList) {
        EXPECT_FALSE(simulate::memory_violation(in.topology, t).has_value());
      }
    }
  }
  EXPECT_GT(scheduled_count, 600);  // most instances were really scheduled
}

}  // namespace
}  // namespace pipeplan::schedule
