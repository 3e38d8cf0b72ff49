#include "pipeplan/simulate/simulator.hpp"

#include <gtest/gtest.h>

#include "../support/builders.hpp"
#include "pipeplan/schedule/scheduler.hpp"

namespace pipeplan::simulate {
namespace {

using namespace pipeplan::testing;

const TimedCompute& find(const Timeline& t, ComputeTask task) {
  for (const auto& e : t.compute) {
    if (e.task == task) return e;
  }
  throw std::runtime_error("task not found");
}

const TimedTransfer& find(const Timeline& t, TransferTask task) {
  for (const auto& e : t.transfers) {
    if (e.task == task) return e;
  }
  throw std::runtime_error("transfer not found");
}

void expect_times(const Timeline& t, ComputeTask task, double start, double end) {
  const auto& e = find(t, task);
  EXPECT_DOUBLE_EQ(e.start_ms, start) << describe(task);
  EXPECT_DOUBLE_EQ(e.end_ms, end) << describe(task);
}

void expect_times(const Timeline& t, TransferTask task, double start, double end) {
  const auto& e = find(t, task);
  EXPECT_DOUBLE_EQ(e.start_ms, start) << describe(task);
  EXPECT_DOUBLE_EQ(e.end_ms, end) << describe(task);
}

// Two stages on two GPUs joined by 1 GB/s and no latency; the boundary carries 1 MB, so
// every transfer takes 1 ms. Stage 0: F 1, B 2; stage 1: F 2, B 3. M = 2.
struct TwoStages : ::testing::Test {
  model::Model model = make_model({{1, 2, 1e6, 10, 100}, {2, 3, 0, 20, 300}});
  topology::Topology topology = uniform_topology(2, 1e9, 0);
  std::vector<Stage> plan_stages = stages({{0, 0, {0}}, {1, 1, {1}}});
};

TEST_F(TwoStages, FillDrainTimelineByHand) {
  Schedule s =
      schedule_of(2, {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {F(1, 0), F(1, 1), B(1, 0), B(1, 1)}});
  s.channel_order[{0, 1}] = {Act(0, 0), Act(0, 1)};
  s.channel_order[{1, 0}] = {Grad(0, 0), Grad(0, 1)};
  Timeline t = replay(model, topology, plan_stages, s);
  // GPU0: F(m0) 0-1, F(m1) 1-2.   Channel 0->1: act m0 1-2, act m1 2-3.
  // GPU1: F(m0) 2-4, F(m1) 4-6, B(m0) 6-9, B(m1) 9-12.
  // Channel 1->0: grad m0 9-10, grad m1 12-13.   GPU0: B(m0) 10-12, B(m1) 13-15.
  expect_times(t, F(0, 0), 0, 1);
  expect_times(t, F(0, 1), 1, 2);
  expect_times(t, Act(0, 0), 1, 2);
  expect_times(t, Act(0, 1), 2, 3);
  expect_times(t, F(1, 0), 2, 4);
  expect_times(t, F(1, 1), 4, 6);
  expect_times(t, B(1, 0), 6, 9);
  expect_times(t, B(1, 1), 9, 12);
  expect_times(t, Grad(0, 0), 9, 10);
  expect_times(t, Grad(0, 1), 12, 13);
  expect_times(t, B(0, 0), 10, 12);
  expect_times(t, B(0, 1), 13, 15);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 15);
  // Both micro-batches are stashed on both GPUs at once: 4 x parameters + 2 stashes.
  EXPECT_DOUBLE_EQ(t.gpus[0].peak_memory_bytes, 4 * 10 + 2 * 100);
  EXPECT_DOUBLE_EQ(t.gpus[1].peak_memory_bytes, 4 * 20 + 2 * 300);
  EXPECT_DOUBLE_EQ(t.gpus[0].busy_ms, 6);
  EXPECT_DOUBLE_EQ(t.gpus[1].busy_ms, 10);
  EXPECT_TRUE(t.allreduces.empty());
}

TEST_F(TwoStages, OneFOneBTimelineByHand) {
  // Stage 1's warm-up is one forward: F(m0) 2-4, B(m0) 4-7, F(m1) 7-9 (its activation
  // arrived at 3), B(m1) 9-12. Gradients 7-8 and 12-13; GPU0: B(m0) 8-10, B(m1) 13-15.
  Schedule s =
      schedule_of(2, {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {F(1, 0), B(1, 0), F(1, 1), B(1, 1)}});
  s.channel_order[{0, 1}] = {Act(0, 0), Act(0, 1)};
  s.channel_order[{1, 0}] = {Grad(0, 0), Grad(0, 1)};
  Timeline t = replay(model, topology, plan_stages, s);
  expect_times(t, B(1, 0), 4, 7);
  expect_times(t, F(1, 1), 7, 9);
  expect_times(t, Grad(0, 0), 7, 8);
  expect_times(t, B(0, 0), 8, 10);
  expect_times(t, B(0, 1), 13, 15);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 15);
  // The last stage now holds one stash at a time: release (B m0 ends at 7) comes before the
  // allocation (F m1 starts at 7).
  EXPECT_DOUBLE_EQ(t.gpus[1].peak_memory_bytes, 4 * 20 + 300);
}

