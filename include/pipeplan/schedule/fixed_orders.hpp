#pragma once
/// \file
/// The fixed policies of spec sections 5 and 9.4 as per-GPU orders: which stages each device
/// holds for a policy, whether a plan's placement suits a policy, and every device's order.
/// The scheduler runs these orders; nothing else writes them.

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/plan.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::schedule {

/// A device (spec 9.2): stages sharing one GPU list, ascending, and its groups' leaders.
struct Device {
  std::vector<int> stages;   ///< Ascending; `stages[c]` is the device's chunk `c`.
  std::vector<int> leaders;  ///< Its groups' leaders, in replica order.
};

/// The devices of `stages` in pipeline order (by first stage). O(S log S).
std::vector<Device> devices(const std::vector<Stage>& stages);

/// The stage on device `p` of `P` that holds chunk `c` of `v` under `policy`'s placement
/// (spec 9.4): `p + c P` (Megatron-LM's interleaving), or for `zb-v` `p` and `2P - 1 - p`.
int placed_stage(Policy policy, int P, int p, int c);

/// Why `policy` cannot run `stages` with `micro_batches` micro-batches, naming the option to
/// change (`--virtual-stages`, `--micro-batches`, `--schedule`); nothing when it can. A fixed
/// multi-stage policy needs the same number of stages on every device, placed as
/// `placed_stage` says; `interleaved-1f1b` with several stages per device needs each replica's
/// micro-batches to be a multiple of the number of devices. O(S log S).
std::optional<std::string> policy_refusal(Policy policy, const std::vector<Stage>& stages,
                                          int micro_batches);

/// The 1F1B warm-up depth of stage `s`: `min(M, max_{t>=s} (S-t) r_t)` (spec section 5).
int one_f_one_b_warmup(const std::vector<Stage>& stages, int s, int micro_batches);

/// Every GPU's compute order under fixed `policy` (which must not be refused), with `B` split
/// into `I` and `W` when `split_backward`. Replicas take micro-batches round robin (micro-batch
/// `m` on group `m mod r`); each replica runs the policy's order over its own micro-batches.
/// Indexed by topology GPU (`gpu_count`); only leaders have tasks. O(c S M).
std::vector<std::vector<ComputeTask>> fixed_orders(int gpu_count, const std::vector<Stage>& stages,
                                                   int micro_batches, Policy policy,
                                                   bool split_backward);

}  // namespace pipeplan::schedule
