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
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_set>

#include "pipeplan/io/format.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/task_graph.hpp"

namespace pipeplan::simulate {
namespace {

constexpr int kNone = -1;

std::string gpu_name(const topology::Topology& topology, int gpu) {
  return "GPU \"" + topology.gpu(gpu).id + "\"";
}

// The first compute task, in the order the replay checks them (stage, then micro-batch,
// forward before backward), that `schedule` does not list; nothing when all are listed.
// Looks at most (listed tasks + 1) tasks and holds the listed ones in a hash set, so a
// schedule that claims a huge micro-batch count costs what it lists, not what it claims.
std::optional<ComputeTask> first_missing(const Schedule& schedule, int S) {
  std::unordered_set<std::uint64_t> listed;
  auto key = [](const ComputeTask& t) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.stage)) << 34) |
           (static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.micro_batch)) << 2) |
           static_cast<std::uint64_t>(t.op);
  };
  for (const auto& order : schedule.gpu_order) {
    for (const ComputeTask& task : order) listed.insert(key(task));
  }
  const std::vector<Op> ops =
      schedule.split_backward
          ? std::vector<Op>{Op::kForward, Op::kBackwardInput, Op::kBackwardWeight}
          : std::vector<Op>{Op::kForward, Op::kBackward};
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < schedule.micro_batches; ++m) {
      for (Op op : ops) {
        if (listed.count(key(ComputeTask{op, s, m})) == 0) return ComputeTask{op, s, m};
      }
    }
  }
  return std::nullopt;
}

// The replay's working state: one slot per task of the `TaskGraph`.
struct Replay {
  const topology::Topology& topology;
  const Schedule& schedule;
  const TaskGraph graph;
  std::vector<StageExecution> exec;  // per stage
  std::vector<int> stage_of;         // per GPU: the first stage of its device, kNone when unused
  std::vector<int> device_of;        // per stage: the first stage of its device
  std::vector<int> group_of;         // per GPU: its replica (group) in its stages, kNone
  std::vector<Channel> channels;     // channel slots in schedule order
  std::vector<int> where;            // GPU of a compute task, channel slot of a transfer
  std::vector<int> resource_pred;    // the task before it on its GPU or channel
  std::vector<int> resource_succ;
  std::vector<int> position;  // position in its resource's order
  std::vector<double> duration;
  std::vector<std::uint8_t> pending;  // unfinished predecessors after the longest paths
  std::vector<double> start;
  std::vector<double> end;

  [[nodiscard]] std::size_t slot(int id) const { return static_cast<std::size_t>(id); }
  // The group a used GPU belongs to, in stage `s` of its device (its first by default).
  [[nodiscard]] const GroupExecution& group(int gpu, int s = kNone) const {
    const auto g = static_cast<std::size_t>(gpu);
    return exec[static_cast<std::size_t>(s == kNone ? stage_of[g] : s)]
        .groups[static_cast<std::size_t>(group_of[g])];
  }
  // Links `id` behind `previous` on the same resource.
  void chain(int previous, int id) {
    if (previous == kNone) return;
    resource_pred[slot(id)] = previous;
    resource_succ[slot(previous)] = id;
  }
};

// Phase 1: what is missing or cannot be numbered is rejected before anything is sized by
// S M, which a stated plan may set to anything.
void reject_missing(const Schedule& schedule, int S, int N) {
  const int M = schedule.micro_batches;
  if (M < 1) throw ScheduleError("the schedule has no micro-batches");
  std::int64_t listed = 0;
  for (const auto& order : schedule.gpu_order) listed += static_cast<std::int64_t>(order.size());
  const std::int64_t per = schedule.split_backward ? 3 : 2;
  if (listed < per * static_cast<std::int64_t>(S) * M) {  // fewer than the compute tasks
    if (auto missing = first_missing(schedule, S)) {
      throw ScheduleError(describe(*missing) + " is missing");
    }
  }
  if (static_cast<int>(schedule.gpu_order.size()) != N) {
    throw ScheduleError("the schedule has orders for " + std::to_string(schedule.gpu_order.size()) +
                        " GPUs, the topology has " + std::to_string(N));
  }
}

