#pragma once
/// \file
/// The tasks of one iteration and their data dependencies (spec sections 3 and 8.3), in one
/// place.
///
/// Every consumer of the execution model (the replay, the plan checker, the standalone plan
/// reader, the ranks export's global order, the list scheduler, the planners' task limits)
/// numbers tasks with this type and asks it what a task waits for, which way a transfer goes
/// and how many tasks a plan has; none keeps a copy of the rules.

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
/// * compute tasks first: `F(m,s)` is `2 (s M + m)`, `B(m,s)` is `2 (s M + m) + 1`;
/// * then transfers across boundary `s = 0..S-2`: the activation is `2 S M + 2 (s M + m)`, the
///   gradient `2 S M + 2 (s M + m) + 1`;
/// * then one AllReduce slot per stage, `4 S M - 2 M + s` (a stage with one replica has no
///   AllReduce; its slot stays unused);
/// * then one optimizer-step slot per stage, `4 S M - 2 M + S + s`, standing for the update
///   tasks `U(s, group)` of all its groups (spec 8.3; unused when no layer has an update time).
///
/// Dependencies (spec sections 3 and 8.3), all answered by `predecessors`:
/// * each compute task and transfer has at most one data predecessor and one data successor
///   along its micro-batch's chain
///   `F(m,0) -> act(m,0) -> F(m,1) -> ... -> F(m,S-1) -> B(m,S-1) -> grad(m,S-2) -> ... -> B(m,0)`;
/// * a stage's AllReduce follows every `B(m,s)` of its stage;
/// * its update tasks follow its AllReduce when it has one (r > 1), else every `B(m,s)`.
///
/// A value type; O(1) per query but `predecessors` of an AllReduce or update slot, O(M).
class TaskGraph {
 public:
  /// No task: the answer of a chain query at the end of a chain, or about a task off the
  /// chains (an AllReduce or update slot).
  static constexpr int kNone = -1;

  /// The compute tasks and transfers of `S` stages and `M` micro-batches, `4 S M - 2 M`: the
  /// quantity the planners' task limit bounds, computable before a graph exists.
  [[nodiscard]] static constexpr std::int64_t chain_task_count(std::int64_t S, std::int64_t M) {
    return 4 * S * M - 2 * M;
  }

  /// A graph whose stages all have one replica (no AllReduce). Throws `ScheduleError` when
  /// `stages < 1`, `micro_batches < 1`, or the tasks do not fit an `int`
  /// (planners::check_limits keeps plans far below that).
  TaskGraph(int stages, int micro_batches);
  /// The graph of `stages` (their replica counts decide which have an AllReduce), as above.
  TaskGraph(const std::vector<Stage>& stages, int micro_batches);

  [[nodiscard]] int stages() const { return stages_; }                ///< S.
  [[nodiscard]] int micro_batches() const { return micro_batches_; }  ///< M.
  /// 2 S M forwards and backwards.
  [[nodiscard]] int compute_count() const { return 2 * stages_ * micro_batches_; }
  /// 2 (S-1) M activation and gradient transfers.
  [[nodiscard]] int transfer_count() const { return 2 * (stages_ - 1) * micro_batches_; }
  /// Compute tasks and transfers: the tasks with a data chain, `chain_task_count(S, M)`.
  [[nodiscard]] int chain_count() const { return compute_count() + transfer_count(); }
  /// Every slot, AllReduces and optimizer steps included.
  [[nodiscard]] int size() const { return chain_count() + 2 * stages_; }

  /// Whether the task names an existing stage (boundary) and micro-batch.
  [[nodiscard]] bool contains(const ComputeTask& task) const;
  [[nodiscard]] bool contains(const TransferTask& task) const;

  /// The id of a task; requires `contains(task)`.
  [[nodiscard]] int id(const ComputeTask& task) const {
    return ((task.stage * micro_batches_ + task.micro_batch) << 1) |
           (task.op == Op::kBackward ? 1 : 0);
  }
  [[nodiscard]] int id(const TransferTask& task) const {
    return compute_count() + (((task.stage * micro_batches_ + task.micro_batch) << 1) |
                              (task.kind == TransferKind::kGradient ? 1 : 0));
  }
  /// The id of stage `s`'s AllReduce slot.
  [[nodiscard]] int allreduce(int stage) const { return chain_count() + stage; }
  /// The id of stage `s`'s optimizer-step slot (its groups' update tasks).
  [[nodiscard]] int update(int stage) const { return chain_count() + stages_ + stage; }
  /// Whether stage `s` has an AllReduce: it has more than one replica (spec 3, 8.2).
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

  /// The task a compute task or transfer waits for along its chain; `kNone` for `F(m,0)` and
  /// for an AllReduce or update slot (they are on no chain: see `predecessors`).
  [[nodiscard]] int data_predecessor(int id) const;
  /// The task that waits for this one along its chain; `kNone` for `B(m,0)` and for an
  /// AllReduce or update slot.
  [[nodiscard]] int data_successor(int id) const;
  /// Every task `id` waits for, for every kind: the data predecessor of a compute task or
  /// transfer (none or one), the `M` backwards of its stage for an AllReduce slot, and for an
  /// update slot its stage's AllReduce when `has_allreduce`, else the `M` backwards. O(M).
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
  // The M backwards of stage s.
  [[nodiscard]] std::vector<int> backwards_of(int stage) const;

  int stages_;
  int micro_batches_;
  std::vector<char> replicated_;  // per stage: whether it has more than one replica
};

/// A task in words for messages: `forward of micro-batch 3 on stage 1`.
std::string describe(const ComputeTask& task);
/// A transfer in words: `activation transfer of micro-batch 3 from stage 1 to stage 2`.
std::string describe(const TransferTask& task);

}  // namespace pipeplan::simulate
