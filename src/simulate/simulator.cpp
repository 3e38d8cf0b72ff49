// The execution model (spec section 3).
//
// Replay: a schedule fixes the order of tasks on every GPU and channel, so every task has at
// most two predecessors (its data dependency and the task before it on its resource). Start
// times are the longest paths of that DAG, computed in topological order (Kahn's
// algorithm): O(T) for T = 4 S M tasks, plus O(T log T) to sort the timeline for output.
// Peak memory: per GPU, a sweep over allocations (forward starts) and releases (backward
// ends) sorted by time, releases first at equal times. O(T log T).

#include "pipeplan/simulate/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "pipeplan/report/format.hpp"

namespace pipeplan::simulate {
namespace {

constexpr int kNone = -1;

std::string gpu_name(const topology::Topology& topology, int gpu) {
  return "GPU \"" + topology.gpu(gpu).id + "\"";
}

// Dense task numbering: compute tasks first, then transfers.
class TaskIndex {
 public:
  TaskIndex(int stages, int micro_batches) : stages_(stages), micro_batches_(micro_batches) {}
  [[nodiscard]] int compute(Op op, int stage, int micro_batch) const {
    return ((stage * micro_batches_ + micro_batch) << 1) | (op == Op::kBackward ? 1 : 0);
  }
  [[nodiscard]] int transfer(TransferKind kind, int stage, int micro_batch) const {
    return compute_count() +
           (((stage * micro_batches_ + micro_batch) << 1) | (kind == TransferKind::kGradient ? 1 : 0));
  }
  [[nodiscard]] int compute_count() const { return 2 * stages_ * micro_batches_; }
  [[nodiscard]] int total() const { return compute_count() + 2 * (stages_ - 1) * micro_batches_; }
  [[nodiscard]] bool is_compute(int id) const { return id < compute_count(); }
  [[nodiscard]] ComputeTask compute_task(int id) const {
    int pair = id >> 1;
    return ComputeTask{(id & 1) ? Op::kBackward : Op::kForward, pair / micro_batches_,
                       pair % micro_batches_};
  }
  [[nodiscard]] TransferTask transfer_task(int id) const {
    int local = id - compute_count();
    int pair = local >> 1;
    return TransferTask{(local & 1) ? TransferKind::kGradient : TransferKind::kActivation,
                        pair / micro_batches_, pair % micro_batches_};
  }

