// Event-driven scheduling engine (list scheduling; fixed 1F1B and GPipe orders).
//
// Reference: list scheduling as in Luo et al., "Efficient Pipeline Planning for Expedited
// Distributed DNN Training" (INFOCOM 2022), section 5; 1F1B with a flush as in PipeDream-Flush
// (Narayanan et al., ICML 2021) and DAPPLE (Fan et al., PPoPP 2021).
//
// Complexity: every task is started once and completes once; each start or completion costs
// O(log T) (event heap, per-GPU ready sets, channel queues) plus O(r) to choose a replica, and
// each event's dispatch scans the G groups in use once, so O(T (log T + r + G)) for
// T = 4 S M tasks (planners::scheduling_steps counts T G).

#include "pipeplan/schedule/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <set>
#include <tuple>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::schedule {

int one_f_one_b_warmup(const std::vector<Stage>& stages, int s, int micro_batches) {
  const int S = static_cast<int>(stages.size());
  long best = 0;
  for (int t = s; t < S; ++t) {
    best = std::max(best, static_cast<long>(S - t) *
                              static_cast<long>(stages[static_cast<std::size_t>(t)].replicas()));
  }
  return static_cast<int>(std::min<long>(micro_batches, best));
}

long stashes_per_replica(Policy policy, long micro_batches, long replicas, long warmup) {
  switch (policy) {
    case Policy::kGpipe:
      return (micro_batches + replicas - 1) / replicas;
    case Policy::kOneFOneB:
      return (warmup + replicas - 1) / replicas;
    case Policy::kList:
      return 1;
  }
  return micro_batches;
}

namespace {

constexpr int kNone = -1;

// The fixed per-GPU orders of spec section 5.
std::vector<std::vector<ComputeTask>> fixed_orders(const topology::Topology& topology,
                                                   const std::vector<Stage>& stages, int M,
                                                   Policy policy) {
  std::vector<std::vector<ComputeTask>> orders(static_cast<std::size_t>(topology.size()));
  const int S = static_cast<int>(stages.size());
  for (int s = 0; s < S; ++s) {
    const std::vector<int> gpus = stages[static_cast<std::size_t>(s)].leaders();
    const int r = static_cast<int>(gpus.size());
    std::vector<ComputeTask> wide;  // the stage-wide order
    if (policy == Policy::kGpipe) {
      for (int m = 0; m < M; ++m) wide.push_back({Op::kForward, s, m});
      for (int m = 0; m < M; ++m) wide.push_back({Op::kBackward, s, m});
    } else {
      const int warmup = one_f_one_b_warmup(stages, s, M);
      int forward = 0, backward = 0;
      while (forward < warmup) wide.push_back({Op::kForward, s, forward++});
      while (forward < M) {
        wide.push_back({Op::kBackward, s, backward++});
        wide.push_back({Op::kForward, s, forward++});
      }
      while (backward < M) wide.push_back({Op::kBackward, s, backward++});
    }
    for (const ComputeTask& task : wide) {
      orders[static_cast<std::size_t>(gpus[static_cast<std::size_t>(task.micro_batch % r)])]
          .push_back(task);
    }
  }
  return orders;
}

class Engine {
 public:
  Engine(const model::Model& model, const topology::Topology& topology,
         const std::vector<Stage>& stages, int micro_batches, Policy policy, Optimizer optimizer)
      : topology_(topology),
        stages_(stages),
        policy_(policy),
        fixed_(policy_row(policy).fixed),
        S_(static_cast<int>(stages.size())),
        M_(micro_batches),
        graph_(stages, M_),
        exec_(simulate::execution(model, topology, stages, optimizer)) {
    const auto n = static_cast<std::size_t>(topology.size());
    gpus_.resize(n);
    for (int s = 0; s < S_; ++s) {
      const simulate::StageExecution& e = exec_[static_cast<std::size_t>(s)];
      for (const simulate::GroupExecution& group : e.groups) {
        // A group is one compute resource, named by its leader (spec 8.3); it holds as many
        // micro-batches as its smallest GPU does beside the static and transient bytes.
        Gpu& gpu = gpus_[static_cast<std::size_t>(group.leader)];
        gpu.stage = s;
        gpu.group = &group;
        const double fixed = e.static_bytes + e.transient_bytes;
        const long fit = simulate::max_in_flight(fixed, e.stash_bytes, group.capacity_bytes, M_);
        if (fit < 1 && !refusal_) {
          const Stage& stage = stages[static_cast<std::size_t>(s)];
          refusal_ = "stage " + std::to_string(s) + " (layers " +
                     std::to_string(stage.first_layer) + ".." + std::to_string(stage.last_layer) +
                     ") needs " + io::format_bytes(fixed + e.stash_bytes) +
                     " with one micro-batch in flight but GPU \"" +
                     topology.gpu(group.tightest_gpu).id + "\" has " +
                     io::format_bytes(*group.capacity_bytes);
        }
        gpu.max_in_flight = static_cast<int>(fit);
      }
    }
    for (int g = 0; g < topology.size(); ++g) {
      if (gpus_[static_cast<std::size_t>(g)].stage != kNone) leaders_.push_back(g);
    }
    replica_.assign(static_cast<std::size_t>(S_),
                    std::vector<int>(static_cast<std::size_t>(M_), kNone));
    result_.schedule.micro_batches = M_;
    result_.schedule.gpu_order.resize(n);
    if (fixed_) {
      sequences_ = fixed_orders(topology, stages, M_, policy_);
      for (int s = 0; s < S_; ++s) {
        const std::vector<int> gpus = stages[static_cast<std::size_t>(s)].leaders();
        for (int m = 0; m < M_; ++m) {
          replica_[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)] =
              gpus[static_cast<std::size_t>(m) % gpus.size()];
        }
      }
      for (int m = 0; m < M_; ++m) make_ready({Op::kForward, 0, m});
    }
  }

