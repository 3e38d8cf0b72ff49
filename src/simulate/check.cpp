// Plan checking, first violation wins. The structural rules (no model, no topology) are
// checked once, here, for every reader of a plan; the rules that need the inputs follow.
// O(T log T) for T schedule entries (the sorts of the per-resource orders).

#include "pipeplan/simulate/check.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"
#include "pipeplan/simulate/task_graph.hpp"

namespace pipeplan::simulate {
namespace {

std::string ms(double value) { return io::format_number(value, 12) + " ms"; }
std::string number(double value) { return io::format_number(value, 15); }

const std::string kComputeAt = "/schedule/compute/";
const std::string kTransferAt = "/schedule/transfers/";

// The state of one structural check: the plan, how GPUs are named, and what is known so far.
class StructureCheck {
 public:
  StructureCheck(const StatedPlan& stated, const std::vector<std::string>& gpu_ids)
      : stated_(stated),
        gpu_ids_(gpu_ids),
        S_(static_cast<int>(stated.stages.size())),
        M_(stated.micro_batches) {}

  StatedIndex run() {
    if (stated_.iteration_ms < 0) {
      fail("/iteration_ms", "must be >= 0, got " + number(stated_.iteration_ms));
    }
    if (S_ == 0) fail("/stages", "must list at least one stage");
    if (M_ < 1) fail("/micro_batches", "must be an integer >= 1");
    stages();
    if (stated_.virtual_stages && *stated_.virtual_stages != virtual_stages(stated_.stages)) {
      fail("/virtual_stages", "states " + std::to_string(*stated_.virtual_stages) +
                                  " but the most stages sharing one GPU list is " +
                                  std::to_string(virtual_stages(stated_.stages)));
    }
    compute_entries();
    // The count matches S M: numbering is now bounded.
    graph_ = TaskGraph(stated_.stages, M_, stated_.split_backward, stated_.optimizer);
    index_.entry.assign(static_cast<std::size_t>(graph_->chain_count()), kNoEntry);
    compute_once();
    transfer_entries();
    transfers_once();
    overlaps();
    dependencies();
    allreduces();
    updates();
    iteration_end();
    gpu_entries();
    return std::move(index_);
  }

 private:
  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw InputError(stated_.file, pointer, message);
  }
  [[nodiscard]] std::string gpu_name(int g) const {
    return "GPU \"" + gpu_ids_[static_cast<std::size_t>(g)] + "\"";
  }
  // The leader of the group GPU `g` (which serves a stage) belongs to.
  [[nodiscard]] int leader_of(int g) const {
    const auto gpu = static_cast<std::size_t>(g);
    const Stage& stage = stated_.stages[static_cast<std::size_t>(index_.stage_of[gpu])];
    return stage.leader(index_.group_of[gpu]);
  }
  [[nodiscard]] const StatedCompute& compute_of(const ComputeTask& task) const {
    return stated_.compute[index_.entry[static_cast<std::size_t>(graph_->id(task))]];
  }
  // The stated end of a compute task, transfer or (indexed) AllReduce of the task graph.
  [[nodiscard]] double end_of(int id) const {
    if (graph_->is_allreduce(id)) {
      const auto s = static_cast<std::size_t>(graph_->allreduce_stage(id));
      return stated_.allreduces[index_.allreduce_entry[s]].end_ms;
    }
    const std::size_t i = index_.entry[static_cast<std::size_t>(id)];
    return graph_->is_compute(id) ? stated_.compute[i].end_ms : stated_.transfers[i].end_ms;
  }
  // Checks that `start` (of the entry at `at`, task `id`) is not before the last of the task's
  // predecessors in the task graph ends. O(M).
  void check_after_predecessors(const std::string& at, int id, double start) const {
    double ready = 0;
    for (const int p : graph_->predecessors(id)) ready = std::max(ready, end_of(p));
    check_after(at, graph_->describe(id), start, ready, graph_->describe_predecessors(id));
  }
  void check_times(const std::string& at, const std::string& what, double start, double end) const {
    if (start < 0) fail(at + "/start_ms", "must be >= 0, got " + number(start));
    if (end < start && !times_equal(end, start)) {
      fail(at + "/end_ms", what + " ends at " + ms(end) + ", before it starts at " + ms(start));
    }
    if (end > stated_.iteration_ms && !times_equal(end, stated_.iteration_ms)) {
      fail(at + "/end_ms", what + " ends at " + ms(end) + ", after the stated iteration_ms " +
                               ms(stated_.iteration_ms));
    }
  }
  void check_after(const std::string& at, const std::string& what, double start, double end,
                   const std::string& dependency) const {
    if (start < end && !times_equal(start, end)) {
      fail(at, what + " starts at " + ms(start) + " before " + dependency + " ends at " + ms(end));
    }
  }