// Phase 2a': every compute task is listed; its backward (or I and W) runs on the GPU of its
// forward; across a boundary inside a device a micro-batch stays on one group (spec 9.3).
// O(c S M).
void check_compute_places(const Replay& r) {
  const TaskGraph& graph = r.graph;
  for (int s = 0; s < graph.stages(); ++s) {
    for (int m = 0; m < graph.micro_batches(); ++m) {
      const ComputeTask forward{Op::kForward, s, m};
      const int f = r.where[r.slot(graph.id(forward))];
      if (f == kNone) throw ScheduleError(describe(forward) + " is missing");
      for (const Op op : graph.split_backward()
                             ? std::vector<Op>{Op::kBackwardInput, Op::kBackwardWeight}
                             : std::vector<Op>{Op::kBackward}) {
        const ComputeTask backward{op, s, m};
        const int b = r.where[r.slot(graph.id(backward))];
        if (b == kNone) throw ScheduleError(describe(backward) + " is missing");
        if (b != f) {
          throw ScheduleError(describe(backward) + " runs on " + gpu_name(r.topology, b) +
                                  " but its forward runs on " + gpu_name(r.topology, f),
                              backward);
        }
      }
      if (s > 0 && graph.is_local_boundary(s - 1)) {
        const int below = r.where[r.slot(graph.id(ComputeTask{Op::kForward, s - 1, m}))];
        if (below != f) {
          throw ScheduleError(describe(forward) + " runs on " + gpu_name(r.topology, f) +
                                  " but stage " + std::to_string(s - 1) +
                                  " shares its device and runs micro-batch " + std::to_string(m) +
                                  " on " + gpu_name(r.topology, below) +
                                  " (a boundary inside a device has no transfer, spec 9.3)",
                              forward);
        }
      }
    }
  }
}

// Phase 2a: every GPU's compute order, each task once, on a GPU of its stage, its backward
// on the GPU of its forward. O(2 S M).
void index_compute_orders(Replay& r) {
  const TaskGraph& graph = r.graph;
  const int N = r.topology.size();
  for (int g = 0; g < N; ++g) {
    const auto& order = r.schedule.gpu_order[static_cast<std::size_t>(g)];
    int previous = kNone;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const ComputeTask& task = order[k];
      if (!graph.contains(task)) {
        throw ScheduleError(gpu_name(r.topology, g) + " runs a task of stage " +
                            std::to_string(task.stage) + " and micro-batch " +
                            std::to_string(task.micro_batch) + ", which do not exist");
      }
      if (r.stage_of[static_cast<std::size_t>(g)] == kNone ||
          r.device_of[static_cast<std::size_t>(task.stage)] !=
              r.stage_of[static_cast<std::size_t>(g)]) {
        throw ScheduleError(describe(task) + " runs on " + gpu_name(r.topology, g) +
                                ", which does not serve stage " + std::to_string(task.stage),
                            task);
      }
      const GroupExecution& group = r.group(g);
      if (group.leader != g) {
        throw ScheduleError(describe(task) + " runs on " + gpu_name(r.topology, g) +
                                ", which is not the leader of its tensor-parallel group (" +
                                gpu_name(r.topology, group.leader) + ")",
                            task);
      }
      const int id = graph.id(task);
      if (r.where[r.slot(id)] != kNone) {
        throw ScheduleError(describe(task) + " appears more than once", task);
      }
      r.where[r.slot(id)] = g;
      r.position[r.slot(id)] = static_cast<int>(k);
      r.duration[r.slot(id)] = r.group(g, task.stage).duration(task.op);
      r.chain(previous, id);
      previous = id;
    }
  }
  check_compute_places(r);
}

// Phase 2b: every channel's transfer order, each transfer once, on the channel between the
// GPUs of its two forwards. O(2 (S-1) M).
void index_transfer_orders(Replay& r) {
  const TaskGraph& graph = r.graph;
  const topology::Topology& topology = r.topology;
  for (const auto& [channel, order] : r.schedule.channel_order) {
    const int slot = static_cast<int>(r.channels.size());
    r.channels.push_back(channel);
    int previous = kNone;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const TransferTask& task = order[k];
      if (!graph.contains(task)) {
        throw ScheduleError(
            "channel " + topology.gpu(channel.first).id + " -> " + topology.gpu(channel.second).id +
            " carries a transfer across boundary " + std::to_string(task.stage) +
            " for micro-batch " + std::to_string(task.micro_batch) + ", which do not exist");
      }
      const int s = task.stage;
      const int m = task.micro_batch;
      const TransferEnds ends = TaskGraph::ends(task);
      const Channel expected{
          r.where[r.slot(graph.id(ComputeTask{Op::kForward, ends.from_stage, m}))],
          r.where[r.slot(graph.id(ComputeTask{Op::kForward, ends.to_stage, m}))]};
      if (expected != channel) {
        throw ScheduleError(describe(task) + " must go from " + topology.gpu(expected.first).id +
                                " to " + topology.gpu(expected.second).id + ", not from " +
                                topology.gpu(channel.first).id + " to " +
                                topology.gpu(channel.second).id,
                            task);
      }
      const int id = graph.id(task);
      if (r.where[r.slot(id)] != kNone) {
        throw ScheduleError(describe(task) + " appears more than once", task);
      }
      r.where[r.slot(id)] = slot;
      r.position[r.slot(id)] = static_cast<int>(k);
      r.duration[r.slot(id)] = topology.transfer_ms(
          channel.first, channel.second, r.exec[static_cast<std::size_t>(s)].transfer_bytes);
      r.chain(previous, id);
      previous = id;
    }
  }
  for (int id = graph.compute_count(); id < graph.chain_count(); ++id) {
    if (r.where[r.slot(id)] == kNone) {
      throw ScheduleError(describe(graph.transfer_task(id)) + " is missing");
    }
  }
}

