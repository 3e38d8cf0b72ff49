// Launcher exports: per-rank instructions (`ranks`) and the split points for
// torch.distributed.pipelining (`torch-split`).
//
// The operations of every rank are cut from one global order of the plan's tasks: Kahn's
// topological sort of the task graph (per-GPU and per-channel orders plus the dependencies of
// spec section 3), taking the ready task that starts first (at equal starts: transfers, then
// AllReduces, then compute, each in timeline order).
// Each transfer appears once in that order and so at the same place in its sender's and its
// receiver's lists, and each AllReduce at the same place in all its members' lists; the first
// unfinished task of the global order is therefore always next on every rank it involves, so
// the lists cannot deadlock, with blocking or non-blocking sends. The GPUs of a tensor-parallel
// group (spec 8.2) other than its leader get the leader's list, with each transfer cut into the
// pieces between the groups' GPUs at the same place (all at the transfer's place in the global
// order, so the argument holds for them too). A GPU that serves several stages (spec 9.2) lists
// the operations of all of them, each compute operation with its stage; a boundary inside one
// device has no transfer, and the order's edges pass through its absent slot. O(T log T + T t)
// for T tasks.

#include <algorithm>
#include <functional>
#include <queue>

#include "export_util.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/simulate/task_graph.hpp"

