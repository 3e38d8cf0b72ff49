// Google Benchmark suite: ordering, DP, scheduling, replay and end-to-end planning.
// Build with the `bench` preset; see docs/performance.md for the figures and how to rerun.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeplan/cli/cli.hpp"
#include "pipeplan/io/files.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/ordering/mincut_order.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/simulate/simulator.hpp"
#include "synthetic.hpp"

namespace pipeplan::bench {
namespace {

// S single-GPU stages and enough micro-batches for about `tasks` tasks (4 S M of them).
struct Pipeline {
  model::Model model;
  topology::Topology topology;
  std::vector<Stage> stages;
  int micro_batches;
};

Pipeline pipeline(int stages, long tasks) {
  Pipeline p{synthetic_model(stages),
             synthetic_cluster((stages + 7) / 8, 8),
             {},
             static_cast<int>(tasks / (4L * stages))};
  for (int s = 0; s < stages; ++s) p.stages.push_back({s, s, {s}});
  p.model.parameter_memory_factor = 0;  // keep every micro-batch in memory for the big runs
  return p;
}

void BM_Replay(benchmark::State& state) {
  Pipeline p = pipeline(16, state.range(0));
  schedule::Scheduled s = schedule::make_schedule(p.model, p.topology, p.stages, p.micro_batches,
                                                  schedule::Policy::kOneFOneB);
  for (auto _ : state) {
    Timeline t = simulate::replay(p.model, p.topology, p.stages, s.schedule);
    benchmark::DoNotOptimize(t.iteration_ms);
  }
  state.counters["tasks"] = 4.0 * 16 * p.micro_batches - 2.0 * p.micro_batches;
}
BENCHMARK(BM_Replay)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_ListSchedule(benchmark::State& state) {
  Pipeline p = pipeline(16, state.range(0));
  for (auto _ : state) {
    schedule::Scheduled s = schedule::make_schedule(p.model, p.topology, p.stages, p.micro_batches,
                                                    schedule::Policy::kList);
    benchmark::DoNotOptimize(s.iteration_ms);
  }
}
BENCHMARK(BM_ListSchedule)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_MincutOrder(benchmark::State& state) {
  topology::Topology t = synthetic_cluster(static_cast<int>(state.range(0)) / 8, 8);
  for (auto _ : state) benchmark::DoNotOptimize(ordering::mincut_order(t));
}
BENCHMARK(BM_MincutOrder)->Arg(16)->Arg(128)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

void BM_Dp(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0));
  const int gpus = static_cast<int>(state.range(1));
  model::Model m = synthetic_model(layers);
  topology::Topology t = synthetic_cluster(gpus / 8, 8);
  std::vector<int> order = ordering::mincut_order(t);
  const int micro_batches = static_cast<int>(state.range(2));
  for (auto _ : state) benchmark::DoNotOptimize(partition::solve(m, t, order, micro_batches));
}
BENCHMARK(BM_Dp)
    ->Args({48, 16, 16})
    ->Args({96, 32, 16})
    ->Args({200, 128, 64})
    ->Args({200, 256, 64})
    ->Args({1000, 1024, 64})
    ->Args({4000, 4096, 64})
    ->Unit(benchmark::kMillisecond);

