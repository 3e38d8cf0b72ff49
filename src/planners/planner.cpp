// The planner table, the limits, the shared last step (schedule, replay, check) and the memory
// rules the baselines share.

#include "pipeplan/planners/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/partition/search.hpp"
#include "pipeplan/planners/baselines.hpp"
#include "pipeplan/planners/choices.hpp"
#include "pipeplan/planners/context_parallel.hpp"
#include "pipeplan/planners/settings_choice.hpp"
#include "pipeplan/schedule/fixed_orders.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/simulate/simulator.hpp"
#include "pipeplan/simulate/task_graph.hpp"

namespace pipeplan::planners {

namespace {

// A large count or time in three significant digits: `1.05e+12`, `3.38e+07`.
std::string count_text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

// The planners' work estimates (`PlannerRow::steps`), for L layers and N GPUs, calibrated so
// that a step takes about the same time in every planner (about 40 ns; measured on the dev
// build: pipedream about 2.5e7 of its L^2 N^2 per second, gpipe about 1.3e8 of its N L^2 per
// second; docs/errors.md, "Limits").
double layer_count(const Request& request) {
  return static_cast<double>(request.model.layers.size());
}

// spp: its DP runs on a grid whose size a fixed budget bounds (docs/performance.md) and its
// ordering is bounded by `ordering::kMaxOrderWork`, so only the pair costs it reads grow with
// the input: every pair's for explicit links, the nodes' for a node-cost topology (its order
// and the DP's worst pairs read them: O(N log N)). Every topology the reader accepts can be
// planned by spp.
double spp_steps(const Request& request) {
  const double L = layer_count(request);
  const double N = request.topology.size();
  if (request.topology.costs_by_node()) return (L * N + N * std::log2(N + 1)) / 4;
  return (N * N + L * N) / 4;
}

// pipedream: its DP's inner loop with its Pareto fronts.
double pipedream_steps(const Request& request) {
  const double L = layer_count(request);
  const double N = request.topology.size();
  return L * L * N * N;
}

// gpipe: its exact min-max split.
double gpipe_steps(const Request& request) {
  const double L = layer_count(request);
  const double N = request.topology.size();
  return N * L * L / 5;
}

// uniform and data-parallel: linear.
double linear_steps(const Request& request) {
  return layer_count(request) + request.topology.size();
}

// spp at each context-parallel degree of the request, the fastest kept (spec 10.4).
Plan spp_plan(const Request& request, schedule::Policy policy) {
  return plan_context_parallel(request, policy, [](const Request& at_one, schedule::Policy p) {
    return plan_spp(at_one, p);
  });
}

// megatron in compare: megatron_configurations at every degree the request allows, each labelled
// `t{T} p{P} d{D}`. O(configurations).
std::vector<CompareVariant> megatron_variants(const Request& request) {
  std::vector<CompareVariant> variants;
  for (Request& fixed : megatron_configurations(request, candidate_degrees(request))) {
    if (megatron_refusal(fixed)) continue;  // a configuration Megatron-LM cannot run
    // Appended piece by piece: `" p" + std::string&&` draws a false -Wrestrict from GCC 12 at
    // -O3 (GCC bug 105329).
    std::string label = "t";
    label += std::to_string(fixed.tensor_parallel.front());
    label += " p";
    label += std::to_string(*fixed.pipeline_parallel);
    label += " d";
    label += std::to_string(*fixed.data_parallel);
    if (fixed.context_parallel.size() == 1 && fixed.context_parallel.front() > 1) {
      label += " c";
      label += std::to_string(fixed.context_parallel.front());
    }
    variants.push_back({std::move(label), std::move(fixed)});
  }
  return variants;
}

// The one list of planners (PlannerRow). The baselines shape their stages by the memory rule of
// the policy that schedules them, so `make_plan` hands them the policy it schedules with.
std::vector<PlannerRow> make_planner_table() {
  using schedule::Policy;
  std::vector<PlannerRow> rows;
  rows.push_back(
      {.name = "spp",
       .description = "the paper's: min-cut GPU order, DP partition and placement, "
                      "list scheduling",
       .default_policy = Policy::kList,
       .compare_policies = {Policy::kList, Policy::kOneFOneB, Policy::kGpipe},
       .compare_uniform = true,
       .steps = spp_steps,
       .plan = spp_plan,
       .baseline = false,
       .options = {"--tensor-parallel", "--context-parallel", "--recompute", "--uniform"},
       .shares_devices = true,
       .chooses_settings = true});
  rows.push_back({.name = "gpipe",
                  .description = "one stage per GPU in input order, layers balanced by compute",
                  .default_policy = Policy::kGpipe,
                  .compare_policies = {Policy::kGpipe},
                  .steps = gpipe_steps,
                  .partition = gpipe_partition,
                  .options = {"--uniform"},  // its plans are uniform: one stage per GPU
                  .seeds_spp = true});
  rows.push_back({.name = "pipedream",
                  .description = "PipeDream's DP minimising the slowest replicated stage, GPUs in "
                                 "input order",
                  .default_policy = Policy::kOneFOneB,
                  .compare_policies = {Policy::kOneFOneB},
                  .steps = pipedream_steps,
                  .partition = pipedream_partition,
                  .options = {"--uniform"},
                  .seeds_spp = true});
  rows.push_back({.name = "uniform",
                  .description = "equal layer counts per stage, one GPU per stage",
                  .default_policy = Policy::kOneFOneB,
                  .compare_policies = {Policy::kOneFOneB},
                  .steps = linear_steps,
                  .partition = uniform_partition,
                  .options = {"--uniform"},
                  .seeds_spp = true});
  rows.push_back({.name = "data-parallel",
                  .description = "one stage of every layer on every GPU",
                  .default_policy = Policy::kOneFOneB,
                  .compare_policies = {Policy::kOneFOneB},
                  .steps = linear_steps,
                  .partition = data_parallel_partition,
                  .options = {"--uniform"},  // one stage: uniform
                  .refuses = data_parallel_refusal,
                  .seeds_spp = true});
  // A configuration the user gives (--tensor-parallel T --pipeline-parallel P): compare runs it
  // in the configurations that use every GPU (megatron_variants), not as a row of its own.
  rows.push_back(
      {.name = "megatron",
       .description = "Megatron-LM's placement for --tensor-parallel T "
                      "--pipeline-parallel P [--data-parallel D]",
       .default_policy = Policy::kOneFOneB,
       .compare_policies = {},
       .compare_variants = megatron_variants,
       .steps = linear_steps,
       .partition = megatron_partition,
       .options = {"--tensor-parallel", "--context-parallel", "--recompute", "--uniform",
                   "--pipeline-parallel", "--data-parallel", "--first-stage-layers",
                   "--last-stage-layers", "--account-for-embedding", "--account-for-loss"},
       .shares_devices = true,
       .refuses = megatron_refusal,
       .task_limit = kMaxPlanTasks});
  return rows;
}

}  // namespace

const std::vector<PlannerRow>& planner_table() {
  static const std::vector<PlannerRow> kTable = make_planner_table();
  return kTable;
}

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> out;
    for (const PlannerRow& row : planner_table()) out.emplace_back(row.name);
    return out;
  }();
  return kNames;
}