namespace pipeplan::report {
namespace {

using nlohmann::ordered_json;

// One task of the global order.
struct Node {
  enum class Kind : std::uint8_t { kCompute, kTransfer, kAllReduce } kind;
  std::size_t index;  // into the timeline's compute, transfers or allreduces
  double start_ms;
};

std::vector<Node> global_order(const PlanView& view) {
  const Plan& plan = view.plan;
  const Timeline& timeline = plan.timeline;
  const simulate::TaskGraph graph(plan.stages, view.micro_batches, plan.schedule.split_backward,
                                  plan.optimizer);
  const auto T = static_cast<std::size_t>(graph.size());
  // Every task of the graph as a node: its kind, its timeline entry and its start.
  constexpr std::size_t kMissing = static_cast<std::size_t>(-1);
  std::vector<Node> nodes(T, Node{Node::Kind::kCompute, kMissing, 0});
  std::vector<char> present(T, 0);
  auto place = [&](int id, Node::Kind kind, std::size_t i, double start) {
    nodes[static_cast<std::size_t>(id)] = Node{kind, i, start};
    present[static_cast<std::size_t>(id)] = 1;
  };
  for (std::size_t i = 0; i < timeline.compute.size(); ++i) {
    place(graph.id(timeline.compute[i].task), Node::Kind::kCompute, i,
          timeline.compute[i].start_ms);
  }
  for (std::size_t i = 0; i < timeline.transfers.size(); ++i) {
    place(graph.id(timeline.transfers[i].task), Node::Kind::kTransfer, i,
          timeline.transfers[i].start_ms);
  }
  for (std::size_t i = 0; i < timeline.allreduces.size(); ++i) {
    place(graph.allreduce(timeline.allreduces[i].stage), Node::Kind::kAllReduce, i,
          timeline.allreduces[i].start_ms);
  }
  // A boundary between two stages of one device has no transfer (spec 9.3): its slots stay
  // absent, and the dependencies pass through them.
  auto shared_boundary = [&](int id) {
    if (!graph.is_transfer(id)) return false;
    const int s = graph.transfer_task(id).stage;
    return plan.stages[static_cast<std::size_t>(s)].gpus ==
           plan.stages[static_cast<std::size_t>(s) + 1].gpus;
  };
  for (int id = 0; id < graph.chain_count(); ++id) {
    if (!present[static_cast<std::size_t>(id)] && !shared_boundary(id)) {
      throw InternalError("ranks export: a task of the plan is missing");
    }
  }

  // Edges: the per-GPU and per-channel orders, and every dependency of the task graph among
  // the tasks present (the data chain, each AllReduce after its stage's backwards).
  std::vector<std::vector<int>> next(T);
  std::vector<int> waiting(T, 0);
  // An edge from an absent task is one from each of its own predecessors.
  std::function<void(int, int)> edge = [&](int from, int to) {
    if (!present[static_cast<std::size_t>(from)]) {
      for (const int p : graph.predecessors(from)) edge(p, to);
      return;
    }
    next[static_cast<std::size_t>(from)].push_back(to);
    ++waiting[static_cast<std::size_t>(to)];
  };
  for (const auto& order : plan.schedule.gpu_order) {
    for (std::size_t k = 1; k < order.size(); ++k) edge(graph.id(order[k - 1]), graph.id(order[k]));
  }
  for (const auto& [channel, order] : plan.schedule.channel_order) {
    for (std::size_t k = 1; k < order.size(); ++k) edge(graph.id(order[k - 1]), graph.id(order[k]));
  }
  for (int id = 0; id < graph.chain_count(); ++id) {
    if (!present[static_cast<std::size_t>(id)]) continue;
    for (const int p : graph.predecessors(id)) edge(p, id);
  }
  for (const TimedAllReduce& allreduce : timeline.allreduces) {
    const int id = graph.allreduce(allreduce.stage);
    for (const int p : graph.predecessors(id)) edge(p, id);
  }

  // Kahn's algorithm, earliest start first; at equal starts transfers first (a send is
  // posted before the next compute), then AllReduces, then compute, then timeline order.
  auto rank_of_kind = [](Node::Kind kind) {
    return kind == Node::Kind::kTransfer ? 0 : kind == Node::Kind::kAllReduce ? 1 : 2;
  };
  auto later = [&](int a, int b) {
    const Node& x = nodes[static_cast<std::size_t>(a)];
    const Node& y = nodes[static_cast<std::size_t>(b)];
    if (x.start_ms != y.start_ms) return x.start_ms > y.start_ms;
    if (x.kind != y.kind) return rank_of_kind(x.kind) > rank_of_kind(y.kind);
    return x.index > y.index;
  };
  std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
  std::size_t count = 0;
  for (std::size_t i = 0; i < T; ++i) {
    if (!present[i]) continue;
    ++count;
    if (waiting[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<Node> out;
  out.reserve(count);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    out.push_back(nodes[static_cast<std::size_t>(i)]);
    for (const int j : next[static_cast<std::size_t>(i)]) {
      if (--waiting[static_cast<std::size_t>(j)] == 0) ready.push(j);
    }
  }
  if (out.size() != count) throw InternalError("ranks export: the plan's orders form a cycle");
  return out;
}

// Per-rank entries of one plan: the ranks, the groups and rings, and the operations.
class RanksWriter {
 public:
  explicit RanksWriter(const PlanView& view)
      : view_(view),
        plan_(view.plan),
        ranks_(rank_order(view)),
        S_(static_cast<int>(view.plan.stages.size())),
        M_(view.micro_batches),
        rank_of_(view.gpu_ids.size(), -1),
        group_of_(view.gpu_ids.size()),
        member_of_(view.gpu_ids.size(), 0),
        gpu_of_(static_cast<std::size_t>(S_) * static_cast<std::size_t>(M_), -1),
        shared_(virtual_stages(view.plan.stages) > 1) {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      rank_of_[static_cast<std::size_t>(ranks_[r])] = static_cast<int>(r);
    }
    // Every GPU's group (spec 8.2: its stage's replica, leader first) and its place in it; a v1
    // GPU is a group of its own.
    for (const Stage& stage : plan_.stages) {
      for (int i = 0; i < stage.replicas(); ++i) {
        const std::vector<int> group = stage.group(i);
        for (std::size_t j = 0; j < group.size(); ++j) {
          group_of_[static_cast<std::size_t>(group[j])] = group;
          member_of_[static_cast<std::size_t>(group[j])] = static_cast<int>(j);
        }
      }
    }
    // Where every micro-batch of every stage runs.
    for (const TimedCompute& e : plan_.timeline.compute) {
      if (e.task.op == Op::kForward) {
        gpu_of_[static_cast<std::size_t>(e.task.stage) * static_cast<std::size_t>(M_) +
                static_cast<std::size_t>(e.task.micro_batch)] = e.gpu;
      }
    }
  }

  ordered_json write() {
    std::vector<ordered_json> operations = all_operations();
    ordered_json out = ordered_json::array();
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const int g = ranks_[r];
      out.push_back(entry(static_cast<int>(r), std::move(operations[static_cast<std::size_t>(g)])));
    }
    return out;
  }

 private:
  int rank(int gpu) const { return rank_of_[static_cast<std::size_t>(gpu)]; }
  const std::vector<int>& group_at(int leader) const {
    return group_of_[static_cast<std::size_t>(leader)];
  }
  int where(int s, int m) const {
    return gpu_of_[static_cast<std::size_t>(s) * static_cast<std::size_t>(M_) +
                   static_cast<std::size_t>(m)];
  }
  // The data-parallel ring of a GPU: the GPUs at its place in every group of its stage.
  static std::vector<int> ring_of(const Stage& stage, int member) {
    std::vector<int> ring;
    ring.reserve(static_cast<std::size_t>(stage.replicas()));
    for (int i = 0; i < stage.replicas(); ++i) {
      ring.push_back(
          stage.gpus[static_cast<std::size_t>(i) * static_cast<std::size_t>(stage.tensor_parallel) +
                     static_cast<std::size_t>(member)]);
    }
    return ring;
  }
  ordered_json peer(int gpu) const {
    return {{"rank", rank(gpu)}, {"gpu", detail::gpu_id(view_, gpu)}};
  }

  // Every GPU's operations, cut from the global order. The other GPUs of a group run the
  // leader's operations in tensor-parallel lockstep. A transfer between groups of t and t' GPUs
  // travels as min(t, t') pieces of the stated size, piece p from the p-th GPU of one group to
  // the p-th of the other (spec 8.3); the GPUs beyond take no part in it. Each ring of a
  // data-parallel AllReduce joins the GPUs at one place of every group.
  std::vector<ordered_json> all_operations() const {
    std::vector<ordered_json> operations(view_.gpu_ids.size(), ordered_json::array());
    for (const Node& node : global_order(view_)) {
      switch (node.kind) {
        case Node::Kind::kCompute: {
          const TimedCompute& e = plan_.timeline.compute[node.index];
          ordered_json op = {{"op", op_name(e.task.op)}};
          if (shared_) op["stage"] = e.task.stage;
          op["micro_batch"] = e.task.micro_batch;
          for (int g : group_at(e.gpu)) operations[static_cast<std::size_t>(g)].push_back(op);
          break;
        }
        case Node::Kind::kTransfer:
          add_transfer(plan_.timeline.transfers[node.index], operations);
          break;
        case Node::Kind::kAllReduce:
          add_allreduce(plan_.timeline.allreduces[node.index], operations);
          break;
      }
    }
    // The optimizer steps last: they follow the stage's AllReduce (or last backward), and no
    // other rank waits for them.
    for (const TimedUpdate& e : plan_.timeline.updates) {
      for (int g : group_at(e.gpu)) {
        operations[static_cast<std::size_t>(g)].push_back({{"op", "update"}});
      }
    }
    return operations;
  }

  void add_transfer(const TimedTransfer& e, std::vector<ordered_json>& operations) const {
    const char* kind = e.task.kind == TransferKind::kActivation ? "activation" : "gradient";
    const std::vector<int>& senders = group_at(e.from);
    const std::vector<int>& receivers = group_at(e.to);
    for (std::size_t p = 0; p < std::min(senders.size(), receivers.size()); ++p) {
      auto op = [&](const char* name, int other) {
        return ordered_json{{"op", name},
                            {"kind", kind},
                            {"micro_batch", e.task.micro_batch},
                            {"peer", rank(other)},
                            {"peer_gpu", detail::gpu_id(view_, other)},
                            {"bytes", io::json_number(e.bytes)}};
      };
      operations[static_cast<std::size_t>(senders[p])].push_back(op("send", receivers[p]));
      operations[static_cast<std::size_t>(receivers[p])].push_back(op("recv", senders[p]));
    }
  }

  void add_allreduce(const TimedAllReduce& e, std::vector<ordered_json>& operations) const {
    const Stage& stage = plan_.stages[static_cast<std::size_t>(e.stage)];
    for (int member = 0; member < stage.tensor_parallel; ++member) {
      const std::vector<int> ring = ring_of(stage, member);
      ordered_json group = ordered_json::array();
      for (int g : ring) group.push_back(rank(g));
      for (int g : ring) {
        operations[static_cast<std::size_t>(g)].push_back(
            {{"op", "allreduce"}, {"ranks", group}, {"bytes", io::json_number(e.bytes)}});
      }
    }
  }

  // `{"ranks": [...], "gpus": [...]}` of a group or ring.
  ordered_json ranks_and_gpus(const std::vector<int>& gpus) const {
    ordered_json group_ranks = ordered_json::array();
    ordered_json group_gpus = ordered_json::array();
    for (int member : gpus) {
      group_ranks.push_back(rank(member));
      group_gpus.push_back(detail::gpu_id(view_, member));
    }
    return ordered_json{{"ranks", std::move(group_ranks)}, {"gpus", std::move(group_gpus)}};
  }

  ordered_json layers_of(const Stage& stage) const {
    ordered_json layers = {{"first", stage.first_layer}, {"last", stage.last_layer}};
    if (view_.layer_names) {
      ordered_json names = ordered_json::array();
      for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
        const std::string& name = (*view_.layer_names)[static_cast<std::size_t>(l)];
        names.push_back(name.empty() ? ordered_json(nullptr) : ordered_json(name));
      }
      layers["names"] = std::move(names);
    } else {
      layers["names"] = nullptr;
    }
    return layers;
  }