  // Stages: contiguous from layer 0, at least one GPU each, no GPU twice (stages share all
  // their GPUs or none, spec 9.2), figures >= 0.
  void stages() {
    index_.stage_of.assign(gpu_ids_.size(), -1);
    index_.group_of.assign(gpu_ids_.size(), -1);
    index_.device_of.assign(static_cast<std::size_t>(S_), -1);
    for (int s = 0; s < S_; ++s) {
      const Stage& stage = stated_.stages[static_cast<std::size_t>(s)];
      const std::string at = "/stages/" + std::to_string(s);
      const int first = s == 0 ? 0 : stated_.stages[static_cast<std::size_t>(s) - 1].last_layer + 1;
      if (stage.first_layer != first) {
        fail(at + "/first_layer",
             "must be " + std::to_string(first) +
                 (s == 0 ? ": stages start at layer 0"
                         : ", the layer after the last of stage " + std::to_string(s - 1)));
      }
      if (stage.last_layer < stage.first_layer) {
        fail(at + "/last_layer",
             "must be >= first_layer (" + std::to_string(stage.first_layer) + ")");
      }
      if (stage.gpus.empty()) fail(at + "/gpus", "must list at least one GPU");
      const auto t = static_cast<std::size_t>(stage.tensor_parallel);
      if (stage.gpus.size() % t != 0) {
        fail(at + "/gpus", "lists " + std::to_string(stage.gpus.size()) +
                               " GPUs, not a multiple of the stage's tensor_parallel (" +
                               std::to_string(t) + "): each replica is a group of t GPUs");
      }
      const auto group = static_cast<std::size_t>(stage.group_size());
      if (stage.gpus.size() % group != 0) {
        fail(at + "/gpus", "lists " + std::to_string(stage.gpus.size()) +
                               " GPUs, not a multiple of context_parallel x tensor_parallel (" +
                               std::to_string(group) +
                               "): each replica is a group of c tensor-parallel groups");
      }
      place(s, at);
      const auto& figures = s < static_cast<int>(stated_.stage_figures.size())
                                ? stated_.stage_figures[static_cast<std::size_t>(s)]
                                : std::nullopt;
      if (!figures) continue;
      const std::pair<const char*, double> values[] = {
          {"forward_ms", figures->forward_ms},
          {"backward_ms", figures->backward_ms},
          {"parameter_bytes", figures->parameter_bytes},
          {"boundary_bytes", figures->boundary_bytes},
          {"allreduce_ms", figures->allreduce_ms}};
      for (const auto& [key, value] : values) {
        if (value < 0) fail(at + "/" + key, "must be >= 0, got " + number(value));
      }
    }
  }

  // Stage s's GPUs: new ones, or exactly the GPUs and degree of an earlier stage (a device).
  void place(int s, const std::string& at) {
    const Stage& stage = stated_.stages[static_cast<std::size_t>(s)];
    const auto group = static_cast<std::size_t>(stage.group_size());
    const int shared = index_.stage_of[static_cast<std::size_t>(stage.gpus.front())];
    const bool device =
        shared >= 0 && stated_.stages[static_cast<std::size_t>(shared)].gpus == stage.gpus;
    if (device &&
        stated_.stages[static_cast<std::size_t>(shared)].tensor_parallel != stage.tensor_parallel) {
      fail(at + "/tensor_parallel",
           "must be " +
               std::to_string(stated_.stages[static_cast<std::size_t>(shared)].tensor_parallel) +
               ", the degree of stage " + std::to_string(shared) +
               ", which has the same GPUs (stages on one device have the same groups, spec 9.2)");
    }
    index_.device_of[static_cast<std::size_t>(s)] = device ? shared : s;
    if (device) return;
    for (std::size_t k = 0; k < stage.gpus.size(); ++k) {
      int& owner = index_.stage_of[static_cast<std::size_t>(stage.gpus[k])];
      if (owner >= 0) {
        fail(at + "/gpus/" + std::to_string(k),
             gpu_name(stage.gpus[k]) + (owner == s
                                            ? " is listed twice"
                                            : " already serves stage " + std::to_string(owner)));
      }
      owner = s;
      index_.group_of[static_cast<std::size_t>(stage.gpus[k])] = static_cast<int>(k / group);
    }
  }

  // Whether GPU g serves stage s (on its device).
  [[nodiscard]] bool serves(int g, int s) const {
    return index_.stage_of[static_cast<std::size_t>(g)] >= 0 &&
           index_.stage_of[static_cast<std::size_t>(g)] ==
               index_.device_of[static_cast<std::size_t>(s)];
  }

  // Compute entries: ranges, placement and times per entry, then their count.
  void compute_entries() const {
    for (std::size_t i = 0; i < stated_.compute.size(); ++i) {
      const StatedCompute& e = stated_.compute[i];
      const std::string at = kComputeAt + std::to_string(i);
      if (e.task.stage >= S_) {
        fail(at + "/stage", "names stage " + std::to_string(e.task.stage) + " but the plan has " +
                                std::to_string(S_));
      }
      if (e.task.micro_batch >= M_) {
        fail(at + "/micro_batch", "must be < micro_batches (" + std::to_string(M_) + ")");
      }
      check_op(at, e.task.op);
      if (!serves(e.gpu, e.task.stage)) {
        fail(at + "/gpu",
             gpu_name(e.gpu) + " does not serve stage " + std::to_string(e.task.stage));
      }
      if (const int leader = leader_of(e.gpu); leader != e.gpu) {
        fail(at + "/gpu",
             gpu_name(e.gpu) + " is not the leader of its tensor-parallel group in stage " +
                 std::to_string(e.task.stage) + "; tasks name " + gpu_name(leader) + " (spec 8.2)");
      }
      check_times(at, describe(e.task), e.start_ms, e.end_ms);
    }
    const bool split = stated_.split_backward;
    const std::int64_t count = std::int64_t{split ? 3 : 2} * S_ * M_;
    if (static_cast<std::int64_t>(stated_.compute.size()) != count) {
      fail("/schedule/compute",
           "lists " + std::to_string(stated_.compute.size()) + " tasks but " + std::to_string(S_) +
               " stages and " + std::to_string(M_) + " micro-batches make " +
               std::to_string(count) +
               (split ? " (a forward, an input-gradient and a weight-gradient backward each)"
                      : " (a forward and a backward each)"));
    }
  }

