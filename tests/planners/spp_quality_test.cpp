// spp against brute force on the replayed time, spp's memory guarantee, and its stage cap.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <numeric>
#include <random>

#include "../support/builders.hpp"
#include "../support/enumerate.hpp"
#include "../support/sanitized_share.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/partition/search.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;

// The measured gap of the DP and local search alone against the exhaustive optimum on the
// instances below (docs/algorithms.md, "The final choice").
// Measured: 180 of 183 exact, geometric mean 1.00125, worst 1.12685, one 1F1B instance
// without a plan (its memory needs a shape neither the DP's stash models nor the search
// reached). Before the search's fourth phase (the fill splits): 177 exact, 1.00234, 1.12685;
// before its compound moves: 173 exact, 1.0037, 1.1783.
constexpr double kWorstGap = 1.1269;
constexpr double kMeanGap = 1.0013;
constexpr int kMissed = 1;

// The orders spp considers: min-cut, its reverse, the input order.
std::vector<std::vector<int>> spp_orders(const topology::Topology& topology) {
  std::vector<std::vector<int>> orders{ordering::mincut_order(topology)};
  orders.emplace_back(orders.front().rbegin(), orders.front().rend());
  std::vector<int> input(static_cast<std::size_t>(topology.size()));
  std::iota(input.begin(), input.end(), 0);
  orders.push_back(input);
  return orders;
}

// Every contiguous partition, placement and replica count (any, even beyond M) on every order
// spp considers,
// scheduled and replayed under `policy`: the best iteration time, or nothing when no shape fits.
std::optional<double> oracle(const Request& request, schedule::Policy policy, int* shapes) {
  const int L = static_cast<int>(request.model.layers.size());
  const int max_stages = max_stages_within_task_limit(request.micro_batches);
  std::optional<double> best;
  for (const auto& order : spp_orders(request.topology)) {
    for_each_plan(
        L, order, static_cast<int>(order.size()), max_stages,
        [&](const std::vector<Stage>& stages) {
          ++*shapes;
          try {
            const Plan plan = finish_plan("oracle", Partition{order, stages}, request, policy);
            if (!best || plan.timeline.iteration_ms < *best) best = plan.timeline.iteration_ms;
          } catch (const InfeasibleError&) {
          }
        });
  }
  return best;
}

struct Instance {
  model::Model model;
  topology::Topology topology;
  int micro_batches;
  schedule::Policy policy;
};

// Small instances: up to 8 layers and 6 GPUs, speeds 0.25-2, bandwidths 1-100 GB/s, latencies
// up to 20 us, memory limits on three GPUs of four; a quarter under each fixed policy.
Instance small_instance(std::mt19937& rng, int trial) {
  const int L = 2 + static_cast<int>(rng() % 7);
  const int N = 2 + static_cast<int>(rng() % 5);
  const int M = 1 + static_cast<int>(rng() % 8);
  model::Model model = random_model(rng, L, 4e6);
  topology::Topology topology = random_topology(rng, N, 4e6, 40e6);
  const schedule::Policy policy = trial % 4 == 1   ? schedule::Policy::kOneFOneB
                                  : trial % 4 == 3 ? schedule::Policy::kGpipe
                                                   : schedule::Policy::kList;
  return {std::move(model), std::move(topology), M, policy};
}

TEST(SppQualityTest, EqualsTheBestReplayedShapeOnSmallInstances) {
  std::mt19937 rng(20260);
  int shapes = 0, infeasible = 0, other_rule = 0;
  const int kInstances = 200;
  for (int trial = 0; trial < kInstances; ++trial) {
    const Instance instance = small_instance(rng, trial);
    const Request request{instance.model, instance.topology, instance.micro_batches};
    const auto best = oracle(request, instance.policy, &shapes);
    SCOPED_TRACE("trial " + std::to_string(trial));
    if (!best) {
      ++infeasible;
      EXPECT_THROW(plan_spp(request, instance.policy), InfeasibleError);
      continue;
    }
    const Plan plan = plan_spp(request, instance.policy);
    if (instance.policy != schedule::Policy::kList) {
      EXPECT_NEAR(plan.timeline.iteration_ms, *best, 1e-9 * *best);
      continue;
    }
    // Under list, spp's last step may keep a fixed policy's order of the same stages, or the
    // list scheduler's under one of its other rules, where it is strictly faster than the
    // default list schedule the oracle replays (schedule_choice.hpp): then faster, and the
    // fastest of those rules' orders.
    if (plan.timeline.iteration_ms >= *best * (1 - 1e-9)) {
      EXPECT_NEAR(plan.timeline.iteration_ms, *best, 1e-9 * *best);
      continue;
    }
    if (plan.schedule_policy == "list") {
      std::optional<double> fastest;
      for (const schedule::ListRule& rule : schedule::other_list_rules()) {
        Request other = request;
        other.list_rule = rule;
        const Plan again = finish_plan("spp", Partition{plan.gpu_order, plan.stages}, other,
                                       schedule::Policy::kList);
        fastest =
            std::min(fastest.value_or(again.timeline.iteration_ms), again.timeline.iteration_ms);
      }
      EXPECT_DOUBLE_EQ(*fastest, plan.timeline.iteration_ms);
      ++other_rule;
    }
  }
  EXPECT_GT(shapes, 50000);               // the oracle really searched
  EXPECT_LT(infeasible, kInstances / 4);  // and most instances had a plan
  EXPECT_GE(other_rule, 1);  // measured: 4 instances get a faster plan by another rule (2
                             // before the replicas' per-task load)
}