std::string planner_names_text() { return io::format_list(planner_names()); }

std::vector<std::string> planners_taking(std::string_view option) {
  std::vector<std::string> out;
  for (const PlannerRow& row : planner_table()) {
    if (std::find(row.options.begin(), row.options.end(), option) != row.options.end()) {
      out.emplace_back(row.name);
    }
  }
  return out;
}

const PlannerRow& find_planner(std::string_view name) {
  for (const PlannerRow& row : planner_table()) {
    if (row.name == name) return row;
  }
  throw UsageError("unknown planner \"" + std::string(name) + "\" (known: " + planner_names_text() +
                   ")");
}

std::vector<schedule::Policy> compare_policies_for(const PlannerRow& row, const Request& request) {
  std::vector<schedule::Policy> out = row.compare_policies;
  if (out.empty()) return out;
  for (const schedule::Policy policy : schedule::all_policies()) {
    if (std::find(out.begin(), out.end(), policy) != out.end()) continue;
    const schedule::PolicyRow& p = schedule::policy_row(policy);
    bool runs = true;  // the policies of spec 5
    if (p.version3) {
      switch (p.device_stages) {
        case schedule::DeviceStages::kOne:
          runs = uses_split_backward(request, policy);
          break;
        case schedule::DeviceStages::kAny:
          runs = row.shares_devices && request.virtual_stages.value_or(1) > 1;
          break;
        case schedule::DeviceStages::kTwo:
          runs = row.shares_devices;
          break;
      }
    }
    if (runs) out.push_back(policy);
  }
  return out;
}

std::vector<CompareVariant> compare_variants(const PlannerRow& row, const Request& request) {
  std::vector<CompareVariant> variants;
  if (row.compare_uniform && !request.uniform) {
    CompareVariant uniform{"--uniform", request};
    uniform.request.uniform = true;
    variants.push_back(std::move(uniform));
  }
  if (row.compare_variants) {
    for (CompareVariant& variant : row.compare_variants(request)) {
      variants.push_back(std::move(variant));
    }
  }
  return variants;
}

double planning_steps(std::string_view planner, const Request& request) {
  return find_planner(planner).steps(request);
}

