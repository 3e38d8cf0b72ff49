#pragma once
// Plan views built by hand, for tests of the exports on plans that no planner makes yet (spec
// 8.2: tensor-parallel groups, recomputation, a sharded optimizer, optimizer steps): the stages,
// per-GPU orders (1F1B per replica, micro-batch m on replica m mod r), a timeline from a small
// event replay of those orders, and the figures make_view would give.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "hand_timeline.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::testing {

/// What a hand-made plan looks like.
struct HandPlan {
  std::vector<int> layers_per_stage = {2, 2};  ///< Layers of each stage, in order.
  std::vector<int> replicas = {1, 1};          ///< r per stage.
  std::vector<int> degrees = {1, 1};           ///< t per stage.
  std::vector<bool> recompute = {false, false};
  int micro_batches = 4;
  Optimizer optimizer = Optimizer::kReplicated;
  bool updates = false;                  ///< Whether stages run optimizer steps.
  std::vector<std::string> layer_names;  ///< Empty: `l0`, `l1` ...
  int gpus_per_node = 4;                 ///< Hosts `n0`, `n1` ... with GPUs `nK/gpuJ`.
  int spare_gpus = 0;                    ///< Unused GPUs after the used ones.
  std::vector<int> gpu_permutation;      ///< Empty: GPUs in topology order; else stage GPUs
                                         ///< taken in this order of topology indices.
  std::string schedule_policy = "1f1b";
  bool swap_replica_order = false;  ///< Replica 1 of stage 0 runs its first two forwards swapped.
  bool cross_replicas = false;      ///< Micro-batch 0 runs on replica 1 of the last stage.
};

/// 1F1B order of `micro_batches` (global ids) on one GPU of stage `s` of `S` (warm-up S - s).
inline std::vector<ComputeTask> one_f_one_b(const std::vector<int>& micro_batches, int s, int S) {
  std::vector<ComputeTask> out;
  const std::size_t warm = std::min(micro_batches.size(), static_cast<std::size_t>(S - s));
  std::size_t f = 0, b = 0;
  for (; f < warm; ++f) out.push_back({Op::kForward, s, micro_batches[f]});
  while (b < micro_batches.size()) {
    out.push_back({Op::kBackward, s, micro_batches[b++]});
    if (f < micro_batches.size()) out.push_back({Op::kForward, s, micro_batches[f++]});
  }
  return out;
}

/// The replica that runs micro-batch m on stage s in `hand`: m mod r, but for the crossed
/// first two micro-batches of the last stage where `cross_replicas` asks.
inline int hand_replica(const HandPlan& hand, const Plan& plan, int s, int m) {
  const int S = static_cast<int>(plan.stages.size());
  const int r = plan.stages[static_cast<std::size_t>(s)].replicas();
  if (hand.cross_replicas && s == S - 1 && m == 0 && r > 1) return 1;
  if (hand.cross_replicas && s == S - 1 && m == 1 && r > 1) return 0;
  return m % r;
}

/// The view's inputs and stages: GPUs, names, stages and their GPUs, layer names.
inline void hand_setup(const HandPlan& hand, report::PlanView& view) {
  const int S = static_cast<int>(hand.layers_per_stage.size());
  const int M = hand.micro_batches;
  int used = 0;
  for (int s = 0; s < S; ++s) {
    used += hand.replicas[static_cast<std::size_t>(s)] * hand.degrees[static_cast<std::size_t>(s)];
  }
  const int N = used + hand.spare_gpus;
  view.model_name = "hand";
  view.topology_name = "hosts";
  view.plan_file = "plan.json";
  view.model_file = "model.json";
  view.micro_batches = M;
  view.batch_size = 4;
  for (int g = 0; g < N; ++g) {
    const std::string node = "n" + std::to_string(g / hand.gpus_per_node);
    view.gpu_ids.push_back(node + "/gpu" + std::to_string(g % hand.gpus_per_node));
    view.gpu_nodes.push_back(node);
    view.memory_bytes.emplace_back(80e9);
  }
  Plan& plan = view.plan;
  plan.planner = "hand";
  plan.schedule_policy = hand.schedule_policy;
  plan.optimizer = hand.optimizer;
  int layer = 0, next_gpu = 0;
  for (int s = 0; s < S; ++s) {
    Stage stage;
    stage.first_layer = layer;
    layer += hand.layers_per_stage[static_cast<std::size_t>(s)];
    stage.last_layer = layer - 1;
    stage.tensor_parallel = hand.degrees[static_cast<std::size_t>(s)];
    stage.recompute = hand.recompute[static_cast<std::size_t>(s)];
    for (int k = 0; k < hand.replicas[static_cast<std::size_t>(s)] * stage.tensor_parallel; ++k) {
      const int g = next_gpu++;
      stage.gpus.push_back(
          hand.gpu_permutation.empty() ? g : hand.gpu_permutation[static_cast<std::size_t>(g)]);
    }
    plan.stages.push_back(stage);
  }
  for (int g = 0; g < N; ++g) plan.gpu_order.push_back(g);
  std::vector<std::string> names = hand.layer_names;
  for (int l = static_cast<int>(names.size()); l < layer; ++l) {
    names.push_back("l" + std::to_string(l));
  }
  view.layer_names = names;
}

