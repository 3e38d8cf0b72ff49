// pipeplan_quality: the plan-quality benchmark of docs/performance.md ("Plan quality"). For
// seeded families of instances, spp (the defaults of `pipeplan plan`) against a slow, thorough
// search: the best of three variants of spp's own search with 32 DP solutions, 16 random
// restarts and 60x the work budget (then as much again for the compound moves).
// Prints a Markdown table: per instance spp's and the slow search's replayed iteration times
// and their ratio, then per family and overall the geometric mean and the worst ratio. With an
// INSTANCE (1-based, in the table's order), only that one, with both plans' stages and notes.
// With `examples DIR`, the instances are instead every model of DIR/models on every topology of
// DIR/topologies (the shipped examples: each model with its own micro-batch count), one family
// per topology.
// With `--schedule POLICY` first, both plan for that schedule policy (default: list).
//   pipeplan_quality [--schedule POLICY] [SEEDS_PER_FAMILY [INSTANCE]]   (default 3)
//   pipeplan_quality [--schedule POLICY] examples DIR [INSTANCE]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/io/files.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "synthetic.hpp"

namespace pipeplan::bench {
namespace {

struct Instance {
  std::string name;  ///< The family.
  model::Model model;
  topology::Topology topology;
  int micro_batches;
  std::string which{};  ///< Within the family (the seed when empty).
};

// GPUs in groups: `groups` groups of `per_group`, `inside` / `between` bandwidths (bytes/s)
// and latencies (ms), each pair scaled by a seeded +-`noise`; speeds and memories by GPU.
topology::Topology grouped(const std::string& name, int groups, int per_group, double inside,
                           double inside_ms, double between, double between_ms,
                           const std::function<double(int)>& speed, double memory,
                           std::mt19937& rng, double noise = 0.05) {
  std::uniform_real_distribution<double> factor(1 - noise, 1 + noise);
  std::vector<topology::Gpu> gpus;
  const int n = groups * per_group;
  for (int g = 0; g < n; ++g) {
    gpus.push_back({"n" + std::to_string(g / per_group) + "/gpu" + std::to_string(g % per_group),
                    "n" + std::to_string(g / per_group), speed(g), memory});
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) {
      const bool same = u / per_group == v / per_group;
      links.push_back(
          {u, v, (same ? inside : between) * factor(rng), same ? inside_ms : between_ms});
    }
  }
  return topology::Topology::build(name, gpus, links, "quality");
}

std::vector<Instance> families(int seeds) {
  std::vector<Instance> out;
  const double GiB = 1024.0 * 1024 * 1024;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const auto s = static_cast<unsigned>(seed);
    out.push_back(
        {"heterogeneous 1:2:4, 32 layers, 9 GPUs, M 16", synthetic_model(32, s),
         grouped(
             "het", 3, 3, 150e9, 0.002, 25e9, 0.005,
             [](int g) { return g % 3 == 0   ? 4.0
                                : g % 3 == 1 ? 2.0
                                             : 1.0; }, 40 * GiB, rng),
         16});
    out.push_back(
        {"multi-server PCIe, 48 layers, 2 x 4 GPUs, M 16", synthetic_model(48, s + 10),
         grouped(
             "pcie", 2, 4, 12e9, 0.005, 1.25e9, 0.02, [](int) { return 1.0; }, 32 * GiB, rng),
         16});
    out.push_back(
        {"WAN between 3 regions, 24 layers, 3 x 2 GPUs, M 8", synthetic_model(24, s + 20),
         grouped(
             "wan", 3, 2, 100e9, 0.002, 0.125e9, 30, [](int) { return 1.0; }, 80 * GiB, rng),
         8});
    out.push_back(
        {"memory-tight mix, 60 layers, 2 x 8 GPUs, M 16", mixed_model(60, s + 30, 6),
         grouped(
             "tight", 2, 8, 150e9, 0.002, 25e9, 0.005, [](int) { return 1.0; }, 16 * GiB, rng),
         16});
    out.push_back(
        {"1,000-layer realistic mix, 4 x 8 V100, M 32", mixed_model(1000, s + 40),
         grouped(
             "chain", 4, 8, 150e9, 0.002, 25e9, 0.005, [](int) { return 1.0; }, 32 * GiB, rng),
         32});
  }
  return out;
}

// The *.json files of `folder` (not its subfolders), sorted.
std::vector<std::filesystem::path> json_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every example model on every example topology, one family per topology.
std::vector<Instance> examples(const std::filesystem::path& root) {
  std::vector<Instance> out;
  for (const auto& topology_file : json_files(root / "topologies")) {
    for (const auto& model_file : json_files(root / "models")) {
      model::Model model = model::read_model(io::read_source(model_file.string(), std::cin));
      topology::Topology topology = topology::read_topology(
          io::read_source(topology_file.string(), std::cin), model.profile_device);
      const int micro_batches = static_cast<int>(model.micro_batches.value_or(1));
      out.push_back({"examples on " + topology_file.stem().string(), std::move(model),
                     std::move(topology), micro_batches, model_file.stem().string()});
    }
  }
  return out;
}