  // The first stage that cannot hold one micro-batch on some replica, in words; nothing when
  // every group can (then `run` may be called).
  [[nodiscard]] const std::optional<std::string>& refusal() const { return refusal_; }

  Scheduled run() {
    dispatch(0);
    while (!events_.empty()) {
      const double now = events_.top().time;
      while (!events_.empty() && events_.top().time == now) {
        Event event = events_.top();
        events_.pop();
        complete(event, now);
      }
      dispatch(now);
    }
    const long expected = graph_.chain_count();
    if (completed_ != expected) {
      throw InternalError("the scheduler stopped after " + std::to_string(completed_) + " of " +
                          std::to_string(expected) + " tasks");
    }
    return std::move(result_);
  }

 private:
  struct Gpu {
    int stage = kNone;
    const simulate::GroupExecution* group = nullptr;  // the group it leads
    bool busy = false;
    int in_flight = 0;
    int max_in_flight = 1 << 30;
    double outstanding_ms = 0;                    // work of assigned micro-batches not yet done
    std::set<int> ready_forward, ready_backward;  // micro-batches (list policy)
    std::size_t next = 0;                         // position in the fixed sequence
  };
  struct Transfer {
    double ready_time;
    int kind;  // 0 gradient, 1 activation: gradients first at equal ready times
    int micro_batch;
    int stage;
    bool operator<(const Transfer& o) const {
      return std::tie(ready_time, kind, micro_batch, stage) <
             std::tie(o.ready_time, o.kind, o.micro_batch, o.stage);
    }
  };
  struct ChannelState {
    bool busy = false;
    std::set<Transfer> queue;
  };
  struct Event {
    double time;
    long sequence;
    bool is_compute;
    int gpu;  // compute: its GPU
    Channel channel;
    ComputeTask compute;
    TransferTask transfer;
    bool operator<(const Event& o) const {  // min-heap on (time, sequence)
      return std::tie(time, sequence) > std::tie(o.time, o.sequence);
    }
  };