double scheduling_steps(const topology::Topology& topology, const std::vector<Stage>& stages,
                        int micro_batches) {
  double groups = 0, most_choice = 1;
  for (const Stage& stage : stages) {
    groups += stage.replicas();
    most_choice = std::max(most_choice, schedule::replica_choice_steps(topology, stage));
  }
  const auto tasks = static_cast<double>(simulate::TaskGraph::chain_task_count(
      static_cast<std::int64_t>(stages.size()), micro_batches));
  // The scheduler's O(T (log T + r) + G) (scheduler.cpp): each event dispatches only the groups
  // it touched, so no task scans every group.
  return tasks * (std::log2(std::max(tasks, 2.0)) + most_choice) + groups;
}

std::optional<std::string> schedule_limit_refusal(const topology::Topology& topology,
                                                  const std::vector<Stage>& stages,
                                                  int micro_batches) {
  const int gpus = topology.size();
  const double steps = scheduling_steps(topology, stages, micro_batches);
  if (steps <= kMaxScheduleSteps) return std::nullopt;
  return "cannot schedule " +
         io::format_count(static_cast<std::int64_t>(stages.size()), "stage", "stages") + " with " +
         io::format_count(micro_batches, "micro-batch", "micro-batches") + " on " +
         io::format_count(gpus, "GPU", "GPUs") + ": the scheduler would take about " +
         count_text(steps) +
         " steps (each task's events, and the replicas it may run on), more than its limit of " +
         count_text(kMaxScheduleSteps) +
         "; use fewer stages or micro-batches (see \"Limits\" in docs/errors.md)";
}

void check_schedule_limit(const topology::Topology& topology, const std::vector<Stage>& stages,
                          int micro_batches) {
  if (auto refusal = schedule_limit_refusal(topology, stages, micro_batches)) {
    throw InfeasibleError(*refusal);
  }
}

namespace {

// The narrowest bandwidth and the longest latency over all GPU pairs (infinity and 0 for one
// GPU). O(N^2) over the pairs; O(N) for a node-cost topology, whose pairs take only the
// network's costs (two nodes or more) and those of its nodes of two GPUs or more.
std::pair<double, double> narrowest_and_longest(const topology::Topology& topology) {
  const int N = topology.size();
  double narrowest = std::numeric_limits<double>::infinity(), longest_ms = 0;
  auto count = [&](double bandwidth, double latency_ms) {
    narrowest = std::min(narrowest, bandwidth);
    longest_ms = std::max(longest_ms, latency_ms);
  };
  if (topology.costs_by_node() && N > 1) {
    std::vector<int> gpus_of_node(static_cast<std::size_t>(topology.node_count()), 0);
    for (int g = 0; g < N; ++g) ++gpus_of_node[static_cast<std::size_t>(topology.node_of(g))];
    if (topology.node_count() >= 2) {
      count(topology.network_cost().bandwidth_bytes_per_s, topology.network_cost().latency_ms);
    }
    for (int k = 0; k < topology.node_count(); ++k) {
      if (gpus_of_node[static_cast<std::size_t>(k)] < 2) continue;
      count(topology.node_cost(k).bandwidth_bytes_per_s, topology.node_cost(k).latency_ms);
    }
    return {narrowest, longest_ms};
  }
  for (int u = 0; u < N; ++u) {
    for (int v = u + 1; v < N; ++v) {
      count(topology.bandwidth_bytes_per_s(u, v), topology.latency_ms(u, v));
    }
  }
  return {narrowest, longest_ms};
}

}  // namespace

