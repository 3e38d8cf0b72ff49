// The fixed per-device orders of spec sections 5 and 9.4.
//
// Sources: 1F1B with a flush as in PipeDream-Flush (Narayanan et al., ICML 2021) and DAPPLE
// (Fan et al., PPoPP 2021); the interleaved order of Megatron-LM
// (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving:
// warm-up `2 (P - p - 1) + (v - 1) P`, micro-batch groups of P); looped BFS and ZB-V as torch
// builds them (torch/distributed/pipelining/schedules.py, ScheduleLoopedBFS and
// ScheduleZBVZeroBubble._calculate_single_rank_operations); ZB-H1 from Qi et al., "Zero Bubble
// Pipeline Parallelism" (ICLR 2024, arXiv 2401.10241), section 3.1 (docs/decisions.md says how
// its deferral is read).
//
// Every generator is O(v m) per replica, so building all orders is O(c S M).

#include "pipeplan/schedule/fixed_orders.hpp"

#include <algorithm>
#include <map>

namespace pipeplan::schedule {
namespace {

// One step of a device's order: an op on chunk `chunk` (the device's `stages[chunk]`) for the
// replica's local micro-batch `j` (global micro-batch `j r + i`).
struct Step {
  Op op;
  int chunk;
  int j;
};

// Megatron-LM's interleaved 1F1B on device p of P with v > 1 chunks and m local micro-batches
// (a multiple of P): virtual micro-batch k runs chunk (k mod vP) / P of micro-batch
// (k / vP) P + k mod P; backwards visit the chunks in reverse.
std::vector<Step> interleaved(int P, int p, int v, int m) {
  const int total = m * v;
  const int warmup = std::min(total, 2 * (P - p - 1) + (v - 1) * P);
  auto at = [&](int k, Op op) {
    const int chunk = (k % (P * v)) / P;
    const int j = (k / (P * v)) * P + k % P;
    return Step{op, op == Op::kForward ? chunk : v - 1 - chunk, j};
  };
  std::vector<Step> out;
  out.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) out.push_back(at(k, Op::kForward));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(at(k + warmup, Op::kForward));
    out.push_back(at(k, Op::kBackward));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(at(k, Op::kBackward));
  return out;
}

// torch's ScheduleLoopedBFS: every forward of chunk 0, then of chunk 1, ...; then every backward
// of the last chunk, then of the one before, micro-batches in reverse.
std::vector<Step> looped_bfs(int v, int m) {
  std::vector<Step> out;
  for (int c = 0; c < v; ++c) {
    for (int j = 0; j < m; ++j) out.push_back({Op::kForward, c, j});
  }
  for (int c = v - 1; c >= 0; --c) {
    for (int j = m - 1; j >= 0; --j) out.push_back({Op::kBackward, c, j});
  }
  return out;
}

// Fill-drain over several chunks: every forward, chunk by chunk, then every backward, the last
// chunk first.
std::vector<Step> gpipe(int v, int m) {
  std::vector<Step> out;
  for (int c = 0; c < v; ++c) {
    for (int j = 0; j < m; ++j) out.push_back({Op::kForward, c, j});
  }
  for (int c = v - 1; c >= 0; --c) {
    for (int j = 0; j < m; ++j) out.push_back({Op::kBackward, c, j});
  }
  return out;
}

// ZB-V as torch writes it (ScheduleZBVZeroBubble): chunk 0 is stage p, chunk 1 stage 2P-1-p.
// torch pads the micro-batches to at least 2P - 1 and drops the padding's steps afterwards.
std::vector<Step> zb_v(int P, int p, int m) {
  const int n = std::max(2 * P - 1, m);
  std::vector<Step> out;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto add = [&](Op op, int chunk, int& count) { out.push_back({op, chunk, count++}); };
  for (int k = 0; k < 2 * (P - p) - 1; ++k) add(Op::kForward, 0, f0);
  for (int k = 0; k < p; ++k) {
    add(Op::kForward, 1, f1);
    add(Op::kForward, 0, f0);
  }
  for (int k = 0; k < P - p; ++k) {
    add(Op::kForward, 1, f1);
    out.push_back({Op::kBackwardInput, 1, b1});
    add(Op::kBackwardWeight, 1, b1);
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) add(Op::kForward, 0, f0);
    out.push_back({Op::kBackwardInput, 0, b0});
    add(Op::kBackwardWeight, 0, b0);
    add(Op::kForward, 1, f1);
    out.push_back({Op::kBackwardInput, 1, b1});
    add(Op::kBackwardWeight, 1, b1);
  }
  int w0 = b0, w1 = b1;
  for (int k = 0; k < p; ++k) {
    add(Op::kBackwardInput, 0, b0);
    add(Op::kBackwardInput, 1, b1);
  }
  for (int k = 0; k < P - p; ++k) {
    add(Op::kBackwardInput, 0, b0);
    add(Op::kBackwardWeight, 0, w0);
  }
  while (w1 < b1) add(Op::kBackwardWeight, 1, w1);
  while (w0 < b0) add(Op::kBackwardWeight, 0, w0);
  std::erase_if(out, [&](const Step& step) { return step.j >= m; });
  return out;
}