  // A compute entry's op agrees with `split_backward` (spec 9.2).
  void check_op(const std::string& at, Op op) const {
    if (stated_.split_backward && op == Op::kBackward) {
      fail(at + "/op",
           "is \"backward\" but the plan has split_backward: true, so every backward is "
           "\"backward_input\" and \"backward_weight\" (spec 9.2)");
    }
    if (!stated_.split_backward && (op == Op::kBackwardInput || op == Op::kBackwardWeight)) {
      fail(at + "/op", std::string("is \"") + op_name(op) +
                           "\" but the plan does not have split_backward: true (spec 9.2)");
    }
  }

  // Each compute task once; a backward (or its halves) on the GPU of its forward; across a
  // boundary inside a device, a micro-batch's forwards on one group (spec 9.3).
  void compute_once() {
    for (std::size_t i = 0; i < stated_.compute.size(); ++i) {
      std::size_t& slot =
          index_.entry[static_cast<std::size_t>(graph_->id(stated_.compute[i].task))];
      if (slot != kNoEntry) {
        fail(kComputeAt + std::to_string(i), describe(stated_.compute[i].task) +
                                                 " is listed twice (also at " + kComputeAt +
                                                 std::to_string(slot) + ")");
      }
      slot = i;
    }
    for (std::size_t i = 0; i < stated_.compute.size(); ++i) {
      const StatedCompute& e = stated_.compute[i];
      const int m = e.task.micro_batch;
      if (e.task.op == Op::kForward) {
        const int s = e.task.stage;
        if (s == 0 || !graph_->is_local_boundary(s - 1)) continue;
        const int below = compute_of({Op::kForward, s - 1, m}).gpu;
        if (e.gpu != below) {
          fail(kComputeAt + std::to_string(i) + "/gpu",
               describe(e.task) + " runs on " + gpu_name(e.gpu) + " but stage " +
                   std::to_string(s - 1) + " shares its device and runs micro-batch " +
                   std::to_string(m) + " on " + gpu_name(below) +
                   " (a boundary inside a device has no transfer, spec 9.3)");
        }
        continue;
      }
      const int forward_gpu = compute_of({Op::kForward, e.task.stage, m}).gpu;
      if (e.gpu != forward_gpu) {
        fail(kComputeAt + std::to_string(i) + "/gpu",
             describe(e.task) + " runs on " + gpu_name(e.gpu) + " but its forward runs on " +
                 gpu_name(forward_gpu));
      }
    }
  }

  // Transfers: boundary and micro-batch ranges, endpoints implied by the compute placement.
  void transfer_entries() const {
    for (std::size_t i = 0; i < stated_.transfers.size(); ++i) {
      const StatedTransfer& e = stated_.transfers[i];
      const std::string at = kTransferAt + std::to_string(i);
      if (e.task.stage >= S_ - 1) {
        fail(at + "/stage", "names the boundary after stage " + std::to_string(e.task.stage) +
                                " but the plan has " + std::to_string(S_) + " stage" +
                                (S_ == 1 ? "" : "s"));
      }
      if (e.task.micro_batch >= M_) {
        fail(at + "/micro_batch", "must be < micro_batches (" + std::to_string(M_) + ")");
      }
      if (graph_->is_local_boundary(e.task.stage)) {
        fail(at + "/stage", "names the boundary after stage " + std::to_string(e.task.stage) +
                                ", which lies inside one device (stages " +
                                std::to_string(e.task.stage) + " and " +
                                std::to_string(e.task.stage + 1) +
                                " share their GPUs): it has no transfer (spec 9.3)");
      }
      const int m = e.task.micro_batch;
      const TransferEnds ends = TaskGraph::ends(e.task);
      const int from = compute_of({Op::kForward, ends.from_stage, m}).gpu;
      const int to = compute_of({Op::kForward, ends.to_stage, m}).gpu;
      if (e.from != from) {
        fail(at + "/from", describe(e.task) + " must leave from " + gpu_name(from) +
                               ", which runs micro-batch " + std::to_string(m) + " on stage " +
                               std::to_string(ends.from_stage));
      }
      if (e.to != to) {
        fail(at + "/to", describe(e.task) + " must go to " + gpu_name(to) +
                             ", which runs micro-batch " + std::to_string(m) + " on stage " +
                             std::to_string(ends.to_stage));
      }
      if (e.bytes < 0) fail(at + "/bytes", "must be >= 0, got " + number(e.bytes));
      check_times(at, describe(e.task), e.start_ms, e.end_ms);
    }
  }

