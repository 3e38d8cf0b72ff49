// Chrome trace export: the Trace Event Format (JSON object form) as Perfetto and
// chrome://tracing read it. One process per used GPU (per tensor-parallel group in a plan that
// uses spec 8.2), threads per kind of work and per channel
// (so that no two complete events on one thread overlap), and a memory counter per GPU.
// O(T log T) for T tasks (the counters sort their changes).

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "export_util.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/simulate/task_graph.hpp"
#include "pipeplan/version.hpp"

namespace pipeplan::report {
namespace {

using nlohmann::ordered_json;

constexpr int kComputeThread = 1;
constexpr int kAllReduceThread = 2;
constexpr int kFirstChannelThread = 10;

// Milliseconds to microseconds, rounded to the nanosecond so that the text stays short.
double to_us(double ms) { return std::round(ms * 1e6) / 1e3; }

ordered_json metadata(const char* name, int pid, int tid, ordered_json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid},
          {"tid", tid},   {"ts", 0},   {"args", std::move(args)}};
}

ordered_json complete(std::string name, const char* category, int pid, int tid, double start_ms,
                      double end_ms, ordered_json args) {
  const double ts = to_us(start_ms);
  const double dur = std::max(0.0, std::round((to_us(end_ms) - ts) * 1e3) / 1e3);
  return {{"name", std::move(name)},
          {"cat", category},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", io::json_number(ts)},
          {"dur", io::json_number(dur)},
          {"args", std::move(args)}};
}

std::string transfer_name(const TransferTask& task) {
  const simulate::TransferEnds ends = simulate::TaskGraph::ends(task);
  return std::string(task.kind == TransferKind::kActivation ? "act" : "grad") + " m" +
         std::to_string(task.micro_batch) + " s" + std::to_string(ends.from_stage) + "->s" +
         std::to_string(ends.to_stage);
}

// One process per group (spec 8.2), named after all its GPUs and numbered by its leader's rank;
// in a v1 plan every GPU is a group of its own. A group serves every stage of its device
// (spec 9.2), ascending: one unless stages share GPUs.
struct Group {
  std::vector<int> stages;
  int replica;
  std::vector<int> gpus;
};

// Trace viewer colours (catapult's reserved `cname` values) of a split backward's plan, close to
// the SVG's: forward blue, `I` red, `W` yellow.
const char* colour_name(Op op) {
  switch (op) {
    case Op::kForward:
      return "rail_response";
    case Op::kBackwardInput:
      return "rail_animation";
    case Op::kBackwardWeight:
      return "startup";
    case Op::kBackward:
      break;
  }
  return "rail_idle";
}