// ZB-H1 on device p: the 1F1B order with each B split into I and W, where the W of the k-th
// I comes right after the (k + p)-th I: device p keeps up to p weight gradients pending, so the
// last devices, whose inputs gradients the earlier ones wait for, run their I first, and each
// device holds at most P micro-batches' worth of activations (docs/decisions.md).
std::vector<Step> zb_h1(const std::vector<Step>& one_f_one_b, int p) {
  std::vector<Step> out;
  std::vector<Step> pending;
  for (const Step& step : one_f_one_b) {
    if (step.op != Op::kBackward) {
      out.push_back(step);
      continue;
    }
    out.push_back({Op::kBackwardInput, step.chunk, step.j});
    pending.push_back({Op::kBackwardWeight, step.chunk, step.j});
    if (static_cast<int>(pending.size()) > p) {
      out.push_back(pending.front());
      pending.erase(pending.begin());
    }
  }
  out.insert(out.end(), pending.begin(), pending.end());
  return out;
}

// A whole backward as I then W (split), or the halves of a zero-bubble order as one B (not
// split: I becomes B, W disappears).
std::vector<Step> fit_backward(const std::vector<Step>& steps, bool split) {
  std::vector<Step> out;
  out.reserve(steps.size() * 2);
  for (const Step& step : steps) {
    if (split && step.op == Op::kBackward) {
      out.push_back({Op::kBackwardInput, step.chunk, step.j});
      out.push_back({Op::kBackwardWeight, step.chunk, step.j});
    } else if (!split && step.op == Op::kBackwardInput) {
      out.push_back({Op::kBackward, step.chunk, step.j});
    } else if (split || step.op != Op::kBackwardWeight) {
      out.push_back(step);
    }
  }
  return out;
}

// The stage-wide 1F1B order of spec section 5 for stage s (warm-up over the whole stage, then
// the order dealt to replicas by micro-batch), as the steps of replica i.
std::vector<Step> one_f_one_b(const std::vector<Stage>& stages, int s, int M, int i) {
  const int r = stages[static_cast<std::size_t>(s)].replicas();
  const int warmup = one_f_one_b_warmup(stages, s, M);
  std::vector<Step> wide;
  int forward = 0, backward = 0;
  while (forward < warmup) wide.push_back({Op::kForward, 0, forward++});
  while (forward < M) {
    wide.push_back({Op::kBackward, 0, backward++});
    wide.push_back({Op::kForward, 0, forward++});
  }
  while (backward < M) wide.push_back({Op::kBackward, 0, backward++});
  std::vector<Step> out;
  for (const Step& step : wide) {
    if (step.j % r == i) out.push_back({step.op, 0, step.j / r});
  }
  return out;
}

// The steps of replica i of device p under a fixed policy, before fitting the backward.
std::vector<Step> replica_steps(Policy policy, const std::vector<Stage>& stages, int P, int p,
                                const Device& device, int M, int i) {
  const int v = static_cast<int>(device.stages.size());
  const int r = static_cast<int>(device.leaders.size());
  const int m = M / r + (i < M % r ? 1 : 0);
  const int s = device.stages.front();
  switch (policy) {
    case Policy::kOneFOneB:
      return one_f_one_b(stages, s, M, i);
    case Policy::kZbH1:
      return zb_h1(one_f_one_b(stages, s, M, i), p);
    case Policy::kInterleaved1F1B:
      return v == 1 ? one_f_one_b(stages, s, M, i) : interleaved(P, p, v, m);
    case Policy::kLoopedBfs:
      return looped_bfs(v, m);
    case Policy::kZbV:
      return zb_v(P, p, m);
    case Policy::kGpipe:
    case Policy::kList:
      break;
  }
  return gpipe(v, m);
}

}  // namespace