  void transfers_once() {
    const std::int64_t count = graph_->transfer_count();
    if (static_cast<std::int64_t>(stated_.transfers.size()) != count) {
      fail("/schedule/transfers", "lists " + std::to_string(stated_.transfers.size()) +
                                      " transfers but " + std::to_string(count / 2 / M_) +
                                      " boundaries between devices and " + std::to_string(M_) +
                                      " micro-batches make " + std::to_string(count) +
                                      " (an activation and a gradient each)");
    }
    for (std::size_t i = 0; i < stated_.transfers.size(); ++i) {
      std::size_t& slot =
          index_.entry[static_cast<std::size_t>(graph_->id(stated_.transfers[i].task))];
      if (slot != kNoEntry) {
        fail(kTransferAt + std::to_string(i), describe(stated_.transfers[i].task) +
                                                  " is listed twice (also at " + kTransferAt +
                                                  std::to_string(slot) + ")");
      }
      slot = i;
    }
  }

  // One task at a time per GPU and per channel: entries ordered by start, ties by position.
  void overlaps() {
    index_.compute_order = compute_by_gpu(stated_);
    const auto& order = index_.compute_order;
    for (std::size_t k = 1; k < order.size(); ++k) {
      const auto& a = stated_.compute[order[k - 1]];
      const auto& b = stated_.compute[order[k]];
      if (a.gpu == b.gpu && b.start_ms < a.end_ms && !times_equal(b.start_ms, a.end_ms)) {
        fail(kComputeAt + std::to_string(order[k]),
             describe(b.task) + " starts at " + ms(b.start_ms) + " on " + gpu_name(b.gpu) +
                 " while " + describe(a.task) + " runs there until " + ms(a.end_ms));
      }
    }
    index_.transfer_order = transfers_by_channel(stated_);
    const auto& transfer_order = index_.transfer_order;
    for (std::size_t k = 1; k < transfer_order.size(); ++k) {
      const auto& a = stated_.transfers[transfer_order[k - 1]];
      const auto& b = stated_.transfers[transfer_order[k]];
      if (a.from == b.from && a.to == b.to && b.start_ms < a.end_ms &&
          !times_equal(b.start_ms, a.end_ms)) {
        fail(kTransferAt + std::to_string(transfer_order[k]),
             describe(b.task) + " starts at " + ms(b.start_ms) + " while " + describe(a.task) +
                 " occupies the channel " + gpu_ids_[static_cast<std::size_t>(a.from)] + " -> " +
                 gpu_ids_[static_cast<std::size_t>(a.to)] + " until " + ms(a.end_ms));
      }
    }
  }

  // Every data dependency of the task graph, on the stated times.
  void dependencies() const {
    const TaskGraph& graph = *graph_;
    for (int id = 0; id < graph.chain_count(); ++id) {
      if (graph.data_predecessor(id) == TaskGraph::kNone) continue;
      const std::size_t i = index_.entry[static_cast<std::size_t>(id)];
      const bool compute = graph.is_compute(id);
      const double start = compute ? stated_.compute[i].start_ms : stated_.transfers[i].start_ms;
      check_after_predecessors((compute ? kComputeAt : kTransferAt) + std::to_string(i), id, start);
    }
  }

  // One AllReduce per replicated stage, over its GPUs in ring order, after its backwards.
  void allreduces() {
    const TaskGraph& graph = *graph_;
    index_.allreduce_entry.assign(static_cast<std::size_t>(S_), kNoEntry);
    for (std::size_t i = 0; i < stated_.allreduces.size(); ++i) {
      const auto& e = stated_.allreduces[i];
      const std::string at = "/schedule/allreduces/" + std::to_string(i);
      if (e.stage >= S_) {
        fail(at + "/stage",
             "names stage " + std::to_string(e.stage) + " but the plan has " + std::to_string(S_));
      }
      const Stage& stage = stated_.stages[static_cast<std::size_t>(e.stage)];
      if (!graph.has_allreduce(e.stage)) {
        const char* why =
            stage.shards() > 1
                ? (stated_.optimizer == Optimizer::kFullySharded
                       ? " is fully sharded (its gradients are reduce-scattered in each backward)"
                       : " shards its gradients (they are reduce-scattered in each backward)")
            : stage.tensor_parallel == 1 ? " has one GPU"
                                         : " has one replica";
        fail(at, "stage " + std::to_string(e.stage) + why + " and no AllReduce");
      }
      std::size_t& slot = index_.allreduce_entry[static_cast<std::size_t>(e.stage)];
      if (slot != kNoEntry) fail(at, "second AllReduce of stage " + std::to_string(e.stage));
      slot = i;
      if (e.gpus != stage.gpus) {
        fail(at + "/gpus",
             "must list the GPUs of stage " + std::to_string(e.stage) + " in ring order");
      }
      if (e.bytes < 0) fail(at + "/bytes", "must be >= 0, got " + number(e.bytes));
      check_times(at, graph.describe(graph.allreduce(e.stage)), e.start_ms, e.end_ms);
      check_after_predecessors(at, graph.allreduce(e.stage), e.start_ms);
    }
    for (int s = 0; s < S_; ++s) {
      if (graph.has_allreduce(s) &&
          index_.allreduce_entry[static_cast<std::size_t>(s)] == kNoEntry) {
        fail("/schedule/allreduces", graph.describe(graph.allreduce(s)) + " is missing");
      }
    }
  }

