#include "pipeplan/schedule/scheduler.hpp"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::schedule {
namespace {

using namespace pipeplan::testing;

struct Instance {
  model::Model model;
  topology::Topology topology;
  std::vector<Stage> stages;
  int micro_batches;
};

// Random stages with random replica counts on random GPUs; memories from tight (one or two
// stashes) to unlimited, always enough for one micro-batch.
Instance random_instance(std::mt19937& rng) {
  std::uniform_real_distribution<double> time(0.1, 5), bytes(1e5, 4e6), speed(0.3, 2),
      bandwidth(1e9, 50e9), latency(0, 0.05);
  const int layers = 1 + static_cast<int>(rng() % 6);
  std::vector<L> spec;
  for (int l = 0; l < layers; ++l)
    spec.push_back({time(rng), time(rng), bytes(rng), bytes(rng), bytes(rng)});
  Instance in{make_model(spec), {}, {}, 1 + static_cast<int>(rng() % 12)};
  // Random contiguous stages.
  std::vector<int> cuts;
  for (int l = 0; l + 1 < layers; ++l) {
    if (rng() % 2) cuts.push_back(l);
  }
  cuts.push_back(layers - 1);
  int first = 0, gpu = 0;
  for (int last : cuts) {
    Stage stage{first, last, {}};
    const int r = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < r; ++k) stage.gpus.push_back(gpu++);
    in.stages.push_back(stage);
    first = last + 1;
  }
  const int N = gpu + static_cast<int>(rng() % 2);  // maybe an unused GPU
  std::vector<topology::Gpu> gpus;
  for (int g = 0; g < N; ++g)
    gpus.push_back({"g" + std::to_string(g), "g" + std::to_string(g), speed(rng), std::nullopt});
  for (std::size_t s = 0; s < in.stages.size(); ++s) {
    const auto p = simulate::stage_profile(in.model, in.stages, static_cast<int>(s));
    for (int g : in.stages[s].gpus) {
      if (rng() % 3 == 0) continue;  // unlimited
      const double stashes = 1 + static_cast<double>(rng() % 3) + 0.5;
      gpus[static_cast<std::size_t>(g)].memory_bytes =
          4 * p.parameter_bytes + stashes * p.stash_bytes;
    }
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < N; ++u) {
    for (int v = u + 1; v < N; ++v) links.push_back({u, v, bandwidth(rng), latency(rng)});
  }
  in.topology = topology::Topology::build("random", gpus, links, "test");
  return in;
}

// The list scheduler is non-delay: no GPU or channel is idle while a task it later runs was
// ready (and, for a forward, its memory could take one more stash).
void expect_non_delay(const Instance& in, const Timeline& t, int trial) {
  const int S = static_cast<int>(in.stages.size());
  const int M = in.micro_batches;
  std::map<std::tuple<int, int, int>, double> compute_end;  // (op, s, m)
  std::map<std::tuple<int, int, int>, double> transfer_end;
  std::map<std::tuple<int, int>, int> gpu_of;  // (s, m)
  for (const auto& e : t.compute) {
    compute_end[{static_cast<int>(e.task.op), e.task.stage, e.task.micro_batch}] = e.end_ms;
    gpu_of[{e.task.stage, e.task.micro_batch}] = e.gpu;
  }
  for (const auto& e : t.transfers)
    transfer_end[{static_cast<int>(e.task.kind), e.task.stage, e.task.micro_batch}] = e.end_ms;
  auto ready = [&](const ComputeTask& task) -> double {
    if (task.op == Op::kForward) {
      return task.stage == 0 ? 0.0 : transfer_end.at({0, task.stage - 1, task.micro_batch});
    }
    return task.stage == S - 1 ? compute_end.at({0, task.stage, task.micro_batch})
                               : transfer_end.at({1, task.stage, task.micro_batch});
  };
  std::map<int, std::vector<TimedCompute>> per_gpu;
  for (const auto& e : t.compute) per_gpu[e.gpu].push_back(e);
  for (auto& [g, tasks] : per_gpu) {
    const auto p = simulate::stage_profile(in.model, in.stages, tasks.front().task.stage);
    const long cap = simulate::max_in_flight(in.model.parameter_memory_factor * p.parameter_bytes,
                                             p.stash_bytes, in.topology.gpu(g).memory_bytes, M);
    int in_flight = 0;
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      const double idle_from = k == 0 ? 0.0 : tasks[k - 1].end_ms;
      const double idle_to = tasks[k].start_ms;
      if (k > 0) in_flight += tasks[k - 1].task.op == Op::kForward ? 1 : -1;
      if (idle_to - idle_from <= 1e-9) continue;
      for (std::size_t later = k; later < tasks.size(); ++later) {
        const ComputeTask& x = tasks[later].task;
        // A stage-0 forward could have been taken by any free replica of stage 0.
        const double r = ready(x);
        if (r >= idle_to - 1e-9) continue;
        if (x.op == Op::kForward && in_flight >= cap) continue;
        ADD_FAILURE() << "trial " << trial << ": GPU " << g << " idle from " << idle_from << " to "
                      << idle_to << " while " << simulate::describe(x) << " was ready at " << r;
        return;
      }
    }
  }
  std::map<Channel, std::vector<TimedTransfer>> per_channel;
  for (const auto& e : t.transfers) per_channel[{e.from, e.to}].push_back(e);
  for (auto& [channel, transfers] : per_channel) {
    for (std::size_t k = 0; k < transfers.size(); ++k) {
      const double idle_from = k == 0 ? 0.0 : transfers[k - 1].end_ms;
      const double idle_to = transfers[k].start_ms;
      if (idle_to - idle_from <= 1e-9) continue;
      for (std::size_t later = k; later < transfers.size(); ++later) {
        const TransferTask& x = transfers[later].task;
        const double r = x.kind == TransferKind::kActivation
                             ? compute_end.at({0, x.stage, x.micro_batch})
                             : compute_end.at({1, x.stage + 1, x.micro_batch});
        if (r < idle_to - 1e-9) {
          ADD_FAILURE() << "trial " << trial << ": channel idle while " << simulate::describe(x)
                        << " was ready";
          return;
        }
      }
    }
  }
  (void)M;
}

