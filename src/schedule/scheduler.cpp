// Event-driven scheduling engine (list scheduling; fixed 1F1B and GPipe orders).
//
// Reference: list scheduling as in Luo et al., "Efficient Pipeline Planning for Expedited
// Distributed DNN Training" (INFOCOM 2022), section 5; 1F1B with a flush as in PipeDream-Flush
// (Narayanan et al., ICML 2021) and DAPPLE (Fan et al., PPoPP 2021).
//
// Complexity: every task is started once and completes once; each start or completion costs
// O(log T) (event heap, per-GPU ready heaps, channel queues) plus the choice of a replica
// (`replica_choice_steps`: O(r), or O(n log r) on a node-cost topology whose groups of the stage
// work alike, n the groups on the sender's node), and each event's dispatch looks only at the
// groups it touched, so O(T (log T + r) + G) for T = 4 S M tasks (planners::scheduling_steps
// counts it).

#include "pipeplan/schedule/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/schedule/fixed_orders.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::schedule {

long stashes_per_replica(Policy policy, long micro_batches, long replicas, long warmup) {
  switch (policy) {
    case Policy::kGpipe:
    case Policy::kLoopedBfs:
      return (micro_batches + replicas - 1) / replicas;
    case Policy::kOneFOneB:
    case Policy::kInterleaved1F1B:
    case Policy::kZbH1:
    case Policy::kZbV:
      return (warmup + replicas - 1) / replicas;
    case Policy::kList:
      return 1;
  }
  return micro_batches;
}

namespace {

constexpr int kNone = -1;

// The least of n values with point updates, and the leftmost position whose value satisfies a
// predicate that holds from some value down (monotone). O(log n) each; unused slots hold
// infinity.
class MinTree {
 public:
  explicit MinTree(std::size_t n = 0) {
    while (size_ < n) size_ *= 2;
    min_.assign(2 * size_, std::numeric_limits<double>::infinity());
  }
  void set(std::size_t at, double value) {
    at += size_;
    min_[at] = value;
    for (at /= 2; at >= 1; at /= 2) min_[at] = std::min(min_[2 * at], min_[2 * at + 1]);
  }
  [[nodiscard]] double least() const { return min_[1]; }
  // Requires holds(least()).
  template <class Holds>
  [[nodiscard]] std::size_t leftmost(const Holds& holds) const {
    std::size_t at = 1;
    while (at < size_) at = holds(min_[2 * at]) ? 2 * at : 2 * at + 1;
    return at - size_;
  }

 private:
  std::size_t size_ = 1;
  std::vector<double> min_;
};

}  // namespace

double replica_choice_steps(const topology::Topology& topology, const Stage& stage) {
  const auto r = static_cast<double>(stage.replicas());
  if (!topology.costs_by_node() || stage.gpus.empty()) return r;
  // The tree needs groups that work alike: GPUs of one speed on nodes of one cost (groups
  // spread over nodes unevenly can still differ; the scheduler checks the work itself).
  const topology::Gpu& first = topology.gpu(stage.gpus.front());
  const topology::PairCost& link = topology.node_cost(topology.node_of(stage.gpus.front()));
  for (const int g : stage.gpus) {
    const topology::PairCost& cost = topology.node_cost(topology.node_of(g));
    if (topology.gpu(g).speed != first.speed ||
        cost.bandwidth_bytes_per_s != link.bandwidth_bytes_per_s ||
        cost.latency_ms != link.latency_ms) {
      return r;
    }
  }
  // The groups on the sender's node (at most a node's GPUs), each with a tree update.
  int most_per_node = 1;
  std::vector<int> per_node(static_cast<std::size_t>(topology.node_count()), 0);
  for (const int g : stage.leaders()) {
    most_per_node =
        std::max(most_per_node, ++per_node[static_cast<std::size_t>(topology.node_of(g))]);
  }
  return std::min(r, (most_per_node + 2) * std::log2(r + 1));
}