  // Optimizer steps (spec 8.3): none, or one per group of every stage, on its leader, after
  // the stage's AllReduce (its last backward when it has one replica).
  void updates() const {
    if (stated_.updates.empty()) return;
    const TaskGraph& graph = *graph_;
    std::vector<char> seen(gpu_ids_.size() * static_cast<std::size_t>(S_), 0);  // per stage, GPU
    for (std::size_t i = 0; i < stated_.updates.size(); ++i) {
      const StatedUpdate& e = stated_.updates[i];
      const std::string at = "/schedule/updates/" + std::to_string(i);
      if (e.stage >= S_) {
        fail(at + "/stage",
             "names stage " + std::to_string(e.stage) + " but the plan has " + std::to_string(S_));
      }
      const auto g = static_cast<std::size_t>(e.gpu);
      if (!serves(e.gpu, e.stage) || leader_of(e.gpu) != e.gpu) {
        fail(at + "/gpu",
             gpu_name(e.gpu) + " is not the leader of a group of stage " + std::to_string(e.stage));
      }
      const auto key = static_cast<std::size_t>(e.stage) * gpu_ids_.size() + g;
      if (seen[key]) fail(at, "second optimizer step of " + gpu_name(e.gpu) + "'s group");
      seen[key] = 1;
      check_times(at, graph.describe(graph.update(e.stage)), e.start_ms, e.end_ms);
      check_after_predecessors(at, graph.update(e.stage), e.start_ms);
    }
    for (int s = 0; s < S_; ++s) {
      const Stage& stage = stated_.stages[static_cast<std::size_t>(s)];
      for (int i = 0; i < stage.replicas(); ++i) {
        if (!seen[static_cast<std::size_t>(s) * gpu_ids_.size() +
                  static_cast<std::size_t>(stage.leader(i))]) {
          fail("/schedule/updates", "lists optimizer steps but none for " +
                                        gpu_name(stage.leader(i)) + "'s group of stage " +
                                        std::to_string(s) + " (every group runs one, spec 8.3)");
        }
      }
    }
  }

  // The iteration ends with its last task.
  void iteration_end() const {
    double last_end = 0;
    for (const auto& e : stated_.compute) last_end = std::max(last_end, e.end_ms);
    for (const auto& e : stated_.transfers) last_end = std::max(last_end, e.end_ms);
    for (const auto& e : stated_.allreduces) last_end = std::max(last_end, e.end_ms);
    for (const auto& e : stated_.updates) last_end = std::max(last_end, e.end_ms);
    if (!times_equal(last_end, stated_.iteration_ms)) {
      fail("/iteration_ms",
           "states " + ms(stated_.iteration_ms) + " but the last task ends at " + ms(last_end));
    }
  }

  // GPU order and GPU entries: every GPU once, stages as the placement says, figures >= 0.
  void gpu_entries() const {
    const auto N = gpu_ids_.size();
    if (stated_.gpu_order) {
      std::vector<char> listed(N, 0);
      for (const int g : *stated_.gpu_order) {
        if (listed[static_cast<std::size_t>(g)])
          fail("/gpu_order", "lists " + gpu_name(g) + " twice");
        listed[static_cast<std::size_t>(g)] = 1;
      }
      for (std::size_t g = 0; g < N; ++g) {
        if (!listed[g]) fail("/gpu_order", "does not list " + gpu_name(static_cast<int>(g)));
      }
    }
    if (!stated_.gpus) return;
    std::vector<char> listed(N, 0);
    for (std::size_t i = 0; i < stated_.gpus->size(); ++i) {
      const StatedGpu& e = (*stated_.gpus)[i];
      const std::string at = "/gpus/" + std::to_string(i);
      if (listed[static_cast<std::size_t>(e.gpu)]) fail(at, "lists " + gpu_name(e.gpu) + " twice");
      listed[static_cast<std::size_t>(e.gpu)] = 1;
      const std::vector<int> served = stages_of(e.gpu);
      if (e.stages != served) {
        fail(at + (served.size() > 1 || e.stages.size() > 1 ? "/stages" : "/stage"),
             gpu_name(e.gpu) + " serves " + served_text(served));
      }
      if (e.busy_ms < 0) fail(at + "/busy_ms", "must be >= 0, got " + number(e.busy_ms));
      if (e.peak_memory_bytes < 0) {
        fail(at + "/peak_memory_bytes", "must be >= 0, got " + number(e.peak_memory_bytes));
      }
    }
    for (std::size_t g = 0; g < N; ++g) {
      if (!listed[g]) fail("/gpus", "does not list " + gpu_name(static_cast<int>(g)));
    }
  }