// The events of one plan's trace, written phase by phase into `events`.
class TraceWriter {
 public:
  explicit TraceWriter(const PlanView& view)
      : view_(view),
        plan_(view.plan),
        N_(view.gpu_ids.size()),
        v2_(is_v2_plan(view.plan)),
        shared_(shares_devices(view.plan)) {
    const std::vector<int> ranks = rank_order(view);
    pid_.assign(N_, 0);
    rank_of_.assign(N_, -1);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      pid_[static_cast<std::size_t>(ranks[r])] = static_cast<int>(r) + 1;
      rank_of_[static_cast<std::size_t>(ranks[r])] = static_cast<int>(r);
    }
    group_index_.assign(N_, -1);
    for (std::size_t s = 0; s < plan_.stages.size(); ++s) {
      const Stage& stage = plan_.stages[s];
      for (int i = 0; i < stage.replicas(); ++i) {
        // A later stage of a device joins the group of its first (identical GPU lists).
        const int known = group_index_[static_cast<std::size_t>(stage.leader(i))];
        if (known >= 0) {
          groups_[static_cast<std::size_t>(known)].stages.push_back(static_cast<int>(s));
          continue;
        }
        for (int g : stage.group(i))
          group_index_[static_cast<std::size_t>(g)] = static_cast<int>(groups_.size());
        groups_.push_back({{static_cast<int>(s)}, i, stage.group(i)});
      }
    }
  }

  // The trace as text, as `detail::dump_compact_below(trace, 2)` writes it: the events one per
  // line. They are written as they are made, not kept as one DOM of T events, whose building
  // and destruction took most of the run on a plan of 262,144 tasks.
  std::string write() {
    processes();
    compute();
    updates();
    transfers();
    allreduces();
    memory_counters();
    ordered_json out = ordered_json::object();
    out["traceEvents"] = ordered_json::array();
    out["displayTimeUnit"] = "ms";
    out["otherData"] = other_data();
    std::string text = detail::dump_compact_below(out, 2);
    if (events_.empty()) return text;
    const std::string empty = "\"traceEvents\": []";
    const std::size_t at = text.find(empty);  // the first member: nothing before it can match
    std::string events = "\"traceEvents\": [\n  ";
    std::size_t size = events.size() + 3;
    for (const std::string& event : events_) size += event.size() + 4;
    events.reserve(size);
    for (std::size_t e = 0; e < events_.size(); ++e) {
      if (e > 0) events += ",\n  ";
      events += events_[e];
    }
    events += "\n ]";
    return text.replace(at, empty.size(), events);
  }

 private:
  int pid(int gpu) const { return pid_[static_cast<std::size_t>(gpu)]; }

  // A process per group with its threads: compute, AllReduce (replicated stages), and one per
  // channel end, peers in rank order. O(N log N + channels).
  void processes() {
    std::vector<std::vector<int>> senders_to(N_), receivers_from(N_);
    for (const auto& [channel, tasks] : plan_.schedule.channel_order) {
      if (tasks.empty()) continue;
      receivers_from[static_cast<std::size_t>(channel.first)].push_back(channel.second);
      senders_to[static_cast<std::size_t>(channel.second)].push_back(channel.first);
    }
    auto by_rank = [&](int a, int b) {
      return rank_of_[static_cast<std::size_t>(a)] < rank_of_[static_cast<std::size_t>(b)];
    };
    for (const Group& group : groups_) {
      const int g = group.gpus.front();
      const int r = rank_of_[static_cast<std::size_t>(g)];
      const int p = pid(g);
      add(metadata("process_name", p, 0, {{"name", process_name(group, r)}}));
      add(metadata("process_sort_index", p, 0, {{"sort_index", r}}));
      auto thread = [&](int tid, const std::string& thread_name) {
        add(metadata("thread_name", p, tid, {{"name", thread_name}}));
        add(metadata("thread_sort_index", p, tid, {{"sort_index", tid}}));
      };
      thread(kComputeThread, "compute");
      int tid = kFirstChannelThread;
      if (group.stages.size() == 1) {
        if (reduces_gradients(plan_.stages[static_cast<std::size_t>(group.stages.front())],
                              plan_.optimizer)) {
          thread(kAllReduceThread, "AllReduce");
        }
      } else {
        // A device's stages (spec 9.2) may reduce and update at the same time: a thread each.
        for (int s : group.stages) {
          if (!has_stage_thread(s)) continue;
          stage_thread_[{g, s}] = tid;
          thread(tid++, "stage " + std::to_string(s));
        }
      }
      std::vector<int> outgoing = receivers_from[static_cast<std::size_t>(g)];
      std::sort(outgoing.begin(), outgoing.end(), by_rank);
      for (int peer : outgoing) {
        send_thread_[{g, peer}] = tid;
        thread(tid++, "send -> " + detail::gpu_id(view_, peer));
      }
      std::vector<int> incoming = senders_to[static_cast<std::size_t>(g)];
      std::sort(incoming.begin(), incoming.end(), by_rank);
      for (int peer : incoming) {
        receive_thread_[{g, peer}] = tid;
        thread(tid++, "recv <- " + detail::gpu_id(view_, peer));
      }
    }
  }

  // `rank 3: gpu3 (stage 1)`, or for a group `ranks 4-7: a, b, c, d (stage 1, group 0)`.
  std::string process_name(const Group& group, int r) const {
    std::string name = "rank " + std::to_string(r) + ": " + detail::gpu_id(view_, group.gpus[0]);
    if (group.gpus.size() > 1) {
      name = "ranks " + std::to_string(r) + "-" +
             std::to_string(r + static_cast<int>(group.gpus.size()) - 1) + ": ";
      for (std::size_t k = 0; k < group.gpus.size(); ++k) {
        name += (k ? ", " : "") + detail::gpu_id(view_, group.gpus[k]);
      }
    }
    return name + " (" + detail::stages_text(group.stages) +
           (v2_ ? ", group " + std::to_string(group.replica) : std::string()) + ")";
  }

  // Whether stage `s` of a shared device has an AllReduce or optimizer steps. O(U).
  bool has_stage_thread(int s) const {
    if (reduces_gradients(plan_.stages[static_cast<std::size_t>(s)], plan_.optimizer)) return true;
    return std::any_of(plan_.timeline.updates.begin(), plan_.timeline.updates.end(),
                       [s](const TimedUpdate& e) { return e.stage == s; });
  }

  // The thread of a stage's AllReduces and optimizer steps on GPU `g`'s process.
  int stage_thread(int g, int s, int single) const {
    return shared_ && group_of(g).stages.size() > 1 ? stage_thread_.at({g, s}) : single;
  }

  const Group& group_of(int gpu) const {
    return groups_[static_cast<std::size_t>(group_index_[static_cast<std::size_t>(gpu)])];
  }

  void compute() {
    for (const TimedCompute& e : plan_.timeline.compute) {
      ordered_json args = {{"micro_batch", e.task.micro_batch},
                           {"stage", e.task.stage},
                           {"gpu", detail::gpu_id(view_, e.gpu)}};
      if (v2_) add_group_args(e, args);
      ordered_json event = complete(detail::short_name(e.task), op_name(e.task.op), pid(e.gpu),
                                    kComputeThread, e.start_ms, e.end_ms, std::move(args));
      if (plan_.schedule.split_backward) event["cname"] = colour_name(e.task.op);
      add(event);
    }
  }

  // The group and the shares of the task's duration (spec 8.3; the execution model does not
  // place them inside the task).
  void add_group_args(const TimedCompute& e, ordered_json& args) const {
    const Group& group = group_of(e.gpu);
    std::vector<ordered_json> ids;
    ids.reserve(group.gpus.size());
    for (int g : group.gpus) ids.emplace_back(detail::gpu_id(view_, g));
    args["gpus"] = io::json_array(std::move(ids));
    // A split backward recomputes and all-reduces input gradients in its `I`; its `W` has neither.
    const bool backward = e.task.op == Op::kBackward || e.task.op == Op::kBackwardInput;
    args["recompute"] = plan_.stages[static_cast<std::size_t>(e.task.stage)].recompute && backward;
    if (view_.group_figures) {
      const GroupFigures& f = (*view_.group_figures)[static_cast<std::size_t>(e.task.stage)]
                                                    [static_cast<std::size_t>(group.replica)];
      const bool forward = e.task.op == Op::kForward;
      args["tensor_parallel_allreduce_ms"] = io::json_number(
          forward ? f.forward_allreduce_ms : (backward ? f.backward_allreduce_ms : 0.0));
      args["recompute_ms"] = io::json_number(backward ? f.recompute_ms : 0.0);
    }
  }

  void updates() {
    for (const TimedUpdate& e : plan_.timeline.updates) {
      add(complete("U s" + std::to_string(e.stage), "update", pid(e.gpu),
                   stage_thread(e.gpu, e.stage, kComputeThread), e.start_ms, e.end_ms,
                   {{"stage", e.stage}, {"gpu", detail::gpu_id(view_, e.gpu)}}));
    }
  }

  // Each transfer twice: on the sender's send thread and on the receiver's receive thread.
  void transfers() {
    for (const TimedTransfer& e : plan_.timeline.transfers) {
      const bool activation = e.task.kind == TransferKind::kActivation;
      // A named struct, not a structured binding: clang 14 (the fuzz build) cannot capture one.
      const simulate::TransferEnds ends = simulate::TaskGraph::ends(e.task);
      auto args = [&](int peer) {
        return ordered_json{
            {"micro_batch", e.task.micro_batch}, {"stage", e.task.stage},
            {"from_stage", ends.from_stage},     {"to_stage", ends.to_stage},
            {"bytes", io::json_number(e.bytes)}, {"from", detail::gpu_id(view_, e.from)},
            {"to", detail::gpu_id(view_, e.to)}, {"peer", detail::gpu_id(view_, peer)}};
      };
      const char* category = activation ? "activation" : "gradient";
      add(complete(transfer_name(e.task), category, pid(e.from), send_thread_.at({e.from, e.to}),
                   e.start_ms, e.end_ms, args(e.to)));
      add(complete(transfer_name(e.task), category, pid(e.to), receive_thread_.at({e.to, e.from}),
                   e.start_ms, e.end_ms, args(e.from)));
    }
  }

  void allreduces() {
    for (const TimedAllReduce& e : plan_.timeline.allreduces) {
      const Stage& stage = plan_.stages[static_cast<std::size_t>(e.stage)];
      std::vector<ordered_json> peer_ids;
      peer_ids.reserve(stage.gpus.size());
      for (int g : stage.gpus) peer_ids.emplace_back(detail::gpu_id(view_, g));
      const ordered_json peers = io::json_array(std::move(peer_ids));
      for (int g : stage.leaders()) {
        add(complete("AllReduce s" + std::to_string(e.stage), "allreduce", pid(g),
                     stage_thread(g, e.stage, kAllReduceThread), e.start_ms, e.end_ms,
                     {{"stage", e.stage}, {"bytes", io::json_number(e.bytes)}, {"peers", peers}}));
      }
    }
  }

  // Memory counters, one per group (its GPUs hold the same): +1 stash when a forward starts,
  // -1 when its backward (or `I`) ends, and in a v2 plan the transient bytes of a recomputing
  // stage during each backward (or `I`); with a split backward +1 weight stash when an `I` ends,
  // -1 when its `W` ends (spec 9.3). Counted per stage, for the stages of a device hold
  // different bytes. Equal times are merged, which releases before allocating as the execution
  // model does. O(T log T).
  void memory_counters() {
    std::vector<std::map<double, std::map<int, Counts>>> changes(N_);
    for (const TimedCompute& e : plan_.timeline.compute) {
      auto& per_gpu = changes[static_cast<std::size_t>(e.gpu)];
      const int s = e.task.stage;
      switch (e.task.op) {
        case Op::kForward:
          per_gpu[to_us(e.start_ms)][s].in_flight += 1;
          break;
        case Op::kBackward:
        case Op::kBackwardInput:
          per_gpu[to_us(e.end_ms)][s].in_flight -= 1;
          if (e.task.op == Op::kBackwardInput) per_gpu[to_us(e.end_ms)][s].weights += 1;
          if (v2_) {
            per_gpu[to_us(e.start_ms)][s].backwards += 1;
            per_gpu[to_us(e.end_ms)][s].backwards -= 1;
          }
          break;
        case Op::kBackwardWeight:
          per_gpu[to_us(e.end_ms)][s].weights -= 1;
          break;
      }
    }
    const double end_us = to_us(plan_.timeline.iteration_ms);
    for (const Group& group : groups_) {
      const auto& per_gpu = changes[static_cast<std::size_t>(group.gpus.front())];
      std::map<int, Counts> counts;  // per stage of the device
      if (per_gpu.empty() || per_gpu.begin()->first > 0) memory_sample(group, 0, counts);
      double last = 0;
      for (const auto& [ts, deltas] : per_gpu) {
        for (const auto& [stage, delta] : deltas) {
          Counts& c = counts[stage];
          c.in_flight += delta.in_flight;
          c.backwards += delta.backwards;
          c.weights += delta.weights;
        }
        memory_sample(group, ts, counts);
        last = ts;
      }
      if (last < end_us) memory_sample(group, end_us, counts);
    }
  }

  // Micro-batches of one stage: stashed (F start to B or I end), in a backward (for the
  // transient bytes) and holding a weight stash (I end to W end).
  struct Counts {
    int in_flight = 0;
    int backwards = 0;
    int weights = 0;
  };

  // One counter sample: bytes by kind when the view knows the memory, else stashes.
  void memory_sample(const Group& group, double ts, const std::map<int, Counts>& counts) {
    const auto g = static_cast<std::size_t>(group.gpus.front());
    ordered_json args;
    if (view_.memory) {
      const MemoryFigures& memory = *view_.memory;
      double stash = 0, transient = 0, weights = 0;
      for (int s : group.stages) {
        const auto stage = static_cast<std::size_t>(s);
        const auto it = counts.find(s);
        const Counts c = it == counts.end() ? Counts{} : it->second;
        stash += c.in_flight * memory.stash_bytes[stage];
        transient += stage < memory.transient_bytes.size()
                         ? c.backwards * memory.transient_bytes[stage]
                         : 0.0;
        weights += stage < memory.weight_stash_bytes.size()
                       ? c.weights * memory.weight_stash_bytes[stage]
                       : 0.0;
      }
      args = {{"static", io::json_number(memory.static_bytes[g])},
              {"stash", io::json_number(stash)}};
      if (v2_) args["transient"] = io::json_number(transient);
      if (plan_.schedule.split_backward) args["weight_stash"] = io::json_number(weights);
    } else {
      int in_flight = 0, weights = 0;
      for (const auto& [stage, c] : counts) {
        in_flight += c.in_flight;
        weights += c.weights;
      }
      args = {{"micro_batches", in_flight}};
      if (plan_.schedule.split_backward) args["weight_stashes"] = weights;
    }
    add({{"name", view_.memory ? "memory (bytes)" : "stashed micro-batches"},
         {"ph", "C"},
         {"pid", pid_[g]},
         {"tid", kComputeThread},
         {"ts", io::json_number(ts)},
         {"args", std::move(args)}});
  }

  ordered_json other_data() const {
    ordered_json other = ordered_json::object();
    other["generator"] = std::string("pipeplan ") + kVersion;
    other["model"] = view_.model_name;
    other["topology"] = view_.topology_name;
    other["planner"] = plan_.planner;
    other["schedule_policy"] = plan_.schedule_policy;
    other["micro_batches"] = std::to_string(view_.micro_batches);
    other["iteration"] = io::format_ms(plan_.timeline.iteration_ms);
    if (v2_) other["optimizer"] = optimizer_name(plan_.optimizer);
    if (plan_.schedule.split_backward) other["split_backward"] = true;
    if (shared_) other["virtual_stages"] = virtual_stages(plan_.stages);
    return other;
  }

  const PlanView& view_;
  const Plan& plan_;
  const std::size_t N_;
  const bool v2_;
  const bool shared_;  // some stages share GPUs (spec 9.2)
  std::vector<int> pid_, rank_of_, group_index_;
  std::vector<Group> groups_;  // in rank order of their leaders
  std::map<std::pair<int, int>, int> send_thread_, receive_thread_;  // (gpu, peer) -> tid
  std::map<std::pair<int, int>, int> stage_thread_;  // (leader, stage) -> tid, shared devices
  // Each event written compact as it is made (see write).
  void add(const ordered_json& event) {
    events_.push_back(
        event.dump(-1, ' ', /*ensure_ascii=*/false, ordered_json::error_handler_t::replace));
  }
  std::vector<std::string> events_;
};

}  // namespace

std::string chrome_trace_text(const PlanView& view) {
  // Every time lies within the iteration (the readers check it): when its end is finite in
  // microseconds, so is every figure written below, never `null`.
  if (!std::isfinite(to_us(view.plan.timeline.iteration_ms))) {
    throw InputError(view.plan_file.empty() ? "plan.json" : view.plan_file, "/iteration_ms",
                     io::format_ms(view.plan.timeline.iteration_ms) +
                         " is too long for a Chrome trace: its times in microseconds would "
                         "overflow");
  }
  return TraceWriter(view).write();
}

ordered_json chrome_trace(const PlanView& view) {
  return ordered_json::parse(chrome_trace_text(view));
}

}  // namespace pipeplan::report