// A plan's stages (layers, GPUs) and its planner's notes, for one instance.
void describe(const char* who, const Plan& plan) {
  std::printf("%s: %.1f ms, %zu stages\n", who, plan.timeline.iteration_ms, plan.stages.size());
  for (const Stage& stage : plan.stages) {
    std::printf("  layers %d-%d on %zu GPUs:", stage.first_layer, stage.last_layer,
                stage.gpus.size());
    for (const int gpu : stage.gpus) std::printf(" %d", gpu);
    std::printf("\n");
  }
  for (const std::string& note : plan.notes) std::printf("  note: %s\n", note.c_str());
}

}  // namespace
}  // namespace pipeplan::bench

int main(int argc, char** argv) {
  using namespace pipeplan;
  using bench::describe;
  auto policy = schedule::Policy::kList;
  if (argc > 2 && std::string(argv[1]) == "--schedule") {
    const auto parsed = schedule::parse_policy(argv[2]);
    if (!parsed) {
      std::fprintf(stderr, "pipeplan_quality: unknown schedule policy %s\n", argv[2]);
      return 2;
    }
    policy = *parsed;
    argc -= 2;
    argv += 2;
  }
  const bool on_examples = argc > 2 && std::string(argv[1]) == "examples";
  const int seeds = argc > 1 && !on_examples ? std::stoi(argv[1]) : 3;
  const int only = argc > 3 && on_examples    ? std::stoi(argv[3])
                   : argc > 2 && !on_examples ? std::stoi(argv[2])
                                              : 0;
  std::vector<bench::Instance> instances;
  try {
    instances = on_examples ? bench::examples(argv[2]) : bench::families(seeds);
  } catch (const std::exception& error) {  // a missing folder or a bad example: one line
    std::fprintf(stderr, "pipeplan_quality: %s\n", error.what());
    return 2;
  }
  planners::SppSearch thorough;
  thorough.dp_solutions = 32;
  thorough.restarts = 16;
  thorough.work = 60 * planners::SppSearch{}.work;  // phase 1 of the search (local_search)
  thorough.sweeps = 1e18;                           // phase 2: up to twice as much in all
  thorough.max_work = 2 * thorough.work;
  // The slow search is the best of three such searches that climb differently in phase 2: as
  // spp does; from the best start of each stage count first; that, taking only moves that gain
  // 1e-4. On flat landscapes (the 1,000-layer chains) they end up to 3% apart, so no one of them
  // is a converged optimum.
  std::vector<planners::SppSearch> slow(3, thorough);
  slow[1].diverse = true;
  slow[2].diverse = true;
  slow[2].min_gain = 1e-4;
  std::printf("| family | %s | spp (ms) | slow search (ms) | spp / slow | spp time | slow time |\n",
              on_examples ? "model" : "seed");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  struct Tally {
    std::string family;
    double log_sum = 0, worst = 0;
    int count = 0;
  };
  std::vector<Tally> tallies;
  Tally all{"all"};
  int index = 0;
  for (const auto& instance : instances) {
    const int seed = index / 5 + 1;
    if (++index != only && only > 0) continue;
    const planners::Request request{instance.model, instance.topology, instance.micro_batches};
    using Clock = std::chrono::steady_clock;
    auto started = Clock::now();
    const Plan fast = planners::plan_spp(request, policy, planners::SppSearch{});
    const double fast_ms = fast.timeline.iteration_ms;
    const double fast_s = std::chrono::duration<double>(Clock::now() - started).count();
    started = Clock::now();
    std::optional<Plan> slow_plan;
    for (const planners::SppSearch& variant : slow) {
      Plan plan = planners::plan_spp(request, policy, variant);
      if (!slow_plan || plan.timeline.iteration_ms < slow_plan->timeline.iteration_ms)
        slow_plan = std::move(plan);
    }
    const double slow_ms = slow_plan->timeline.iteration_ms;
    const double slow_s = std::chrono::duration<double>(Clock::now() - started).count();
    if (only > 0) {
      describe("spp", fast);
      describe("slow search", *slow_plan);
    }
    const double ratio = fast_ms / std::min(fast_ms, slow_ms);
    const std::string which = instance.which.empty() ? std::to_string(seed) : instance.which;
    std::printf("| %s | %s | %.1f | %.1f | %.4f | %.2f s | %.2f s |\n", instance.name.c_str(),
                which.c_str(), fast_ms, slow_ms, fast_ms / slow_ms, fast_s, slow_s);
    auto it = std::find_if(tallies.begin(), tallies.end(),
                           [&](const auto& t) { return t.family == instance.name; });
    if (it == tallies.end()) it = tallies.insert(tallies.end(), {instance.name});
    for (auto* tally : {&*it, &all}) {
      tally->log_sum += std::log(ratio);
      tally->worst = std::max(tally->worst, ratio);
      ++tally->count;
    }
  }
  tallies.push_back(all);
  std::printf(
      "\n| family | instances | geometric mean spp / best | worst |\n| --- | ---: | ---: | ---: "
      "|\n");
  for (const auto& t : tallies) {
    std::printf("| %s | %d | %.4f | %.4f |\n", t.family.c_str(), t.count,
                std::exp(t.log_sum / t.count), t.worst);
  }
  return 0;
}
