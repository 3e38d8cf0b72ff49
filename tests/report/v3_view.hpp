#pragma once
// Plan views of spec 9 built by hand, for tests of the exports before a planner makes them:
// single-GPU devices that may hold several stages, an optional split backward, and per-device
// orders from a small list scheduler (the ready task that can start first; at equal starts the
// backward or I first, then F, then W, lower micro-batch and stage first). F takes 2 ms, B 4 ms
// (I and W 2 ms each), a transfer between devices 0.5 ms on its channel, none inside a device.

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "hand_timeline.hpp"
#include "hand_view_v3.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::testing {

/// What a v3 hand-made plan looks like.
struct V3Plan {
  std::vector<int> device_of_stage = {0, 1, 0, 1};  ///< Stage s runs on GPU device_of_stage[s].
  std::vector<int> layers_per_stage;                ///< Empty: one layer per stage.
  std::vector<std::string> layer_names;             ///< Empty: `l0`, `l1` ...
  int micro_batches = 4;
  bool split_backward = false;
  std::string schedule_policy = "interleaved-1f1b";
};

/// The view's inputs and stages of `hand`: hosts, stages of one GPU each, layer names.
inline void v3_setup(const V3Plan& hand, report::PlanView& view) {
  const int S = static_cast<int>(hand.device_of_stage.size());
  const int N = *std::max_element(hand.device_of_stage.begin(), hand.device_of_stage.end()) + 1;
  hand_v3_hosts(view, N, hand.micro_batches, hand.schedule_policy, hand.split_backward);
  view.plan_file = "plan.json";
  view.model_file = "model.json";
  view.batch_size = 4;
  Plan& plan = view.plan;
  int layer = 0;
  for (int s = 0; s < S; ++s) {
    Stage stage;
    stage.first_layer = layer;
    layer += hand.layers_per_stage.empty() ? 1 : hand.layers_per_stage[static_cast<std::size_t>(s)];
    stage.last_layer = layer - 1;
    stage.gpus = {hand.device_of_stage[static_cast<std::size_t>(s)]};
    plan.stages.push_back(stage);
  }
  for (int g = 0; g < N; ++g) plan.gpu_order.push_back(g);
  std::vector<std::string> names = hand.layer_names;
  for (int l = static_cast<int>(names.size()); l < layer; ++l)
    names.push_back("l" + std::to_string(l));
  view.layer_names = names;
}

/// The replay of `hand` into `plan`: F and B or I 2 ms (B 4 ms), W 2 ms; transfers 0.5 ms
/// between devices; a device runs the ready task that can start first (ties: backward,
/// forward, weight; micro-batch; stage). O(T^2) for T tasks.
inline void v3_replay(const V3Plan& hand, Plan& plan) {
  const int S = static_cast<int>(hand.device_of_stage.size());
  const int M = hand.micro_batches;
  const int N = *std::max_element(hand.device_of_stage.begin(), hand.device_of_stage.end()) + 1;
  // The tasks: 0 = F, 1 = B or I, 2 = W; their ends, and when each one's input arrives.
  const Op backward = hand.split_backward ? Op::kBackwardInput : Op::kBackward;
  constexpr double kUnknown = -1;
  std::map<std::tuple<int, int, int>, double> end;      // (kind, s, m)
  std::map<std::tuple<int, int, int>, double> arrival;  // (kind, s, m): input ready
  std::vector<double> gpu_free(static_cast<std::size_t>(N), 0);
  std::map<Channel, double> channel_free;
  plan.schedule.micro_batches = M;
  plan.schedule.gpu_order.assign(static_cast<std::size_t>(N), {});
  auto gpu = [&](int s) { return hand.device_of_stage[static_cast<std::size_t>(s)]; };
  auto ready_at = [&](int kind, int s, int m) -> double {
    if (end.count({kind, s, m})) return kUnknown;  // done
    if (kind == 0) return s == 0 ? 0 : (arrival.count({0, s, m}) ? arrival[{0, s, m}] : kUnknown);
    if (kind == 2) return end.count({1, s, m}) ? end[{1, s, m}] : kUnknown;
    if (!end.count({0, s, m})) return kUnknown;
    if (s == S - 1) return end[{0, s, m}];
    return arrival.count({1, s, m}) ? std::max(arrival[{1, s, m}], end[{0, s, m}]) : kUnknown;
  };
  const int kinds = hand.split_backward ? 3 : 2;
  const int total = S * M * kinds;
  for (int placed = 0; placed < total; ++placed) {
    // The ready task that can start first (ties: backward, forward, weight; m; s).
    std::tuple<double, int, int, int> best{std::numeric_limits<double>::infinity(), 0, 0, 0};
    for (int s = 0; s < S; ++s) {
      for (int m = 0; m < M; ++m) {
        for (int kind = 0; kind < kinds; ++kind) {
          const double ready = ready_at(kind, s, m);
          if (ready == kUnknown) continue;
          const double start = std::max(ready, gpu_free[static_cast<std::size_t>(gpu(s))]);
          const int rank = kind == 1 ? 0 : kind == 0 ? 1 : 2;
          best = std::min(best, {start, rank * 1000000 + m * 1000 + s, kind, s});
        }
      }
    }
    const auto [start, key, kind, s] = best;
    const int m = (key % 1000000) / 1000;
    const int g = gpu(s);
    const double length = kind == 0 ? 2 : (hand.split_backward ? 2 : 4);
    const Op op = kind == 0 ? Op::kForward : kind == 1 ? backward : Op::kBackwardWeight;
    gpu_free[static_cast<std::size_t>(g)] = start + length;
    end[{kind, s, m}] = start + length;
    plan.schedule.gpu_order[static_cast<std::size_t>(g)].push_back({op, s, m});
    plan.timeline.compute.push_back({g, {op, s, m}, start, start + length});
    // The output to the next stage (F) or the gradient to the previous one (B or I).
    const int to = kind == 0 ? s + 1 : kind == 1 ? s - 1 : -1;
    if (to < 0 || to >= S) continue;
    double arrives = start + length;
    if (gpu(to) != g) {
      const Channel channel{g, gpu(to)};
      const double begin = std::max(arrives, channel_free[channel]);
      const TransferTask task{kind == 0 ? TransferKind::kActivation : TransferKind::kGradient,
                              std::min(s, to), m};
      channel_free[channel] = arrives = begin + 0.5;
      plan.schedule.channel_order[channel].push_back(task);
      plan.timeline.transfers.push_back({g, gpu(to), task, 1e6, begin, arrives});
    }
    arrival[{kind, to, m}] = arrives;
  }
  sort_timeline(plan.timeline);
  plan.timeline.gpus.assign(static_cast<std::size_t>(N), {});
  for (int s = 0; s < S; ++s)
    plan.timeline.gpus[static_cast<std::size_t>(gpu(s))].stages.push_back(s);
  for (const TimedCompute& e : plan.timeline.compute) {
    plan.timeline.gpus[static_cast<std::size_t>(e.gpu)].busy_ms += e.end_ms - e.start_ms;
    plan.timeline.iteration_ms = std::max(plan.timeline.iteration_ms, e.end_ms);
  }
  plan.bounds = {plan.timeline.iteration_ms / 2, plan.timeline.iteration_ms * 0.9};
}

/// The view of `hand`: stages, orders, timeline and GPU usage; no AllReduces (one replica).
inline report::PlanView v3_view(const V3Plan& hand) {
  report::PlanView view;
  v3_setup(hand, view);
  v3_replay(hand, view.plan);
  return view;
}

}  // namespace pipeplan::testing