std::vector<Device> devices(const std::vector<Stage>& stages) {
  std::map<std::vector<int>, std::size_t> index;
  std::vector<Device> out;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto [it, added] = index.emplace(stages[s].gpus, out.size());
    if (added) out.push_back({{}, stages[s].leaders()});
    out[it->second].stages.push_back(static_cast<int>(s));
  }
  return out;
}

int placed_stage(Policy policy, int P, int p, int c) {
  if (policy == Policy::kZbV) return c == 0 ? p : 2 * P - 1 - p;
  return p + c * P;
}

std::optional<std::string> policy_refusal(Policy policy, const std::vector<Stage>& stages,
                                          int micro_batches) {
  const PolicyRow& row = policy_row(policy);
  const std::string name = "--schedule " + std::string(row.name);
  const std::vector<Device> all = devices(stages);
  const int P = static_cast<int>(all.size());
  const int v = static_cast<int>(all.front().stages.size());
  for (const Device& device : all) {
    if (static_cast<int>(device.stages.size()) != v) {
      return name + " needs the same number of stages on every device, but stage " +
             std::to_string(all.front().stages.front()) + "'s device holds " + std::to_string(v) +
             " and stage " + std::to_string(device.stages.front()) + "'s holds " +
             std::to_string(device.stages.size());
    }
  }
  if (row.device_stages == DeviceStages::kOne && v != 1) {
    return name + " runs one stage per device, but the plan has " + std::to_string(v) +
           " (use --virtual-stages 1, or --schedule interleaved-1f1b)";
  }
  if (row.device_stages == DeviceStages::kTwo && v != 2) {
    return name + " runs two stages per device, but the plan has " + std::to_string(v) +
           " (use --virtual-stages 2)";
  }
  if (v > 1 && policy != Policy::kGpipe && policy != Policy::kList) {
    for (int p = 0; p < P; ++p) {
      for (int c = 0; c < v; ++c) {
        const int expected = placed_stage(policy, P, p, c);
        const auto& held = all[static_cast<std::size_t>(p)].stages;
        if (std::find(held.begin(), held.end(), expected) == held.end()) {
          return name + " needs stage " + std::to_string(expected) + " on the device of stage " +
                 std::to_string(p) +
                 (policy == Policy::kZbV ? " (a V: stages p and 2P-1-p)"
                                         : " (stage s on device s mod P)");
        }
      }
    }
  }
  if (policy == Policy::kInterleaved1F1B && v > 1) {
    const int r = static_cast<int>(all.front().leaders.size());
    if (micro_batches % r != 0 || (micro_batches / r) % P != 0) {
      return name + " needs each replica's micro-batches to be a multiple of the " +
             std::to_string(P) + " devices (Megatron-LM's micro-batch groups), but " +
             "--micro-batches " + std::to_string(micro_batches) + " gives " +
             (micro_batches % r != 0 ? "unequal replicas"
                                     : std::to_string(micro_batches / r) + " per replica");
    }
  }
  return std::nullopt;
}

int one_f_one_b_warmup(const std::vector<Stage>& stages, int s, int micro_batches) {
  const int S = static_cast<int>(stages.size());
  long best = 0;
  for (int t = s; t < S; ++t) {
    best = std::max(best, static_cast<long>(S - t) *
                              static_cast<long>(stages[static_cast<std::size_t>(t)].replicas()));
  }
  return static_cast<int>(std::min<long>(micro_batches, best));
}

std::vector<std::vector<ComputeTask>> fixed_orders(int gpu_count, const std::vector<Stage>& stages,
                                                   int micro_batches, Policy policy,
                                                   bool split_backward) {
  std::vector<std::vector<ComputeTask>> orders(static_cast<std::size_t>(gpu_count));
  const std::vector<Device> all = devices(stages);
  const int P = static_cast<int>(all.size());
  for (int p = 0; p < P; ++p) {
    const Device& device = all[static_cast<std::size_t>(p)];
    const int r = static_cast<int>(device.leaders.size());
    for (int i = 0; i < r; ++i) {
      const std::vector<Step> steps = fit_backward(
          replica_steps(policy, stages, P, p, device, micro_batches, i), split_backward);
      auto& order = orders[static_cast<std::size_t>(device.leaders[static_cast<std::size_t>(i)])];
      order.reserve(steps.size());
      for (const Step& step : steps) {
        order.push_back(
            {step.op, device.stages[static_cast<std::size_t>(step.chunk)], step.j * r + i});
      }
    }
  }
  return orders;
}

}  // namespace pipeplan::schedule