// Phase 3: start times are the longest paths of the DAG of data and resource predecessors,
// in topological order (Kahn's algorithm). O(T). Returns how many tasks finished; fewer than
// all means the orders deadlock.
int longest_paths(Replay& r) {
  const TaskGraph& graph = r.graph;
  const int T = graph.chain_count();
  std::vector<int> ready;
  for (int id = 0; id < T; ++id) {
    r.pending[r.slot(id)] =
        static_cast<std::uint8_t>((graph.data_predecessor(id) != kNone ? 1 : 0) +
                                  (r.resource_pred[r.slot(id)] != kNone ? 1 : 0));
    if (r.pending[r.slot(id)] == 0) ready.push_back(id);
  }
  int done = 0;
  while (!ready.empty()) {
    const int id = ready.back();
    ready.pop_back();
    double at = 0;
    if (const int p = graph.data_predecessor(id); p != kNone) at = std::max(at, r.end[r.slot(p)]);
    if (const int p = r.resource_pred[r.slot(id)]; p != kNone) at = std::max(at, r.end[r.slot(p)]);
    r.start[r.slot(id)] = at;
    r.end[r.slot(id)] = at + r.duration[r.slot(id)];
    ++done;
    const std::array<int, 2> data = graph.data_successors(id);
    for (const int next : {data[0], data[1], r.resource_succ[r.slot(id)]}) {
      if (next != kNone && --r.pending[r.slot(next)] == 0) ready.push_back(next);
    }
  }
  return done;
}

// The first unfinished task on the resource of `id`, in that resource's order.
int head_of(const Replay& r, int id) {
  const TaskGraph& graph = r.graph;
  const auto at = static_cast<std::size_t>(r.where[r.slot(id)]);
  if (graph.is_compute(id)) {
    for (const ComputeTask& t : r.schedule.gpu_order[at]) {
      if (const int other = graph.id(t); r.pending[r.slot(other)] != 0) return other;
    }
  } else {
    const auto& order = r.schedule.channel_order.at(r.channels[at]);
    for (const TransferTask& t : order) {
      if (const int other = graph.id(t); r.pending[r.slot(other)] != 0) return other;
    }
  }
  return id;
}

// Phase 3b: explains a deadlock. From a blocked task at the head of its resource, follow its
// data dependency to the head of that dependency's resource until a head repeats; around
// that cycle, report the first wait on a task that its resource orders behind another one:
// that order is what closes the cycle. O(T) per step, O(T^2) at worst, only on failure.
[[noreturn]] void explain_deadlock(const Replay& r) {
  const TaskGraph& graph = r.graph;
  const int T = graph.chain_count();
  auto place = [&](int id) {
    if (graph.is_compute(id)) return gpu_name(r.topology, r.where[r.slot(id)]);
    const Channel& c = r.channels[static_cast<std::size_t>(r.where[r.slot(id)])];
    return "channel " + r.topology.gpu(c.first).id + " -> " + r.topology.gpu(c.second).id;
  };
  int current = kNone;
  for (int id = 0; id < T && current == kNone; ++id) {
    if (r.pending[r.slot(id)] != 0 && head_of(r, id) == id) current = id;
  }
  std::vector<char> visited(static_cast<std::size_t>(T), 0);
  while (current != kNone && !visited[r.slot(current)]) {
    visited[r.slot(current)] = 1;
    current = head_of(r, graph.data_predecessor(current));
  }
  int waiting = current;
  for (int step = 0; step < T; ++step) {
    const int dependency = graph.data_predecessor(waiting);
    if (head_of(r, dependency) != dependency || head_of(r, dependency) == waiting) break;
    waiting = head_of(r, dependency);
  }
  const int dependency = graph.data_predecessor(waiting);
  const int blocker = head_of(r, dependency);
  const std::string behind =
      blocker == waiting ? "it" : graph.describe(blocker) + " on " + place(blocker);
  const std::string message = "the orders deadlock: " + graph.describe(waiting) + " on " +
                              place(waiting) + " waits for " + graph.describe(dependency) +
                              ", which is ordered behind " + behind;
  if (graph.is_compute(waiting)) throw ScheduleError(message, graph.compute_task(waiting));
  throw ScheduleError(message, graph.transfer_task(waiting));
}