TEST(SppQualityTest, DpAndLocalSearchAloneStayCloseToTheBest) {
  // The same instances with enumeration switched off: what the DP's proposals and the replayed
  // local search reach on their own (the path of every instance too large to enumerate). The
  // bounds are the measured gap (docs/algorithms.md); a change that widens it fails here.
  std::mt19937 rng(20260);
  SppSearch no_enumeration;
  no_enumeration.exhaustive_shapes = 0;
  int shapes = 0, compared = 0, exact = 0, missed = 0;
  double worst = 1, log_sum = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const Instance instance = small_instance(rng, trial);
    const Request request{instance.model, instance.topology, instance.micro_batches};
    const auto best = oracle(request, instance.policy, &shapes);
    if (!best) continue;
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::optional<Plan> found;
    try {
      found = plan_spp(request, instance.policy, no_enumeration);
    } catch (const InfeasibleError&) {
      ++missed;  // a fixed policy whose memory the DP's models and the search did not meet
      continue;
    }
    // The search's own result: the stages it found under the instance's policy, the list
    // backward-first (spp's last step may keep a faster order of them, a fixed policy's or the
    // list alternating, which the oracle does not try).
    const Plan plan =
        finish_plan("spp", Partition{found->gpu_order, found->stages}, request, instance.policy);
    const double ratio = plan.timeline.iteration_ms / *best;
    EXPECT_GE(ratio, 1 - 1e-9);
    ++compared;
    if (ratio <= 1 + 1e-9) ++exact;
    worst = std::max(worst, ratio);
    log_sum += std::log(ratio);
  }
  const double geometric_mean = std::exp(log_sum / compared);
  std::cout << "[ gap      ] " << exact << " of " << compared << " exact, geometric mean "
            << geometric_mean << ", worst " << worst << ", no plan found " << missed << "\n";
  EXPECT_LE(missed, kMissed);
  EXPECT_LE(worst, kWorstGap);
  EXPECT_LE(geometric_mean, kMeanGap);
}

TEST(SppQualityTest, TheSecondPhaseNeverEndsSlower) {
  // The search's first phase is the same within the same budget whatever the second's budget,
  // and the second follows the same path further with more: a plan never gets slower (nor the
  // plans of the shipped examples, docs/results.md). On these instances the extra budget makes
  // some plans faster.
  std::mt19937 rng(20261);
  SppSearch first_phase;  // a budget these instances exhaust
  first_phase.exhaustive_shapes = 0;
  first_phase.work = 300;
  first_phase.sweeps = 0;
  SppSearch both = first_phase;
  both.sweeps = SppSearch{}.sweeps;
  int faster = 0, compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Instance instance = small_instance(rng, trial);
    const Request request{instance.model, instance.topology, instance.micro_batches};
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::optional<double> before, after;
    try {
      before = plan_spp(request, instance.policy, first_phase).timeline.iteration_ms;
    } catch (const InfeasibleError&) {
    }
    try {
      after = plan_spp(request, instance.policy, both).timeline.iteration_ms;
    } catch (const InfeasibleError&) {
    }
    if (!before) continue;
    ASSERT_TRUE(after);
    ++compared;
    EXPECT_LE(*after, *before * (1 + 1e-12));
    if (*after < *before * (1 - 1e-9)) ++faster;
  }
  std::cout << "[ phase 2  ] " << faster << " of " << compared << " plans faster\n";
  EXPECT_GT(compared, 30);
  EXPECT_GT(faster, 0);
}

// A memory-tight model: `layers` layers whose parameters vary 1:10 and some of which are large,
// on `gpus` GPUs of equal memory, sized so that greedy one-in-flight packing needs about
// `fill` of them.
Instance memory_tight(std::mt19937& rng, int layers, int gpus, double fill) {
  std::uniform_real_distribution<double> time(0.05, 9), params(2e6, 20e6), stash(1e6, 40e6);
  std::vector<L> spec;
  double need = 0, largest = 0;
  for (int l = 0; l < layers; ++l) {
    const double f = l % 5 == 2 ? 0 : time(rng);  // zero-cost reshapes
    L layer{f, 2 * f, 8e6, l == 0 ? 60e6 : params(rng), f == 0 ? 0 : stash(rng)};
    need += 4 * layer.w + layer.y;
    largest = std::max(largest, 4 * layer.w + layer.y);
    spec.push_back(layer);
  }
  const double memory = std::max(need / (fill * gpus), 1.5 * largest);
  std::vector<double> speeds;
  for (int g = 0; g < gpus; ++g) speeds.push_back(g % 3 == 0 ? 2.0 : 1.0);
  return {make_model(spec), uniform_topology(gpus, 10e9, 0.01, speeds, memory), 1,
          schedule::Policy::kList};
}