  // The entry of rank `r`: its GPU, stage, layers, groups, micro-batches and operations.
  ordered_json entry(int r, ordered_json operations) const {
    const int g = ranks_[static_cast<std::size_t>(r)];
    const int s = plan_.timeline.gpus[static_cast<std::size_t>(g)].stages.front();
    const Stage& stage = plan_.stages[static_cast<std::size_t>(s)];
    ordered_json entry = ordered_json::object();
    entry["rank"] = r;
    entry["gpu"] = detail::gpu_id(view_, g);
    entry["stage"] = s;
    if (shared_) entry["stages"] = plan_.timeline.gpus[static_cast<std::size_t>(g)].stages;
    entry["layers"] = layers_of(stage);
    const std::vector<int>& group = group_at(g);
    const int member = member_of_[static_cast<std::size_t>(g)];
    if (is_v2_plan(plan_)) entry["tensor_parallel_group"] = ranks_and_gpus(group);
    entry["data_parallel_group"] = ranks_and_gpus(ring_of(stage, member));
    // The peer of this GPU's piece of a transfer with the group at `leader`; none when that
    // group has no GPU at its place.
    auto peer_at = [&](int leader) {
      const std::vector<int>& other = group_at(leader);
      return member < static_cast<int>(other.size()) ? peer(other[static_cast<std::size_t>(member)])
                                                     : ordered_json(nullptr);
    };
    ordered_json micro_batches = ordered_json::array();
    for (int m = 0; m < M_; ++m) {
      if (where(s, m) != group.front()) continue;
      // The peer at the other end of micro-batch m's transfer across `boundary`, which this
      // stage sends or receives; none where the boundary does not exist.
      auto other_end = [&](TransferKind kind, int boundary, bool sends) {
        if (boundary < 0 || boundary + 1 >= S_) return ordered_json(nullptr);
        if (plan_.stages[static_cast<std::size_t>(boundary)].gpus ==
            plan_.stages[static_cast<std::size_t>(boundary) + 1].gpus) {
          return ordered_json(nullptr);  // inside one device: no transfer (spec 9.3)
        }
        const simulate::TransferEnds ends = simulate::TaskGraph::ends({kind, boundary, m});
        return peer_at(where(sends ? ends.to_stage : ends.from_stage, m));
      };
      micro_batches.push_back(
          {{"micro_batch", m},
           {"activations_from", other_end(TransferKind::kActivation, s - 1, false)},
           {"activations_to", other_end(TransferKind::kActivation, s, true)},
           {"gradients_from", other_end(TransferKind::kGradient, s, false)},
           {"gradients_to", other_end(TransferKind::kGradient, s - 1, true)}});
    }
    entry["micro_batches"] = std::move(micro_batches);
    entry["operations"] = std::move(operations);
    return entry;
  }

