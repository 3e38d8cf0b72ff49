// Chrome trace export: the Trace Event Format (JSON object form) as Perfetto and
// chrome://tracing read it. One process per used GPU, threads per kind of work and per channel
// (so that no two complete events on one thread overlap), and a memory counter per GPU.
// O(T log T) for T tasks (the counters sort their changes).

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "export_util.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/format.hpp"
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
  const int s = task.stage;
  const bool activation = task.kind == TransferKind::kActivation;
  return std::string(activation ? "act" : "grad") + " m" + std::to_string(task.micro_batch) + " s" +
         std::to_string(activation ? s : s + 1) + "->s" + std::to_string(activation ? s + 1 : s);
}

// The trace under construction: the view, each GPU's process id (its rank + 1) and the
// threads of its channel ends, and the events so far. A vector, made a JSON array once at the
// end (io::json_array): pushing onto an ordered_json array re-links every element with
// JSON_DIAGNOSTICS, O(T^2) for T events.
struct Trace {
  const PlanView& view;
  std::vector<int> ranks;                                          // GPUs in rank order
  std::vector<int> pid;                                            // per GPU
  std::vector<int> rank_of;                                        // per GPU, -1 when unused
  std::map<std::pair<int, int>, int> send_thread, receive_thread;  // (gpu, peer) -> tid
  std::vector<ordered_json> events;
};

Trace start_trace(const PlanView& view) {
  Trace trace{view, rank_order(view), {}, {}, {}, {}, {}};
  const std::size_t N = view.gpu_ids.size();
  trace.pid.assign(N, 0);
  trace.rank_of.assign(N, -1);
  for (std::size_t r = 0; r < trace.ranks.size(); ++r) {
    trace.pid[static_cast<std::size_t>(trace.ranks[r])] = static_cast<int>(r) + 1;
    trace.rank_of[static_cast<std::size_t>(trace.ranks[r])] = static_cast<int>(r);
  }
  return trace;
}

// Process and thread names: a process per used GPU, a thread for its compute, its AllReduce
// and each channel end, peers in rank order. O(N + channels log channels).
void add_processes(Trace& trace) {
  const Plan& plan = trace.view.plan;
  const std::size_t N = trace.view.gpu_ids.size();
  std::vector<std::vector<int>> senders_to(N), receivers_from(N);
  for (const auto& [channel, tasks] : plan.schedule.channel_order) {
    if (tasks.empty()) continue;
    receivers_from[static_cast<std::size_t>(channel.first)].push_back(channel.second);
    senders_to[static_cast<std::size_t>(channel.second)].push_back(channel.first);
  }
  auto by_rank = [&](int a, int b) {
    return trace.rank_of[static_cast<std::size_t>(a)] < trace.rank_of[static_cast<std::size_t>(b)];
  };
  auto& events = trace.events;
  for (std::size_t r = 0; r < trace.ranks.size(); ++r) {
    const int g = trace.ranks[r];
    const int p = trace.pid[static_cast<std::size_t>(g)];
    const int stage = *plan.timeline.gpus[static_cast<std::size_t>(g)].stage;
    events.push_back(
        metadata("process_name", p, 0,
                 {{"name", "rank " + std::to_string(r) + ": " + detail::gpu_id(trace.view, g) +
                               " (stage " + std::to_string(stage) + ")"}}));
    events.push_back(metadata("process_sort_index", p, 0, {{"sort_index", static_cast<int>(r)}}));
    auto thread = [&](int tid, const std::string& name) {
      events.push_back(metadata("thread_name", p, tid, {{"name", name}}));
      events.push_back(metadata("thread_sort_index", p, tid, {{"sort_index", tid}}));
    };
    thread(kComputeThread, "compute");
    if (plan.stages[static_cast<std::size_t>(stage)].gpus.size() > 1) {
      thread(kAllReduceThread, "AllReduce");
    }
    int tid = kFirstChannelThread;
    std::vector<int> outgoing = receivers_from[static_cast<std::size_t>(g)];
    std::sort(outgoing.begin(), outgoing.end(), by_rank);
    for (int peer : outgoing) {
      trace.send_thread[{g, peer}] = tid;
      thread(tid++, "send -> " + detail::gpu_id(trace.view, peer));
    }
    std::vector<int> incoming = senders_to[static_cast<std::size_t>(g)];
    std::sort(incoming.begin(), incoming.end(), by_rank);
    for (int peer : incoming) {
      trace.receive_thread[{g, peer}] = tid;
      thread(tid++, "recv <- " + detail::gpu_id(trace.view, peer));
    }
  }
}

