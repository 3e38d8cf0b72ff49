// The gpipe baseline: its split by hand, against every contiguous split, and its memory rule.

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <random>

#include "../support/builders.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::planners {
namespace {

using namespace pipeplan::testing;
using schedule::Policy;

// Six layers with F + B = 1, 2, ..., 6 ms.
model::Model six_layers() {
  std::vector<L> layers;
  for (int l = 1; l <= 6; ++l) layers.push_back(L{l / 2.0, l / 2.0, 1e3, 0, 0});
  return make_model(layers);
}

// `speeds.size()` GPUs, all pairs linked at 10 GB/s, with per-GPU memories.
topology::Topology gpus_with(const std::vector<double>& speeds,
                             const std::vector<std::optional<double>>& memories) {
  std::vector<topology::Gpu> gpus;
  for (std::size_t i = 0; i < speeds.size(); ++i) {
    topology::Gpu g;
    g.id = "g" + std::to_string(i);
    g.node = g.id;
    g.speed = speeds[i];
    g.memory_bytes = memories.empty() ? std::nullopt : memories[i];
    gpus.push_back(g);
  }
  std::vector<topology::Link> links;
  const int n = static_cast<int>(speeds.size());
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) links.push_back({u, v, 10e9, 0.001});
  }
  return topology::Topology::build("test", gpus, links, "test");
}

TEST(GpipeTest, SplitByHand) {
  // 1+2+3 | 4+5 | 6: bottleneck 9. Nothing below 9 exists: 6 sits alone on the last GPU, and
  // then 5 with 4 (9) or 1..4 (10) are the only ways to cover the rest in two stages.
  const model::Model model = six_layers();
  const topology::Topology topology = gpus_with({1, 1, 1}, {});
  auto split = gpipe_split(model, topology, {0, 1, 2}, 4, Policy::kGpipe);
  ASSERT_TRUE(split.has_value());
  EXPECT_DOUBLE_EQ(split->bottleneck_ms, 9);
  EXPECT_EQ(stages_text(split->stages), "0-2@0 3-4@1 5-5@2");
}

TEST(GpipeTest, SplitRespectsHeterogeneousSpeeds) {
  // A GPU three times as fast takes 1..4 (10 / 3 ms); the last layer alone (6 ms) is then
  // the bottleneck, which no split avoids.
  const model::Model model = six_layers();
  const topology::Topology topology = gpus_with({3, 1, 1}, {});
  auto split = gpipe_split(model, topology, {0, 1, 2}, 4, Policy::kGpipe);
  ASSERT_TRUE(split.has_value());
  EXPECT_DOUBLE_EQ(split->bottleneck_ms, 6);
  EXPECT_EQ(stages_text(split->stages), "0-3@0 4-4@1 5-5@2");
}

TEST(GpipeTest, TiesGoToTheEarliestBoundaries) {
  // Four equal layers on three GPUs: bottleneck 2 whichever stage takes two layers; the
  // earliest boundaries put single layers first.
  const model::Model model = make_model({{1, 1}, {1, 1}, {1, 1}, {1, 1}});
  const topology::Topology topology = gpus_with({1, 1, 1}, {});
  auto split = gpipe_split(model, topology, {0, 1, 2}, 2, Policy::kGpipe);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(stages_text(split->stages), "0-0@0 1-1@1 2-3@2");
}