// Phase 4a: every GPU's stages and busy time, and the iteration's end so far (the last
// task's). O(T + N).
void gpu_usage(const Replay& r, Timeline& timeline) {
  const TaskGraph& graph = r.graph;
  const int N = r.topology.size();
  timeline.gpus.assign(static_cast<std::size_t>(N), GpuUsage{});
  for (int s = 0; s < graph.stages(); ++s) {
    for (const GroupExecution& group : r.exec[static_cast<std::size_t>(s)].groups) {
      for (const int g : group.gpus) timeline.gpus[static_cast<std::size_t>(g)].stages.push_back(s);
    }
  }
  for (int id = 0; id < graph.compute_count(); ++id) {
    const auto i = r.slot(id);
    timeline.gpus[static_cast<std::size_t>(r.where[i])].busy_ms += r.duration[i];
  }
  // Every GPU of a group runs its leader's tasks (spec 8.2).
  for (int g = 0; g < N; ++g) {
    if (r.stage_of[static_cast<std::size_t>(g)] == kNone) continue;
    const int leader = r.group(g).leader;
    if (leader != g) {
      timeline.gpus[static_cast<std::size_t>(g)].busy_ms =
          timeline.gpus[static_cast<std::size_t>(leader)].busy_ms;
    }
  }
  timeline.iteration_ms = 0;
  for (const double e : r.end) timeline.iteration_ms = std::max(timeline.iteration_ms, e);
}

// Phase 4b: the timeline's tasks, sorted by start, then GPU (channel), then resource order.
// O(T log T).
void list_tasks(const Replay& r, Timeline& timeline) {
  const TaskGraph& graph = r.graph;
  timeline.compute.reserve(static_cast<std::size_t>(graph.compute_count()));
  for (int id = 0; id < graph.compute_count(); ++id) {
    const auto i = r.slot(id);
    timeline.compute.push_back(
        TimedCompute{r.where[i], graph.compute_task(id), r.start[i], r.end[i]});
  }
  std::sort(timeline.compute.begin(), timeline.compute.end(),
            [&](const TimedCompute& a, const TimedCompute& b) {
              if (a.start_ms != b.start_ms) return a.start_ms < b.start_ms;
              if (a.gpu != b.gpu) return a.gpu < b.gpu;
              return r.position[r.slot(graph.id(a.task))] < r.position[r.slot(graph.id(b.task))];
            });
  timeline.transfers.reserve(static_cast<std::size_t>(graph.transfer_count()));
  for (int id = graph.compute_count(); id < graph.chain_count(); ++id) {
    const auto i = r.slot(id);
    const Channel& channel = r.channels[static_cast<std::size_t>(r.where[i])];
    const TransferTask task = graph.transfer_task(id);
    timeline.transfers.push_back(TimedTransfer{
        channel.first, channel.second, task,
        r.exec[static_cast<std::size_t>(task.stage)].transfer_bytes, r.start[i], r.end[i]});
  }
  std::sort(timeline.transfers.begin(), timeline.transfers.end(),
            [&](const TimedTransfer& a, const TimedTransfer& b) {
              if (a.start_ms != b.start_ms) return a.start_ms < b.start_ms;
              if (a.from != b.from) return a.from < b.from;
              if (a.to != b.to) return a.to < b.to;
              return r.position[r.slot(graph.id(a.task))] < r.position[r.slot(graph.id(b.task))];
            });
}

// When task `id` (an AllReduce or update slot) may start: when the last of its predecessors in
// the task graph ends; `allreduce_end` holds the AllReduces' ends per stage. O(M).
double ready_at(const Replay& r, const std::vector<double>& allreduce_end, int id) {
  const TaskGraph& graph = r.graph;
  double ready = 0;
  for (const int p : graph.predecessors(id)) {
    ready = std::max(ready, graph.is_allreduce(p)
                                ? allreduce_end[static_cast<std::size_t>(graph.allreduce_stage(p))]
                                : r.end[r.slot(p)]);
  }
  return ready;
}

// Phase 5: each replicated stage's AllReduce starts when its last backward ends. O(S M).
// Returns the AllReduces' ends per stage (0 for a stage without one).
std::vector<double> add_allreduces(const Replay& r, Timeline& timeline) {
  const TaskGraph& graph = r.graph;
  std::vector<double> ends(static_cast<std::size_t>(graph.stages()), 0);
  for (int s = 0; s < graph.stages(); ++s) {
    if (!graph.has_allreduce(s)) continue;
    const double start = ready_at(r, ends, graph.allreduce(s));
    const StageExecution& e = r.exec[static_cast<std::size_t>(s)];
    const double finish = start + e.allreduce_ms;
    timeline.allreduces.push_back(TimedAllReduce{s, e.parameter_bytes, start, finish});
    timeline.iteration_ms = std::max(timeline.iteration_ms, finish);
    ends[static_cast<std::size_t>(s)] = finish;
  }
  return ends;
}