 private:
  int stages_;
  int micro_batches_;
};

// The first compute task, in the order the replay checks them (stage, then micro-batch,
// forward before backward), that `schedule` does not list; nothing when all are listed.
// Looks at most (listed tasks + 1) tasks and holds the listed ones in a hash set, so a
// schedule that claims a huge micro-batch count costs what it lists, not what it claims.
std::optional<ComputeTask> first_missing(const Schedule& schedule, int S) {
  std::unordered_set<std::uint64_t> listed;
  auto key = [](const ComputeTask& t) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.stage)) << 33) |
           (static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.micro_batch)) << 1) |
           (t.op == Op::kBackward ? 1U : 0U);
  };
  for (const auto& order : schedule.gpu_order) {
    for (const ComputeTask& task : order) listed.insert(key(task));
  }
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < schedule.micro_batches; ++m) {
      for (Op op : {Op::kForward, Op::kBackward}) {
        if (listed.count(key(ComputeTask{op, s, m})) == 0) return ComputeTask{op, s, m};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::string describe(const ComputeTask& task) {
  return std::string(task.op == Op::kForward ? "forward" : "backward") + " of micro-batch " +
         std::to_string(task.micro_batch) + " on stage " + std::to_string(task.stage);
}

std::string describe(const TransferTask& task) {
  bool activation = task.kind == TransferKind::kActivation;
  return std::string(activation ? "activation" : "gradient") + " transfer of micro-batch " +
         std::to_string(task.micro_batch) + " from stage " +
         std::to_string(activation ? task.stage : task.stage + 1) + " to stage " +
         std::to_string(activation ? task.stage + 1 : task.stage);
}

StageProfile stage_profile(const model::Model& model, const std::vector<Stage>& stages, int s) {
  const Stage& stage = stages[static_cast<std::size_t>(s)];
  StageProfile profile;
  for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
    const model::Layer& layer = model.layers[static_cast<std::size_t>(l)];
    profile.forward_ms += layer.forward_ms;
    profile.backward_ms += layer.backward_ms;
    profile.parameter_bytes += layer.parameter_bytes;
    profile.stash_bytes += layer.stash_bytes;
  }
  if (s + 1 < static_cast<int>(stages.size())) {
    profile.boundary_bytes = model.layers[static_cast<std::size_t>(stage.last_layer)].activation_bytes;
  }
  return profile;
}

double allreduce_ms(const topology::Topology& topology, const std::vector<int>& gpus,
                    double bytes) {
  const auto r = gpus.size();
  if (r <= 1) return 0;
  double beta = std::numeric_limits<double>::infinity();
  double lambda = 0;
  for (std::size_t i = 0; i < r; ++i) {
    int u = gpus[i];
    int v = gpus[(i + 1) % r];
    beta = std::min(beta, topology.bandwidth_bytes_per_s(u, v));
    lambda = std::max(lambda, topology.latency_ms(u, v));
  }
  return ring_allreduce_ms(static_cast<int>(r), bytes, beta, lambda);
}

double ring_allreduce_ms(int r, double bytes, double beta_bytes_per_s, double lambda_ms) {
  if (r <= 1) return 0;
  const double rr = r;
  return 2 * (rr - 1) / rr * bytes / beta_bytes_per_s * 1e3 + 2 * (rr - 1) * lambda_ms;
}

void check_stages(const model::Model& model, const topology::Topology& topology,
                  const std::vector<Stage>& stages) {
  if (stages.empty()) throw ScheduleError("the plan has no stages");
  std::vector<int> owner(static_cast<std::size_t>(topology.size()), kNone);
  int next_layer = 0;
  const int layers = static_cast<int>(model.layers.size());
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& stage = stages[s];
    const std::string name = "stage " + std::to_string(s);
    if (stage.first_layer != next_layer) {
      throw ScheduleError(name + " starts at layer " + std::to_string(stage.first_layer) +
                          ", expected layer " + std::to_string(next_layer) +
                          " (stages must cover the layers once, in order)");
    }
    if (stage.last_layer < stage.first_layer || stage.last_layer >= layers) {
      throw ScheduleError(name + " ends at layer " + std::to_string(stage.last_layer) +
                          ", outside " + std::to_string(stage.first_layer) + ".." +
                          std::to_string(layers - 1));
    }
    next_layer = stage.last_layer + 1;
    if (stage.gpus.empty()) throw ScheduleError(name + " has no GPUs");
    for (int gpu : stage.gpus) {
      if (gpu < 0 || gpu >= topology.size()) {
        throw ScheduleError(name + " names GPU index " + std::to_string(gpu) + ", which does not exist");
      }
      int& slot = owner[static_cast<std::size_t>(gpu)];
      if (slot != kNone) {
        throw ScheduleError(gpu_name(topology, gpu) + " serves both stage " + std::to_string(slot) +
                            " and " + name);
      }
      slot = static_cast<int>(s);
    }
  }
  if (next_layer != layers) {
    throw ScheduleError("the stages end at layer " + std::to_string(next_layer - 1) +
                        " but the model has " + std::to_string(layers) + " layers");
  }
}