// Every rule of the list policy (its priorities, ListPriority, and its replicas' loads,
// ReplicaLoad) is non-delay, fits memory and keeps its own clock.
class ListRuleTest : public ::testing::TestWithParam<ListRule> {};

TEST_P(ListRuleTest, ListScheduleIsNonDelayAndFitsMemory) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    Instance in = random_instance(rng);
    Scheduled scheduled = make_schedule(in.model, in.topology, in.stages, in.micro_batches,
                                        Policy::kList, Optimizer::kReplicated, false, GetParam());
    Timeline t = simulate::replay(in.model, in.topology, in.stages, scheduled.schedule);
    EXPECT_FALSE(simulate::memory_violation(in.topology, t).has_value()) << "trial " << trial;
    // The engine's own clock agrees with the replay of the orders it produced.
    double last = 0;
    for (const auto& e : t.compute) last = std::max(last, e.end_ms);
    for (const auto& e : t.transfers) last = std::max(last, e.end_ms);
    EXPECT_NEAR(scheduled.iteration_ms, last, 1e-9 * last) << "trial " << trial;
    expect_non_delay(in, t, trial);
    // Never worse than the bound, of course.
    const Bounds bounds =
        simulate::compute_bounds(in.model, in.topology, in.stages, in.micro_batches);
    EXPECT_GE(t.iteration_ms, bounds.partition_ms * (1 - 1e-9)) << "trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRule, ListRuleTest,
                         ::testing::Values(ListRule{}, other_list_rules()[0], other_list_rules()[1],
                                           other_list_rules()[2]));

TEST(ListRuleTest, SppsLastStepTriesEveryOtherRuleOnce) {
  std::vector<ListRule> every{ListRule{}};
  every.insert(every.end(), other_list_rules().begin(), other_list_rules().end());
  EXPECT_EQ(every.size(), 4U);
  for (std::size_t i = 0; i < every.size(); ++i) {
    for (std::size_t j = i + 1; j < every.size(); ++j) EXPECT_FALSE(every[i] == every[j]);
  }
  EXPECT_EQ(list_rule_words(ListRule{}), "");
  EXPECT_EQ(list_rule_words(other_list_rules()[0]), " alternating forwards and backwards");
  EXPECT_EQ(list_rule_words(other_list_rules()[2]),
            " alternating forwards and backwards, choosing replicas by their work left task by "
            "task");
}