// A memory-tight DP: GPT-3 175B as its preset describes it, a replicated optimizer, on 64 DGX
// A100 80GB nodes (512 GPUs), M = 1,536, every degree and recomputation per stage open, as spp
// asks. No stage fits the grid's 128-GPU units, so the DP also runs on narrower units
// (docs/algorithms.md, "Bounded fronts, and narrow runs for memory"): the counters give the
// unit its best solution came from and that solution's estimate.
void BM_DpMemoryTight(benchmark::State& state) {
  const model::TransformerPreset* preset = model::find_transformer_preset("gpt3-175b");
  auto [config, problem] = model::complete_transformer_config(preset->config);
  if (!problem.empty()) throw std::runtime_error(problem);
  const model::Model m = model::transformer_model(config);
  const topology::Topology t = topology::read_topology(
      io::source_from_text(
          "topo.json", R"({"nodes": [{"name": "node", "count": 64, "type": "dgx-a100-80gb"}]})"),
      m.profile_device);
  const std::vector<int> order = ordering::mincut_order(t);
  partition::SolveOptions options;
  options.choices.degrees = {1, 2, 4, 8};
  options.choices.may_recompute = true;
  options.solutions = 8;
  std::vector<partition::Solution> solutions;
  for (auto _ : state)
    solutions = partition::solve_several(m, t, order, 1536, partition::ScheduleModel{}, options);
  if (solutions.empty()) throw std::runtime_error("the DP found no plan");
  state.counters["unit"] = solutions.front().grid_unit;
  state.counters["stages"] = static_cast<double>(solutions.front().stages.size());
  state.counters["estimate_s"] = solutions.front().objective.total_ms / 1e3;
}
BENCHMARK(BM_DpMemoryTight)->Unit(benchmark::kMillisecond);

// What the coarse grid costs in plan quality: the DP's value on the default grid divided by
// its value on the full grid (every layer boundary and GPU position), reported as a counter.
void BM_GridCost(benchmark::State& state) {
  model::Model m = synthetic_model(static_cast<int>(state.range(0)), 7);
  topology::Topology t = synthetic_cluster(static_cast<int>(state.range(1)) / 8, 8);
  std::vector<int> order = ordering::mincut_order(t);
  const int micro_batches = static_cast<int>(state.range(2));
  double coarse = 0, full = 0;
  for (auto _ : state) {
    coarse = partition::solve(m, t, order, micro_batches)->objective.total_ms;
    full = partition::solve(m, t, order, micro_batches, {}, true)->objective.total_ms;
  }
  state.counters["coarse_over_full"] = coarse / full;
}
BENCHMARK(BM_GridCost)
    ->Args({200, 32, 16})
    ->Args({96, 64, 32})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// What the ordering's spanning-tree fallback costs in plan quality, on clusters of 8-GPU
// servers whose measured bandwidths all differ (+-5%): the DP's value on the spanning-tree
// order divided by its value on the order of the cuts alone (no budget), and each order's time.
void BM_OrderFallbackCost(benchmark::State& state) {
  model::Model m = synthetic_model(static_cast<int>(state.range(0)), 11);
  topology::Topology t = synthetic_cluster(static_cast<int>(state.range(1)) / 8, 8, 0.05);
  const int micro_batches = static_cast<int>(state.range(2));
  using Clock = std::chrono::steady_clock;
  double tree = 0, cuts = 0, tree_ms = 0, cuts_ms = 0;
  for (auto _ : state) {
    auto started = Clock::now();
    const std::vector<int> cut_order =
        ordering::mincut_order(t, nullptr, std::numeric_limits<double>::infinity());
    cuts_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    started = Clock::now();
    const std::vector<int> tree_order = ordering::mincut_order(t, nullptr, 0);
    tree_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    cuts = partition::solve(m, t, cut_order, micro_batches)->objective.total_ms;
    tree = partition::solve(m, t, tree_order, micro_batches)->objective.total_ms;
  }
  state.counters["tree_over_cuts"] = tree / cuts;
  state.counters["cuts_ms"] = cuts_ms;
  state.counters["tree_ms"] = tree_ms;
}
BENCHMARK(BM_OrderFallbackCost)
    ->Args({48, 32, 16})
    ->Args({96, 64, 32})
    ->Args({200, 128, 64})
    ->Args({200, 256, 64})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_PlanSpp(benchmark::State& state) {
  model::Model m = synthetic_model(static_cast<int>(state.range(0)));
  topology::Topology t = synthetic_cluster(static_cast<int>(state.range(1)) / 8, 8);
  for (auto _ : state) {
    Plan plan = planners::make_plan("spp", {m, t, 16});
    benchmark::DoNotOptimize(plan.timeline.iteration_ms);
  }
}
BENCHMARK(BM_PlanSpp)->Args({48, 16})->Unit(benchmark::kMillisecond);

