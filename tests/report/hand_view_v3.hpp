#pragma once
// Plan views built by hand for the views of spec 9 (a split backward, stages that share GPUs), on
// plans no planner makes yet: stages of one GPU each on `devices` GPUs (stage s on
// `device_of[s]`), a greedy list-scheduling replay of F, I and W (or B) tasks with each device
// running one task at a time, and the figures make_view would give.

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "hand_timeline.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::testing {

/// What a hand-made v3 plan looks like.
struct HandPlanV3 {
  std::vector<int> device_of = {0, 1, 0, 1};  ///< The device (GPU) of each stage, in order.
  int devices = 2;                            ///< GPUs, `n0/gpu0` ...
  int layers_per_stage = 2;
  int micro_batches = 4;
  bool split_backward = true;  ///< I (3 ms) and W (1 ms) instead of B (4 ms).
  bool updates = false;        ///< An optimizer step of 0.25 ms per stage after its last W or B.
  std::string schedule_policy = "list";
};

namespace detail_v3 {

// A task of the replay: op, stage, micro-batch.
using Task = std::tuple<Op, int, int>;

// Run order among ready tasks of one device: backwards first, then forwards, weights last
// (zero-bubble's fillers); then micro-batch, then later stages first.
inline int rank_of(Op op) { return op == Op::kBackwardWeight ? 2 : (op == Op::kForward ? 1 : 0); }

}  // namespace detail_v3

/// The hosts of a hand-made v3 view: `devices` GPUs `n0/gpu0`.. of 80 GB on one node, and the
/// plan's planner ("hand"), policy and split.
inline void hand_v3_hosts(report::PlanView& view, int devices, int micro_batches,
                          const std::string& policy, bool split_backward) {
  view.model_name = "hand";
  view.topology_name = "hosts";
  view.micro_batches = micro_batches;
  for (int g = 0; g < devices; ++g) {
    view.gpu_ids.push_back("n0/gpu" + std::to_string(g));
    view.gpu_nodes.push_back("n0");
    view.memory_bytes.emplace_back(80e9);
  }
  view.plan.planner = "hand";
  view.plan.schedule_policy = policy;
  view.plan.schedule.split_backward = split_backward;
}

/// The view's inputs and stages: GPU names, stages of one GPU each, layer names.
inline void hand_v3_setup(const HandPlanV3& hand, report::PlanView& view) {
  const int S = static_cast<int>(hand.device_of.size());
  const int N = hand.devices;
  hand_v3_hosts(view, N, hand.micro_batches, hand.schedule_policy, hand.split_backward);
  Plan& plan = view.plan;
  for (int s = 0; s < S; ++s) {
    Stage stage;
    stage.first_layer = s * hand.layers_per_stage;
    stage.last_layer = stage.first_layer + hand.layers_per_stage - 1;
    stage.gpus = {hand.device_of[static_cast<std::size_t>(s)]};
    plan.stages.push_back(stage);
  }
  for (int g = 0; g < N; ++g) plan.gpu_order.push_back(g);
  std::vector<std::string> names;
  for (int l = 0; l < S * hand.layers_per_stage; ++l) names.push_back("l" + std::to_string(l));
  view.layer_names = names;
}