Timeline replay(const model::Model& model, const topology::Topology& topology,
                const std::vector<Stage>& stages, const Schedule& schedule) {
  const int S = static_cast<int>(stages.size());
  const int M = schedule.micro_batches;
  const int N = topology.size();
  if (M < 1) throw ScheduleError("the schedule has no micro-batches");
  // The arrays below have a slot for each of the 4 S M - 2 M tasks. A schedule that lists
  // fewer compute tasks than 2 S M misses one: say which before sizing anything by S M, which
  // a stated plan may set to anything.
  std::int64_t listed = 0;
  for (const auto& order : schedule.gpu_order) listed += static_cast<std::int64_t>(order.size());
  if (listed < 2 * static_cast<std::int64_t>(S) * M) {
    if (auto missing = first_missing(schedule, S))
      throw ScheduleError(describe(*missing) + " is missing");
  }
  // Tasks are numbered with ints; planners::check_limits keeps plans far below this.
  const std::int64_t task_count =
      4 * static_cast<std::int64_t>(S) * M - 2 * static_cast<std::int64_t>(M);
  if (task_count > std::numeric_limits<int>::max()) {
    throw ScheduleError("the schedule has " + std::to_string(task_count) + " tasks, more than " +
                        std::to_string(std::numeric_limits<int>::max()));
  }
  if (static_cast<int>(schedule.gpu_order.size()) != N) {
    throw ScheduleError("the schedule has orders for " + std::to_string(schedule.gpu_order.size()) +
                        " GPUs, the topology has " + std::to_string(N));
  }
  std::vector<StageProfile> profiles;
  profiles.reserve(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) profiles.push_back(stage_profile(model, stages, s));
  std::vector<int> stage_of(static_cast<std::size_t>(N), kNone);
  for (int s = 0; s < S; ++s) {
    for (int g : stages[static_cast<std::size_t>(s)].gpus) stage_of[static_cast<std::size_t>(g)] = s;
  }

  const TaskIndex index(S, M);
  const auto T = static_cast<std::size_t>(index.total());
  std::vector<int> where(T, kNone);        // GPU of a compute task / channel slot of a transfer
  std::vector<int> resource_pred(T, kNone);
  std::vector<int> resource_succ(T, kNone);
  std::vector<int> position(T, 0);         // position in its resource's order
  std::vector<double> duration(T, 0);

  // Compute orders.
  for (int g = 0; g < N; ++g) {
    const auto& order = schedule.gpu_order[static_cast<std::size_t>(g)];
    int previous = kNone;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const ComputeTask& task = order[k];
      if (task.stage < 0 || task.stage >= S || task.micro_batch < 0 || task.micro_batch >= M) {
        throw ScheduleError(gpu_name(topology, g) + " runs a task of stage " +
                            std::to_string(task.stage) + " and micro-batch " +
                            std::to_string(task.micro_batch) + ", which do not exist");
      }
      if (stage_of[static_cast<std::size_t>(g)] != task.stage) {
        throw ScheduleError(describe(task) + " runs on " + gpu_name(topology, g) +
                                ", which does not serve stage " + std::to_string(task.stage),
                            task);
      }
      const int id = index.compute(task.op, task.stage, task.micro_batch);
      if (where[static_cast<std::size_t>(id)] != kNone) {
        throw ScheduleError(describe(task) + " appears more than once", task);
      }
      where[static_cast<std::size_t>(id)] = g;
      position[static_cast<std::size_t>(id)] = static_cast<int>(k);
      const StageProfile& p = profiles[static_cast<std::size_t>(task.stage)];
      duration[static_cast<std::size_t>(id)] =
          (task.op == Op::kForward ? p.forward_ms : p.backward_ms) / topology.gpu(g).speed;
      if (previous != kNone) {
        resource_pred[static_cast<std::size_t>(id)] = previous;
        resource_succ[static_cast<std::size_t>(previous)] = id;
      }
      previous = id;
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < M; ++m) {
      const int f = index.compute(Op::kForward, s, m);
      const int b = index.compute(Op::kBackward, s, m);
      if (where[static_cast<std::size_t>(f)] == kNone) {
        throw ScheduleError(describe(ComputeTask{Op::kForward, s, m}) + " is missing");
      }
      if (where[static_cast<std::size_t>(b)] == kNone) {
        throw ScheduleError(describe(ComputeTask{Op::kBackward, s, m}) + " is missing");
      }
      if (where[static_cast<std::size_t>(b)] != where[static_cast<std::size_t>(f)]) {
        throw ScheduleError(describe(ComputeTask{Op::kBackward, s, m}) + " runs on " +
                                gpu_name(topology, where[static_cast<std::size_t>(b)]) +
                                " but its forward runs on " +
                                gpu_name(topology, where[static_cast<std::size_t>(f)]),
                            ComputeTask{Op::kBackward, s, m});
      }
    }
  }

  // Transfer orders.
  std::vector<Channel> channels;
  for (const auto& [channel, order] : schedule.channel_order) {
    const int slot = static_cast<int>(channels.size());
    channels.push_back(channel);
    int previous = kNone;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const TransferTask& task = order[k];
      if (task.stage < 0 || task.stage >= S - 1 || task.micro_batch < 0 || task.micro_batch >= M) {
        throw ScheduleError("channel " + topology.gpu(channel.first).id + " -> " +
                            topology.gpu(channel.second).id + " carries a transfer across boundary " +
                            std::to_string(task.stage) + " for micro-batch " +
                            std::to_string(task.micro_batch) + ", which do not exist");
      }
      const int s = task.stage;
      const int m = task.micro_batch;
      const int lower = where[static_cast<std::size_t>(index.compute(Op::kForward, s, m))];
      const int upper = where[static_cast<std::size_t>(index.compute(Op::kForward, s + 1, m))];
      const Channel expected = task.kind == TransferKind::kActivation ? Channel{lower, upper}
                                                                      : Channel{upper, lower};
      if (expected != channel) {
        throw ScheduleError(describe(task) + " must go from " + topology.gpu(expected.first).id +
                                " to " + topology.gpu(expected.second).id + ", not from " +
                                topology.gpu(channel.first).id + " to " +
                                topology.gpu(channel.second).id,
                            task);
      }
      const int id = index.transfer(task.kind, s, m);
      if (where[static_cast<std::size_t>(id)] != kNone) {
        throw ScheduleError(describe(task) + " appears more than once", task);
      }
      where[static_cast<std::size_t>(id)] = slot;
      position[static_cast<std::size_t>(id)] = static_cast<int>(k);
      duration[static_cast<std::size_t>(id)] =
          topology.transfer_ms(channel.first, channel.second, profiles[static_cast<std::size_t>(s)].boundary_bytes);
      if (previous != kNone) {
        resource_pred[static_cast<std::size_t>(id)] = previous;
        resource_succ[static_cast<std::size_t>(previous)] = id;
      }
      previous = id;
    }
  }
  for (int id = index.compute_count(); id < index.total(); ++id) {
    if (where[static_cast<std::size_t>(id)] == kNone) {
      throw ScheduleError(describe(index.transfer_task(id)) + " is missing");
    }
  }

  // Data dependencies (at most one predecessor and one successor per task).
  auto data_pred = [&](int id) -> int {
    if (index.is_compute(id)) {
      ComputeTask t = index.compute_task(id);
      if (t.op == Op::kForward) {
        return t.stage > 0 ? index.transfer(TransferKind::kActivation, t.stage - 1, t.micro_batch) : kNone;
      }
      return t.stage == S - 1 ? index.compute(Op::kForward, t.stage, t.micro_batch)
                              : index.transfer(TransferKind::kGradient, t.stage, t.micro_batch);
    }
    TransferTask t = index.transfer_task(id);
    return t.kind == TransferKind::kActivation ? index.compute(Op::kForward, t.stage, t.micro_batch)
                                               : index.compute(Op::kBackward, t.stage + 1, t.micro_batch);
  };
  auto data_succ = [&](int id) -> int {
    if (index.is_compute(id)) {
      ComputeTask t = index.compute_task(id);
      if (t.op == Op::kForward) {
        return t.stage < S - 1 ? index.transfer(TransferKind::kActivation, t.stage, t.micro_batch)
                               : index.compute(Op::kBackward, t.stage, t.micro_batch);
      }
      return t.stage > 0 ? index.transfer(TransferKind::kGradient, t.stage - 1, t.micro_batch) : kNone;
    }
    TransferTask t = index.transfer_task(id);
    return t.kind == TransferKind::kActivation ? index.compute(Op::kForward, t.stage + 1, t.micro_batch)
                                               : index.compute(Op::kBackward, t.stage, t.micro_batch);
  };

  // Longest paths in topological order.
  std::vector<std::uint8_t> pending(T, 0);
  std::vector<double> start(T, 0), end(T, 0);
  std::vector<int> ready;
  for (std::size_t id = 0; id < T; ++id) {
    pending[id] = static_cast<std::uint8_t>((data_pred(static_cast<int>(id)) != kNone ? 1 : 0) +
                                            (resource_pred[id] != kNone ? 1 : 0));
    if (pending[id] == 0) ready.push_back(static_cast<int>(id));
  }
  std::size_t done = 0;
  while (!ready.empty()) {
    const int id = ready.back();
    ready.pop_back();
    const auto i = static_cast<std::size_t>(id);
    double at = 0;
    if (int p = data_pred(id); p != kNone) at = std::max(at, end[static_cast<std::size_t>(p)]);
    if (int p = resource_pred[i]; p != kNone) at = std::max(at, end[static_cast<std::size_t>(p)]);
    start[i] = at;
    end[i] = at + duration[i];
    ++done;
    for (int next : {data_succ(id), resource_succ[i]}) {
      if (next != kNone && --pending[static_cast<std::size_t>(next)] == 0) ready.push_back(next);
    }
  }
  if (done != T) {
    // Find a cycle of waiting: from a blocked task at the head of its resource, follow its
    // data dependency to the head of that dependency's resource, until a head repeats.
    std::vector<const std::vector<TransferTask>*> channel_tasks;
    for (const auto& entry : schedule.channel_order) channel_tasks.push_back(&entry.second);
    auto head_of = [&](int id) -> int {
      const auto i = static_cast<std::size_t>(id);
      if (index.is_compute(id)) {
        for (const ComputeTask& t : schedule.gpu_order[static_cast<std::size_t>(where[i])]) {
          const int other = index.compute(t.op, t.stage, t.micro_batch);
          if (pending[static_cast<std::size_t>(other)] != 0) return other;
        }
      } else {
        for (const TransferTask& t : *channel_tasks[static_cast<std::size_t>(where[i])]) {
          const int other = index.transfer(t.kind, t.stage, t.micro_batch);
          if (pending[static_cast<std::size_t>(other)] != 0) return other;
        }
      }
      return id;
    };
    auto name = [&](int id) {
      return index.is_compute(id) ? describe(index.compute_task(id)) : describe(index.transfer_task(id));
    };
    auto place = [&](int id) {
      const auto i = static_cast<std::size_t>(id);
      if (index.is_compute(id)) return gpu_name(topology, where[i]);
      const Channel& c = channels[static_cast<std::size_t>(where[i])];
      return "channel " + topology.gpu(c.first).id + " -> " + topology.gpu(c.second).id;
    };
    int current = kNone;
    for (std::size_t id = 0; id < T && current == kNone; ++id) {
      if (pending[id] != 0 && head_of(static_cast<int>(id)) == static_cast<int>(id)) current = static_cast<int>(id);
    }
    std::vector<char> visited(T, 0);
    while (current != kNone && !visited[static_cast<std::size_t>(current)]) {
      visited[static_cast<std::size_t>(current)] = 1;
      current = head_of(data_pred(current));
    }
    // Around the cycle, report the first wait on a task that its resource orders behind
    // another one: that order is what closes the cycle.
    int waiting = current;
    for (int step = 0; step < static_cast<int>(T); ++step) {
      if (head_of(data_pred(waiting)) != data_pred(waiting) || head_of(data_pred(waiting)) == waiting) break;
      waiting = head_of(data_pred(waiting));
    }
    const int dependency = data_pred(waiting);
    const int blocker = head_of(dependency);
    const std::string behind = blocker == waiting ? "it" : name(blocker) + " on " + place(blocker);
    const std::string message = "the orders deadlock: " + name(waiting) + " on " + place(waiting) +
                                " waits for " + name(dependency) + ", which is ordered behind " + behind;
    if (index.is_compute(waiting)) throw ScheduleError(message, index.compute_task(waiting));
    throw ScheduleError(message, index.transfer_task(waiting));
  }

  Timeline timeline;
  timeline.gpus.assign(static_cast<std::size_t>(N), GpuUsage{});
  for (int g = 0; g < N; ++g) {
    if (stage_of[static_cast<std::size_t>(g)] != kNone) timeline.gpus[static_cast<std::size_t>(g)].stage = stage_of[static_cast<std::size_t>(g)];
  }
  timeline.compute.reserve(static_cast<std::size_t>(index.compute_count()));
  for (int id = 0; id < index.compute_count(); ++id) {
    const auto i = static_cast<std::size_t>(id);
    timeline.compute.push_back(TimedCompute{where[i], index.compute_task(id), start[i], end[i]});
    timeline.gpus[static_cast<std::size_t>(where[i])].busy_ms += duration[i];
  }
  std::sort(timeline.compute.begin(), timeline.compute.end(), [&](const TimedCompute& a, const TimedCompute& b) {
    if (a.start_ms != b.start_ms) return a.start_ms < b.start_ms;
    if (a.gpu != b.gpu) return a.gpu < b.gpu;
    return position[static_cast<std::size_t>(index.compute(a.task.op, a.task.stage, a.task.micro_batch))] <
           position[static_cast<std::size_t>(index.compute(b.task.op, b.task.stage, b.task.micro_batch))];
  });
  timeline.transfers.reserve(T - static_cast<std::size_t>(index.compute_count()));
  for (int id = index.compute_count(); id < index.total(); ++id) {
    const auto i = static_cast<std::size_t>(id);
    const Channel& channel = channels[static_cast<std::size_t>(where[i])];
    const TransferTask task = index.transfer_task(id);
    timeline.transfers.push_back(TimedTransfer{channel.first, channel.second, task,
                                               profiles[static_cast<std::size_t>(task.stage)].boundary_bytes,
                                               start[i], end[i]});
  }
  std::sort(timeline.transfers.begin(), timeline.transfers.end(), [&](const TimedTransfer& a, const TimedTransfer& b) {
    if (a.start_ms != b.start_ms) return a.start_ms < b.start_ms;
    if (a.from != b.from) return a.from < b.from;
    if (a.to != b.to) return a.to < b.to;
    return position[static_cast<std::size_t>(index.transfer(a.task.kind, a.task.stage, a.task.micro_batch))] <
           position[static_cast<std::size_t>(index.transfer(b.task.kind, b.task.stage, b.task.micro_batch))];
  });

  double iteration = 0;
  for (double e : end) iteration = std::max(iteration, e);
  for (int s = 0; s < S; ++s) {
    const Stage& stage = stages[static_cast<std::size_t>(s)];
    if (stage.gpus.size() < 2) continue;
    double last_backward = 0;
    for (int m = 0; m < M; ++m) {
      last_backward = std::max(last_backward, end[static_cast<std::size_t>(index.compute(Op::kBackward, s, m))]);
    }
    const double bytes = profiles[static_cast<std::size_t>(s)].parameter_bytes;
    const double finish = last_backward + allreduce_ms(topology, stage.gpus, bytes);
    timeline.allreduces.push_back(TimedAllReduce{s, bytes, last_backward, finish});
    iteration = std::max(iteration, finish);
  }
  timeline.iteration_ms = iteration;

  // Peak memory: static bytes plus the stash of micro-batches between forward start and
  // backward end; at equal times (within tolerance) releases come first.
  std::vector<std::vector<double>> allocations(static_cast<std::size_t>(N)), releases(static_cast<std::size_t>(N));
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < M; ++m) {
      const auto f = static_cast<std::size_t>(index.compute(Op::kForward, s, m));
      const auto b = static_cast<std::size_t>(index.compute(Op::kBackward, s, m));
      allocations[static_cast<std::size_t>(where[f])].push_back(start[f]);
      releases[static_cast<std::size_t>(where[b])].push_back(end[b]);
    }
  }
  for (int g = 0; g < N; ++g) {
    const auto gi = static_cast<std::size_t>(g);
    if (stage_of[gi] == kNone) continue;
    const StageProfile& p = profiles[static_cast<std::size_t>(stage_of[gi])];
    auto& alloc = allocations[gi];
    auto& rel = releases[gi];
    std::sort(alloc.begin(), alloc.end());
    std::sort(rel.begin(), rel.end());
    std::size_t released = 0;
    std::size_t peak_in_flight = 0;
    for (std::size_t k = 0; k < alloc.size(); ++k) {
      while (released < rel.size() && (rel[released] <= alloc[k] || times_equal(rel[released], alloc[k]))) {
        ++released;
      }
      peak_in_flight = std::max(peak_in_flight, k + 1 - std::min(released, k + 1));
    }
    timeline.gpus[gi].peak_memory_bytes =
        model.parameter_memory_factor * p.parameter_bytes + static_cast<double>(peak_in_flight) * p.stash_bytes;
  }
  return timeline;
}