// spp end to end on the realistic cost mix (mixed_model: zero-cost layers, 400 MB embeddings,
// 9 ms MLPs) on V100-32GB servers, M = 64.
void BM_PlanSppMixed(benchmark::State& state) {
  model::Model m = mixed_model(static_cast<int>(state.range(0)));
  topology::Topology t =
      synthetic_cluster(static_cast<int>(state.range(1)) / 8, 8, 0, 1, 32.0 * 1024 * 1024 * 1024);
  for (auto _ : state) {
    Plan plan = planners::make_plan("spp", {m, t, static_cast<int>(state.range(2))});
    benchmark::DoNotOptimize(plan.timeline.iteration_ms);
  }
}
BENCHMARK(BM_PlanSppMixed)
    ->Args({48, 16, 16})
    ->Args({1000, 1024, 64})
    ->Unit(benchmark::kMillisecond);

// Spec 9 (issue 32): replaying zb-v with 8,192 micro-batches on 64 devices (two stages each, a
// split backward: 5 x 128 x 8192 tasks). Goal: within 2 s on 2 cores.
void BM_ReplayZbV(benchmark::State& state) {
  const int P = 64;
  const int M = static_cast<int>(state.range(0));
  model::Model m = synthetic_model(2 * P);
  for (model::Layer& layer : m.layers) layer.backward_weight_ms = layer.backward_ms / 2;
  m.parameter_memory_factor = 0;
  const topology::Topology t = synthetic_cluster(P / 8, 8);
  std::vector<Stage> stages(static_cast<std::size_t>(2 * P));
  for (int p = 0; p < P; ++p) {
    for (int c = 0; c < 2; ++c) {
      const int s = schedule::placed_stage(schedule::Policy::kZbV, P, p, c);
      stages[static_cast<std::size_t>(s)] = Stage{s, s, {p}};
    }
  }
  const schedule::Scheduled scheduled = schedule::make_schedule(
      m, t, stages, M, schedule::Policy::kZbV, Optimizer::kReplicated, true);
  for (auto _ : state) {
    Timeline timeline = simulate::replay(m, t, stages, scheduled.schedule);
    benchmark::DoNotOptimize(timeline.iteration_ms);
  }
}
BENCHMARK(BM_ReplayZbV)->Arg(8192)->Iterations(1)->Unit(benchmark::kMillisecond);

// Spec 9.5: spp with --schedule auto on 1,000 layers (with weight gradients) and 1,024 GPUs.
// Goal: within 5 s on 2 cores.
void BM_PlanSppAuto(benchmark::State& state) {
  model::Model m = mixed_model(static_cast<int>(state.range(0)));
  for (model::Layer& layer : m.layers) layer.backward_weight_ms = layer.backward_ms / 2;
  const topology::Topology t =
      synthetic_cluster(static_cast<int>(state.range(1)) / 8, 8, 0, 1, 32.0 * 1024 * 1024 * 1024);
  for (auto _ : state) {
    planners::Request request{m, t, 64};
    request.schedule_auto = true;
    Plan plan = planners::make_plan("spp", request);
    benchmark::DoNotOptimize(plan.timeline.iteration_ms);
  }
}
BENCHMARK(BM_PlanSppAuto)->Args({1000, 1024})->Iterations(1)->Unit(benchmark::kMillisecond);

// Issue 34: a star of N GPUs (every GPU linked only to the first, each link its own bandwidth):
// building the pair costs (a tree of links: one walk per GPU) and planning with spp, whose
// ordering spends its cut budget on the star and orders the rest by spanning tree. Goal: 8,000
// GPUs within 5 s and 1 GiB on 2 cores (the topology reader once refused it after 2e8 steps of
// widest-path search, and took 6 to 13 s before that).
topology::Topology star(int gpus) {
  std::vector<topology::Gpu> all(static_cast<std::size_t>(gpus));
  std::vector<topology::Link> links;
  for (int i = 0; i < gpus; ++i) {
    topology::Gpu& gpu = all[static_cast<std::size_t>(i)];
    gpu.id = std::to_string(100000 + i);  // distinct ids of digits only
    gpu.id.front() = 'g';
    gpu.node = gpu.id;
    gpu.memory_bytes = 80.0 * 1024 * 1024 * 1024;
    if (i > 0) links.push_back({0, i, 1e10 + 1e7 * i, 0.001});
  }
  return topology::Topology::build("star", all, links, "star.json");
}

