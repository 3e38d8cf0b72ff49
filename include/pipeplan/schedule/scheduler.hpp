#pragma once
/// \file
/// Scheduling of micro-batches (spec section 5): the paper's list scheduler and the fixed
/// 1F1B and GPipe orders, all run by one event-driven engine over GPUs and channels.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/schedule/fixed_orders.hpp"
#include "pipeplan/schedule/policy.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::schedule {

/// The result of scheduling: the decisions and the engine's own times (which the replay of
/// the decisions must reproduce).
struct Scheduled {
  Schedule schedule;
  double iteration_ms = 0;  ///< Last compute or transfer end seen by the engine (no AllReduce).
};

/// The steps the list policy's choice of a replica of `stage` takes per task (the scheduler's
/// `choose_replica`): its replicas r, or on a node-cost topology, where a stage whose groups
/// work alike is chosen from by a tree, (n + 2) log2 (r + 1) for n its groups on one node (at
/// most r). O(r + nodes).
double replica_choice_steps(const topology::Topology& topology, const Stage& stage);

/// Schedules `micro_batches` micro-batches through `stages` (which must pass
/// `simulate::check_stages`; stages with the same GPUs share a device, spec 9.2), with every
/// backward split into `I` and `W` when `split_backward` (spec 9.2). A stage's replicas are its
/// groups, each one compute resource named by its leader (spec 8.3); durations, transfer sizes
/// and memory come from `simulate::execution` under `optimizer`.
///
/// * `kList`: event-driven and non-delay: whenever a group is idle it starts its ready
///   backward (`B` or `I`) of lowest micro-batch, else its ready forward of lowest micro-batch
///   (one entering the device only if its memory can hold one more micro-batch on all the
///   device's stages), else a ready weight gradient `W` (the filler), else it waits. A stage-0
///   replica that is free takes the next micro-batch; a later stage's replica for micro-batch m
///   is chosen when m's forward ends upstream, as the one with the earliest estimated finish
///   (outstanding work plus the transfer, ties to the earlier replica); across a boundary inside
///   a device the micro-batch stays on its group. Channels are first-in first-out (ties:
///   gradient before activation, then lower micro-batch). Never exceeds memory. `rule`'s
///   priority `kAlternate` takes a forward before a ready backward on a group whose last forward
///   or backward was a backward (`ListPriority`); its load `kPerTask` takes a forward's part off
///   a group's outstanding work when the forward ends, not with the backward (`ReplicaLoad`);
///   fixed policies ignore both.
/// * The fixed policies: the per-device orders of `fixed_orders` (spec sections 5 and 9.4),
///   channels first-in first-out. They ignore memory; check the replay.
///
/// Throws `InfeasibleError` when a device cannot hold even one micro-batch on some replica
/// (`try_make_schedule` returns that as a value), and `simulate::ScheduleError` (exit 3) when
/// `policy_refusal` refuses the policy for these stages. O(T log T) for T tasks.
Scheduled make_schedule(const model::Model& model, const topology::Topology& topology,
                        const std::vector<Stage>& stages, int micro_batches, Policy policy,
                        Optimizer optimizer = Optimizer::kReplicated, bool split_backward = false,
                        ListRule rule = {});

/// A schedule, or why there is none.
struct ScheduleAttempt {
  std::optional<Scheduled> scheduled;
  std::string refusal;  ///< When `scheduled` is empty: the stage and GPU that cannot hold one
                        ///< micro-batch, the message `make_schedule` throws.
};

/// `make_schedule` with "does not fit" as a value, for searches that try many stages.
ScheduleAttempt try_make_schedule(const model::Model& model, const topology::Topology& topology,
                                  const std::vector<Stage>& stages, int micro_batches,
                                  Policy policy, Optimizer optimizer = Optimizer::kReplicated,
                                  bool split_backward = false, ListRule rule = {});

/// Stashes a GPU of a stage of `replicas` replicas holds at its peak under `policy` for
/// `micro_batches` micro-batches: `ceil(M / r)` under `kGpipe` and `kLoopedBfs`, `ceil(warmup /
/// r)` under `kOneFOneB`, `kInterleaved1F1B`, `kZbH1` and `kZbV` (`warmup` the stage's 1F1B
/// warm-up, `one_f_one_b_warmup`; an estimate for the last three, which the replay checks), and
/// 1 under `kList`
/// (the list scheduler caps in-flight work by memory, so one stash is all a stage needs). The
/// one statement of this rule: the DP, the baselines and `planners::peak_stashes` use it. O(1).
long stashes_per_replica(Policy policy, long micro_batches, long replicas, long warmup);

}  // namespace pipeplan::schedule
