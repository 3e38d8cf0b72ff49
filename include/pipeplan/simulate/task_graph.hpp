#pragma once
/// \file
/// The tasks of one iteration and their data dependencies (spec sections 3 and 8.3), in one
/// place.
///
/// Every consumer of the execution model (the replay, the plan checker, the standalone plan
/// reader, the ranks export's global order, the list scheduler, the planners' task limits)
/// numbers tasks with this type and asks it what a task waits for, which way a transfer goes
/// and how many tasks a plan has; none keeps a copy of the rules.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/plan.hpp"

namespace pipeplan::simulate {

/// Which way a transfer goes: from the GPU that runs its micro-batch on `from_stage` to the
/// GPU that runs it on `to_stage` (an activation goes up, a gradient down).
struct TransferEnds {
  int from_stage = 0;
  int to_stage = 0;
};

/// The tasks of one iteration of `S` stages and `M` micro-batches, numbered densely:
///
/// * compute tasks first, `c` per micro-batch and stage (`c = 2`: `F`, `B`; `c = 3` with a split
///   backward, spec 9.2: `F`, `I`, `W`): task `k` of `(m, s)` is `c (s M + m) + k`;
/// * then transfers across every boundary `s = 0..S-2` whose two stages are on different
///   devices (a boundary inside a device has none, spec 9.3), numbered `b = 0, 1, ...` in stage
///   order: the activation is `c S M + 2 (b M + m)`, the gradient one more;
/// * then one AllReduce slot per stage (a stage with one replica, or a fully sharded one, has no
///   AllReduce; its slot stays unused);
/// * then one optimizer-step slot per stage, standing for the update tasks `U(s, group)` of all
///   its groups (spec 8.3; unused when no layer has an update time).
///
/// Without a split backward or shared devices this is the numbering of spec section 3:
/// `F(m,s) = 2 (s M + m)`, `B(m,s) = 2 (s M + m) + 1`, transfers from `2 S M`.
///
/// Dependencies (spec sections 3, 8.3 and 9.3), all answered by `predecessors`:
/// * each compute task and transfer has at most one data predecessor; along its micro-batch's
///   chain `F(m,0) -> act(m,0) -> F(m,1) -> ... -> F(m,S-1) -> B(m,S-1) -> grad(m,S-2) -> ...
///   -> B(m,0)` each has at most one chain successor. With a split backward `I` takes `B`'s
///   place in the chain and `W(m,s)` follows `I(m,s)` (and nothing follows `W`). A boundary
///   inside a device has no transfer: `F(m,s+1)` follows `F(m,s)` and `I(m,s)` follows `I(m,s+1)`;
/// * a stage's AllReduce follows every `B(m,s)` (or `W(m,s)`) of its stage;
/// * its update tasks follow its AllReduce when it has one (r > 1), else every `B` (or `W`).
///
/// A value type; O(1) per query but `predecessors` of an AllReduce or update slot, O(M).
class TaskGraph {
 public:
  /// No task: the answer of a chain query at the end of a chain, or about a task off the
  /// chains (an AllReduce or update slot).
  static constexpr int kNone = -1;

  /// The compute tasks and transfers of `S` stages and `M` micro-batches at most (no shared
  /// device), `4 S M - 2 M`, or `5 S M - 2 M` with a split backward: the quantity the planners'
  /// task limit bounds, computable before a graph exists.
  [[nodiscard]] static constexpr std::int64_t chain_task_count(std::int64_t S, std::int64_t M,
                                                               bool split_backward = false) {
    return (split_backward ? 3 : 2) * S * M + 2 * (S - 1) * M;
  }

  /// A graph whose stages all have one replica (no AllReduce) on devices of their own, without
  /// a split backward. Throws `ScheduleError` when `stages < 1`, `micro_batches < 1`, or the
  /// tasks do not fit an `int` (planners::check_limits keeps plans far below that).
  TaskGraph(int stages, int micro_batches);
  /// The graph of `stages` (their replica counts and `optimizer` decide which have an
  /// AllReduce, `pipeplan::reduces_gradients`; two adjacent stages with the same `gpus` share a
  /// device, so their boundary has no transfer), with or without a split backward, as above.
  /// O(S).
  TaskGraph(const std::vector<Stage>& stages, int micro_batches, bool split_backward = false,
            Optimizer optimizer = Optimizer::kReplicated);

  [[nodiscard]] int stages() const { return stages_; }                ///< S.
  [[nodiscard]] int micro_batches() const { return micro_batches_; }  ///< M.
  /// Whether every backward is split into `I` and `W`.
  [[nodiscard]] bool split_backward() const { return per_ == 3; }
  /// The op that takes `B`'s place in the chain rules: `kBackwardInput` with a split backward.
  [[nodiscard]] Op backward_op() const {
    return split_backward() ? Op::kBackwardInput : Op::kBackward;
  }
  /// The op whose ends a stage's AllReduce waits for: `kBackwardWeight` with a split backward.
  [[nodiscard]] Op last_backward_op() const {
    return split_backward() ? Op::kBackwardWeight : Op::kBackward;
  }
  /// Whether boundary `s` (between stages `s` and `s+1`) lies inside one device (no transfer).
  [[nodiscard]] bool is_local_boundary(int boundary) const {
    return boundary_[static_cast<std::size_t>(boundary)] == kNone;
  }
  /// `c S M` compute tasks (c = 2, or 3 with a split backward).
  [[nodiscard]] int compute_count() const { return per_ * stages_ * micro_batches_; }
  /// 2 M transfers per boundary between devices.
  [[nodiscard]] int transfer_count() const { return 2 * remote_boundaries_ * micro_batches_; }
  /// Compute tasks and transfers: the tasks with a data chain.
  [[nodiscard]] int chain_count() const { return compute_count() + transfer_count(); }
  /// Every slot, AllReduces and optimizer steps included.
  [[nodiscard]] int size() const { return chain_count() + 2 * stages_; }