  // The stages GPU g serves, ascending.
  [[nodiscard]] std::vector<int> stages_of(int g) const {
    std::vector<int> out;
    for (int s = 0; s < S_; ++s) {
      if (serves(g, s)) out.push_back(s);
    }
    return out;
  }
  [[nodiscard]] static std::string served_text(const std::vector<int>& stages) {
    if (stages.empty()) return "no stage";
    std::string out = stages.size() == 1 ? "stage " : "stages ";
    for (std::size_t i = 0; i < stages.size(); ++i) {
      out += (i == 0 ? "" : ", ") + std::to_string(stages[i]);
    }
    return out;
  }

  const StatedPlan& stated_;
  const std::vector<std::string>& gpu_ids_;
  const int S_;
  const int M_;
  std::optional<TaskGraph> graph_;
  StatedIndex index_;
};

// The rules that need the model and topology, on a structurally checked plan.
class ModelCheck {
 public:
  ModelCheck(const StatedPlan& stated, const StatedIndex& index, const model::Model& model,
             const topology::Topology& topology)
      : stated_(stated), index_(index), model_(model), topology_(topology) {}

  Plan run() {
    if (!model::allows_context_degree(model_, stated_.context_parallel)) {
      fail("/context_parallel", "is " + std::to_string(stated_.context_parallel) +
                                    ", which some layer's context_parallel degrees do not list "
                                    "(spec 10.1)");
    }
    try {
      check_stages(model_, topology_, stated_.stages);
    } catch (const ScheduleError& error) {
      fail("/stages", error.what());
    }
    for (int s = 0; s < static_cast<int>(stated_.stages.size()); ++s) {
      profiles_.push_back(stage_profile(model_, stated_.stages, s));
    }
    exec_ = execution(model_, topology_, stated_.stages, stated_.optimizer);
    Plan plan = stated_plan(stated_, index_, topology_.size());
    plan.timeline = replay_stated(plan.schedule);
    durations();
    starts(plan.timeline);
    allreduces(plan.timeline);
    updates(plan.timeline);
    if (auto violation = memory_violation(topology_, plan.timeline)) fail("/stages", *violation);
    if (!times_equal(stated_.iteration_ms, plan.timeline.iteration_ms)) {
      fail("/iteration_ms", "states " + ms(stated_.iteration_ms) + " but the replay ends at " +
                                ms(plan.timeline.iteration_ms));
    }
    plan.bounds = compute_bounds(model_, topology_, stated_.stages, stated_.micro_batches,
                                 stated_.optimizer, stated_.split_backward);
    bounds(plan.bounds);
    stage_figures();
    gpu_figures(plan.timeline);
    return plan;
  }

 private:
  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw InputError(stated_.file, pointer, message);
  }
  [[nodiscard]] std::string gpu_name(int g) const { return "GPU \"" + topology_.gpu(g).id + "\""; }
  // The group a used GPU belongs to, as stage s (one it serves) runs it.
  [[nodiscard]] const GroupExecution& group_of(int g, int s) const {
    return exec_[static_cast<std::size_t>(s)]
        .groups[static_cast<std::size_t>(index_.group_of[static_cast<std::size_t>(g)])];
  }

  // Update tasks: present exactly when the model has update times, at the replay's times.
  void updates(const Timeline& timeline) const {
    const bool expected = model::has_updates(model_);
    if (expected && stated_.updates.empty()) {
      fail("/schedule",
           "lists no optimizer steps (schedule.updates), but the model has update "
           "times, so every group of every stage runs one (spec 8.3)");
    }
    if (!expected && !stated_.updates.empty()) {
      fail("/schedule/updates",
           "lists optimizer steps, but no layer of the model has an update "
           "time above 0 (spec 8.3)");
    }
    for (std::size_t i = 0; i < stated_.updates.size(); ++i) {
      const StatedUpdate& e = stated_.updates[i];
      for (const TimedUpdate& actual : timeline.updates) {
        if (actual.stage != e.stage || actual.gpu != e.gpu) continue;
        if (!times_equal(e.start_ms, actual.start_ms) || !times_equal(e.end_ms, actual.end_ms)) {
          fail("/schedule/updates/" + std::to_string(i),
               "the optimizer step of " + gpu_name(e.gpu) + "'s group of stage " +
                   std::to_string(e.stage) + " runs " + ms(e.start_ms) + " to " + ms(e.end_ms) +
                   " but the replay runs it " + ms(actual.start_ms) + " to " + ms(actual.end_ms));
        }
      }
    }
  }

  // The replay of the stated orders; a broken order points at the (last) entry involved.
  Timeline replay_stated(const Schedule& schedule) const {
    try {
      return replay(model_, topology_, stated_.stages, schedule, stated_.optimizer);
    } catch (const ScheduleError& error) {
      std::string pointer = "/schedule";
      if (error.compute) {
        for (std::size_t i = 0; i < stated_.compute.size(); ++i) {
          if (stated_.compute[i].task == *error.compute) pointer = kComputeAt + std::to_string(i);
        }
      } else if (error.transfer) {
        for (std::size_t i = 0; i < stated_.transfers.size(); ++i) {
          if (stated_.transfers[i].task == *error.transfer)
            pointer = kTransferAt + std::to_string(i);
        }
      }
      fail(pointer, error.what());
    }
  }

