// The task numbering and data dependencies of spec section 3. O(1) per query.

#include "pipeplan/simulate/task_graph.hpp"

#include <limits>

#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {

TaskGraph::TaskGraph(int stages, int micro_batches)
    : stages_(stages), micro_batches_(micro_batches) {
  if (stages < 1) throw ScheduleError("the plan has no stages");
  if (micro_batches < 1) throw ScheduleError("the schedule has no micro-batches");
  const std::int64_t slots = 4 * static_cast<std::int64_t>(stages) * micro_batches -
                             2 * static_cast<std::int64_t>(micro_batches) +
                             2 * static_cast<std::int64_t>(stages);
  if (slots > std::numeric_limits<int>::max()) {
    throw ScheduleError("the schedule has " + std::to_string(slots) + " tasks, more than " +
                        std::to_string(std::numeric_limits<int>::max()));
  }
}

bool TaskGraph::contains(const ComputeTask& task) const {
  return task.stage >= 0 && task.stage < stages_ && task.micro_batch >= 0 &&
         task.micro_batch < micro_batches_;
}

bool TaskGraph::contains(const TransferTask& task) const {
  return task.stage >= 0 && task.stage < stages_ - 1 && task.micro_batch >= 0 &&
         task.micro_batch < micro_batches_;
}

ComputeTask TaskGraph::compute_task(int id) const {
  const int pair = id >> 1;
  return ComputeTask{(id & 1) ? Op::kBackward : Op::kForward, pair / micro_batches_,
                     pair % micro_batches_};
}

TransferTask TaskGraph::transfer_task(int id) const {
  const int local = id - compute_count();
  const int pair = local >> 1;
  return TransferTask{(local & 1) ? TransferKind::kGradient : TransferKind::kActivation,
                      pair / micro_batches_, pair % micro_batches_};
}

int TaskGraph::data_predecessor(int id) const {
  if (is_compute(id)) {
    const ComputeTask t = compute_task(id);
    if (t.op == Op::kForward) {
      return t.stage > 0
                 ? this->id(TransferTask{TransferKind::kActivation, t.stage - 1, t.micro_batch})
                 : kNone;
    }
    return t.stage == stages_ - 1
               ? this->id(ComputeTask{Op::kForward, t.stage, t.micro_batch})
               : this->id(TransferTask{TransferKind::kGradient, t.stage, t.micro_batch});
  }
  if (is_allreduce(id)) return kNone;
  const TransferTask t = transfer_task(id);
  return t.kind == TransferKind::kActivation
             ? this->id(ComputeTask{Op::kForward, t.stage, t.micro_batch})
             : this->id(ComputeTask{Op::kBackward, t.stage + 1, t.micro_batch});
}

int TaskGraph::data_successor(int id) const {
  if (is_compute(id)) {
    const ComputeTask t = compute_task(id);
    if (t.op == Op::kForward) {
      return t.stage < stages_ - 1
                 ? this->id(TransferTask{TransferKind::kActivation, t.stage, t.micro_batch})
                 : this->id(ComputeTask{Op::kBackward, t.stage, t.micro_batch});
    }
    return t.stage > 0 ? this->id(TransferTask{TransferKind::kGradient, t.stage - 1, t.micro_batch})
                       : kNone;
  }
  if (is_allreduce(id)) return kNone;
  const TransferTask t = transfer_task(id);
  return t.kind == TransferKind::kActivation
             ? this->id(ComputeTask{Op::kForward, t.stage + 1, t.micro_batch})
             : this->id(ComputeTask{Op::kBackward, t.stage, t.micro_batch});
}

std::string TaskGraph::describe(int id) const {
  if (is_compute(id)) return simulate::describe(compute_task(id));
  if (is_transfer(id)) return simulate::describe(transfer_task(id));
  if (is_allreduce(id)) return "the AllReduce of stage " + std::to_string(allreduce_stage(id));
  return "the optimizer step of stage " + std::to_string(update_stage(id));
}

std::string describe(const ComputeTask& task) {
  return std::string(task.op == Op::kForward ? "forward" : "backward") + " of micro-batch " +
         std::to_string(task.micro_batch) + " on stage " + std::to_string(task.stage);
}

std::string describe(const TransferTask& task) {
  const bool activation = task.kind == TransferKind::kActivation;
  return std::string(activation ? "activation" : "gradient") + " transfer of micro-batch " +
         std::to_string(task.micro_batch) + " from stage " +
         std::to_string(activation ? task.stage : task.stage + 1) + " to stage " +
         std::to_string(activation ? task.stage + 1 : task.stage);
}

}  // namespace pipeplan::simulate