// Phase 6 (spec 8.3): when the model has update times, every group of every stage runs its
// optimizer step when the task graph says (after the stage's AllReduce, or after its last
// backward when r = 1). O(S M).
void add_updates(const Replay& r, const std::vector<double>& allreduce_end, bool updates,
                 Timeline& timeline) {
  if (!updates) return;
  const TaskGraph& graph = r.graph;
  for (int s = 0; s < graph.stages(); ++s) {
    const double ready = ready_at(r, allreduce_end, graph.update(s));
    for (const GroupExecution& group : r.exec[static_cast<std::size_t>(s)].groups) {
      const double end = ready + group.update_ms;
      timeline.updates.push_back(TimedUpdate{s, group.leader, ready, end});
      timeline.iteration_ms = std::max(timeline.iteration_ms, end);
    }
  }
}

// One change of a device's memory (phase 7): what a micro-batch of `stage` takes or gives back.
enum class Held : std::uint8_t { kStash, kTransient, kWeightStash };
struct MemoryEvent {
  double at;
  int stage;
  Held kind;
  bool operator<(const MemoryEvent& o) const {
    return std::tie(at, kind, stage) < std::tie(o.at, o.kind, o.stage);
  }
};

// The allocations and releases of every micro-batch on the GPU (leader) that runs it (spec 3,
// 8.3, 9.3): `Y_s` from the start of its F to the end of its B (or I), recomputation's one-layer
// stash during each B (or I), and with a split backward `Yw_s` from the end of its I to the end
// of its W. O(c S M).
void memory_events(const Replay& r, std::vector<std::vector<MemoryEvent>>& allocations,
                   std::vector<std::vector<MemoryEvent>>& releases) {
  const TaskGraph& graph = r.graph;
  for (int s = 0; s < graph.stages(); ++s) {
    const bool transient = r.exec[static_cast<std::size_t>(s)].transient_bytes > 0;
    for (int m = 0; m < graph.micro_batches(); ++m) {
      const auto f = r.slot(graph.id(ComputeTask{Op::kForward, s, m}));
      const auto b = r.slot(graph.id(ComputeTask{graph.backward_op(), s, m}));
      const auto g = static_cast<std::size_t>(r.where[f]);
      allocations[g].push_back({r.start[f], s, Held::kStash});
      if (transient) allocations[g].push_back({r.start[b], s, Held::kTransient});
      releases[g].push_back({r.end[b], s, Held::kStash});
      if (transient) releases[g].push_back({r.end[b], s, Held::kTransient});
      if (graph.split_backward()) {
        const auto w = r.slot(graph.id(ComputeTask{Op::kBackwardWeight, s, m}));
        allocations[g].push_back({r.end[b], s, Held::kWeightStash});
        releases[g].push_back({r.end[w], s, Held::kWeightStash});
      }
    }
  }
}

// The peak of one device's group led by `g` over its stages `stages`: a sweep over its
// allocations in time order, applying first every release at an earlier or equal time (within
// tolerance). O(E log E + E v) for E events and v stages on the device.
double device_peak(const Replay& r, const std::vector<int>& stages, std::vector<MemoryEvent>& alloc,
                   std::vector<MemoryEvent>& rel) {
  std::sort(alloc.begin(), alloc.end());
  std::sort(rel.begin(), rel.end());
  // Per stage of the device and kind: allocations and releases so far.
  std::vector<std::array<std::size_t, 3>> taken(stages.size(), {0, 0, 0});
  std::vector<std::array<std::size_t, 3>> given(stages.size(), {0, 0, 0});
  auto local = [&](int s) {
    return static_cast<std::size_t>(std::find(stages.begin(), stages.end(), s) - stages.begin());
  };
  std::size_t released = 0;
  double peak = 0;
  for (const MemoryEvent& a : alloc) {
    for (;
         released < rel.size() && (rel[released].at <= a.at || times_equal(rel[released].at, a.at));
         ++released) {
      given[local(rel[released].stage)][static_cast<std::size_t>(rel[released].kind)] += 1;
    }
    taken[local(a.stage)][static_cast<std::size_t>(a.kind)] += 1;
    double bytes = 0;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const StageExecution& e = r.exec[static_cast<std::size_t>(stages[i])];
      auto held = [&](Held kind) {
        const auto k = static_cast<std::size_t>(kind);
        return taken[i][k] - std::min(given[i][k], taken[i][k]);
      };
      const std::size_t running = held(Held::kTransient);
      bytes += static_cast<double>(held(Held::kStash)) * e.stash_bytes +
               (running > 0 ? static_cast<double>(running) * e.transient_bytes : 0);
      if (r.graph.split_backward()) {
        bytes += static_cast<double>(held(Held::kWeightStash)) * e.weight_stash_bytes;
      }
    }
    peak = std::max(peak, bytes);
  }
  return peak;
}