namespace {

class Engine {
 public:
  Engine(const model::Model& model, const topology::Topology& topology,
         const std::vector<Stage>& stages, int micro_batches, Policy policy, Optimizer optimizer,
         bool split, ListRule rule)
      : topology_(topology),
        stages_(stages),
        policy_(policy),
        alternate_(rule.priority == ListPriority::kAlternate),
        per_task_(rule.load == ReplicaLoad::kPerTask),
        fixed_(policy_row(policy).fixed),
        S_(static_cast<int>(stages.size())),
        M_(micro_batches),
        graph_(stages, M_, split, optimizer),
        exec_(simulate::execution(model, topology, stages, optimizer)) {
    gpus_.resize(static_cast<std::size_t>(topology.size()));
    for (const Device& device : devices(stages)) add_device(device);
    for (int g = 0; g < topology.size(); ++g) {
      if (gpus_[static_cast<std::size_t>(g)].stage != kNone) leaders_.push_back(g);
    }
    replica_.assign(static_cast<std::size_t>(S_),
                    std::vector<int>(static_cast<std::size_t>(M_), kNone));
    unfinished_.assign(static_cast<std::size_t>(S_),
                       std::vector<int>(static_cast<std::size_t>(M_), 0));
    index_replicas();
    result_.schedule.micro_batches = M_;
    result_.schedule.split_backward = split;
    result_.schedule.gpu_order.resize(static_cast<std::size_t>(topology.size()));
    if (fixed_) {
      sequences_ = fixed_orders(topology.size(), stages, M_, policy_, split);
      ready_.assign(static_cast<std::size_t>(graph_.compute_count()), 0);
      for (int s = 0; s < S_; ++s) {
        const std::vector<int> gpus = stages[static_cast<std::size_t>(s)].leaders();
        for (int m = 0; m < M_; ++m) {
          replica(s, m) = gpus[static_cast<std::size_t>(m) % gpus.size()];
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
  // A min-heap: the same order as a set (every element is pushed once), without a node
  // allocated per element.
  template <class T>
  using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<>>;
  using Ready = MinHeap<std::pair<int, int>>;  // (micro-batch, stage), lowest first
  struct Gpu {
    int stage = kNone;        // the first stage of its device: where micro-batches enter it
    int group = 0;            // its replica index in its device's stages
    std::vector<int> stages;  // every stage of its device, ascending
    bool busy = false;
    bool after_backward = false;  // its last forward or backward was a backward (B or I)
    int in_flight = 0;  // micro-batches that entered the device and still hold memory there
    int max_in_flight = 1 << 30;
    double outstanding_ms = 0;  // work of assigned micro-batches not yet done
    // Ready tasks (list policy): forwards of the entry stage (they need memory), forwards of
    // later stages of the device (already reserved), backwards (B or I), weight gradients.
    Ready ready_entry, ready_forward, ready_backward, ready_weight;
    std::size_t next = 0;  // position in the fixed sequence
  };
  struct Transfer {
    double ready_time;
    int kind;  // 0 gradient, 1 activation: gradients first at equal ready times
    int micro_batch;
    int stage;
    bool operator>(const Transfer& o) const {
      return std::tie(ready_time, kind, micro_batch, stage) >
             std::tie(o.ready_time, o.kind, o.micro_batch, o.stage);
    }
  };
  // A channel in use: its pair of GPUs, its queue, and its order in the schedule (a stable
  // pointer into the schedule's map, so that starting a transfer looks nothing up).
  struct ChannelState {
    Channel channel;
    bool busy = false;
    MinHeap<Transfer> queue;
    std::vector<TransferTask>* order = nullptr;
  };
  struct Event {
    double time;
    long sequence;
    bool is_compute;
    int gpu;      // compute: its GPU
    int channel;  // transfer: its index in channels_
    ComputeTask compute;
    TransferTask transfer;
    bool operator<(const Event& o) const {  // min-heap on (time, sequence)
      return std::tie(time, sequence) > std::tie(o.time, o.sequence);
    }
  };

  // One device's groups: each a compute resource named by its leader (spec 8.3, 9.3), holding as
  // many micro-batches as its smallest GPU does beside the static bytes of all its stages and
  // the largest transient; a micro-batch reserves its stash on every stage of the device when
  // it enters (so that it can always finish there).
  void add_device(const Device& device) {
    double fixed = 0, transient = 0, stash = 0;
    for (const int s : device.stages) {
      const simulate::StageExecution& e = exec_[static_cast<std::size_t>(s)];
      fixed += e.static_bytes;
      transient = std::max(transient, e.transient_bytes);
      stash +=
          graph_.split_backward() ? std::max(e.stash_bytes, e.weight_stash_bytes) : e.stash_bytes;
    }
    fixed += transient;
    const int first = device.stages.front();
    fixed += exec_[static_cast<std::size_t>(first)].device_bytes();  // once per device
    for (std::size_t i = 0; i < device.leaders.size(); ++i) {
      Gpu& gpu = gpus_[static_cast<std::size_t>(device.leaders[i])];
      gpu.stage = first;
      gpu.group = static_cast<int>(i);
      gpu.stages = device.stages;
      const simulate::GroupExecution& group = exec_[static_cast<std::size_t>(first)].groups[i];
      const long fit = simulate::max_in_flight(fixed, stash, group.capacity_bytes, M_);
      if (fit < 1 && !refusal_) refusal_ = no_room(device, fixed + stash, group);
      gpu.max_in_flight = static_cast<int>(fit);
    }
  }

  [[nodiscard]] std::string no_room(const Device& device, double bytes,
                                    const simulate::GroupExecution& group) const {
    const Stage& first = stages_[static_cast<std::size_t>(device.stages.front())];
    const Stage& last = stages_[static_cast<std::size_t>(device.stages.back())];
    std::string which = "stage " + std::to_string(device.stages.front()) + " (layers " +
                        std::to_string(first.first_layer) + ".." +
                        std::to_string(first.last_layer) + ")";
    if (device.stages.size() > 1) {
      which = "stages " + std::to_string(device.stages.front()) + " to " +
              std::to_string(device.stages.back()) + " of one device (layers " +
              std::to_string(first.first_layer) + ".." + std::to_string(last.last_layer) + ")";
    }
    const double reserve = exec_[static_cast<std::size_t>(device.stages.front())].reserve_bytes;
    return which + " needs " + io::format_bytes(bytes) +
           (reserve > 0 ? " (a framework reserve of " + io::format_bytes(reserve) + " included)"
                        : std::string()) +
           " with one micro-batch in flight but GPU \"" + topology_.gpu(group.tightest_gpu).id +
           "\" has " + io::format_bytes(*group.capacity_bytes);
  }

  [[nodiscard]] double transfer_bytes(int s) const {
    return exec_[static_cast<std::size_t>(s)].transfer_bytes;
  }
  int& replica(int s, int m) {
    return replica_[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)];
  }
  // The last backwards of micro-batch m still due on the device whose first stage is s (0 when
  // not in flight there).
  int& unfinished(int s, int m) {
    return unfinished_[static_cast<std::size_t>(s)][static_cast<std::size_t>(m)];
  }
  Gpu& gpu(int g) { return gpus_[static_cast<std::size_t>(g)]; }

  // The group led by `g` as stage `s` runs it.
  [[nodiscard]] const simulate::GroupExecution& group(int g, int s) const {
    return exec_[static_cast<std::size_t>(s)]
        .groups[static_cast<std::size_t>(gpus_[static_cast<std::size_t>(g)].group)];
  }
  // One micro-batch's F + B of stage s on the group led by `g`.
  [[nodiscard]] double work_ms(int g, int s) const { return group(g, s).work_ms; }

  void make_ready(const ComputeTask& task) {
    touched_.push_back(replica(task.stage, task.micro_batch));
    if (fixed_) {
      ready_[static_cast<std::size_t>(key(task))] = 1;
      return;
    }
    Gpu& g = gpu(replica(task.stage, task.micro_batch));
    const std::pair<int, int> entry{task.micro_batch, task.stage};
    if (task.op == Op::kForward) {
      (task.stage == g.stage ? g.ready_entry : g.ready_forward).push(entry);
    } else {
      (task.op == Op::kBackwardWeight ? g.ready_weight : g.ready_backward).push(entry);
    }
  }
  [[nodiscard]] long key(const ComputeTask& task) const { return graph_.id(task); }

  // Chooses the replica of stage s for micro-batch m whose forward just ended on `from`: the
  // group that would finish it first (its arrival, then its outstanding work), ties to the
  // earlier. O(r), or O(n log r) by `fast_choice`.
  int choose_replica(int s, int from) {
    if (fast_[static_cast<std::size_t>(s)]) return fast_choice(s, from);
    const std::vector<int>& gpus = stage_leaders_[static_cast<std::size_t>(s)];
    int best = gpus.front();
    double best_finish = std::numeric_limits<double>::infinity();
    for (int g : gpus) {
      const double finish = finish_ms(s, from, g);
      if (finish < best_finish) {
        best_finish = finish;
        best = g;
      }
    }
    return best;
  }
  // When stage s's input from `from` (none: the start) reaches the group led by g.
  [[nodiscard]] double arrival_ms(int s, int from, int g) const {
    return from == kNone ? 0 : topology_.transfer_ms(from, g, transfer_bytes(s - 1));
  }
  // When a group finishes a micro-batch arriving at `arrival` behind `outstanding` ms of work.
  static double finish_of(double arrival, double outstanding, double work) {
    return std::max(arrival, outstanding) + work;
  }
  [[nodiscard]] double finish_ms(int s, int from, int g) const {
    return finish_of(arrival_ms(s, from, g), gpus_[static_cast<std::size_t>(g)].outstanding_ms,
                     work_ms(g, s));
  }

  // The same choice, exactly, on a node-cost topology where every group of stage s works alike
  // (w): a group off the sender's node finishes at max(A, outstanding) + w with one arrival A
  // (the network's), monotone in its outstanding work, so the earliest of the least finish is
  // the leftmost group whose finish is at most that of the least outstanding (a MinTree over
  // the groups); the few groups on the sender's node are taken out of the tree and compared as
  // the scan does. O(n log r), n the groups on the sender's node.
  int fast_choice(int s, int from) {
    const auto at = static_cast<std::size_t>(s);
    const std::vector<int>& gpus = stage_leaders_[at];
    MinTree& tree = outstanding_[at];
    std::vector<std::size_t> near;  // positions of the groups on the sender's node, ascending
    if (from != kNone) {
      const auto& by_node = leaders_by_node_[at];
      const std::pair<int, std::size_t> first{topology_.node_of(from), 0};
      for (auto it = std::lower_bound(by_node.begin(), by_node.end(), first);
           it != by_node.end() && it->first == first.first; ++it) {
        near.push_back(it->second);
      }
    }
    std::size_t best = gpus.size();
    double best_finish = std::numeric_limits<double>::infinity();
    for (const std::size_t x : near) {
      const double finish = finish_ms(s, from, gpus[x]);
      if (finish < best_finish) best_finish = finish, best = x;
      tree.set(x, std::numeric_limits<double>::infinity());
    }
    if (tree.least() < std::numeric_limits<double>::infinity()) {
      // Every group off the sender's node has this arrival and this work.
      const double least = tree.least();
      const int any = gpus[tree.leftmost([&](double o) { return o <= least; })];
      const double arrival = arrival_ms(s, from, any), w = work_ms(any, s);
      const double far = finish_of(arrival, least, w);
      const std::size_t x =
          tree.leftmost([&](double o) { return finish_of(arrival, o, w) <= far; });
      if (far < best_finish || (far == best_finish && x < best)) best_finish = far, best = x;
    }
    for (const std::size_t x : near) {
      tree.set(x, gpus_[static_cast<std::size_t>(gpus[x])].outstanding_ms);
    }
    return gpus[best];
  }

  // Sets the outstanding work of the group led by g, and the trees of the stages it serves.
  void set_outstanding(int g, double ms) {
    gpu(g).outstanding_ms = ms;
    for (const auto& [s, x] : tree_slots_[static_cast<std::size_t>(g)]) {
      outstanding_[static_cast<std::size_t>(s)].set(x, ms);
    }
  }

  // The fast choice's indexes (list policy, node-cost topology, groups of a stage working
  // alike). O(G log G).
  void index_replicas() {
    fast_.assign(static_cast<std::size_t>(S_), false);
    stage_leaders_.resize(static_cast<std::size_t>(S_));
    outstanding_.resize(static_cast<std::size_t>(S_));
    leaders_by_node_.resize(static_cast<std::size_t>(S_));
    tree_slots_.resize(gpus_.size());
    for (int s = 0; s < S_; ++s) {
      const auto at = static_cast<std::size_t>(s);
      stage_leaders_[at] = stages_[at].leaders();
      const std::vector<int>& gpus = stage_leaders_[at];
      if (fixed_ || !topology_.costs_by_node()) continue;
      const double w = work_ms(gpus.front(), s);
      fast_[at] = std::all_of(gpus.begin(), gpus.end(), [&](int g) { return work_ms(g, s) == w; });
      if (!fast_[at]) continue;
      outstanding_[at] = MinTree(gpus.size());
      for (std::size_t x = 0; x < gpus.size(); ++x) {
        outstanding_[at].set(x, 0);
        leaders_by_node_[at].emplace_back(topology_.node_of(gpus[x]), x);
        tree_slots_[static_cast<std::size_t>(gpus[x])].emplace_back(s, x);
      }
      std::sort(leaders_by_node_[at].begin(), leaders_by_node_[at].end());
    }
  }

  // The replica of stage s for micro-batch m, whose forward just ended on `from`: the group
  // that took m on its device's first stage, where m entered the device (and reserved its
  // memory there, which it frees only after its last backward on the device), else the choice
  // of `choose_replica`.
  int replica_for(int s, int m, int from) {
    const int entry = gpu(stages_[static_cast<std::size_t>(s)].leader(0)).stage;
    if (entry != s && replica(entry, m) != kNone) return replica(entry, m);
    return choose_replica(s, from);
  }

  void assign(int s, int m, int g) {
    replica(s, m) = g;
    set_outstanding(g, gpu(g).outstanding_ms + work_ms(g, s));
  }

  void start_compute(int g, const ComputeTask& task, double now) {
    Gpu& state = gpu(g);
    state.busy = true;
    if (task.op != Op::kBackwardWeight) state.after_backward = task.op != Op::kForward;
    if (task.op == Op::kForward && task.stage == state.stage) {
      ++state.in_flight;  // the micro-batch enters the device
      unfinished(state.stage, task.micro_batch) = static_cast<int>(state.stages.size());
    }
    if (fixed_) ready_[static_cast<std::size_t>(key(task))] = 0;
    const double duration = group(g, task.stage).duration(task.op);
    result_.schedule.gpu_order[static_cast<std::size_t>(g)].push_back(task);
    Event event{now + duration, sequence_++, true, g, kNone, task, {}};
    events_.push(event);
  }

  // The index of `channel` in channels_, added on its first use. O(1) expected.
  int channel_index(const Channel& channel) {
    const std::uint64_t key = (static_cast<std::uint64_t>(channel.first) << 32U) |
                              static_cast<std::uint32_t>(channel.second);
    const auto [it, added] = channel_index_.try_emplace(key, static_cast<int>(channels_.size()));
    if (added) {
      channels_.push_back(
          ChannelState{channel, false, {}, &result_.schedule.channel_order[channel]});
    }
    return it->second;
  }

  void start_transfer(int c, const Transfer& t, double now) {
    ChannelState& state = channels_[static_cast<std::size_t>(c)];
    state.busy = true;
    TransferTask task{t.kind == 1 ? TransferKind::kActivation : TransferKind::kGradient, t.stage,
                      t.micro_batch};
    state.order->push_back(task);
    const double duration =
        topology_.transfer_ms(state.channel.first, state.channel.second, transfer_bytes(t.stage));
    Event event{now + duration, sequence_++, false, kNone, c, {}, task};
    events_.push(event);
  }

  // Takes the first task of `ready` as an op on the group led by g.
  void start_first(int g, Ready& ready, Op op, double now) {
    const auto [m, s] = ready.top();
    ready.pop();
    start_compute(g, {op, s, m}, now);
  }

  // The list policy: a ready backward (B or I) of lowest micro-batch; else a forward
  // (`try_start_forward`); else a ready weight gradient, the filler. Under kAlternate a group
  // just after a backward tries the forwards first.
  void try_start_list(int g, double now) {
    Gpu& state = gpu(g);
    const bool forward_first = alternate_ && state.after_backward;
    if (forward_first && try_start_forward(g, now)) return;
    if (!state.ready_backward.empty()) {
      start_first(g, state.ready_backward, graph_.backward_op(), now);
      return;
    }
    if (!forward_first && try_start_forward(g, now)) return;
    if (!state.ready_weight.empty()) start_first(g, state.ready_weight, Op::kBackwardWeight, now);
  }

  // Starts, if it can, a ready forward of lowest micro-batch on the group led by g, one entering
  // the device only while its memory holds one more, else a new micro-batch on stage 0; whether
  // it did.
  bool try_start_forward(int g, double now) {
    Gpu& state = gpu(g);
    const bool room = state.in_flight < state.max_in_flight;
    const bool entry =
        room && !state.ready_entry.empty() &&
        (state.ready_forward.empty() || state.ready_entry.top() < state.ready_forward.top());
    if (entry || !state.ready_forward.empty()) {
      start_first(g, entry ? state.ready_entry : state.ready_forward, Op::kForward, now);
      return true;
    }
    if (room && state.stage == 0 && next_first_stage_ < M_) {
      int m = next_first_stage_++;
      assign(0, m, g);
      start_compute(g, {Op::kForward, 0, m}, now);
      return true;
    }
    return false;
  }

  void try_start_fixed(int g, double now) {
    Gpu& state = gpu(g);
    const auto& sequence = sequences_[static_cast<std::size_t>(g)];
    if (state.next >= sequence.size()) return;
    const ComputeTask& task = sequence[state.next];
    if (ready_[static_cast<std::size_t>(key(task))] == 0) return;
    ++state.next;
    start_compute(g, task, now);
  }

  // Starts what can start: every idle group (by its leader's index), then every idle channel
  // with a queued transfer (in channel order). Starting a task makes no other task ready, so
  // the order within one dispatch only breaks ties. Only the groups touched since the last
  // dispatch (one became idle, or a task became ready on it) are looked at: an idle group that
  // could start nothing then still cannot, since what it waits for (a ready task of its own,
  // room it frees itself on completing, micro-batches left for stage 0, which only run out)
  // changes only by those events; in leader order, so the same starts in the same order as a
  // scan of every group. O(touched log touched + started x log channels); the first dispatch
  // looks at every group.
  void dispatch(double now) {
    if (first_dispatch_) {
      candidates_ = leaders_;
      first_dispatch_ = false;
    } else {
      std::sort(touched_.begin(), touched_.end());
      touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
      candidates_.swap(touched_);  // both keep their buffers
    }
    touched_.clear();
    for (const int g : candidates_) {
      if (gpu(g).busy) continue;
      if (fixed_) {
        try_start_fixed(g, now);
      } else {
        try_start_list(g, now);
      }
    }
    std::sort(pending_.begin(), pending_.end());
    pending_.erase(std::unique(pending_.begin(), pending_.end()), pending_.end());
    for (const auto& [channel, c] : pending_) {
      ChannelState& state = channels_[static_cast<std::size_t>(c)];
      const Transfer t = state.queue.top();
      state.queue.pop();
      start_transfer(c, t, now);
    }
    pending_.clear();
  }

  void enqueue_transfer(const Channel& channel, TransferKind kind, int s, int m, double now) {
    const int c = channel_index(channel);
    ChannelState& state = channels_[static_cast<std::size_t>(c)];
    state.queue.push(Transfer{now, kind == TransferKind::kActivation ? 1 : 0, m, s});
    if (!state.busy) pending_.emplace_back(channel, c);
  }

  // A compute task ended on its group: its work leaves the group's outstanding work (the whole
  // F + B with the backward, or under `per_task_` the forward's part with the forward), and it
  // stops holding memory for the micro-batch once every last backward (B or W) of the
  // micro-batch on the device has ended.
  void release(int g, const ComputeTask& task) {
    Gpu& state = gpu(g);
    const double forward_ms = per_task_ ? group(g, task.stage).forward_ms : 0;
    if (task.op == Op::kForward && forward_ms > 0) {
      set_outstanding(g, state.outstanding_ms - forward_ms);
    }
    if (task.op == graph_.backward_op()) {
      set_outstanding(g, state.outstanding_ms - (work_ms(g, task.stage) - forward_ms));
    }
    if (task.op != graph_.last_backward_op()) return;
    int& due = unfinished(state.stage, task.micro_batch);
    if (due > 0 && --due == 0) --state.in_flight;
  }

  // What a finished task releases are its data successors in the task graph (spec 3, 9.3): a
  // compute task on the same device (across a boundary inside it, on the same group, or the W
  // after an I) or a transfer to the next stage's replica.
  void complete(const Event& event, double now) {
    ++completed_;
    result_.iteration_ms = std::max(result_.iteration_ms, now);
    if (!event.is_compute) {
      ChannelState& channel = channels_[static_cast<std::size_t>(event.channel)];
      channel.busy = false;
      if (!channel.queue.empty()) pending_.emplace_back(channel.channel, event.channel);
      make_ready(graph_.compute_task(graph_.data_successor(graph_.id(event.transfer))));
      return;
    }
    gpu(event.gpu).busy = false;
    touched_.push_back(event.gpu);
    const ComputeTask& task = event.compute;
    const int m = task.micro_batch;
    release(event.gpu, task);
    for (const int next : graph_.data_successors(graph_.id(task))) {
      if (next == simulate::TaskGraph::kNone) continue;
      if (graph_.is_compute(next)) {
        const ComputeTask successor = graph_.compute_task(next);
        if (replica(successor.stage, m) == kNone) assign(successor.stage, m, event.gpu);
        make_ready(successor);
        continue;
      }
      const TransferTask transfer = graph_.transfer_task(next);
      const int peer_stage = simulate::TaskGraph::ends(transfer).to_stage;
      if (replica(peer_stage, m) == kNone)
        assign(peer_stage, m, replica_for(peer_stage, m, event.gpu));
      enqueue_transfer({event.gpu, replica(peer_stage, m)}, transfer.kind, transfer.stage, m, now);
    }
  }

  const topology::Topology& topology_;
  const std::vector<Stage>& stages_;
  Policy policy_;
  bool alternate_;  // the list policy under ListPriority::kAlternate
  bool per_task_;   // the list policy under ReplicaLoad::kPerTask
  bool fixed_;      // a fixed per-GPU order (policy_row): sequences_ and ready_ drive it
  int S_;
  int M_;
  simulate::TaskGraph graph_;
  std::vector<simulate::StageExecution> exec_;
  std::vector<Gpu> gpus_;
  std::vector<std::vector<int>> replica_;
  std::vector<std::vector<int>> unfinished_;  // per device's first stage and micro-batch
  std::vector<std::vector<ComputeTask>> sequences_;
  std::vector<char> ready_;             // fixed policies: per compute task id, whether it is ready
  std::vector<ChannelState> channels_;  // in order of first use
  std::unordered_map<std::uint64_t, int> channel_index_;  // (from, to) -> index in channels_
  std::vector<int> leaders_;  // the groups' leaders, ascending: the compute resources in use
  std::vector<std::vector<int>> stage_leaders_;  // per stage: Stage::leaders()
  // The fast replica choice (index_replicas): per stage whether it applies, its groups'
  // outstanding work, its (node, position) pairs sorted; per GPU the (stage, position) slots it
  // leads.
  std::vector<bool> fast_;
  std::vector<MinTree> outstanding_;
  std::vector<std::vector<std::pair<int, std::size_t>>> leaders_by_node_;
  std::vector<std::vector<std::pair<int, std::size_t>>> tree_slots_;
  // The channels that are idle and have a transfer queued (with their indexes), taken in channel
  // order at a dispatch (sorted there, repeats dropped).
  std::vector<std::pair<Channel, int>> pending_;
  std::vector<int> touched_;     // leaders that became idle or got a ready task since a dispatch
  std::vector<int> candidates_;  // the groups a dispatch looks at (a buffer kept between them)
  bool first_dispatch_ = true;
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
                        Optimizer optimizer, bool split_backward, ListRule rule) {
  ScheduleAttempt attempt = try_make_schedule(model, topology, stages, micro_batches, policy,
                                              optimizer, split_backward, rule);
  if (!attempt.scheduled) throw InfeasibleError(attempt.refusal);
  return std::move(*attempt.scheduled);
}

ScheduleAttempt try_make_schedule(const model::Model& model, const topology::Topology& topology,
                                  const std::vector<Stage>& stages, int micro_batches,
                                  Policy policy, Optimizer optimizer, bool split_backward,
                                  ListRule rule) {
  if (auto refusal = policy_refusal(policy, stages, micro_batches)) {
    throw simulate::ScheduleError(*refusal);
  }
  Engine engine(model, topology, stages, micro_batches, policy, optimizer, split_backward, rule);
  if (engine.refusal()) return {std::nullopt, *engine.refusal()};
  return {engine.run(), {}};
}

}  // namespace pipeplan::schedule