TEST(SchedulerTest, FixedPoliciesReplayTheirOwnClock) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    Instance in = random_instance(rng);
    for (Policy policy : {Policy::kOneFOneB, Policy::kGpipe}) {
      Scheduled scheduled =
          make_schedule(in.model, in.topology, in.stages, in.micro_batches, policy);
      Timeline t = simulate::replay(in.model, in.topology, in.stages, scheduled.schedule);
      double last = 0;
      for (const auto& e : t.compute) last = std::max(last, e.end_ms);
      EXPECT_NEAR(scheduled.iteration_ms, last, 1e-9 * last) << "trial " << trial;
      const Bounds bounds =
          simulate::compute_bounds(in.model, in.topology, in.stages, in.micro_batches);
      EXPECT_GE(t.iteration_ms, bounds.partition_ms * (1 - 1e-9)) << "trial " << trial;
    }
  }
}

TEST(SchedulerTest, OneFOneBOrderFollowsTheSpec) {
  // S = 2 stages, stage 1 replicated twice: w_0 = min(M, max(2 * 1, 1 * 2)) = 2,
  // w_1 = min(M, 1 * 2) = 2. Micro-batch m runs on replica m mod r.
  model::Model model = make_model({{1, 1, 1e3, 0, 1}, {1, 1, 0, 0, 1}});
  topology::Topology topology = uniform_topology(3, 1e9, 0);
  std::vector<Stage> plan{{0, 0, {0}}, {1, 1, {1, 2}}};
  EXPECT_EQ(one_f_one_b_warmup(plan, 0, 5), 2);
  EXPECT_EQ(one_f_one_b_warmup(plan, 1, 5), 2);
  EXPECT_EQ(one_f_one_b_warmup(plan, 0, 1), 1);
  Scheduled s = make_schedule(model, topology, plan, 5, Policy::kOneFOneB);
  EXPECT_EQ(s.schedule.gpu_order[0],
            (std::vector<ComputeTask>{F(0, 0), F(0, 1), B(0, 0), F(0, 2), B(0, 1), F(0, 3), B(0, 2),
                                      F(0, 4), B(0, 3), B(0, 4)}));
  // Stage-wide order F0 F1 B0 F2 B1 F3 B2 F4 B3 B4, split by replica (m mod 2).
  EXPECT_EQ(s.schedule.gpu_order[1],
            (std::vector<ComputeTask>{F(1, 0), B(1, 0), F(1, 2), B(1, 2), F(1, 4), B(1, 4)}));
  EXPECT_EQ(s.schedule.gpu_order[2],
            (std::vector<ComputeTask>{F(1, 1), B(1, 1), F(1, 3), B(1, 3)}));
}

TEST(SchedulerTest, GpipeOrderRunsAllForwardsFirst) {
  model::Model model = make_model({{1, 1, 0, 0, 1}});
  topology::Topology topology = uniform_topology(2, 1e9, 0);
  Scheduled s = make_schedule(model, topology, {{0, 0, {0, 1}}}, 3, Policy::kGpipe);
  EXPECT_EQ(s.schedule.gpu_order[0],
            (std::vector<ComputeTask>{F(0, 0), F(0, 2), B(0, 0), B(0, 2)}));
  EXPECT_EQ(s.schedule.gpu_order[1], (std::vector<ComputeTask>{F(0, 1), B(0, 1)}));
}

TEST(SchedulerTest, ListWaitsForMemory) {
  // One GPU holds two stashes: it never has three micro-batches in flight.
  model::Model model = make_model({{1, 1, 1e3, 0, 100}, {3, 3, 0, 0, 100}});
  std::vector<topology::Gpu> gpus{{"a", "a", 1.0, 250.0}, {"b", "b", 1.0, std::nullopt}};
  topology::Topology topology = topology::Topology::build("t", gpus, {{0, 1, 1e9, 0}}, "test");
  std::vector<Stage> plan{{0, 0, {0}}, {1, 1, {1}}};
  Scheduled s = make_schedule(model, topology, plan, 8, Policy::kList);
  Timeline t = simulate::replay(model, topology, plan, s.schedule);
  EXPECT_DOUBLE_EQ(t.gpus[0].peak_memory_bytes, 200);
  EXPECT_FALSE(simulate::memory_violation(topology, t).has_value());
}