long max_in_flight(double static_bytes, double stash_bytes, std::optional<double> capacity_bytes,
                   long limit) {
  if (!capacity_bytes) return limit;
  const double cap = *capacity_bytes * (1 + 1e-9);
  if (static_bytes + stash_bytes > cap) return 0;
  if (stash_bytes <= 0) return limit;
  const double room = (cap - static_bytes) / stash_bytes;
  long fit = room >= static_cast<double>(limit) ? limit : static_cast<long>(std::floor(room));
  // Count exactly as the replay does: static + k * stash <= cap.
  while (fit > 1 && static_bytes + static_cast<double>(fit) * stash_bytes > cap) --fit;
  while (fit < limit && static_bytes + static_cast<double>(fit + 1) * stash_bytes <= cap) ++fit;
  return std::max(fit, 1L);
}

std::optional<std::string> memory_violation(const topology::Topology& topology,
                                            const Timeline& timeline) {
  for (int g = 0; g < topology.size(); ++g) {
    const auto& capacity = topology.gpu(g).memory_bytes;
    const double peak = timeline.gpus[static_cast<std::size_t>(g)].peak_memory_bytes;
    if (capacity && peak > *capacity * (1 + 1e-9)) {
      return gpu_name(topology, g) + " needs " + report::format_bytes(peak) + " at its peak but has " +
             report::format_bytes(*capacity);
    }
  }
  return std::nullopt;
}