TEST_F(TwoStages, ChannelOrderIsRespected) {
  // Sending micro-batch 1 first delays micro-batch 0's activation behind it.
  Schedule s =
      schedule_of(2, {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {F(1, 0), F(1, 1), B(1, 0), B(1, 1)}});
  s.channel_order[{0, 1}] = {Act(0, 1), Act(0, 0)};
  s.channel_order[{1, 0}] = {Grad(0, 0), Grad(0, 1)};
  Timeline t = replay(model, topology, plan_stages, s);
  expect_times(t, Act(0, 1), 2, 3);
  expect_times(t, Act(0, 0), 3, 4);
  expect_times(t, F(1, 0), 4, 6);
}

TEST(SimulatorTest, ReplicatedStageAllReduce) {
  // One stage on two GPUs, 1 GB of parameters over a 1 GB/s ring with 1 us latency:
  // 2 (r-1)/r W / beta = 1000 ms, plus 2 (r-1) lambda = 0.002 ms. GPU1 runs at half speed.
  model::Model model = make_model({{1, 2, 0, 1e9, 0}});
  topology::Topology topology = uniform_topology(2, 1e9, 0.001, {1.0, 0.5});
  Schedule s = schedule_of(2, {{F(0, 0), B(0, 0)}, {F(0, 1), B(0, 1)}});
  Timeline t = replay(model, topology, stages({{0, 0, {0, 1}}}), s);
  expect_times(t, B(0, 0), 1, 3);
  expect_times(t, F(0, 1), 0, 2);
  expect_times(t, B(0, 1), 2, 6);
  ASSERT_EQ(t.allreduces.size(), 1u);
  EXPECT_DOUBLE_EQ(t.allreduces[0].start_ms, 6);
  EXPECT_DOUBLE_EQ(t.allreduces[0].end_ms, 6 + 1000.002);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 1006.002);
  EXPECT_DOUBLE_EQ(allreduce_ms(topology, {0, 1}, 1e9), 1000.002);
}

TEST(SimulatorTest, RingUsesSlowestBandwidthAndLargestLatency) {
  // Ring 0 -> 1 -> 2 -> 0 over links of 4, 2 and 1 GB/s with latencies 1, 3, 2 us.
  topology::Topology topology = linked_topology(
      {"a", "b", "c"}, {{0, 1, 4e9, 0.001}, {1, 2, 2e9, 0.003}, {0, 2, 1e9, 0.002}});
  // 2 * 2/3 * 3e9 / 1e9 s = 4 s = 4000 ms, plus 2 * 2 * 0.003 ms.
  EXPECT_DOUBLE_EQ(allreduce_ms(topology, {0, 1, 2}, 3e9), 4000 + 0.012);
  EXPECT_DOUBLE_EQ(allreduce_ms(topology, {0}, 3e9), 0);
}

TEST(SimulatorTest, LatencyOnlyAndBandwidthOnlyLinks) {
  model::Model model = make_model({{1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}});
  topology::Topology latency_only = uniform_topology(2, 1e9, 0.5);
  Schedule s = schedule_of(1, {{F(0, 0), B(0, 0)}, {F(1, 0), B(1, 0)}});
  s.channel_order[{0, 1}] = {Act(0, 0)};
  s.channel_order[{1, 0}] = {Grad(0, 0)};
  // 1 + 0.5 + 1 + 1 + 0.5 + 1.
  EXPECT_DOUBLE_EQ(replay(model, latency_only, stages({{0, 0, {0}}, {1, 1, {1}}}), s).iteration_ms,
                   5);
  model::Model heavy = make_model({{1, 1, 2e9, 0, 0}, {1, 1, 0, 0, 0}});
  topology::Topology bandwidth_only = uniform_topology(2, 1e12, 0);
  // 2 GB over 1 TB/s: 2 ms each way.
  EXPECT_DOUBLE_EQ(
      replay(heavy, bandwidth_only, stages({{0, 0, {0}}, {1, 1, {1}}}), s).iteration_ms, 8);
}