void check_limits(std::string_view planner, const Request& request) {
  const auto& model = request.model;
  const auto& topology = request.topology;
  const std::size_t L = model.layers.size();
  const int N = topology.size();
  const std::int64_t M = request.micro_batches;
  const PlannerRow& row = find_planner(planner);
  const std::string hint = " (see \"Limits\" in docs/errors.md)";
  if (L > static_cast<std::size_t>(kMaxPlanLayers)) {
    throw InfeasibleError("cannot plan " + std::to_string(L) +
                          " layers: the planners handle at most " + std::to_string(kMaxPlanLayers) +
                          "; merge layers in the profile" + hint);
  }
  if (M < 1) throw InternalError("check_limits: micro_batches must be >= 1");
  // The smallest plan, one stage, has a forward and a backward per micro-batch.
  if (const std::int64_t one_stage = simulate::TaskGraph::chain_task_count(1, M);
      one_stage > row.task_limit) {
    throw InfeasibleError("cannot plan " + std::to_string(M) +
                          " micro-batches: even one stage makes " + std::to_string(one_stage) +
                          " tasks, and a plan may have at most " + std::to_string(row.task_limit) +
                          hint);
  }
  const std::string shape = io::format_count(static_cast<std::int64_t>(L), "layer", "layers") +
                            " on " + io::format_count(N, "GPU", "GPUs") + " with " +
                            io::format_count(M, "micro-batch", "micro-batches");
  const double steps = row.steps(request);
  if (steps > kMaxPlanSteps) {
    throw InfeasibleError("cannot plan " + shape + ": the " + std::string(row.name) +
                          " planner would take about " + count_text(steps) +
                          " steps, more than its limit of " + count_text(kMaxPlanSteps) +
                          "; use fewer layers, GPUs or micro-batches" + hint);
  }
  // Times: all the work in series on the slowest GPU, every boundary transfer over the
  // narrowest pair, and the AllReduce of every parameter. Below kMaxPlanTimeMs, every sum the
  // execution model and the planners form stays finite.
  double work_ms = 0, activation_bytes = 0, parameter_bytes = 0;
  for (const model::Layer& layer : model.layers) {
    // The optimizer step too: once per iteration, not per micro-batch (spec 8.3).
    work_ms += layer.forward_ms + layer.backward_ms + layer.update_ms / static_cast<double>(M);
    activation_bytes += layer.activation_bytes;
    parameter_bytes += layer.parameter_bytes;
  }
  double slowest = std::numeric_limits<double>::infinity();
  for (const topology::Gpu& gpu : topology.gpus()) slowest = std::min(slowest, gpu.speed);
  const auto [narrowest, longest_ms] = narrowest_and_longest(topology);
  const auto micro_batches = static_cast<double>(M);
  double serial_ms = micro_batches * work_ms / slowest;
  if (N > 1) {
    serial_ms += 2 * micro_batches *
                     (activation_bytes / narrowest * 1e3 + static_cast<double>(L) * longest_ms) +
                 2 * (parameter_bytes / narrowest * 1e3 + N * longest_ms);
  }
  if (!(serial_ms <= kMaxPlanTimeMs)) {
    throw InfeasibleError(
        "cannot plan: an iteration could take up to " + count_text(serial_ms) +
        " ms (all work in series on the slowest GPU and the narrowest link), beyond the "
        "planners' range of " +
        count_text(kMaxPlanTimeMs) +
        " ms; check the model's times and the topology's speeds and bandwidths" + hint);
  }
}

std::optional<std::string> task_limit_refusal(std::size_t stages, int micro_batches,
                                              bool split_backward, std::int64_t limit) {
  const auto S = static_cast<std::int64_t>(stages);
  const std::int64_t M = micro_batches;
  const std::int64_t tasks = simulate::TaskGraph::chain_task_count(S, M, split_backward);
  if (tasks <= limit) return std::nullopt;
  return "cannot schedule " + std::to_string(S) + " stages with " + std::to_string(M) +
         " micro-batches: that makes " + std::to_string(tasks) +
         " tasks, and a plan may have at most " + std::to_string(limit) +
         "; use fewer micro-batches (see \"Limits\" in docs/errors.md)";
}

void check_task_limit(std::size_t stages, int micro_batches, std::int64_t limit) {
  if (auto refusal = task_limit_refusal(stages, micro_batches, false, limit)) {
    throw InfeasibleError(*refusal);
  }
}

std::int64_t plan_task_limit(std::string_view planner) {
  for (const PlannerRow& row : planner_table()) {
    if (row.name == planner) return row.task_limit;
  }
  return kMaxSearchTasks;
}

Request with_inputs(const Request& request, const model::Model& model,
                    const topology::Topology& topology) {
  return Request{.model = model,
                 .topology = topology,
                 .micro_batches = request.micro_batches,
                 .optimizer = request.optimizer,
                 .recompute = request.recompute,
                 .tensor_parallel = request.tensor_parallel,
                 .uniform = request.uniform,
                 .pipeline_parallel = request.pipeline_parallel,
                 .data_parallel = request.data_parallel,
                 .split_backward = request.split_backward,
                 .virtual_stages = request.virtual_stages,
                 .context_parallel = request.context_parallel,
                 .list_rule = request.list_rule,
                 .schedule_auto = request.schedule_auto,
                 .clock = request.clock};
}

int virtual_stages_of(const Request& request, schedule::Policy policy) {
  return request.virtual_stages.value_or(policy == schedule::Policy::kZbV ? 2 : 1);
}

schedule::Policy default_policy_for(std::string_view planner, const Request& request) {
  const schedule::Policy policy = find_planner(planner).default_policy;
  const bool one = schedule::policy_row(policy).device_stages == schedule::DeviceStages::kOne;
  return one && request.virtual_stages.value_or(1) > 1 ? schedule::Policy::kInterleaved1F1B
                                                       : policy;
}

bool uses_split_backward(const Request& request, schedule::Policy policy) {
  return request.split_backward == SplitBackward::kAuto && schedule::policy_row(policy).splits &&
         model::has_weight_gradients(request.model);
}