  const PlanView& view_;
  const Plan& plan_;
  const std::vector<int> ranks_;
  const int S_;
  const int M_;
  std::vector<int> rank_of_;
  std::vector<std::vector<int>> group_of_;
  std::vector<int> member_of_;
  std::vector<int> gpu_of_;  // per (stage, micro-batch): the GPU of its forward
  bool shared_;              // whether stages share GPUs (spec 9.2): operations name their stage
};

}  // namespace

ordered_json ranks_json(const PlanView& view) { return RanksWriter(view).write(); }

ordered_json torch_split_json(const PlanView& view) {
  const Plan& plan = view.plan;
  const std::string file = detail::model_file(view);
  if (!view.layer_names) {
    throw InputError(file, "", "torch-split needs the model's layer names, and no model was given");
  }
  const auto& names = *view.layer_names;
  ordered_json split_points = ordered_json::array();
  ordered_json split_spec = ordered_json::object();
  for (std::size_t s = 1; s < plan.stages.size(); ++s) {
    const int layer = plan.stages[s].first_layer;
    const std::string& name = names[static_cast<std::size_t>(layer)];
    if (name.empty()) {
      throw InputError(file, "/layers/" + std::to_string(layer),
                       "has no \"name\"; torch-split needs the name of the layer that begins each "
                       "stage after the "
                       "first (layer " +
                           std::to_string(layer) + " begins stage " + std::to_string(s) + ")");
    }
    split_points.push_back(name);
    split_spec[name] = "BEGINNING";
  }
  ordered_json stages = ordered_json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    auto name_of = [&](int layer) {
      const std::string& name = names[static_cast<std::size_t>(layer)];
      return name.empty() ? ordered_json(nullptr) : ordered_json(name);
    };
    ordered_json gpus = ordered_json::array();
    for (int g : stage.gpus) gpus.push_back(detail::gpu_id(view, g));
    stages.push_back({{"stage", static_cast<int>(s)},
                      {"first_layer", stage.first_layer},
                      {"last_layer", stage.last_layer},
                      {"first_layer_name", name_of(stage.first_layer)},
                      {"last_layer_name", name_of(stage.last_layer)},
                      {"gpus", std::move(gpus)}});
  }
  ordered_json out = ordered_json::object();
  out["format"] = "torch.distributed.pipelining";
  out["split_point"] = "BEGINNING";
  out["split_points"] = std::move(split_points);
  out["split_spec"] = std::move(split_spec);
  out["num_stages"] = static_cast<int>(plan.stages.size());
  out["micro_batches"] = view.micro_batches;
  out["stages"] = std::move(stages);
  return out;
}

}  // namespace pipeplan::report