// Phase 7: peak memory per group (spec sections 3, 8.3 and 9.3): the static bytes of every
// stage of its device, plus what its micro-batches hold (`memory_events`); at equal times
// (within tolerance) releases come first. Every GPU of a group holds the same. O(T log T).
void peak_memory(const Replay& r, Timeline& timeline) {
  const auto N = static_cast<std::size_t>(r.topology.size());
  std::vector<std::vector<MemoryEvent>> allocations(N);
  std::vector<std::vector<MemoryEvent>> releases(N);
  memory_events(r, allocations, releases);
  for (std::size_t g = 0; g < N; ++g) {
    if (r.stage_of[g] == kNone || r.group(static_cast<int>(g)).leader != static_cast<int>(g))
      continue;
    const std::vector<int>& stages = timeline.gpus[g].stages;
    double static_bytes = 0;
    for (const int s : stages) static_bytes += r.exec[static_cast<std::size_t>(s)].static_bytes;
    // The framework reserve and full sharding's working copies, once per device (0 for
    // profiles: the sums stay bit for bit).
    static_bytes += r.exec[static_cast<std::size_t>(stages.front())].device_bytes();
    timeline.gpus[g].peak_memory_bytes =
        static_bytes + device_peak(r, stages, allocations[g], releases[g]);
  }
  for (std::size_t g = 0; g < N; ++g) {
    if (r.stage_of[g] == kNone) continue;
    const auto leader = static_cast<std::size_t>(r.group(static_cast<int>(g)).leader);
    if (leader != g) timeline.gpus[g].peak_memory_bytes = timeline.gpus[leader].peak_memory_bytes;
  }
}

}  // namespace

StageProfile stage_profile(const model::Model& model, const std::vector<Stage>& stages, int s) {
  const Stage& stage = stages[static_cast<std::size_t>(s)];
  // Per-GPU sums at the stage's degrees (spec 8.2 and 10.1); at t = c = 1 the layers' own
  // fields, summed in layer order.
  const int c = context_parallel(stages);
  const model::StageCost cost =
      c > 1 ? model::stage_cost(model::at_context_degree(model, c), stage.first_layer,
                                stage.last_layer, stage.tensor_parallel)
            : model::stage_cost(model, stage.first_layer, stage.last_layer, stage.tensor_parallel);
  StageProfile profile;
  profile.forward_ms = cost.forward_ms;
  profile.backward_ms = cost.backward_ms;
  profile.parameter_bytes = cost.parameter_bytes;
  profile.stash_bytes = cost.stash_bytes;
  if (s + 1 < static_cast<int>(stages.size())) {
    profile.boundary_bytes =
        model.layers[static_cast<std::size_t>(stage.last_layer)].activation_bytes;
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

double ring_all_gather_ms(double n, double bytes, double beta_bytes_per_s, double lambda_ms,
                          double count) {
  if (n <= 1) return 0;
  return (n - 1) / n * bytes / beta_bytes_per_s * 1e3 + (n - 1) * lambda_ms * count;
}

namespace {

// The context-parallel rules of spec 10.2 for stage `s`: a degree of at least 1, the same for
// every stage, allowed by every layer, and groups of `c t` GPUs. O(L) for the first stage, O(1)
// after.
void check_context_parallel(const model::Model& model, const std::vector<Stage>& stages,
                            std::size_t s) {
  const Stage& stage = stages[s];
  const int c = stage.context_parallel;
  const std::string name = "stage " + std::to_string(s);
  if (c < 1) {
    throw ScheduleError(name + " has context-parallel degree " + std::to_string(c) +
                        "; it must be at least 1");
  }
  if (c != stages.front().context_parallel) {
    throw ScheduleError(name + " has context-parallel degree " + std::to_string(c) + ", not " +
                        std::to_string(stages.front().context_parallel) +
                        " (one degree for the whole plan, spec 10.2)");
  }
  if (s == 0 && !model::allows_context_degree(model, c)) {
    throw ScheduleError("context-parallel degree " + std::to_string(c) +
                        " is not allowed by every layer's context_parallel degrees (spec 10.1)");
  }
  if (stage.gpus.size() % static_cast<std::size_t>(stage.group_size()) != 0) {
    throw ScheduleError(name + " lists " + std::to_string(stage.gpus.size()) +
                        " GPUs, not a multiple of its group size " +
                        std::to_string(stage.group_size()) +
                        " (c t: groups of c tensor-parallel groups, spec 10.2)");
  }
}

}  // namespace

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
    const int t = stage.tensor_parallel;
    if (t < 1) {
      throw ScheduleError(name + " has tensor-parallel degree " + std::to_string(t) +
                          "; it must be at least 1");
    }
    if (stage.gpus.size() % static_cast<std::size_t>(t) != 0) {
      throw ScheduleError(name + " lists " + std::to_string(stage.gpus.size()) +
                          " GPUs, not a multiple of its tensor-parallel degree " +
                          std::to_string(t) + " (groups of t GPUs, spec 8.2)");
    }
    check_context_parallel(model, stages, s);
    if (!model::stage_allows_degree(model, stage.first_layer, stage.last_layer, t)) {
      throw ScheduleError(name + " (layers " + std::to_string(stage.first_layer) + "-" +
                          std::to_string(stage.last_layer) +
                          ") cannot run at tensor-parallel degree " + std::to_string(t) +
                          ": every layer with tensor_parallel must list it, "
                          "and at least one must have tensor_parallel (spec 8.1)");
    }
    int same_as = kNone;  // the stage whose GPU list this one's was found equal to
    for (int gpu : stage.gpus) {
      if (gpu < 0 || gpu >= topology.size()) {
        throw ScheduleError(name + " names GPU index " + std::to_string(gpu) +
                            ", which does not exist");
      }
      // Stages share all their GPUs (one device, spec 9.2) or none.
      int& slot = owner[static_cast<std::size_t>(gpu)];
      if (slot == kNone) {
        slot = static_cast<int>(s);
        continue;
      }
      if (slot == same_as) continue;  // compared whole once, not once per GPU: O(r), not O(r^2)
      const Stage& other = stages[static_cast<std::size_t>(slot)];
      if (slot == static_cast<int>(s) || other.gpus != stage.gpus) {
        throw ScheduleError(gpu_name(topology, gpu) + " serves both stage " + std::to_string(slot) +
                            " and " + name);
      }
      if (other.tensor_parallel != t) {
        throw ScheduleError(name + " shares its GPUs with stage " + std::to_string(slot) +
                            " but has tensor-parallel degree " + std::to_string(t) + ", not " +
                            std::to_string(other.tensor_parallel) +
                            " (stages on one device have the same groups, spec 9.2)");
      }
      same_as = slot;
    }
  }
  if (next_layer != layers) {
    throw ScheduleError("the stages end at layer " + std::to_string(next_layer - 1) +
                        " but the model has " + std::to_string(layers) + " layers");
  }
}