  // Durations and sizes. An end is compared with its start plus the duration, as times:
  // `end - start` of two large times loses the low bits of a short duration (a 1 us transfer
  // ending at 5e6 ms), so comparing it as a duration would refuse exact replays.
  void durations() const {
    for (std::size_t i = 0; i < stated_.compute.size(); ++i) {
      const auto& e = stated_.compute[i];
      const GroupExecution& group = group_of(e.gpu, e.task.stage);
      const double expected = group.duration(e.task.op);
      if (!times_equal(e.end_ms, e.start_ms + expected)) {
        fail(kComputeAt + std::to_string(i),
             describe(e.task) + " lasts " + ms(e.end_ms - e.start_ms) + " but takes " +
                 ms(expected) + " on " + gpu_name(e.gpu) + " (speed " +
                 io::format_number(group.speed, 6) + ")");
      }
    }
    for (std::size_t i = 0; i < stated_.transfers.size(); ++i) {
      const auto& e = stated_.transfers[i];
      const double bytes = exec_[static_cast<std::size_t>(e.task.stage)].transfer_bytes;
      if (!times_equal(e.bytes, bytes)) {
        fail(kTransferAt + std::to_string(i), describe(e.task) + " states " + number(e.bytes) +
                                                  " bytes but the boundary carries " +
                                                  number(bytes));
      }
      const double expected = topology_.transfer_ms(e.from, e.to, bytes);
      if (!times_equal(e.end_ms, e.start_ms + expected)) {
        fail(kTransferAt + std::to_string(i),
             describe(e.task) + " lasts " + ms(e.end_ms - e.start_ms) + " but takes " +
                 ms(expected) + " from " + topology_.gpu(e.from).id + " to " +
                 topology_.gpu(e.to).id);
      }
    }
  }

  // Starts equal to the replay of the orders.
  void starts(const Timeline& timeline) const {
    const TaskGraph graph(stated_.stages, stated_.micro_batches, stated_.split_backward,
                          stated_.optimizer);
    std::vector<double> start(static_cast<std::size_t>(graph.chain_count()), 0);
    for (const auto& e : timeline.compute)
      start[static_cast<std::size_t>(graph.id(e.task))] = e.start_ms;
    for (const auto& e : timeline.transfers)
      start[static_cast<std::size_t>(graph.id(e.task))] = e.start_ms;
    auto check = [&](const std::string& at, int id, double stated_start) {
      const double expected = start[static_cast<std::size_t>(id)];
      if (!times_equal(stated_start, expected)) {
        fail(at, graph.describe(id) + " starts at " + ms(stated_start) +
                     " but the replay of the orders starts it at " + ms(expected));
      }
    };
    for (std::size_t i = 0; i < stated_.compute.size(); ++i) {
      check(kComputeAt + std::to_string(i), graph.id(stated_.compute[i].task),
            stated_.compute[i].start_ms);
    }
    for (std::size_t i = 0; i < stated_.transfers.size(); ++i) {
      check(kTransferAt + std::to_string(i), graph.id(stated_.transfers[i].task),
            stated_.transfers[i].start_ms);
    }
  }

  // AllReduce sizes and times (their count and GPUs are structural).
  void allreduces(const Timeline& timeline) const {
    for (std::size_t i = 0; i < stated_.allreduces.size(); ++i) {
      const auto& e = stated_.allreduces[i];
      const std::string at = "/schedule/allreduces/" + std::to_string(i);
      const double bytes = profiles_[static_cast<std::size_t>(e.stage)].parameter_bytes;
      if (!times_equal(e.bytes, bytes)) {
        fail(at + "/bytes", "states " + number(e.bytes) + " bytes but stage " +
                                std::to_string(e.stage) + " has " + number(bytes) +
                                " parameter bytes");
      }
      for (const auto& actual : timeline.allreduces) {
        if (actual.stage != e.stage) continue;
        if (!times_equal(e.start_ms, actual.start_ms) || !times_equal(e.end_ms, actual.end_ms)) {
          fail(at, "the AllReduce of stage " + std::to_string(e.stage) + " runs " + ms(e.start_ms) +
                       " to " + ms(e.end_ms) + " but the replay runs it " + ms(actual.start_ms) +
                       " to " + ms(actual.end_ms));
        }
      }
    }
  }

  void bounds(const Bounds& actual) const {
    if (!stated_.bounds) return;
    if (!times_equal(stated_.bounds->any_plan_ms, actual.any_plan_ms)) {
      fail("/bounds/any_plan_ms", "states " + ms(stated_.bounds->any_plan_ms) +
                                      " but the bound is " + ms(actual.any_plan_ms));
    }
    if (!times_equal(stated_.bounds->partition_ms, actual.partition_ms)) {
      fail("/bounds/partition_ms", "states " + ms(stated_.bounds->partition_ms) +
                                       " but the bound is " + ms(actual.partition_ms));
    }
  }