Finished try_finish_plan(std::string planner, const Partition& partition, const Request& request,
                         schedule::Policy policy) {
  const std::int64_t limit = plan_task_limit(planner);
  return try_finish_plan(std::move(planner), partition, request, policy, limit);
}

namespace {

// `try_finish_plan`'s work with the replay listing `listing`; the bounds only with the tasks
// listed (a candidate's are computed when it is completed).
Finished attempt_plan(std::string planner, const Partition& partition, const Request& request,
                      schedule::Policy policy, std::int64_t task_limit, simulate::Listing listing) {
  const PhaseTimer timer(request.clock, "scheduling");
  simulate::check_stages(request.model, request.topology, partition.stages);
  // A partition the policy cannot run (Megatron-LM's micro-batch groups, a one-stage policy on
  // shared devices) is "no plan" for a search's candidate; finish_plan makes it a usage error.
  if (auto refusal = schedule::policy_refusal(policy, partition.stages, request.micro_batches)) {
    return {std::nullopt, std::move(*refusal)};
  }
  const bool split = uses_split_backward(request, policy);
  if (auto refusal =
          task_limit_refusal(partition.stages.size(), request.micro_batches, split, task_limit)) {
    return {std::nullopt, std::move(*refusal)};
  }
  if (auto refusal =
          schedule_limit_refusal(request.topology, partition.stages, request.micro_batches)) {
    return {std::nullopt, std::move(*refusal)};
  }
  schedule::ScheduleAttempt scheduled = schedule::try_make_schedule(
      request.model, request.topology, partition.stages, request.micro_batches, policy,
      request.optimizer, split, request.list_rule);
  if (!scheduled.scheduled) return {std::nullopt, std::move(scheduled.refusal)};
  Plan plan;
  plan.planner = std::move(planner);
  plan.schedule_policy = std::string(schedule::policy_name(policy));
  plan.gpu_order = partition.gpu_order;
  plan.stages = partition.stages;
  plan.optimizer = request.optimizer;
  try {
    plan.timeline = simulate::replay(request.model, request.topology, plan.stages,
                                     scheduled.scheduled->schedule, request.optimizer, listing);
  } catch (const simulate::ScheduleError& error) {
    throw InternalError(std::string("the ") + plan.schedule_policy +
                        " scheduler made an invalid schedule: " + error.what());
  }
  plan.schedule = std::move(scheduled.scheduled->schedule);
  if (auto violation = simulate::memory_violation(request.topology, plan.timeline)) {
    return {std::nullopt, "the " + plan.schedule_policy + " schedule of the " + plan.planner +
                              " plan does not fit in memory: " + *violation};
  }
  if (listing == simulate::Listing::kTasks) {
    plan.bounds = simulate::compute_bounds(request.model, request.topology, plan.stages,
                                           request.micro_batches, request.optimizer, split);
  }
  return {std::move(plan), {}};
}

}  // namespace

Finished try_finish_plan(std::string planner, const Partition& partition, const Request& request,
                         schedule::Policy policy, std::int64_t task_limit) {
  return attempt_plan(std::move(planner), partition, request, policy, task_limit,
                      simulate::Listing::kTasks);
}

Candidate try_candidate_plan(std::string planner, const Partition& partition,
                             const Request& request, schedule::Policy policy) {
  const std::int64_t limit = plan_task_limit(planner);
  return try_candidate_plan(std::move(planner), partition, request, policy, limit);
}

Candidate try_candidate_plan(std::string planner, const Partition& partition,
                             const Request& request, schedule::Policy policy,
                             std::int64_t task_limit) {
  Finished made = attempt_plan(std::move(planner), partition, request, policy, task_limit,
                               simulate::Listing::kTimesOnly);
  return {std::move(made.plan), std::move(made.refusal)};
}

Plan complete_plan(Plan sketch, const Request& request) {
  // A complete plan lists its tasks (at least one forward): nothing to add.
  if (!sketch.timeline.compute.empty()) return sketch;
  const PhaseTimer timer(request.clock, "scheduling");
  // The same schedule replayed again gives the same times, now with the tasks listed.
  sketch.timeline = simulate::replay(request.model, request.topology, sketch.stages,
                                     sketch.schedule, request.optimizer);
  sketch.bounds = simulate::compute_bounds(request.model, request.topology, sketch.stages,
                                           request.micro_batches, request.optimizer,
                                           sketch.schedule.split_backward);
  return sketch;
}