Timeline replay(const model::Model& model, const topology::Topology& topology,
                const std::vector<Stage>& stages, const Schedule& schedule, Optimizer optimizer,
                Listing listing) {
  const int S = static_cast<int>(stages.size());
  const int N = topology.size();
  reject_missing(schedule, S, N);
  Replay r{topology,
           schedule,
           TaskGraph(stages, schedule.micro_batches, schedule.split_backward, optimizer),
           execution(model, topology, stages, optimizer),
           {},
           {},
           {},
           {},
           {},
           {},
           {},
           {},
           {},
           {},
           {},
           {}};
  const auto T = static_cast<std::size_t>(r.graph.chain_count());
  r.stage_of.assign(static_cast<std::size_t>(N), kNone);
  r.group_of.assign(static_cast<std::size_t>(N), kNone);
  r.device_of.assign(static_cast<std::size_t>(S), kNone);
  for (int s = 0; s < S; ++s) {
    const Stage& stage = stages[static_cast<std::size_t>(s)];
    for (std::size_t k = 0; k < stage.gpus.size(); ++k) {
      const auto g = static_cast<std::size_t>(stage.gpus[k]);
      if (r.stage_of[g] == kNone) r.stage_of[g] = s;  // a device is named by its first stage
      r.group_of[g] = static_cast<int>(k) / stage.group_size();
    }
    r.device_of[static_cast<std::size_t>(s)] =
        r.stage_of[static_cast<std::size_t>(stage.gpus.front())];
  }
  r.where.assign(T, kNone);
  r.resource_pred.assign(T, kNone);
  r.resource_succ.assign(T, kNone);
  r.position.assign(T, 0);
  r.duration.assign(T, 0);
  r.pending.assign(T, 0);
  r.start.assign(T, 0);
  r.end.assign(T, 0);

  index_compute_orders(r);
  index_transfer_orders(r);
  if (longest_paths(r) != static_cast<int>(T)) explain_deadlock(r);
  Timeline timeline;
  gpu_usage(r, timeline);
  if (listing == Listing::kTasks) list_tasks(r, timeline);
  const std::vector<double> allreduce_end = add_allreduces(r, timeline);
  add_updates(r, allreduce_end, model::has_updates(model), timeline);
  peak_memory(r, timeline);
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
      return gpu_name(topology, g) + " needs " + io::format_bytes(peak) + " at its peak but has " +
             io::format_bytes(*capacity);
    }
  }
  return std::nullopt;
}