// Closed form: S equal stages, forward f, backward b, links of latency c and zero bytes:
// fill-drain and the list scheduler give (M + S - 1)(f + b) + 2 (S - 1) c. 1F1B with the
// S - s warm-up gives it for c = 0; with latency its strict alternation stalls (a backward
// waits 2c for its gradient in every steady-state step), so it is only bounded below.
class ClosedForm : public ::testing::TestWithParam<std::tuple<int, int, schedule::Policy>> {};

TEST_P(ClosedForm, EqualStages) {
  const auto [S, M, policy] = GetParam();
  const double f = 2, b = 3;
  const double c = policy == schedule::Policy::kOneFOneB ? 0 : 0.25;
  std::vector<L> layers(static_cast<std::size_t>(S), L{f, b, 0, 0, 1});
  model::Model model = make_model(layers);
  topology::Topology topology = uniform_topology(S, 1e9, c);
  std::vector<Stage> plan;
  for (int s = 0; s < S; ++s) plan.push_back({s, s, {s}});
  auto scheduled = schedule::make_schedule(model, topology, plan, M, policy);
  Timeline t = replay(model, topology, plan, scheduled.schedule);
  EXPECT_NEAR(t.iteration_ms, (M + S - 1) * (f + b) + 2 * (S - 1) * c, 1e-9);
  EXPECT_NEAR(scheduled.iteration_ms, t.iteration_ms, 1e-9);
  for (int s = 0; s < S; ++s) {
    const double peak = t.gpus[static_cast<std::size_t>(s)].peak_memory_bytes;
    if (policy == schedule::Policy::kGpipe) {
      EXPECT_EQ(peak, M) << "stage " << s;
    } else if (policy == schedule::Policy::kOneFOneB) {
      EXPECT_EQ(peak, std::min(M, S - s)) << "stage " << s;
    }
  }
}

TEST(SimulatorTest, OneFOneBStallsOnLatency) {
  const int S = 3, M = 8;
  std::vector<L> layers(S, L{2, 3, 0, 0, 1});
  model::Model model = make_model(layers);
  topology::Topology topology = uniform_topology(S, 1e9, 0.25);
  std::vector<Stage> plan{{0, 0, {0}}, {1, 1, {1}}, {2, 2, {2}}};
  auto one_f_one_b = schedule::make_schedule(model, topology, plan, M, schedule::Policy::kOneFOneB);
  auto list = schedule::make_schedule(model, topology, plan, M, schedule::Policy::kList);
  const double closed = (M + S - 1) * 5.0 + 2 * (S - 1) * 0.25;
  EXPECT_GT(replay(model, topology, plan, one_f_one_b.schedule).iteration_ms, closed + 1);
  EXPECT_DOUBLE_EQ(replay(model, topology, plan, list.schedule).iteration_ms, closed);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ClosedForm,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 6), ::testing::Values(1, 2, 5, 8, 16),
                       ::testing::Values(schedule::Policy::kGpipe, schedule::Policy::kOneFOneB,
                                         schedule::Policy::kList)),
    [](const auto& param_info) {
      const schedule::Policy policy = std::get<2>(param_info.param);
      const char* name = policy == schedule::Policy::kGpipe
                             ? "Gpipe"
                             : (policy == schedule::Policy::kList ? "List" : "OneFOneB");
      return "S" + std::to_string(std::get<0>(param_info.param)) + "M" +
             std::to_string(std::get<1>(param_info.param)) + name;
    });

