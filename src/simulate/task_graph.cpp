// The task numbering and data dependencies of spec sections 3, 8.3 and 9.3. O(1) per query,
// O(M) for the predecessors of an AllReduce or update slot.

#include "pipeplan/simulate/task_graph.hpp"

#include <limits>

#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

// The slots of `stages` stages and `micro_batches` micro-batches, checked to fit an int.
void check_size(int stages, int micro_batches, bool split) {
  if (stages < 1) throw ScheduleError("the plan has no stages");
  if (micro_batches < 1) throw ScheduleError("the schedule has no micro-batches");
  const std::int64_t slots = TaskGraph::chain_task_count(stages, micro_batches, split) +
                             2 * static_cast<std::int64_t>(stages);
  if (slots > std::numeric_limits<int>::max()) {
    throw ScheduleError("the schedule has " + std::to_string(slots) + " tasks, more than " +
                        std::to_string(std::numeric_limits<int>::max()));
  }
}

}  // namespace

TaskGraph::TaskGraph(int stages, int micro_batches)
    // Stages without GPUs: each on a device of its own.
    : TaskGraph(std::vector<Stage>(static_cast<std::size_t>(std::max(stages, 0))), micro_batches) {}

TaskGraph::TaskGraph(const std::vector<Stage>& stages, int micro_batches, bool split_backward,
                     Optimizer optimizer)
    : stages_(static_cast<int>(stages.size())),
      micro_batches_(micro_batches),
      per_(split_backward ? 3 : 2) {
  check_size(stages_, micro_batches, split_backward);
  replicated_.assign(stages.size(), 0);
  boundary_.assign(stages.size(), kNone);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    replicated_[s] = reduces_gradients(stages[s], optimizer) ? 1 : 0;
    if (s + 1 < stages.size() && (stages[s].gpus != stages[s + 1].gpus || stages[s].gpus.empty())) {
      boundary_[s] = remote_boundaries_++;
      boundary_stage_.push_back(static_cast<int>(s));
    }
  }
}

bool TaskGraph::contains(const ComputeTask& task) const {
  const bool op = task.op == Op::kForward ||
                  (split_backward() ? task.op != Op::kBackward : task.op == Op::kBackward);
  return op && task.stage >= 0 && task.stage < stages_ && task.micro_batch >= 0 &&
         task.micro_batch < micro_batches_;
}

bool TaskGraph::contains(const TransferTask& task) const {
  return task.stage >= 0 && task.stage < stages_ - 1 && !is_local_boundary(task.stage) &&
         task.micro_batch >= 0 && task.micro_batch < micro_batches_;
}

ComputeTask TaskGraph::compute_task(int id) const {
  const int pair = id / per_;
  const int k = id % per_;
  const Op op = k == 0 ? Op::kForward : k == 2 ? Op::kBackwardWeight : backward_op();
  return ComputeTask{op, pair / micro_batches_, pair % micro_batches_};
}

TransferTask TaskGraph::transfer_task(int id) const {
  const int local = id - compute_count();
  const int pair = local >> 1;
  return TransferTask{(local & 1) ? TransferKind::kGradient : TransferKind::kActivation,
                      boundary_stage_[static_cast<std::size_t>(pair / micro_batches_)],
                      pair % micro_batches_};
}

TransferEnds TaskGraph::ends(const TransferTask& task) {
  return task.kind == TransferKind::kActivation ? TransferEnds{task.stage, task.stage + 1}
                                                : TransferEnds{task.stage + 1, task.stage};
}

int TaskGraph::data_predecessor(int id) const {
  if (is_compute(id)) {
    const ComputeTask t = compute_task(id);
    const int m = t.micro_batch;
    if (t.op == Op::kForward) {
      if (t.stage == 0) return kNone;
      return is_local_boundary(t.stage - 1)
                 ? this->id(ComputeTask{Op::kForward, t.stage - 1, m})
                 : this->id(TransferTask{TransferKind::kActivation, t.stage - 1, m});
    }
    if (t.op == Op::kBackwardWeight) return this->id(ComputeTask{Op::kBackwardInput, t.stage, m});
    if (t.stage == stages_ - 1) return this->id(ComputeTask{Op::kForward, t.stage, m});
    return is_local_boundary(t.stage) ? this->id(ComputeTask{t.op, t.stage + 1, m})
                                      : this->id(TransferTask{TransferKind::kGradient, t.stage, m});
  }
  if (!is_transfer(id)) return kNone;
  // A transfer waits for the task that produces it on its sending stage.
  const TransferTask t = transfer_task(id);
  const Op producer = t.kind == TransferKind::kActivation ? Op::kForward : backward_op();
  return this->id(ComputeTask{producer, ends(t).from_stage, t.micro_batch});
}