namespace {

// any_plan_ms (spec 8.3): each layer at its least total work `min_t t (f + b)` over its degrees
// shared by all GPUs, and the single micro-batch at each layer's least time `min_t (f + b)` on
// the fastest GPU. For a layer without tensor_parallel both are `f + b`, summed in layer order
// as section 3 does. A context-parallel plan (spec 10.3) runs the single micro-batch `c` times
// faster at best: its term is divided by the plan's `c` (the bound then holds for every plan of
// that degree). O(layers x degrees + N).
double any_plan_bound(const model::Model& model, const topology::Topology& topology, double M,
                      int c) {
  double work = 0;
  double latency = 0;
  for (const model::Layer& layer : model.layers) {
    double least_work = layer.forward_ms + layer.backward_ms;
    double least_time = least_work;
    if (layer.tensor_parallel) {
      for (const int t : layer.tensor_parallel->degrees) {
        const double per_gpu = model::forward_ms_at(layer, t) + model::backward_ms_at(layer, t);
        least_work = std::min(least_work, t * per_gpu);
        least_time = std::min(least_time, per_gpu);
      }
    }
    work += least_work;
    latency += least_time;
  }
  double speed_sum = 0, speed_max = 0;
  for (const auto& gpu : topology.gpus()) {
    speed_sum += gpu.speed;
    speed_max = std::max(speed_max, gpu.speed);
  }
  if (c > 1) latency /= c;
  return std::max(M * work / speed_sum, latency / speed_max);
}

// The steady-state term L_s of partition_ms (spec 8.3): `max(M / sum_g (1 / d_g), ceil(M / r)
// min_g d_g)` for d_g a group's F + B duration. When no group spends time on tensor-parallel
// all-reduces, d_g is the same work over each group's speed and the first term is computed as
// section 3 writes it, `M (F + B) / sum_g v_g`, exactly.
double steady_state_ms(const StageExecution& e, const Stage& stage, double M) {
  const double r = static_cast<double>(stage.replicas());
  bool proportional = true;
  double speeds = 0, rate = 0, shortest = std::numeric_limits<double>::infinity();
  for (const GroupExecution& group : e.groups) {
    proportional = proportional && group.forward_allreduce_ms == 0 &&
                   group.backward_allreduce_ms == 0 && stage.context_parallel == 1;
    speeds += group.speed;
    rate += 1 / group.work_ms;
    shortest = std::min(shortest, group.work_ms);
  }
  double work = e.forward_ms + e.backward_ms;
  if (stage.recompute) work += e.forward_ms - e.backward_recompute_ms;
  const double spread = proportional ? M * work / speeds : M / rate;
  return std::max(spread, std::ceil(M / r) * shortest);
}

// partition_ms with shared GPUs (spec 9.3): the largest sum over a device's stages of their
// steady-state terms. O(S log S).
double device_bound(const std::vector<StageExecution>& exec, const std::vector<Stage>& stages,
                    double M) {
  std::map<std::vector<int>, double> per_device;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    per_device[stages[s].gpus] += steady_state_ms(exec[s], stages[s], M);
  }
  double best = 0;
  for (const auto& [gpus, load] : per_device) best = std::max(best, load);
  return best;
}

}  // namespace

Bounds compute_bounds(const model::Model& model, const topology::Topology& topology,
                      const std::vector<Stage>& stages, int micro_batches, Optimizer optimizer,
                      bool split_backward) {
  const double M = micro_batches;
  Bounds bounds;
  bounds.any_plan_ms = any_plan_bound(model, topology, M, context_parallel(stages));
  const std::vector<StageExecution> exec = execution(model, topology, stages, optimizer);

  // H_s accumulates forward latency; `drain` is max_{j<s} (sum_{i=j}^{s-1} (c_i + B_i/v_i) + AR_j),
  // with the smallest forward and backward durations among each stage's groups.
  double head = 0;
  double drain = -std::numeric_limits<double>::infinity();
  double best = 0;
  const int S = static_cast<int>(stages.size());
  for (int s = 0; s < S; ++s) {
    const Stage& stage = stages[static_cast<std::size_t>(s)];
    const StageExecution& e = exec[static_cast<std::size_t>(s)];
    double forward = std::numeric_limits<double>::infinity();
    double backward = std::numeric_limits<double>::infinity();
    for (const GroupExecution& group : e.groups) {
      forward = std::min(forward, group.forward_ms);
      backward = std::min(backward, group.backward_ms);
    }
    const double load = steady_state_ms(e, stage, M);
    const double tail = split_backward ? e.allreduce_ms : std::max(e.allreduce_ms, drain);
    best = std::max(best, head + load + tail);
    if (s + 1 < S) {
      // A boundary inside a device has no transfer (spec 9.3).
      const bool local = stage.gpus == stages[static_cast<std::size_t>(s) + 1].gpus;
      double c = local ? 0 : std::numeric_limits<double>::infinity();
      for (const int u : local ? std::vector<int>{} : stage.leaders()) {
        for (const int v : stages[static_cast<std::size_t>(s) + 1].leaders()) {
          c = std::min(c, topology.transfer_ms(u, v, e.transfer_bytes));
        }
      }
      head += forward + c;
      drain = std::max(drain, e.allreduce_ms) + c + backward;
    }
  }
  bounds.partition_ms = virtual_stages(stages) > 1 ? device_bound(exec, stages, M) : best;
  return bounds;
}

double bubble_fraction(const GpuUsage& usage, double iteration_ms) {
  if (iteration_ms <= 0) return 0;
  return std::max(0.0, 1 - usage.busy_ms / iteration_ms);
}

}  // namespace pipeplan::simulate