  /// Whether the task names an existing stage and micro-batch and an op of this graph (`B`
  /// without a split backward, `I` and `W` with one).
  [[nodiscard]] bool contains(const ComputeTask& task) const;
  /// Whether the transfer names an existing boundary between two devices and micro-batch.
  [[nodiscard]] bool contains(const TransferTask& task) const;

  /// The id of a task; requires `contains(task)`.
  [[nodiscard]] int id(const ComputeTask& task) const {
    const int k = task.op == Op::kForward ? 0 : task.op == Op::kBackwardWeight ? 2 : 1;
    return (task.stage * micro_batches_ + task.micro_batch) * per_ + k;
  }
  [[nodiscard]] int id(const TransferTask& task) const {
    const int b = boundary_[static_cast<std::size_t>(task.stage)];
    return compute_count() + (((b * micro_batches_ + task.micro_batch) << 1) |
                              (task.kind == TransferKind::kGradient ? 1 : 0));
  }
  /// The id of stage `s`'s AllReduce slot.
  [[nodiscard]] int allreduce(int stage) const { return chain_count() + stage; }
  /// The id of stage `s`'s optimizer-step slot (its groups' update tasks).
  [[nodiscard]] int update(int stage) const { return chain_count() + stages_ + stage; }
  /// Whether stage `s` has an AllReduce (`pipeplan::reduces_gradients`).
  [[nodiscard]] bool has_allreduce(int stage) const {
    return replicated_[static_cast<std::size_t>(stage)] != 0;
  }

  [[nodiscard]] bool is_compute(int id) const { return id >= 0 && id < compute_count(); }
  [[nodiscard]] bool is_transfer(int id) const {
    return id >= compute_count() && id < chain_count();
  }
  [[nodiscard]] bool is_allreduce(int id) const {
    return id >= chain_count() && id < chain_count() + stages_;
  }
  [[nodiscard]] bool is_update(int id) const {
    return id >= chain_count() + stages_ && id < size();
  }

  /// The task behind an id of the matching kind.
  [[nodiscard]] ComputeTask compute_task(int id) const;
  [[nodiscard]] TransferTask transfer_task(int id) const;
  [[nodiscard]] int allreduce_stage(int id) const { return id - chain_count(); }
  [[nodiscard]] int update_stage(int id) const { return id - chain_count() - stages_; }

  /// Which way a transfer goes (spec section 3): an activation across boundary `s` from stage
  /// `s` to `s + 1`, a gradient from `s + 1` to `s`. Each end's GPU is the one that runs the
  /// transfer's micro-batch on that stage (the GPU of its forward there).
  [[nodiscard]] static TransferEnds ends(const TransferTask& task);

  /// The task a compute task or transfer waits for (its only data predecessor); `kNone` for
  /// `F(m,0)` and for an AllReduce or update slot (they are on no chain: see `predecessors`).
  [[nodiscard]] int data_predecessor(int id) const;
  /// The task that waits for this one along its micro-batch's chain; `kNone` for `B(m,0)`
  /// (`I(m,0)`), for a `W` and for an AllReduce or update slot.
  [[nodiscard]] int data_successor(int id) const;
  /// Every task that waits for this one's data: the chain successor and, for an `I`, its `W`;
  /// `kNone` where there is none. O(1).
  [[nodiscard]] std::array<int, 2> data_successors(int id) const;
  /// Every task `id` waits for, for every kind: the data predecessor of a compute task or
  /// transfer (none or one), the `M` backwards (`W`s) of its stage for an AllReduce slot, and
  /// for an update slot its stage's AllReduce when `has_allreduce`, else those `M` tasks. O(M).
  [[nodiscard]] std::vector<int> predecessors(int id) const;
  /// `predecessors(id)` in words for messages, as the one that ends last: `the AllReduce of
  /// stage 2`, `the last backward of stage 2`, or the one data predecessor's `describe`.
  /// Requires a task with a predecessor.
  [[nodiscard]] std::string describe_predecessors(int id) const;
  /// A task in words for messages: `forward of micro-batch 3 on stage 1`,
  /// `activation transfer of micro-batch 3 from stage 1 to stage 2`,
  /// `the AllReduce of stage 2`, `the optimizer step of stage 2`.
  [[nodiscard]] std::string describe(int id) const;

 private:
  // The M tasks of stage s an AllReduce waits for (its backwards, or its Ws).
  [[nodiscard]] std::vector<int> backwards_of(int stage) const;

  int stages_;
  int micro_batches_;
  int per_ = 2;                   // compute tasks per micro-batch and stage
  int remote_boundaries_ = 0;     // boundaries between devices
  std::vector<char> replicated_;  // per stage: whether it has more than one replica
  std::vector<int> boundary_;     // per boundary s: its transfer numbering b, kNone inside a device
  std::vector<int> boundary_stage_;  // per b: the boundary s
};

/// A task in words for messages: `forward of micro-batch 3 on stage 1`, `input-gradient
/// backward of ...`, `weight-gradient backward of ...`.
std::string describe(const ComputeTask& task);
/// A transfer in words: `activation transfer of micro-batch 3 from stage 1 to stage 2`.
std::string describe(const TransferTask& task);

}  // namespace pipeplan::simulate