/// The per-GPU orders of `hand`.
inline void hand_orders(const HandPlan& hand, Plan& plan) {
  const int S = static_cast<int>(plan.stages.size());
  const int M = hand.micro_batches;
  const int N = static_cast<int>(plan.gpu_order.size());
  // Orders: replica m mod r, 1F1B on each replica's micro-batches.
  plan.schedule.micro_batches = M;
  plan.schedule.gpu_order.assign(static_cast<std::size_t>(N), {});
  for (int s = 0; s < S; ++s) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(s)];
    for (int i = 0; i < stage.replicas(); ++i) {
      std::vector<int> mine;
      for (int m = 0; m < M; ++m) {
        if (hand_replica(hand, plan, s, m) == i) mine.push_back(m);
      }
      auto order = one_f_one_b(mine, s, S);
      if (hand.swap_replica_order && s == 0 && i == 1 && order.size() > 1) {
        std::swap(order[0], order[1]);
      }
      plan.schedule.gpu_order[static_cast<std::size_t>(stage.leader(i))] = order;
    }
  }
}

/// Replays the orders into the timeline's compute and transfers; returns each backward's end.
inline std::vector<std::vector<double>> hand_replay(const HandPlan& hand, Plan& plan) {
  const int S = static_cast<int>(plan.stages.size());
  const int M = hand.micro_batches;
  const int N = static_cast<int>(plan.gpu_order.size());
  // Replay: each leader runs its order; a task waits for its data predecessor and a transfer
  // between leaders of 0.5 ms. O(T^2) sweeps, fine for a handful of tasks.
  auto leader_of = [&](int s, int m) {
    return plan.stages[static_cast<std::size_t>(s)].leader(hand_replica(hand, plan, s, m));
  };
  std::vector<double> gpu_free(static_cast<std::size_t>(N), 0);
  std::vector<std::size_t> next(static_cast<std::size_t>(N), 0);
  std::vector<std::vector<double>> f_end(static_cast<std::size_t>(S), std::vector<double>(M, -1));
  std::vector<std::vector<double>> b_end = f_end;
  std::map<Channel, double> channel_free;
  Timeline& timeline = plan.timeline;
  auto transfer = [&](TransferKind kind, int boundary, int m, int from, int to, double ready) {
    double& free = channel_free[{from, to}];
    const double start = std::max(ready, free);
    free = start + 0.5;
    timeline.transfers.push_back({from, to, {kind, boundary, m}, 1e6, start, start + 0.5});
    plan.schedule.channel_order[{from, to}].push_back({kind, boundary, m});
    return start + 0.5;
  };
  std::map<std::pair<int, int>, double> arrival;  // (stage, m) forward input / backward input
  std::map<std::pair<int, int>, double> gradient;
  for (bool progress = true; progress;) {
    progress = false;
    for (int g = 0; g < N; ++g) {
      auto& order = plan.schedule.gpu_order[static_cast<std::size_t>(g)];
      while (next[static_cast<std::size_t>(g)] < order.size()) {
        const ComputeTask task = order[next[static_cast<std::size_t>(g)]];
        const int s = task.stage, m = task.micro_batch;
        double ready = 0;
        if (task.op == Op::kForward && s > 0) {
          if (!arrival.count({s, m})) break;
          ready = arrival[{s, m}];
        }
        if (task.op == Op::kBackward) {
          if (s == S - 1) {
            if (f_end[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)] < 0) break;
          } else {
            if (!gradient.count({s, m})) break;
            ready = gradient[{s, m}];
          }
        }
        const double start = std::max(ready, gpu_free[static_cast<std::size_t>(g)]);
        const double length = task.op == Op::kForward
                                  ? 2
                                  : (plan.stages[static_cast<std::size_t>(s)].recompute ? 6 : 4);
        const double end = start + length;
        gpu_free[static_cast<std::size_t>(g)] = end;
        timeline.compute.push_back({g, task, start, end});
        if (task.op == Op::kForward) {
          f_end[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)] = end;
          if (s + 1 < S) {
            arrival[{s + 1, m}] =
                transfer(TransferKind::kActivation, s, m, g, leader_of(s + 1, m), end);
          }
        } else {
          b_end[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)] = end;
          if (s > 0) {
            gradient[{s - 1, m}] =
                transfer(TransferKind::kGradient, s - 1, m, g, leader_of(s - 1, m), end);
          }
        }
        ++next[static_cast<std::size_t>(g)];
        progress = true;
      }
    }
  }
  sort_timeline(timeline);
  return b_end;
}