void BM_StarTopology(benchmark::State& state) {
  for (auto _ : state) {
    topology::Topology t = star(static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(t.size());
  }
}
BENCHMARK(BM_StarTopology)->Arg(8000)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_PlanSppStar(benchmark::State& state) {
  const model::Model m = mixed_model(48);
  for (auto _ : state) {
    const topology::Topology t = star(static_cast<int>(state.range(0)));
    Plan plan = planners::make_plan("spp", {m, t, 32});
    benchmark::DoNotOptimize(plan.timeline.iteration_ms);
  }
}
BENCHMARK(BM_PlanSppStar)->Arg(8000)->Iterations(1)->Unit(benchmark::kMillisecond);

// Issue 33 item 2, clusters of any size: Llama 3.1 405B (126 decoder layers, sequence 8,192)
// on `topology cluster --type dgx-h100 --nodes N` (8 N H100), planned through the command line
// with `--global-batch` (the batch-size search included), as a user runs it: megatron with
// tensor 8 and pipeline 16 (data-parallel the rest), and spp with tensor 8. Goals on 2 cores:
// 16,384 GPUs, megatron within 2 s and spp within 10 s; 131,072 GPUs within 60 s; each within
// 2 GiB (docs/performance.md, "Clusters of any size"). The inputs are written once, outside
// the timing; the plan goes to a file.
const std::string& scale_folder() {
  static const std::string folder = [] {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("pipeplan-bench-scale-" + std::to_string(::getpid())))
                           .string();
    std::filesystem::create_directories(path);
    return path;
  }();
  return folder;
}

int run_cli(const std::vector<std::string>& args) {
  std::istringstream in;
  std::ostringstream out, err;
  const int code = cli::run(args, in, out, err);
  if (code != 0) throw std::runtime_error("pipeplan failed: " + err.str());
  return code;
}

void BM_PlanLlamaCluster(benchmark::State& state) {
  const auto nodes = std::to_string(state.range(0));
  const bool megatron = state.range(1) == 1;
  const std::string folder = scale_folder();
  const std::string model = folder + "/llama.json",
                    topology = folder + "/cluster-" + nodes + ".json";
  run_cli({"--quiet", "model", "transformer", "--preset", "llama3.1-405b", "--sequence", "8192",
           "--gpu", "H100-SXM", "--sequence-parallel", "-o", model});
  run_cli(
      {"--quiet", "topology", "cluster", "--type", "dgx-h100", "--nodes", nodes, "-o", topology});
  const std::string global_batch = std::to_string(state.range(2));
  std::vector<std::string> args{"--quiet",
                                "plan",
                                model,
                                topology,
                                "--global-batch",
                                global_batch,
                                "--tensor-parallel",
                                "8",
                                "-o",
                                folder + "/plan.json"};
  if (megatron) {
    // Without a sharded optimizer no configuration of 16 stages fits 80 GiB (spp chooses it).
    for (const char* arg :
         {"--planner", "megatron", "--pipeline-parallel", "16", "--shard-optimizer"})
      args.emplace_back(arg);
  }
  for (auto _ : state) benchmark::DoNotOptimize(run_cli(args));
}
BENCHMARK(BM_PlanLlamaCluster)
    ->Args({2048, 1, 2048})
    ->Args({2048, 0, 2048})
    ->Args({16384, 1, 8192})
    ->Args({16384, 0, 8192})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipeplan::bench

// BENCHMARK_MAIN, with the allocator set as pipeplan's entry point sets it.
int main(int argc, char** argv) {
  pipeplan::cli::keep_freed_memory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