Plan finish_plan(std::string planner, const Partition& partition, const Request& request,
                 schedule::Policy policy) {
  // What the user's configuration cannot run under the policy they named: exit 3, naming it.
  if (auto refusal = schedule::policy_refusal(policy, partition.stages, request.micro_batches)) {
    throw simulate::ScheduleError(*refusal);
  }
  Finished finished = try_finish_plan(std::move(planner), partition, request, policy);
  if (!finished.plan) throw InfeasibleError(finished.refusal);
  return std::move(*finished.plan);
}

schedule::Policy default_policy(std::string_view planner) {
  return find_planner(planner).default_policy;
}

namespace {

// A planner that places one stage per GPU cannot run several per device: a usage error naming
// the option that asks for them (`--virtual-stages`, or `--schedule zb-v`) and the planners that
// take it. O(planners).
void check_shares_devices(const PlannerRow& row, const Request& request, schedule::Policy policy) {
  const int V = virtual_stages_of(request, policy);
  if (row.shares_devices || V == 1) return;
  std::vector<std::string> takers;
  for (const PlannerRow& other : planner_table()) {
    if (other.shares_devices) takers.emplace_back(other.name);
  }
  const std::string option = request.virtual_stages
                                 ? "--virtual-stages " + std::to_string(V)
                                 : "--schedule " + std::string(schedule::policy_name(policy));
  throw UsageError(option + " places " + std::to_string(V) + " stages on each device, but the " +
                   std::string(row.name) + " planner places one stage per GPU; the " +
                   io::format_list(takers, " and ") + " planners place several");
}

// A policy of a fixed number of stages per device other than one (zb-v's two, in a V) given
// another `--virtual-stages`: a usage error (spec 9.5, "zb-v needs 2"), before the placement
// would make a device of the wrong shape.
void check_fixed_device_stages(const Request& request, schedule::Policy policy) {
  if (schedule::policy_row(policy).device_stages != schedule::DeviceStages::kTwo) return;
  if (!request.virtual_stages || *request.virtual_stages == 2) return;
  throw UsageError(
      "--virtual-stages " + std::to_string(*request.virtual_stages) + ": --schedule " +
      std::string(schedule::policy_name(policy)) +
      " runs two stages per device, in a V (give --virtual-stages 2, or leave it out)");
}

}  // namespace

Plan make_plan(std::string_view name, const Request& request,
               std::optional<schedule::Policy> policy) {
  const PlannerRow& row = find_planner(name);
  const schedule::Policy chosen = policy.value_or(default_policy_for(name, request));
  check_limits(row.name, request);
  check_fixed_device_stages(request, chosen);
  check_shares_devices(row, request, chosen);
  if (auto why = refusal(name, request)) throw UsageError(*why);
  // The settings the request leaves open (spp's knob search) or changes (a description's fixed
  // flags), each a whole plan of the row; settings_choice.hpp.
  Request settings = request;
  settings.choose_settings = request.choose_settings && row.chooses_settings;
  const auto plan_at = [&](const Request& at) {
    return plan_choosing_settings(
        at, std::string(row.name), chosen, [&row](const Request& asked, schedule::Policy under) {
          return row.plan ? row.plan(asked, under)
                          : finish_plan(std::string(row.name), row.partition(asked, under), asked,
                                        under);
        });
  };
  // A planner that chooses its settings chooses the context-parallel degree of a list as one of
  // them: everything else searched at each degree the model allows (context_parallel.hpp; one
  // degree the model refuses is refused before any search).
  Plan plan = row.chooses_settings && !settings.context_parallel.empty()
                  ? plan_each_context_degree(settings, plan_at)
                  : plan_at(settings);
  if (request.uniform &&
      (!is_uniform(plan.stages) ||
       !partition::shares_equally(request.micro_batches, plan.stages.front().replicas()))) {
    throw InternalError("the " + std::string(row.name) +
                        " planner made a plan that is not uniform under --uniform");
  }
  return plan;
}

double estimate_for_planner(std::string_view name, const Request& request,
                            schedule::Policy policy) {
  if (!request.choose_settings || !find_planner(name).chooses_settings) {
    return estimate_iteration_ms(request, policy);
  }
  double best = std::numeric_limits<double>::infinity();
  for (const SettingsCandidate& candidate : settings_candidates(request)) {
    const model::Model model = request.model.transformer
                                   ? model::transformer_variant(request.model, candidate.settings)
                                   : request.model;
    Request each = with_inputs(request, model, request.topology);
    each.optimizer = candidate.optimizer;
    best = std::min(best, estimate_iteration_ms(each, policy));
  }
  return best;
}

std::optional<std::string> refusal(std::string_view name, const Request& request) {
  const PlannerRow& row = find_planner(name);
  return row.refuses ? row.refuses(request) : std::nullopt;
}

bool is_uniform(const std::vector<Stage>& stages) {
  return std::all_of(stages.begin(), stages.end(), [&](const Stage& stage) {
    return stage.replicas() == stages.front().replicas() &&
           stage.tensor_parallel == stages.front().tensor_parallel;
  });
}