TEST(SppMemoryTest, FindsAPlanWheneverGreedyPackingFits) {
  // For M in 1..64, spp plans whenever layers packed greedily along the input order, one
  // micro-batch in flight per GPU, fit on the GPUs (the list schedule then never exceeds
  // memory); otherwise its message names how many GPUs that packing needs.
  std::mt19937 rng(4242);
  int planned = 0, refused = 0, counts = 0;  // counts: micro-batch counts tried per trial
  for (int trial = 0; trial < 6; ++trial) {
    const int layers = 20 + static_cast<int>(rng() % 60);
    const int gpus = 4 + static_cast<int>(rng() % 12);
    const double fill = 0.5 + 0.15 * trial;  // 0.5 .. 1.25 of the GPUs
    const Instance instance = memory_tight(rng, layers, gpus, fill);
    std::vector<int> input(static_cast<std::size_t>(gpus));
    std::iota(input.begin(), input.end(), 0);
    int needed = 0;
    const bool fits =
        partition::greedy_packing(instance.model, instance.topology, input, 1, 1 << 30, &needed)
            .has_value();
    SppSearch quick;  // the guarantee comes from the packing seed, not from the search budget
    quick.work = 0;
    counts = 0;
    for (int M = 1; M <= 64; ++M) {
      if (!runs_instance(M - 1, 4) && M != 64) continue;  // 17 of the 64 under the sanitizers
      ++counts;
      SCOPED_TRACE("trial " + std::to_string(trial) + ", M " + std::to_string(M));
      const Request request{instance.model, instance.topology, M};
      // The default search on a few micro-batch counts, the zero-budget search on all of them.
      const bool full = M == 1 || M == 64;
      if (fits) {
        EXPECT_NO_THROW(full ? plan_spp(request)
                             : plan_spp(request, schedule::Policy::kList, quick));
        ++planned;
      } else {
        try {
          plan_spp(request, schedule::Policy::kList, quick);
          ADD_FAILURE() << "planned although the packing needs " << needed << " GPUs";
        } catch (const InfeasibleError& error) {
          EXPECT_NE(std::string(error.what())
                        .find("the layers need " + std::to_string(needed) + " GPUs and there are " +
                              std::to_string(gpus)),
                    std::string::npos)
              << error.what();
        }
        ++refused;
      }
    }
  }
  EXPECT_GT(planned, 3 * counts);  // more than three of the six trials fit
  EXPECT_GT(refused, 0);
}

TEST(SppMemoryTest, SaysHowManyGpusThePackingNeeds) {
  // Four layers of 4 x 1 MB + 1 MB each on GPUs of 6 MB: one layer per GPU, four GPUs, three there.
  const model::Model model = make_model(
      {{1, 2, 0, 1e6, 1e6}, {1, 2, 0, 1e6, 1e6}, {1, 2, 0, 1e6, 1e6}, {1, 2, 0, 1e6, 1e6}});
  const topology::Topology topology = uniform_topology(3, 10e9, 0.01, {}, 6e6);
  try {
    plan_spp({model, topology, 16});
    FAIL() << "no error";
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(
        error.what(),
        "no placement fits in GPU memory: packed in order with one micro-batch in flight (4 x "
        "parameters + one stash per layer, 19.07 MiB in all), the layers need 4 GPUs and there are "
        "3 "
        "(17.17 MiB in total)");
  }
}

TEST(SppLimitsTest, SearchesWithinTheTaskLimitInsteadOfRefusing) {
  // 64 layers on 64 GPUs with 16,384 micro-batches: 16 stages would make 1,015,808 tasks; a
  // plan of at most 8 stages fits the limit of 524,288, and spp finds one.
  // 1 GB of parameters per layer on 1 GB/s links: the DP's unconstrained optimum is 16 stages
  // (which the task limit refused before).
  std::vector<L> spec(64, L{1, 2, 1e6, 1e9, 1e6});
  const model::Model model = make_model(spec);
  const topology::Topology topology = uniform_topology(64, 1e9, 0.01);
  EXPECT_EQ(max_stages_within_task_limit(16384), 8);
  const Plan plan = make_plan("spp", Request{model, topology, 16384});
  EXPECT_EQ(plan.stages.size(), 8u);
}

}  // namespace
}  // namespace pipeplan::planners