/// The replay: ready[task] is when its inputs are there; a device runs the ready task that can
/// start first (ties: rank_of, micro-batch, later stage first). O(T^2) for T tasks.
inline void hand_v3_replay(const HandPlanV3& hand, Plan& plan) {
  using detail_v3::Task;
  const int S = static_cast<int>(hand.device_of.size());
  const int M = hand.micro_batches;
  const int N = hand.devices;
  plan.schedule.micro_batches = M;
  plan.schedule.gpu_order.assign(static_cast<std::size_t>(N), {});
  auto device = [&](int s) { return hand.device_of[static_cast<std::size_t>(s)]; };
  std::map<Task, double> ready, done;
  std::map<Channel, double> channel_free;
  std::vector<double> free(static_cast<std::size_t>(N), 0);
  const Op backward = hand.split_backward ? Op::kBackwardInput : Op::kBackward;
  for (int m = 0; m < M; ++m) ready[{Op::kForward, 0, m}] = 0;
  auto arrive = [&](Task task, TransferKind kind, int boundary, int from_stage, int to_stage,
                    double end) {
    const int from = device(from_stage), to = device(to_stage);
    if (from == to) {  // spec 9.3: no transfer inside a device
      ready[task] = end;
      return;
    }
    double& channel = channel_free[{from, to}];
    const double start = std::max(end, channel);
    channel = start + 0.5;
    const int m = std::get<2>(task);
    plan.timeline.transfers.push_back({from, to, {kind, boundary, m}, 1e6, start, start + 0.5});
    plan.schedule.channel_order[{from, to}].push_back({kind, boundary, m});
    ready[task] = start + 0.5;
  };
  const std::size_t total = static_cast<std::size_t>(S * M * (hand.split_backward ? 3 : 2));
  while (done.size() < total) {
    bool found = false;
    Task best;
    double best_start = 0;
    for (const auto& [task, at] : ready) {
      if (done.count(task)) continue;
      const auto [op, s, m] = task;
      const double start = std::max(at, free[static_cast<std::size_t>(device(s))]);
      const auto key = std::make_tuple(start, device(s), detail_v3::rank_of(op), m, -s);
      const auto [bop, bs, bm] = best;
      if (!found ||
          key < std::make_tuple(best_start, device(bs), detail_v3::rank_of(bop), bm, -bs)) {
        found = true;
        best = task;
        best_start = start;
      }
    }
    const auto [op, s, m] = best;
    const double length = op == Op::kForward         ? 2
                          : op == Op::kBackward      ? 4
                          : op == Op::kBackwardInput ? 3
                                                     : 1;
    const double end = best_start + length;
    const int g = device(s);
    free[static_cast<std::size_t>(g)] = end;
    done[best] = end;
    plan.timeline.compute.push_back({g, {op, s, m}, best_start, end});
    plan.schedule.gpu_order[static_cast<std::size_t>(g)].push_back({op, s, m});
    if (op == Op::kForward) {
      if (s + 1 < S) {
        arrive({Op::kForward, s + 1, m}, TransferKind::kActivation, s, s, s + 1, end);
      } else {
        ready[{backward, s, m}] = end;
      }
    } else if (op != Op::kBackwardWeight) {
      if (op == Op::kBackwardInput) ready[{Op::kBackwardWeight, s, m}] = end;
      if (s > 0) arrive({backward, s - 1, m}, TransferKind::kGradient, s - 1, s, s - 1, end);
    }
  }
  Timeline& timeline = plan.timeline;
  sort_timeline(timeline);
  double iteration = 0;
  for (const auto& e : timeline.compute) iteration = std::max(iteration, e.end_ms);
  for (const auto& e : timeline.transfers) iteration = std::max(iteration, e.end_ms);
  if (hand.updates) {
    for (int s = 0; s < S; ++s) {
      double last = 0;
      for (const auto& e : timeline.compute) {
        if (e.task.stage == s) last = std::max(last, e.end_ms);
      }
      timeline.updates.push_back({s, device(s), last, last + 0.25});
      iteration = std::max(iteration, last + 0.25);
    }
  }
  timeline.iteration_ms = iteration;
  plan.bounds = {iteration / 2, iteration * 0.9};
}

/// The stage, GPU and memory figures: every stage 2 / 4 ms, 1e8 parameter bytes (8e8
/// static), 4e6 stash, 1e6 weight stash; a GPU's static bytes are its stages' sum.
inline void hand_v3_figures(const HandPlanV3& hand, report::PlanView& view) {
  const int S = static_cast<int>(hand.device_of.size());
  const int N = hand.devices;
  auto device = [&](int s) { return hand.device_of[static_cast<std::size_t>(s)]; };
  Timeline& timeline = view.plan.timeline;
  timeline.gpus.assign(static_cast<std::size_t>(N), {});
  report::MemoryFigures memory;
  memory.static_bytes.assign(static_cast<std::size_t>(N), 0);
  for (int s = 0; s < S; ++s) {
    view.stage_figures.push_back({2, 4, 1e8, s + 1 < S ? 1e6 : 0, 0});
    memory.stash_bytes.push_back(4e6);
    memory.transient_bytes.push_back(0);
    memory.weight_stash_bytes.push_back(1e6);
    GpuUsage& usage = timeline.gpus[static_cast<std::size_t>(device(s))];
    usage.stages.push_back(s);
    usage.peak_memory_bytes += 8e8 + 4e6;
    memory.static_bytes[static_cast<std::size_t>(device(s))] += 8e8;
  }
  for (const auto& e : timeline.compute) {
    timeline.gpus[static_cast<std::size_t>(e.gpu)].busy_ms += e.end_ms - e.start_ms;
  }
  view.memory = memory;
  view.group_figures = std::vector<std::vector<report::GroupFigures>>(
      static_cast<std::size_t>(S), std::vector<report::GroupFigures>(1));
}

/// The view of `hand`: forwards 2 ms, I 3 ms, W 1 ms (B 4 ms), transfers 0.5 ms between
/// devices, none between two stages of one device.
inline report::PlanView hand_view_v3(const HandPlanV3& hand) {
  report::PlanView view;
  hand_v3_setup(hand, view);
  hand_v3_replay(hand, view.plan);
  hand_v3_figures(hand, view);
  return view;
}

}  // namespace pipeplan::testing