Bounds compute_bounds(const model::Model& model, const topology::Topology& topology,
                      const std::vector<Stage>& stages, int micro_batches) {
  const double M = micro_batches;
  Bounds bounds;
  double work = model::total_compute_ms(model);
  double speed_sum = 0, speed_max = 0;
  for (const auto& gpu : topology.gpus()) {
    speed_sum += gpu.speed;
    speed_max = std::max(speed_max, gpu.speed);
  }
  bounds.any_plan_ms = std::max(M * work / speed_sum, work / speed_max);

  // H_s accumulates forward latency; `drain` is max_{j<s} (sum_{i=j}^{s-1} (c_i + B_i/v_i) + AR_j).
  double head = 0;
  double drain = -std::numeric_limits<double>::infinity();
  double best = 0;
  const int S = static_cast<int>(stages.size());
  for (int s = 0; s < S; ++s) {
    const Stage& stage = stages[static_cast<std::size_t>(s)];
    const StageProfile p = stage_profile(model, stages, s);
    double fastest = 0, speeds = 0;
    for (int g : stage.gpus) {
      fastest = std::max(fastest, topology.gpu(g).speed);
      speeds += topology.gpu(g).speed;
    }
    const double r = static_cast<double>(stage.gpus.size());
    const double work_s = p.forward_ms + p.backward_ms;
    const double load = std::max(M * work_s / speeds, std::ceil(M / r) * work_s / fastest);
    const double allreduce = allreduce_ms(topology, stage.gpus, p.parameter_bytes);
    const double tail = std::max(allreduce, drain);
    best = std::max(best, head + load + tail);
    if (s + 1 < S) {
      double c = std::numeric_limits<double>::infinity();
      for (int u : stage.gpus) {
        for (int v : stages[static_cast<std::size_t>(s + 1)].gpus) {
          c = std::min(c, topology.transfer_ms(u, v, p.boundary_bytes));
        }
      }
      head += p.forward_ms / fastest + c;
      drain = std::max(drain, allreduce) + c + p.backward_ms / fastest;
    }
  }
  bounds.partition_ms = best;
  return bounds;
}

double bubble_fraction(const GpuUsage& usage, double iteration_ms) {
  if (iteration_ms <= 0) return 0;
  return std::max(0.0, 1 - usage.busy_ms / iteration_ms);
}

}  // namespace pipeplan::simulate