// Memory holds the first stage to exactly the micro-batches its round trip needs, and the last
// stage runs on two replicas, one micro-batch each: stage 0 (F 1, B 2 ms) on GPU 0 with room for
// 4, stage 1 (the same) on GPU 1 with room for 4, stage 2 (F 2, B 4) on GPUs 2 and 3 with room
// for 1, transfers free. Every stage takes 3 ms per micro-batch (the last 6 ms on each of two
// replicas), and stage 0's round trip, 1 + 1 + 6 + 2 + 2 = 12 ms, is the 4 micro-batches it
// holds times 3 ms: it keeps pace only if no micro-batch ever waits. Backward-first does the two
// replicas' backwards, which come back together, in pairs on stages 1 and 0, and each pair
// leaves a bubble that never closes: each further micro-batch costs 46 / 12 ms. Alternating
// keeps them spaced, at the 3 ms per micro-batch every stage needs (12 more micro-batches: 36
// ms more). 1F1B (warm-up S - s = 3 on stage 0) holds one micro-batch too few: 222 ms.
TEST(SchedulerTest, AlternatingKeepsAMemoryBoundPipelineAtItsBottleneckRate) {
  const model::Model model =
      make_model({{1, 2, 0, 100, 100}, {1, 2, 0, 100, 100}, {2, 4, 0, 100, 100}});
  std::vector<topology::Gpu> gpus{{"a", "a", 1.0, 800.0},
                                  {"b", "b", 1.0, 800.0},
                                  {"c", "c", 1.0, 500.0},
                                  {"d", "d", 1.0, 500.0}};
  std::vector<topology::Link> links;
  for (int u = 0; u < 4; ++u) {
    for (int v = u + 1; v < 4; ++v) links.push_back({u, v, 1e12, 0});
  }
  const topology::Topology topology = topology::Topology::build("t", gpus, links, "test");
  const std::vector<Stage> plan{{0, 0, {0}}, {1, 1, {1}}, {2, 2, {2, 3}}};
  auto list = [&](int M, ListPriority priority) {
    return make_schedule(model, topology, plan, M, Policy::kList, Optimizer::kReplicated, false,
                         ListRule{priority});
  };
  EXPECT_DOUBLE_EQ(list(36, ListPriority::kBackwardFirst).iteration_ms, 140);
  EXPECT_DOUBLE_EQ(list(48, ListPriority::kBackwardFirst).iteration_ms, 186);
  EXPECT_DOUBLE_EQ(list(36, ListPriority::kAlternate).iteration_ms, 120);
  const Scheduled spaced = list(48, ListPriority::kAlternate);
  EXPECT_DOUBLE_EQ(spaced.iteration_ms, 156);
  EXPECT_DOUBLE_EQ(make_schedule(model, topology, plan, 48, Policy::kOneFOneB).iteration_ms, 222);
  const Timeline t = simulate::replay(model, topology, plan, spaced.schedule);
  EXPECT_DOUBLE_EQ(t.iteration_ms, 156);
  EXPECT_FALSE(simulate::memory_violation(topology, t).has_value());
  // Stage 0 alternates from its first backward: its fifth micro-batch enters right after the
  // first backward, before the second.
  const std::vector<ComputeTask> opening{F(0, 0), F(0, 1), F(0, 2), F(0, 3),
                                         B(0, 0), F(0, 4), B(0, 1)};
  const std::vector<ComputeTask>& first = spaced.schedule.gpu_order[0];
  ASSERT_GE(first.size(), opening.size());
  EXPECT_EQ(std::vector<ComputeTask>(first.begin(), first.begin() + 7), opening);
  // Stage 1 runs two backwards in a row before its last forward 12 times under backward-first,
  // twice alternating (in the fill, where no forward has arrived yet).
  auto pairs_before_last_forward = [](const std::vector<ComputeTask>& order) {
    std::size_t last_forward = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (order[k].op == Op::kForward) last_forward = k;
    }
    int pairs = 0;
    for (std::size_t k = 0; k + 1 < last_forward; ++k) {
      pairs += order[k].op == Op::kBackward && order[k + 1].op == Op::kBackward ? 1 : 0;
    }
    return pairs;
  };
  EXPECT_EQ(pairs_before_last_forward(spaced.schedule.gpu_order[1]), 2);
  const Scheduled pairs = list(48, ListPriority::kBackwardFirst);
  EXPECT_EQ(pairs_before_last_forward(pairs.schedule.gpu_order[1]), 12);
}