// The tasks: compute on its GPU's compute thread, each transfer on both of its channel ends,
// each AllReduce on every GPU of its stage. O(T log channels).
void add_tasks(Trace& trace) {
  const PlanView& view = trace.view;
  const Plan& plan = view.plan;
  const auto pid = [&](int gpu) { return trace.pid[static_cast<std::size_t>(gpu)]; };
  for (const TimedCompute& e : plan.timeline.compute) {
    trace.events.push_back(complete(detail::short_name(e.task),
                                    e.task.op == Op::kForward ? "forward" : "backward", pid(e.gpu),
                                    kComputeThread, e.start_ms, e.end_ms,
                                    {{"micro_batch", e.task.micro_batch},
                                     {"stage", e.task.stage},
                                     {"gpu", detail::gpu_id(view, e.gpu)}}));
  }
  for (const TimedTransfer& e : plan.timeline.transfers) {
    const bool activation = e.task.kind == TransferKind::kActivation;
    const int from_stage = activation ? e.task.stage : e.task.stage + 1;
    const int to_stage = activation ? e.task.stage + 1 : e.task.stage;
    auto args = [&](int peer) {
      return ordered_json{
          {"micro_batch", e.task.micro_batch}, {"stage", e.task.stage},
          {"from_stage", from_stage},          {"to_stage", to_stage},
          {"bytes", io::json_number(e.bytes)}, {"from", detail::gpu_id(view, e.from)},
          {"to", detail::gpu_id(view, e.to)},  {"peer", detail::gpu_id(view, peer)}};
    };
    const char* category = activation ? "activation" : "gradient";
    trace.events.push_back(complete(transfer_name(e.task), category, pid(e.from),
                                    trace.send_thread.at({e.from, e.to}), e.start_ms, e.end_ms,
                                    args(e.to)));
    trace.events.push_back(complete(transfer_name(e.task), category, pid(e.to),
                                    trace.receive_thread.at({e.to, e.from}), e.start_ms, e.end_ms,
                                    args(e.from)));
  }
  for (const TimedAllReduce& e : plan.timeline.allreduces) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(e.stage)];
    std::vector<ordered_json> peer_ids;
    peer_ids.reserve(stage.gpus.size());
    for (int g : stage.gpus) peer_ids.emplace_back(detail::gpu_id(view, g));
    const ordered_json peers = io::json_array(std::move(peer_ids));
    for (int g : stage.gpus) {
      trace.events.push_back(
          complete("AllReduce s" + std::to_string(e.stage), "allreduce", pid(g), kAllReduceThread,
                   e.start_ms, e.end_ms,
                   {{"stage", e.stage}, {"bytes", io::json_number(e.bytes)}, {"peers", peers}}));
    }
  }
}

// Memory counters: +1 stash when a forward starts, -1 when its backward ends; equal times
// are merged, which releases before allocating as the execution model does. O(T log T).
void add_memory_counters(Trace& trace) {
  const PlanView& view = trace.view;
  const Plan& plan = view.plan;
  std::vector<std::map<double, int>> changes(view.gpu_ids.size());
  for (const TimedCompute& e : plan.timeline.compute) {
    auto& per_gpu = changes[static_cast<std::size_t>(e.gpu)];
    if (e.task.op == Op::kForward) {
      per_gpu[to_us(e.start_ms)] += 1;
    } else {
      per_gpu[to_us(e.end_ms)] -= 1;
    }
  }
  const double end_us = to_us(plan.timeline.iteration_ms);
  for (int g : trace.ranks) {
    const int p = trace.pid[static_cast<std::size_t>(g)];
    const int stage = *plan.timeline.gpus[static_cast<std::size_t>(g)].stage;
    auto sample = [&](double ts, int in_flight) {
      ordered_json args;
      if (view.memory) {
        args = {
            {"static", io::json_number(view.memory->static_bytes[static_cast<std::size_t>(g)])},
            {"stash", io::json_number(in_flight *
                                      view.memory->stash_bytes[static_cast<std::size_t>(stage)])}};
      } else {
        args = {{"micro_batches", in_flight}};
      }
      trace.events.push_back({{"name", view.memory ? "memory (bytes)" : "stashed micro-batches"},
                              {"ph", "C"},
                              {"pid", p},
                              {"tid", kComputeThread},
                              {"ts", io::json_number(ts)},
                              {"args", std::move(args)}});
    };
    const auto& per_gpu = changes[static_cast<std::size_t>(g)];
    int in_flight = 0;
    if (per_gpu.empty() || per_gpu.begin()->first > 0) sample(0, 0);
    double last = 0;
    for (const auto& [ts, delta] : per_gpu) {
      in_flight += delta;
      sample(ts, in_flight);
      last = ts;
    }
    if (last < end_us) sample(end_us, in_flight);
  }
}

}  // namespace

ordered_json chrome_trace(const PlanView& view) {
  const Plan& plan = view.plan;
  // Every time lies within the iteration (the readers check it): when its end is finite in
  // microseconds, so is every figure written below, never `null`.
  if (!std::isfinite(to_us(plan.timeline.iteration_ms))) {
    throw InputError("the plan's iteration of " + format_ms(plan.timeline.iteration_ms) +
                     " is too long for a Chrome trace: its times in microseconds would overflow");
  }
  Trace trace = start_trace(view);
  add_processes(trace);
  add_tasks(trace);
  add_memory_counters(trace);

  ordered_json other = ordered_json::object();
  other["generator"] = std::string("pipeplan ") + kVersion;
  other["model"] = view.model_name;
  other["topology"] = view.topology_name;
  other["planner"] = plan.planner;
  other["schedule_policy"] = plan.schedule_policy;
  other["micro_batches"] = std::to_string(view.micro_batches);
  other["iteration"] = format_ms(plan.timeline.iteration_ms);
  ordered_json out = ordered_json::object();
  out["traceEvents"] = io::json_array(std::move(trace.events));
  out["displayTimeUnit"] = "ms";
  out["otherData"] = std::move(other);
  return out;
}

}  // namespace pipeplan::report