long peak_stashes(const std::vector<Stage>& stages, int s, int micro_batches,
                  schedule::Policy policy) {
  const long r = stages[static_cast<std::size_t>(s)].replicas();
  const long warmup = schedule::one_f_one_b_warmup(stages, s, micro_batches);
  return schedule::stashes_per_replica(policy, micro_batches, r, warmup);
}

namespace {

// ` + a framework reserve of 2 GiB` when the model has one (Model::reserve_bytes), else nothing.
std::string reserve_words(const model::Model& model) {
  if (model.reserve_bytes <= 0) return {};
  return " + a framework reserve of " + io::format_bytes(model.reserve_bytes);
}

// A stage's sums at degree 1: its parameters and stash, and its largest backward working set.
struct StageBytes {
  double parameters = 0, stash = 0, working = 0;
};

StageBytes stage_bytes(const model::Model& model, const Stage& stage) {
  StageBytes sums;
  for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
    const model::Layer& layer = model.layers[static_cast<std::size_t>(l)];
    sums.parameters += layer.parameter_bytes;
    sums.stash += layer.stash_bytes;
    sums.working = std::max(sums.working, layer.backward_working_bytes);
  }
  return sums;
}

// ` + a backward working set of 15.66 GiB` when `bytes` is above 0, else nothing.
std::string working_words(double bytes) {
  return bytes > 0 ? " + a backward working set of " + io::format_bytes(bytes) : std::string();
}

// The GPU of `stage` that holds the fewest stashes beside its static bytes (ties: the first in
// the stage's order), and how many it holds, at most `limit`.
std::pair<int, long> tightest_gpu(const model::Model& model, const topology::Topology& topology,
                                  const Stage& stage, long limit) {
  const StageBytes sums = stage_bytes(model, stage);
  const double static_bytes =
      model.parameter_memory_factor * sums.parameters + sums.working + model.reserve_bytes;
  int tightest = stage.gpus.front();
  long fewest = limit;
  for (int g : stage.gpus) {
    const long fit =
        simulate::max_in_flight(static_bytes, sums.stash, topology.gpu(g).memory_bytes, limit);
    if (fit < fewest) {
      fewest = fit;
      tightest = g;
    }
  }
  return {tightest, fewest};
}

}  // namespace

bool stage_fits(const model::Model& model, const topology::Topology& topology, const Stage& stage,
                long stashes) {
  return tightest_gpu(model, topology, stage, stashes).second >= stashes;
}

std::optional<std::string> memory_shortfall(const model::Model& model,
                                            const topology::Topology& topology, const Stage& stage,
                                            int s, long stashes) {
  const auto [gpu, fit] = tightest_gpu(model, topology, stage, stashes);
  if (fit >= stashes) return std::nullopt;
  const StageBytes sums = stage_bytes(model, stage);
  const double need = model.parameter_memory_factor * sums.parameters +
                      static_cast<double>(stashes) * sums.stash + sums.working +
                      model.reserve_bytes;
  const std::string layers =
      stage.first_layer == stage.last_layer
          ? "layer " + std::to_string(stage.first_layer)
          : "layers " + std::to_string(stage.first_layer) + "-" + std::to_string(stage.last_layer);
  return "stage " + std::to_string(s) + " (" + layers + ") needs " + io::format_bytes(need) + " (" +
         io::format_number(model.parameter_memory_factor) + " x parameters + " +
         std::to_string(stashes) + (stashes == 1 ? " stash" : " stashes") +
         working_words(sums.working) + reserve_words(model) + ") but GPU \"" +
         topology.gpu(gpu).id + "\" has " + io::format_bytes(*topology.gpu(gpu).memory_bytes);
}

std::string infeasibility_message(const Request& request) {
  return "no placement fits in GPU memory: " + infeasibility_reason(request);
}