/// AllReduces, updates, the iteration and the bounds.
inline void hand_finish(const HandPlan& hand, Plan& plan,
                        const std::vector<std::vector<double>>& b_end) {
  const int S = static_cast<int>(plan.stages.size());
  const int M = hand.micro_batches;
  Timeline& timeline = plan.timeline;
  double iteration = 0;
  for (const auto& e : timeline.compute) iteration = std::max(iteration, e.end_ms);
  for (const auto& e : timeline.transfers) iteration = std::max(iteration, e.end_ms);
  for (int s = 0; s < S; ++s) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(s)];
    double last_b = 0;
    for (int m = 0; m < M; ++m) {
      last_b = std::max(last_b, b_end[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)]);
    }
    double ready = last_b;
    if (stage.replicas() > 1) {
      timeline.allreduces.push_back({s, 2e8, last_b, last_b + 1});
      ready = last_b + 1;
    }
    if (hand.updates) {
      for (int i = 0; i < stage.replicas(); ++i) {
        timeline.updates.push_back({s, stage.leader(i), ready, ready + 0.25});
      }
      ready += 0.25;
    }
    iteration = std::max(iteration, ready);
  }
  timeline.iteration_ms = iteration;
  plan.bounds = {iteration / 2, iteration * 0.9};
}

/// The stage, group, GPU and memory figures.
inline void hand_figures(report::PlanView& view) {
  Plan& plan = view.plan;
  Timeline& timeline = plan.timeline;
  const int S = static_cast<int>(plan.stages.size());
  const int N = static_cast<int>(view.gpu_ids.size());
  // Figures.
  timeline.gpus.assign(static_cast<std::size_t>(N), {});
  report::MemoryFigures memory;
  memory.static_bytes.assign(static_cast<std::size_t>(N), 0);
  std::vector<std::vector<report::GroupFigures>> groups;
  for (int s = 0; s < S; ++s) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(s)];
    const double forward_ar = stage.tensor_parallel > 1 ? 0.5 : 0;
    view.stage_figures.push_back({2 - forward_ar, 4 - 2 * forward_ar, 1e8, s + 1 < S ? 1e6 : 0,
                                  stage.replicas() > 1 ? 1.0 : 0.0});
    memory.stash_bytes.push_back(stage.recompute ? 1e6 : 4e6);
    memory.transient_bytes.push_back(stage.recompute ? 2e6 : 0);
    groups.emplace_back();
    for (int i = 0; i < stage.replicas(); ++i) {
      groups.back().push_back({forward_ar, stage.recompute ? 4 * forward_ar : 2 * forward_ar,
                               stage.recompute ? 2.0 : 0.0});
      double busy = 0;
      for (const auto& e : timeline.compute) {
        if (e.gpu == stage.leader(i)) busy += e.end_ms - e.start_ms;
      }
      for (int g : stage.group(i)) {
        timeline.gpus[static_cast<std::size_t>(g)] = {{s}, busy, 8e8 + 4e6 * (S - s)};
        memory.static_bytes[static_cast<std::size_t>(g)] = 8e8;
      }
    }
  }
  view.memory = memory;
  view.group_figures = groups;
}

/// The view of `hand`: forwards take 2 ms, backwards 4 ms (6 with recomputation), transfers
/// 0.5 ms between leaders, AllReduces 1 ms, updates 0.25 ms.
inline report::PlanView hand_view(const HandPlan& hand) {
  report::PlanView view;
  hand_setup(hand, view);
  hand_orders(hand, view.plan);
  const std::vector<std::vector<double>> b_end = hand_replay(hand, view.plan);
  hand_finish(hand, view.plan, b_end);
  hand_figures(view);
  return view;
}

}  // namespace pipeplan::testing