int TaskGraph::data_successor(int id) const {
  if (is_compute(id)) {
    const ComputeTask t = compute_task(id);
    const int m = t.micro_batch;
    if (t.op == Op::kForward) {
      if (t.stage == stages_ - 1) return this->id(ComputeTask{backward_op(), t.stage, m});
      return is_local_boundary(t.stage)
                 ? this->id(ComputeTask{Op::kForward, t.stage + 1, m})
                 : this->id(TransferTask{TransferKind::kActivation, t.stage, m});
    }
    if (t.op == Op::kBackwardWeight || t.stage == 0) return kNone;
    return is_local_boundary(t.stage - 1)
               ? this->id(ComputeTask{t.op, t.stage - 1, m})
               : this->id(TransferTask{TransferKind::kGradient, t.stage - 1, m});
  }
  if (!is_transfer(id)) return kNone;
  // A transfer releases the task that consumes it on its receiving stage.
  const TransferTask t = transfer_task(id);
  const Op consumer = t.kind == TransferKind::kActivation ? Op::kForward : backward_op();
  return this->id(ComputeTask{consumer, ends(t).to_stage, t.micro_batch});
}

std::array<int, 2> TaskGraph::data_successors(int id) const {
  std::array<int, 2> out{data_successor(id), kNone};
  if (split_backward() && is_compute(id) && id % per_ == 1) out[1] = id + 1;  // I(m,s) -> W(m,s)
  return out;
}

std::vector<int> TaskGraph::backwards_of(int stage) const {
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(micro_batches_));
  for (int m = 0; m < micro_batches_; ++m) {
    out.push_back(id(ComputeTask{last_backward_op(), stage, m}));
  }
  return out;
}

std::vector<int> TaskGraph::predecessors(int id) const {
  if (is_allreduce(id)) return backwards_of(allreduce_stage(id));
  if (is_update(id)) {
    const int s = update_stage(id);
    return has_allreduce(s) ? std::vector<int>{allreduce(s)} : backwards_of(s);
  }
  const int p = data_predecessor(id);
  return p == kNone ? std::vector<int>{} : std::vector<int>{p};
}

std::string TaskGraph::describe_predecessors(int id) const {
  if (is_allreduce(id) || (is_update(id) && !has_allreduce(update_stage(id)))) {
    const int s = is_allreduce(id) ? allreduce_stage(id) : update_stage(id);
    return std::string(split_backward() ? "the last weight-gradient backward"
                                        : "the last backward") +
           " of stage " + std::to_string(s);
  }
  if (is_update(id)) return describe(allreduce(update_stage(id)));
  return describe(data_predecessor(id));
}

std::string TaskGraph::describe(int id) const {
  if (is_compute(id)) return simulate::describe(compute_task(id));
  if (is_transfer(id)) return simulate::describe(transfer_task(id));
  if (is_allreduce(id)) return "the AllReduce of stage " + std::to_string(allreduce_stage(id));
  return "the optimizer step of stage " + std::to_string(update_stage(id));
}

std::string describe(const ComputeTask& task) {
  const char* what = "forward";
  switch (task.op) {
    case Op::kForward:
      break;
    case Op::kBackward:
      what = "backward";
      break;
    case Op::kBackwardInput:
      what = "input-gradient backward";
      break;
    case Op::kBackwardWeight:
      what = "weight-gradient backward";
      break;
  }
  return std::string(what) + " of micro-batch " + std::to_string(task.micro_batch) + " on stage " +
         std::to_string(task.stage);
}

std::string describe(const TransferTask& task) {
  const TransferEnds ends = TaskGraph::ends(task);
  return std::string(task.kind == TransferKind::kActivation ? "activation" : "gradient") +
         " transfer of micro-batch " + std::to_string(task.micro_batch) + " from stage " +
         std::to_string(ends.from_stage) + " to stage " + std::to_string(ends.to_stage);
}

}  // namespace pipeplan::simulate