namespace {

// "there are 16" or "there is 1" (GPUs, or a reduced problem's groups). O(1).
std::string there_are(int gpus) {
  return gpus == 1 ? std::string("there is 1") : "there are " + std::to_string(gpus);
}

// Spec 8: with tensor parallelism or recomputation allowed, the reason reads the best choice
// for each layer and for the packing, not one GPU per stage without recomputation. Nothing for
// a request whose only choice is section 3's.
std::optional<std::string> infeasibility_reason_v2(const Request& request) {
  const partition::StageChoices choices = stage_choices(request);
  std::vector<bool> recompute{false};
  if (choices.must_recompute) recompute = {true};
  if (choices.may_recompute) recompute = {false, true};
  if (choices.degrees == std::vector<int>{1} && recompute == std::vector<bool>{false}) {
    return std::nullopt;
  }
  const model::Model& model = request.model;
  const topology::Topology& topology = request.topology;
  std::vector<int> order(static_cast<std::size_t>(topology.size()));
  std::iota(order.begin(), order.end(), 0);
  int fewest = -1, best_t = 1;
  bool best_recompute = false;
  for (const int t : choices.degrees) {
    for (const bool again : recompute) {
      int needed = 0;
      partition::greedy_packing(model, topology, order, 1, std::numeric_limits<int>::max(), &needed,
                                partition::Packing{t, again});
      if (needed > 0 && (fewest < 0 || needed < fewest)) {
        fewest = needed;
        best_t = t;
        best_recompute = again;
      }
    }
  }
  const std::string how = "at tensor-parallel degree " + std::to_string(best_t) +
                          (best_recompute ? " with recomputation" : " without recomputation");
  if (fewest < 0) {
    return std::string(
               "some layer fits on no group of GPUs at any tensor-parallel degree and "
               "recomputation allowed (") +
           (request.tensor_parallel.empty() ? "every degree the model lists"
                                            : "--tensor-parallel") +
           "); a larger GPU, a smaller micro-batch or --shard-optimizer with replicas may fit";
  }
  if (fewest > topology.size()) {
    return "packed in order with one micro-batch in flight, the layers need " +
           std::to_string(fewest) + " GPUs " + how + " (the choice that needs the fewest) and " +
           there_are(topology.size()) +
           (request.optimizer == Optimizer::kReplicated
                ? "; --shard-optimizer divides the optimizer state among a stage's replicas"
                : "");
  }
  return std::nullopt;
}

}  // namespace

std::string infeasibility_reason(const Request& request) {
  if (auto reason = infeasibility_reason_v2(request)) return *reason;
  const auto& model = request.model;
  const auto& topology = request.topology;
  double largest = 0;
  std::string largest_gpu;
  double total_memory = 0;
  bool unlimited = false;
  for (const auto& gpu : topology.gpus()) {
    if (!gpu.memory_bytes) {
      unlimited = true;
      continue;
    }
    total_memory += *gpu.memory_bytes;
    // The first GPU counts as the largest so far even with 0 bytes: the message names a GPU.
    if (largest_gpu.empty() || *gpu.memory_bytes > largest) {
      largest = *gpu.memory_bytes;
      largest_gpu = gpu.id;
    }
  }
  double worst = 0;
  std::size_t worst_layer = 0;
  double static_total = 0;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const auto& layer = model.layers[l];
    const double need = model.parameter_memory_factor * layer.parameter_bytes + layer.stash_bytes +
                        layer.backward_working_bytes + model.reserve_bytes;
    static_total += model.parameter_memory_factor * layer.parameter_bytes + layer.stash_bytes;
    if (need > worst) {
      worst = need;
      worst_layer = l;
    }
  }
  const std::string layer_name = model.layers[worst_layer].name.empty()
                                     ? "layer " + std::to_string(worst_layer)
                                     : "layer " + std::to_string(worst_layer) + " (\"" +
                                           model.layers[worst_layer].name + "\")";
  if (!unlimited && worst > largest) {
    return layer_name + " alone needs " + io::format_bytes(worst) + " (" +
           io::format_number(model.parameter_memory_factor) + " x parameters + one stash" +
           working_words(model.layers[worst_layer].backward_working_bytes) + reserve_words(model) +
           ") but the largest GPU, \"" + largest_gpu + "\", has " + io::format_bytes(largest);
  }
  // Packed in input order, one stage per GPU, each GPU holding as many layers as fit beside
  // one stash (optimal for contiguous packing along an order): how many GPUs that takes.
  std::vector<int> order(static_cast<std::size_t>(topology.size()));
  std::iota(order.begin(), order.end(), 0);
  int needed = 0;
  partition::greedy_packing(model, topology, order, 1, std::numeric_limits<int>::max(), &needed);
  if (!unlimited && needed > topology.size()) {
    return "packed in order with one micro-batch in flight (" +
           io::format_number(model.parameter_memory_factor) +
           " x parameters + one stash per layer, " + io::format_bytes(static_total) +
           " in all), the layers need " + std::to_string(needed) + " GPUs and " +
           there_are(topology.size()) + " (" + io::format_bytes(total_memory) + " in total)";
  }
  return "the model needs at least " + io::format_bytes(static_total) + " (" +
         io::format_number(model.parameter_memory_factor) +
         " x parameters + one stash per layer) spread over contiguous runs of GPUs; the " +
         std::to_string(topology.size()) + " GPUs have " + io::format_bytes(total_memory) +
         (unlimited ? " plus unlimited ones that cannot take the rest in order" : " in total");
}

}  // namespace pipeplan::planners