  void stage_figures() const {
    for (std::size_t s = 0; s < stated_.stages.size(); ++s) {
      const auto& figures =
          s < stated_.stage_figures.size() ? stated_.stage_figures[s] : std::nullopt;
      if (!figures) continue;
      const auto& p = profiles_[s];
      const double allreduce = exec_[s].allreduce_ms;
      const std::pair<const char*, std::pair<double, double>> checks[] = {
          {"forward_ms", {figures->forward_ms, p.forward_ms}},
          {"backward_ms", {figures->backward_ms, p.backward_ms}},
          {"parameter_bytes", {figures->parameter_bytes, p.parameter_bytes}},
          {"boundary_bytes", {figures->boundary_bytes, p.boundary_bytes}},
          {"allreduce_ms", {figures->allreduce_ms, allreduce}},
      };
      for (const auto& [key, values] : checks) {
        if (!times_equal(values.first, values.second)) {
          fail("/stages/" + std::to_string(s) + "/" + key,
               "states " + number(values.first) + " but the model gives " + number(values.second));
        }
      }
    }
  }

  void gpu_figures(const Timeline& timeline) const {
    if (!stated_.gpus) return;
    for (std::size_t i = 0; i < stated_.gpus->size(); ++i) {
      const StatedGpu& e = (*stated_.gpus)[i];
      const std::string at = "/gpus/" + std::to_string(i);
      const GpuUsage& usage = timeline.gpus[static_cast<std::size_t>(e.gpu)];
      if (!times_equal(e.busy_ms, usage.busy_ms)) {
        fail(at + "/busy_ms",
             "states " + ms(e.busy_ms) + " but the replay gives " + ms(usage.busy_ms));
      }
      if (!times_equal(e.peak_memory_bytes, usage.peak_memory_bytes)) {
        fail(at + "/peak_memory_bytes", "states " + number(e.peak_memory_bytes) +
                                            " but the replay gives " +
                                            number(usage.peak_memory_bytes));
      }
      const auto& capacity = topology_.gpu(e.gpu).memory_bytes;
      const bool same = e.memory_bytes && capacity
                            ? times_equal(*e.memory_bytes, *capacity)
                            : e.memory_bytes.has_value() == capacity.has_value();
      if (e.memory_stated && !same) {
        fail(at + "/memory_bytes",
             "states " +
                 (e.memory_bytes ? number(*e.memory_bytes) : std::string("null (unlimited)")) +
                 " but the topology gives " + gpu_name(e.gpu) + " " +
                 (capacity ? number(*capacity) : std::string("unlimited memory")));
      }
    }
  }

  const StatedPlan& stated_;
  const StatedIndex& index_;
  const model::Model& model_;
  const topology::Topology& topology_;
  std::vector<StageProfile> profiles_;
  std::vector<StageExecution> exec_;
};

}  // namespace

std::vector<std::size_t> compute_by_gpu(const StatedPlan& stated) {
  std::vector<std::size_t> order(stated.compute.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = stated.compute[a];
    const auto& y = stated.compute[b];
    if (x.gpu != y.gpu) return x.gpu < y.gpu;
    return x.start_ms < y.start_ms;
  });
  return order;
}

std::vector<std::size_t> transfers_by_channel(const StatedPlan& stated) {
  std::vector<std::size_t> order(stated.transfers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = stated.transfers[a];
    const auto& y = stated.transfers[b];
    if (x.from != y.from) return x.from < y.from;
    if (x.to != y.to) return x.to < y.to;
    return x.start_ms < y.start_ms;
  });
  return order;
}

StatedIndex check_structure(const StatedPlan& stated, const std::vector<std::string>& gpu_ids) {
  return StructureCheck(stated, gpu_ids).run();
}

Schedule stated_schedule(const StatedPlan& stated, const StatedIndex& index, int gpu_count) {
  Schedule schedule;
  schedule.micro_batches = stated.micro_batches;
  schedule.split_backward = stated.split_backward;
  schedule.gpu_order.resize(static_cast<std::size_t>(gpu_count));
  for (const std::size_t i : index.compute_order) {
    schedule.gpu_order[static_cast<std::size_t>(stated.compute[i].gpu)].push_back(
        stated.compute[i].task);
  }
  for (const std::size_t i : index.transfer_order) {
    const auto& t = stated.transfers[i];
    schedule.channel_order[{t.from, t.to}].push_back(t.task);
  }
  return schedule;
}

Plan stated_plan(const StatedPlan& stated, const StatedIndex& index, int gpu_count) {
  Plan plan;
  plan.planner = stated.planner;
  plan.schedule_policy = stated.schedule_policy;
  plan.stages = stated.stages;
  plan.optimizer = stated.optimizer;
  if (stated.gpu_order) {
    plan.gpu_order = *stated.gpu_order;
  } else {
    plan.gpu_order.resize(static_cast<std::size_t>(gpu_count));
    std::iota(plan.gpu_order.begin(), plan.gpu_order.end(), 0);
  }
  plan.schedule = stated_schedule(stated, index, gpu_count);
  return plan;
}

Plan check_plan(const StatedPlan& stated, const model::Model& model,
                const topology::Topology& topology) {
  std::vector<std::string> gpu_ids;
  gpu_ids.reserve(static_cast<std::size_t>(topology.size()));
  for (const topology::Gpu& gpu : topology.gpus()) gpu_ids.push_back(gpu.id);
  const StatedIndex index = check_structure(stated, gpu_ids);
  return ModelCheck(stated, index, model, topology).run();
}

}  // namespace pipeplan::simulate