// Replica groups of different sizes: stage 0 (F 1, B 2 ms) on 3 GPUs with room for 5
// micro-batches each, stage 1 (F 2, B 4) on 5 GPUs with room for 1, M = 20, transfers free.
// Stage 1 takes 6 ms per micro-batch on a replica. GPUs 3 to 5 start at 1 ms, GPUs 6 and 7 at 2
// (they wait for stage 0's second forwards). Counting a micro-batch's F + B against its replica
// until its backward ends, all five look equally loaded whenever micro-batches 15 to 19 are
// dealt (the later two are a forward behind, which the count does not see), the ties go to the
// earlier replicas, and GPUs 3 and 4 get five micro-batches: 1 + 5 x 6 + 2 = 33 ms. Taking the
// forward's part off when the forward ends deals four to each: GPUs 6 and 7 end at 2 + 4 x 6 =
// 26, the other three at 25, and stage 0's three GPUs run the backwards of 15 to 17 from 25 to
// 27 and those of 18 and 19 from 27: 29 ms.
TEST(SchedulerTest, PerTaskLoadDealsMicroBatchesEvenlyOverReplicas) {
  const model::Model model = make_model({{1, 2, 0, 100, 100}, {2, 4, 0, 100, 100}});
  std::vector<topology::Gpu> gpus;
  for (int g = 0; g < 8; ++g) {
    gpus.push_back({"g" + std::to_string(g), "g" + std::to_string(g), 1.0, g < 3 ? 900.0 : 500.0});
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < 8; ++u) {
    for (int v = u + 1; v < 8; ++v) links.push_back({u, v, 1e12, 0});
  }
  const topology::Topology topology = topology::Topology::build("t", gpus, links, "test");
  const std::vector<Stage> plan{{0, 0, {0, 1, 2}}, {1, 1, {3, 4, 5, 6, 7}}};
  auto forwards = [](const Scheduled& scheduled, int g) {
    const auto& order = scheduled.schedule.gpu_order[static_cast<std::size_t>(g)];
    return std::count_if(order.begin(), order.end(),
                         [](const ComputeTask& task) { return task.op == Op::kForward; });
  };
  for (const ListPriority priority : {ListPriority::kBackwardFirst, ListPriority::kAlternate}) {
    const Scheduled whole = make_schedule(model, topology, plan, 20, Policy::kList,
                                          Optimizer::kReplicated, false, ListRule{priority});
    EXPECT_DOUBLE_EQ(whole.iteration_ms, 33);
    EXPECT_EQ(forwards(whole, 3), 5);
    const Scheduled per_task =
        make_schedule(model, topology, plan, 20, Policy::kList, Optimizer::kReplicated, false,
                      ListRule{priority, ReplicaLoad::kPerTask});
    EXPECT_DOUBLE_EQ(per_task.iteration_ms, 29);
    for (int g = 3; g < 8; ++g) EXPECT_EQ(forwards(per_task, g), 4) << "GPU " << g;
    const Timeline t = simulate::replay(model, topology, plan, per_task.schedule);
    EXPECT_NEAR(t.iteration_ms, 29, 1e-6);  // the replay adds the transfers' few bytes
    EXPECT_FALSE(simulate::memory_violation(topology, t).has_value());
  }
}

TEST(SchedulerTest, StageThatCannotHoldOneMicroBatchIsInfeasible) {
  model::Model model = make_model({{1, 1, 0, 100, 100}});
  std::vector<topology::Gpu> gpus{{"a", "a", 1.0, 450.0}};
  topology::Topology topology =
      topology::Topology::build("t", gpus, std::vector<topology::Link>{}, "test");
  try {
    make_schedule(model, topology, {{0, 0, {0}}}, 2, Policy::kList);
    FAIL() << "no error";
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(
        error.what(),
        "stage 0 (layers 0..0) needs 500 B with one micro-batch in flight but GPU \"a\" has 450 B");
  }
}

TEST(SchedulerTest, PolicyNames) {
  for (Policy p : {Policy::kList, Policy::kOneFOneB, Policy::kGpipe})
    EXPECT_EQ(parse_policy(policy_name(p)), p);
  EXPECT_FALSE(parse_policy("eager").has_value());
}

}  // namespace
}  // namespace pipeplan::schedule

namespace pipeplan::schedule {
namespace {

TEST(SchedulerTest, NonDelayCheckCatchesOneFOneBStalls) {
  // The checker above is not vacuous: 1F1B with link latency idles a GPU while a forward
  // is ready (its order insists on a backward first).
  std::vector<L> layers(3, L{2, 3, 0, 0, 1});
  Instance in{make_model(layers),
              uniform_topology(3, 1e9, 0.25),
              {{0, 0, {0}}, {1, 1, {1}}, {2, 2, {2}}},
              8};
  Scheduled s =
      make_schedule(in.model, in.topology, in.stages, in.micro_batches, Policy::kOneFOneB);
  Timeline t = simulate::replay(in.model, in.topology, in.stages, s.schedule);
  EXPECT_NONFATAL_FAILURE(expect_non_delay(in, t, 0), "was ready");
}

}  // namespace
}  // namespace pipeplan::schedule
