// The task numbering and data dependencies of spec sections 3 and 8.3. O(1) per query, O(M)
// for the predecessors of an AllReduce or update slot.

#include "pipeplan/simulate/task_graph.hpp"

#include <limits>

#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {

TaskGraph::TaskGraph(int stages, int micro_batches)
    : stages_(stages), micro_batches_(micro_batches) {
  if (stages < 1) throw ScheduleError("the plan has no stages");
  if (micro_batches < 1) throw ScheduleError("the schedule has no micro-batches");
  const std::int64_t slots =
      chain_task_count(stages, micro_batches) + 2 * static_cast<std::int64_t>(stages);
  if (slots > std::numeric_limits<int>::max()) {
    throw ScheduleError("the schedule has " + std::to_string(slots) + " tasks, more than " +
                        std::to_string(std::numeric_limits<int>::max()));
  }
  replicated_.assign(static_cast<std::size_t>(stages), 0);
}

TaskGraph::TaskGraph(const std::vector<Stage>& stages, int micro_batches)
    : TaskGraph(static_cast<int>(stages.size()), micro_batches) {
  for (std::size_t s = 0; s < stages.size(); ++s) {
    replicated_[s] = stages[s].replicas() > 1 ? 1 : 0;
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

TransferEnds TaskGraph::ends(const TransferTask& task) {
  return task.kind == TransferKind::kActivation ? TransferEnds{task.stage, task.stage + 1}
                                                : TransferEnds{task.stage + 1, task.stage};
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
  if (!is_transfer(id)) return kNone;
  // A transfer waits for the task that produces it on its sending stage.
  const TransferTask t = transfer_task(id);
  const Op producer = t.kind == TransferKind::kActivation ? Op::kForward : Op::kBackward;
  return this->id(ComputeTask{producer, ends(t).from_stage, t.micro_batch});
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
  if (!is_transfer(id)) return kNone;
  // A transfer releases the task that consumes it on its receiving stage.
  const TransferTask t = transfer_task(id);
  const Op consumer = t.kind == TransferKind::kActivation ? Op::kForward : Op::kBackward;
  return this->id(ComputeTask{consumer, ends(t).to_stage, t.micro_batch});
}

std::vector<int> TaskGraph::backwards_of(int stage) const {
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(micro_batches_));
  for (int m = 0; m < micro_batches_; ++m) out.push_back(id(ComputeTask{Op::kBackward, stage, m}));
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
    return "the last backward of stage " + std::to_string(s);
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
  return std::string(task.op == Op::kForward ? "forward" : "backward") + " of micro-batch " +
         std::to_string(task.micro_batch) + " on stage " + std::to_string(task.stage);
}

std::string describe(const TransferTask& task) {
  const TransferEnds ends = TaskGraph::ends(task);
  return std::string(task.kind == TransferKind::kActivation ? "activation" : "gradient") +
         " transfer of micro-batch " + std::to_string(task.micro_batch) + " from stage " +
         std::to_string(ends.from_stage) + " to stage " + std::to_string(ends.to_stage);
}

}  // namespace pipeplan::simulate