  [[nodiscard]] double transfer_bytes(int s) const {
    return exec_[static_cast<std::size_t>(s)].transfer_bytes;
  }
  int& replica(int s, int m) {
    return replica_[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)];
  }
  Gpu& gpu(int g) { return gpus_[static_cast<std::size_t>(g)]; }

  // One micro-batch's F + B on the group led by `g` (a GPU of stage s).
  [[nodiscard]] double work_ms(int g) const {
    return gpus_[static_cast<std::size_t>(g)].group->work_ms;
  }

  void make_ready(const ComputeTask& task) {
    if (fixed_) {
      ready_.insert(key(task));
      return;
    }
    Gpu& g = gpu(replica(task.stage, task.micro_batch));
    (task.op == Op::kForward ? g.ready_forward : g.ready_backward).insert(task.micro_batch);
  }
  [[nodiscard]] long key(const ComputeTask& task) const { return graph_.id(task); }

  // Chooses the replica of stage s for micro-batch m whose forward just ended on `from`.
  int choose_replica(int s, int from) {
    const std::vector<int> gpus = stages_[static_cast<std::size_t>(s)].leaders();
    int best = gpus.front();
    double best_finish = std::numeric_limits<double>::infinity();
    for (int g : gpus) {
      const double arrival =
          from == kNone ? 0 : topology_.transfer_ms(from, g, transfer_bytes(s - 1));
      const double finish = std::max(arrival, gpu(g).outstanding_ms) + work_ms(g);
      if (finish < best_finish) {
        best_finish = finish;
        best = g;
      }
    }
    return best;
  }

  void assign(int s, int m, int g) {
    replica(s, m) = g;
    gpu(g).outstanding_ms += work_ms(g);
  }

  void start_compute(int g, const ComputeTask& task, double now) {
    Gpu& state = gpu(g);
    state.busy = true;
    if (task.op == Op::kForward) ++state.in_flight;
    if (fixed_) ready_.erase(key(task));
    const double duration =
        task.op == Op::kForward ? state.group->forward_ms : state.group->backward_ms;
    result_.schedule.gpu_order[static_cast<std::size_t>(g)].push_back(task);
    Event event{now + duration, sequence_++, true, g, {}, task, {}};
    events_.push(event);
  }

  void start_transfer(const Channel& channel, const Transfer& t, double now) {
    ChannelState& state = channels_[channel];
    state.busy = true;
    TransferTask task{t.kind == 1 ? TransferKind::kActivation : TransferKind::kGradient, t.stage,
                      t.micro_batch};
    result_.schedule.channel_order[channel].push_back(task);
    const double duration =
        topology_.transfer_ms(channel.first, channel.second, transfer_bytes(t.stage));
    Event event{now + duration, sequence_++, false, kNone, channel, {}, task};
    events_.push(event);
  }

  void try_start_list(int g, double now) {
    Gpu& state = gpu(g);
    if (!state.ready_backward.empty()) {
      int m = *state.ready_backward.begin();
      state.ready_backward.erase(state.ready_backward.begin());
      start_compute(g, {Op::kBackward, state.stage, m}, now);
      return;
    }
    if (state.in_flight >= state.max_in_flight) return;
    if (!state.ready_forward.empty()) {
      int m = *state.ready_forward.begin();
      state.ready_forward.erase(state.ready_forward.begin());
      start_compute(g, {Op::kForward, state.stage, m}, now);
      return;
    }
    if (state.stage == 0 && next_first_stage_ < M_) {
      int m = next_first_stage_++;
      assign(0, m, g);
      start_compute(g, {Op::kForward, 0, m}, now);
    }
  }

  void try_start_fixed(int g, double now) {
    Gpu& state = gpu(g);
    const auto& sequence = sequences_[static_cast<std::size_t>(g)];
    if (state.next >= sequence.size()) return;
    const ComputeTask& task = sequence[state.next];
    if (!ready_.count(key(task))) return;
    ++state.next;
    start_compute(g, task, now);
  }

  // Starts what can start: every idle group (by its leader's index), then every idle channel
  // with a queued transfer (in channel order). Starting a task makes no other task ready, so
  // the order within one dispatch only breaks ties. O(groups + started x log channels).
  void dispatch(double now) {
    for (const int g : leaders_) {
      if (gpu(g).busy) continue;
      if (fixed_) {
        try_start_fixed(g, now);
      } else {
        try_start_list(g, now);
      }
    }
    for (auto it = pending_.begin(); it != pending_.end(); it = pending_.erase(it)) {
      ChannelState& state = channels_[*it];
      const Transfer t = *state.queue.begin();
      state.queue.erase(state.queue.begin());
      start_transfer(*it, t, now);
    }
  }

  void enqueue_transfer(const Channel& channel, TransferKind kind, int s, int m, double now) {
    ChannelState& state = channels_[channel];
    state.queue.insert(Transfer{now, kind == TransferKind::kActivation ? 1 : 0, m, s});
    if (!state.busy) pending_.insert(channel);
  }

  // What a finished task releases is its data successor in the task graph (spec section 3).
  void complete(const Event& event, double now) {
    ++completed_;
    result_.iteration_ms = std::max(result_.iteration_ms, now);
    if (!event.is_compute) {
      ChannelState& channel = channels_[event.channel];
      channel.busy = false;
      if (!channel.queue.empty()) pending_.insert(event.channel);
      make_ready(graph_.compute_task(graph_.data_successor(graph_.id(event.transfer))));
      return;
    }
    Gpu& state = gpu(event.gpu);
    state.busy = false;
    const ComputeTask& task = event.compute;
    const int m = task.micro_batch;
    if (task.op == Op::kBackward) {
      --state.in_flight;
      state.outstanding_ms -= work_ms(event.gpu);
    }
    const int next = graph_.data_successor(graph_.id(task));
    if (next == simulate::TaskGraph::kNone) return;
    if (!graph_.is_transfer(next)) {
      make_ready(graph_.compute_task(next));
      return;
    }
    const TransferTask transfer = graph_.transfer_task(next);
    const int peer_stage = simulate::TaskGraph::ends(transfer).to_stage;
    if (replica(peer_stage, m) == kNone)
      assign(peer_stage, m, choose_replica(peer_stage, event.gpu));
    enqueue_transfer({event.gpu, replica(peer_stage, m)}, transfer.kind, transfer.stage, m, now);
  }

  const topology::Topology& topology_;
  const std::vector<Stage>& stages_;
  Policy policy_;
  bool fixed_;  // a fixed per-GPU order (policy_row): sequences_ and ready_ drive it
  int S_;
  int M_;
  simulate::TaskGraph graph_;
  std::vector<simulate::StageExecution> exec_;
  std::vector<Gpu> gpus_;
  std::vector<std::vector<int>> replica_;
  std::vector<std::vector<ComputeTask>> sequences_;
  std::set<long> ready_;
  std::map<Channel, ChannelState> channels_;
  std::vector<int> leaders_;   // the groups' leaders, ascending: the compute resources in use
  std::set<Channel> pending_;  // the channels that are idle and have a transfer queued
  std::priority_queue<Event> events_;
  long sequence_ = 0;
  long completed_ = 0;
  int next_first_stage_ = 0;
  Scheduled result_;
  std::optional<std::string> refusal_;
};

}  // namespace

Scheduled make_schedule(const model::Model& model, const topology::Topology& topology,
                        const std::vector<Stage>& stages, int micro_batches, Policy policy,
                        Optimizer optimizer) {
  ScheduleAttempt attempt =
      try_make_schedule(model, topology, stages, micro_batches, policy, optimizer);
  if (!attempt.scheduled) throw InfeasibleError(attempt.refusal);
  return std::move(*attempt.scheduled);
}

ScheduleAttempt try_make_schedule(const model::Model& model, const topology::Topology& topology,
                                  const std::vector<Stage>& stages, int micro_batches,
                                  Policy policy, Optimizer optimizer) {
  Engine engine(model, topology, stages, micro_batches, policy, optimizer);
  if (engine.refusal()) return {std::nullopt, *engine.refusal()};
  return {engine.run(), {}};
}

}  // namespace pipeplan::schedule