TEST(SimulatorTest, RejectsBrokenSchedules) {
  model::Model model = make_model({{1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}});
  topology::Topology topology = uniform_topology(3, 1e9, 0);
  auto plan = stages({{0, 0, {0}}, {1, 1, {1}}});
  auto error = [&](Schedule s) {
    try {
      replay(model, topology, plan, s);
    } catch (const ScheduleError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto base = [] {
    Schedule s = schedule_of(1, {{F(0, 0), B(0, 0)}, {F(1, 0), B(1, 0)}, {}});
    s.channel_order[{0, 1}] = {Act(0, 0)};
    s.channel_order[{1, 0}] = {Grad(0, 0)};
    return s;
  };
  EXPECT_EQ(error(base()), "no error");
  Schedule missing = base();
  missing.gpu_order[0] = {F(0, 0)};
  EXPECT_EQ(error(missing), "backward of micro-batch 0 on stage 0 is missing");
  // A micro-batch count far beyond the tasks listed (here 3.2e9 tasks, past int) costs only
  // what is listed: the first missing task is found without sizing anything by the count.
  Schedule claims = base();
  claims.micro_batches = 400000000;
  EXPECT_EQ(error(claims), "forward of micro-batch 1 on stage 0 is missing");
  Schedule twice = base();
  twice.gpu_order[0] = {F(0, 0), F(0, 0), B(0, 0)};
  EXPECT_EQ(error(twice), "forward of micro-batch 0 on stage 0 appears more than once");
  Schedule wrong_gpu = base();
  wrong_gpu.gpu_order[2] = {B(0, 0)};
  wrong_gpu.gpu_order[0] = {F(0, 0)};
  EXPECT_EQ(
      error(wrong_gpu),
      "backward of micro-batch 0 on stage 0 runs on GPU \"g2\", which does not serve stage 0");
  Schedule wrong_channel = base();
  wrong_channel.channel_order.erase({1, 0});
  wrong_channel.channel_order[{1, 2}] = {Grad(0, 0)};
  EXPECT_EQ(error(wrong_channel),
            "gradient transfer of micro-batch 0 from stage 1 to stage 0 must go from g1 to g0, not "
            "from g1 to g2");
  Schedule deadlock = base();
  deadlock.gpu_order[1] = {B(1, 0), F(1, 0)};
  EXPECT_EQ(error(deadlock),
            "the orders deadlock: backward of micro-batch 0 on stage 1 on GPU \"g1\" waits for "
            "forward of "
            "micro-batch 0 on stage 1, which is ordered behind it");
  // Activations sent in an order that the two GPUs' 1F1B orders contradict: a cycle through
  // both GPUs and both channels.
  Schedule crossed = base();
  crossed.micro_batches = 2;
  crossed.gpu_order = {
      {F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(1, 0), B(1, 0), F(1, 1), B(1, 1)}, {}};
  crossed.channel_order[{0, 1}] = {Act(0, 1), Act(0, 0)};
  crossed.channel_order[{1, 0}] = {Grad(0, 0), Grad(0, 1)};
  EXPECT_EQ(
      error(crossed),
      "the orders deadlock: gradient transfer of micro-batch 0 from stage 1 to stage 0 on channel "
      "g1 "
      "-> g0 waits for backward of micro-batch 0 on stage 1, which is ordered behind forward of "
      "micro-batch 0 on stage 1 on GPU \"g1\"");
}

TEST(SimulatorTest, StagesMustCoverLayersOnDisjointGpus) {
  model::Model model = make_model({{1, 1}, {1, 1}, {1, 1}});
  topology::Topology topology = uniform_topology(2, 1e9, 0);
  auto error = [&](std::vector<Stage> plan) {
    try {
      check_stages(model, topology, plan);
    } catch (const ScheduleError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{0, 2, {0, 1}}}), "no error");
  EXPECT_EQ(
      error({{0, 0, {0}}, {2, 2, {1}}}),
      "stage 1 starts at layer 2, expected layer 1 (stages must cover the layers once, in order)");
  EXPECT_EQ(error({{0, 1, {0}}}), "the stages end at layer 1 but the model has 3 layers");
  EXPECT_EQ(error({{0, 0, {0, 1}}, {1, 2, {0}}}), "GPU \"g0\" serves both stage 0 and stage 1");
  EXPECT_EQ(error({{0, 0, {0, 1}}, {1, 2, {1, 0}}}), "GPU \"g1\" serves both stage 0 and stage 1");
  // Stages may share an identical GPU list, a device (spec 9.2), at the same degree.
  EXPECT_EQ(error({{0, 0, {0}}, {1, 1, {1}}, {2, 2, {0}}}), "no error");
  EXPECT_EQ(error({{0, 0, {0}}, {1, 2, {0, 0}}}), "GPU \"g0\" serves both stage 0 and stage 1");
  // A device's list is compared whole once per stage (not once per GPU), against its first owner.
  EXPECT_EQ(error({{0, 0, {0, 1}}, {1, 1, {0, 1}}, {2, 2, {0, 1}}}), "no error");
  EXPECT_EQ(error({{0, 0, {0, 1}}, {1, 1, {0, 1}}, {2, 2, {1, 0}}}),
            "GPU \"g1\" serves both stage 0 and stage 2");
  EXPECT_EQ(error({{0, 2, {}}}), "stage 0 has no GPUs");
  EXPECT_EQ(error({{0, 2, {5}}}), "stage 0 names GPU index 5, which does not exist");
}

TEST(SimulatorTest, BoundsByHand) {
  // Two stages on GPUs of speed 1 and 2; boundary 1 MB at 1 GB/s (1 ms); M = 4.
  model::Model model = make_model({{1, 2, 1e6, 0, 0}, {4, 6, 0, 0, 0}});
  topology::Topology topology = uniform_topology(2, 1e9, 0, {1.0, 2.0});
  Bounds b = compute_bounds(model, topology, stages({{0, 0, {0}}, {1, 1, {1}}}), 4);
  // any plan: max(4 * 13 / 3, 13 / 2).
  EXPECT_DOUBLE_EQ(b.any_plan_ms, 4 * 13.0 / 3);
  // stage 0: H 0 + L 4*3 + D 0 = 12; stage 1: H (1 + 1) + L 4*10/2 + D (1 + 2) = 25.
  EXPECT_DOUBLE_EQ(b.partition_ms, 25);
}

}  // namespace
}  // namespace pipeplan::simulate