TEST(GpipeTest, FillDrainStashesShapeTheSplit) {
  // Layer 2 stashes 2 MB per micro-batch; GPU 0 has 5 MB. Fill-drain keeps all 4 stashes
  // (8 MB), so layer 2 cannot join stage 0 and the best split is 1 | 2+3+4 | 5+6 (11 ms); a
  // list schedule needs one stash (2 MB), so the unconstrained split (9 ms) fits.
  std::vector<L> layers;
  for (int l = 1; l <= 6; ++l) layers.push_back(L{l / 2.0, l / 2.0, 1e3, 0, l == 3 ? 2e6 : 0});
  const model::Model model = make_model(layers);
  const topology::Topology topology = gpus_with({1, 1, 1}, {5e6, std::nullopt, std::nullopt});
  auto fill_drain = gpipe_split(model, topology, {0, 1, 2}, 4, Policy::kGpipe);
  ASSERT_TRUE(fill_drain.has_value());
  EXPECT_DOUBLE_EQ(fill_drain->bottleneck_ms, 11);
  EXPECT_EQ(stages_text(fill_drain->stages), "0-0@0 1-3@1 4-5@2");
  auto list = gpipe_split(model, topology, {0, 1, 2}, 4, Policy::kList);
  ASSERT_TRUE(list.has_value());
  EXPECT_DOUBLE_EQ(list->bottleneck_ms, 9);

  // The planner's plans fit under both policies (finish_plan replays and checks memory).
  const Request request{model, topology, 4};
  Plan plan = make_plan("gpipe", request);
  EXPECT_EQ(plan.schedule_policy, "gpipe");
  EXPECT_EQ(stages_text(plan.stages), stages_text(fill_drain->stages));
  EXPECT_EQ(plan.gpu_order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(stages_text(make_plan("gpipe", request, Policy::kList).stages),
            stages_text(list->stages));
}

TEST(GpipeTest, OneStagePerGpuUpToTheLayerCount) {
  const model::Model model = make_model({{1, 1}, {1, 1}});
  const topology::Topology topology = uniform_topology(5, 1e9, 0);
  Partition partition = gpipe_partition(Request{model, topology, 3});
  EXPECT_EQ(stages_text(partition.stages), "0-0@0 1-1@1");
  EXPECT_EQ(partition.gpu_order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(GpipeTest, InfeasibleWhenNoSplitFits) {
  // 4 x 1 MiB of parameters per layer against 3 MiB GPUs.
  const model::Model model = make_model({{1, 1, 0, 1048576, 0}, {1, 1, 0, 1048576, 0}});
  const topology::Topology topology = uniform_topology(2, 1e9, 0, {}, 3 * 1048576.0);
  try {
    (void)make_plan("gpipe", Request{model, topology, 4});
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& error) {
    EXPECT_STREQ(
        error.what(),
        "gpipe: no split of the 2 layers into 2 stages, one per GPU in input order, fits in "
        "memory with all 4 micro-batches' stashes on every GPU, as fill-drain keeps; with 4 "
        "stashes, layer 0 alone needs 4 MiB");
  }
}

// The smallest bottleneck over every split of the layers into `gpus.size()` non-empty stages
// that fits, with stage costs summed directly from the layers.
std::optional<double> brute_force(const model::Model& model, const topology::Topology& topology,
                                  const std::vector<int>& gpus, int M, Policy policy, int* splits) {
  const int L = static_cast<int>(model.layers.size());
  const int S = static_cast<int>(gpus.size());
  std::optional<double> best;
  std::vector<Stage> current;
  std::function<void(int)> extend = [&](int first) {
    const int s = static_cast<int>(current.size());
    if (s == S) {
      if (first != L) return;
      ++*splits;
      double bottleneck = 0;
      for (int t = 0; t < S; ++t) {
        const Stage& stage = current[static_cast<std::size_t>(t)];
        if (!stage_fits(model, topology, stage, peak_stashes(current, t, M, policy))) return;
        double work = 0;
        for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
          work += model.layers[static_cast<std::size_t>(l)].forward_ms +
                  model.layers[static_cast<std::size_t>(l)].backward_ms;
        }
        bottleneck = std::max(bottleneck, work / topology.gpu(stage.gpus.front()).speed);
      }
      if (!best || bottleneck < *best) best = bottleneck;
      return;
    }
    for (int last = first; last < L; ++last) {
      current.push_back(Stage{first, last, {gpus[static_cast<std::size_t>(s)]}});
      extend(last + 1);
      current.pop_back();
    }
  };
  extend(0);
  return best;
}

TEST(GpipeTest, SplitEqualsExhaustiveSearchOnRandomInstances) {
  std::mt19937 rng(20190512);
  const Policy policies[] = {Policy::kGpipe, Policy::kOneFOneB, Policy::kList};
  int instances = 0, infeasible = 0, splits = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 8);
    const int N = 1 + static_cast<int>(rng() % 5);
    const int M = 1 + static_cast<int>(rng() % 8);
    const Policy policy = policies[rng() % 3];
    const model::Model model = random_model(rng, L, 2e6);
    const topology::Topology topology = random_topology(rng, N, 4e6, 60e6);
    std::vector<int> gpus(static_cast<std::size_t>(std::min(N, L)));
    std::iota(gpus.begin(), gpus.end(), 0);
    const auto expected = brute_force(model, topology, gpus, M, policy, &splits);
    const auto split = gpipe_split(model, topology, gpus, M, policy);
    ++instances;
    ASSERT_EQ(expected.has_value(), split.has_value()) << "trial " << trial;
    if (!expected) {
      ++infeasible;
      EXPECT_THROW((void)make_plan("gpipe", Request{model, topology, M}, policy), InfeasibleError);
      continue;
    }
    EXPECT_NEAR(split->bottleneck_ms, *expected, 1e-9 * *expected) << "trial " << trial;
    ASSERT_EQ(split->stages.size(), gpus.size());
    // Its plan is valid and fits: the replay of the policy's schedule stays within memory.
    Plan plan;
    ASSERT_NO_THROW(plan = make_plan("gpipe", Request{model, topology, M}, policy))
        << "trial " << trial;
    EXPECT_EQ(stages_text(plan.stages), stages_text(split->stages));
  }
  EXPECT_GE(instances, 100);
  EXPECT_GT(splits, 1000);               // the oracle really searched
  EXPECT_LT(infeasible, instances / 3);  // and most instances had a split
  EXPECT_GT(infeasible, 0);              // and memory did bind sometimes
}

}  // namespace
}  // namespace pipeplan::planners