namespace pipeplan::simulate {
namespace {

// Spec 9.2: stages on one device (the same GPU list) have the same groups, so the same degree.
TEST(SimulatorTest, StagesOnOneDeviceHaveOneDegree) {
  model::Model model = testing::make_model({{1, 2, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 2, 0, 0, 0}});
  for (model::Layer& layer : model.layers) {
    model::TensorParallel split;
    split.degrees = {1, 2};
    layer.tensor_parallel = split;
  }
  const topology::Topology topology = testing::uniform_topology(3, 1e9, 0);
  const std::vector<Stage> mixed{
      {0, 0, {0, 1}, 1, false}, {1, 1, {2}, 1, false}, {2, 2, {0, 1}, 2, false}};
  try {
    check_stages(model, topology, mixed);
    ADD_FAILURE() << "accepted";
  } catch (const ScheduleError& error) {
    EXPECT_STREQ(error.what(),
                 "stage 2 shares its GPUs with stage 0 but has tensor-parallel degree 2, not 1 "
                 "(stages on one device have the same groups, spec 9.2)");
  }
  std::vector<Stage> same = mixed;
  same[2].tensor_parallel = 1;
  EXPECT_NO_THROW(check_stages(model, topology, same));
}

// Spec 9.3: a boundary inside a device has no transfer, so a micro-batch must stay on its group
// across it; the replay refuses an order that moves it.
TEST(SimulatorTest, AMicroBatchStaysOnItsGroupInsideADevice) {
  const model::Model model = testing::make_model({{1, 2, 0, 0, 0}, {1, 2, 0, 0, 0}});
  const topology::Topology topology = testing::uniform_topology(2, 1e9, 0);
  const std::vector<Stage> device{{0, 0, {0, 1}}, {1, 1, {0, 1}}};  // two replicas, one device
  Schedule schedule = testing::schedule_of(
      2,
      {{{Op::kForward, 0, 0}, {Op::kForward, 1, 1}, {Op::kBackward, 1, 1}, {Op::kBackward, 0, 0}},
       {{Op::kForward, 0, 1}, {Op::kForward, 1, 0}, {Op::kBackward, 1, 0}, {Op::kBackward, 0, 1}}});
  try {
    replay(model, topology, device, schedule);
    ADD_FAILURE() << "accepted";
  } catch (const ScheduleError& error) {
    EXPECT_STREQ(error.what(),
                 "forward of micro-batch 0 on stage 1 runs on GPU \"g1\" but stage 0 shares its "
                 "device and runs micro-batch 0 on GPU \"g0\" (a boundary inside a device has no "
                 "transfer, spec 9.3)");
  }
  // The same orders with each micro-batch on one group replay.
  schedule = testing::schedule_of(
      2,
      {{{Op::kForward, 0, 0}, {Op::kForward, 1, 0}, {Op::kBackward, 1, 0}, {Op::kBackward, 0, 0}},
       {{Op::kForward, 0, 1}, {Op::kForward, 1, 1}, {Op::kBackward, 1, 1}, {Op::kBackward, 0, 1}}});
  EXPECT_EQ(replay(model, topology, device, schedule).iteration_ms, 6);
}

}  // namespace
}  // namespace pipeplan::simulate
