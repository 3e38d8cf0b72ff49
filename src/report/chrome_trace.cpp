// Chrome trace export: the Trace Event Format (JSON object form) as Perfetto and
// chrome://tracing read it. One process per used GPU (per tensor-parallel group in a plan that
// uses spec 8.2), threads per kind of work and per channel
// (so that no two complete events on one thread overlap), and a memory counter per GPU.
// O(T log T) for T tasks (the counters sort their changes).

#include <cmath>
#include <map>
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

}  // namespace

ordered_json chrome_trace(const PlanView& view) {
  const Plan& plan = view.plan;
  // Every time lies within the iteration (the readers check it): when its end is finite in
  // microseconds, so is every figure written below, never `null`.
  if (!std::isfinite(to_us(plan.timeline.iteration_ms))) {
    throw InputError("the plan's iteration of " + format_ms(plan.timeline.iteration_ms) +
                     " is too long for a Chrome trace: its times in microseconds would overflow");
  }
  const std::vector<int> ranks = rank_order(view);
  const std::size_t N = view.gpu_ids.size();
  const bool v2 = is_v2_plan(plan);
  std::vector<int> pid(N, 0);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    pid[static_cast<std::size_t>(ranks[r])] = static_cast<int>(r) + 1;
  }
  std::vector<int> rank_of(N, -1);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    rank_of[static_cast<std::size_t>(ranks[r])] = static_cast<int>(r);
  }
  // One process per group (spec 8.2), named after all its GPUs and numbered by its leader's
  // rank; in a v1 plan every GPU is a group of its own. Per GPU: its group (stage, replica).
  struct Group {
    int stage;
    int replica;
    std::vector<int> gpus;
  };
  std::vector<Group> groups;  // in rank order of their leaders
  std::vector<int> group_index(N, -1);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    for (int i = 0; i < stage.replicas(); ++i) {
      for (int g : stage.group(i))
        group_index[static_cast<std::size_t>(g)] = static_cast<int>(groups.size());
      groups.push_back({static_cast<int>(s), i, stage.group(i)});
    }
  }

  // Threads: one per channel end, peers in rank order.
  std::map<std::pair<int, int>, int> send_thread, receive_thread;  // (gpu, peer) -> tid
  std::vector<std::vector<int>> senders_to(N), receivers_from(N);
  for (const auto& [channel, tasks] : plan.schedule.channel_order) {
    if (tasks.empty()) continue;
    receivers_from[static_cast<std::size_t>(channel.first)].push_back(channel.second);
    senders_to[static_cast<std::size_t>(channel.second)].push_back(channel.first);
  }
  auto by_rank = [&](int a, int b) {
    return rank_of[static_cast<std::size_t>(a)] < rank_of[static_cast<std::size_t>(b)];
  };

  // A vector, made a JSON array once at the end (io::json_array): pushing onto an ordered_json
  // array re-links every element with JSON_DIAGNOSTICS, O(T^2) for T events.
  std::vector<ordered_json> events;
  for (const Group& group : groups) {
    const int g = group.gpus.front();
    const int r = rank_of[static_cast<std::size_t>(g)];
    const int p = pid[static_cast<std::size_t>(g)];
    const int stage = group.stage;
    std::string name = "rank " + std::to_string(r) + ": " + detail::gpu_id(view, g);
    if (group.gpus.size() > 1) {
      name = "ranks " + std::to_string(r) + "-" +
             std::to_string(r + static_cast<int>(group.gpus.size()) - 1) + ": ";
      for (std::size_t k = 0; k < group.gpus.size(); ++k) {
        name += (k ? ", " : "") + detail::gpu_id(view, group.gpus[k]);
      }
    }
    name += " (stage " + std::to_string(stage) +
            (v2 ? ", group " + std::to_string(group.replica) : std::string()) + ")";
    events.push_back(metadata("process_name", p, 0, {{"name", name}}));
    events.push_back(metadata("process_sort_index", p, 0, {{"sort_index", r}}));
    auto thread = [&](int tid, const std::string& thread_name) {
      events.push_back(metadata("thread_name", p, tid, {{"name", thread_name}}));
      events.push_back(metadata("thread_sort_index", p, tid, {{"sort_index", tid}}));
    };
    thread(kComputeThread, "compute");
    if (plan.stages[static_cast<std::size_t>(stage)].replicas() > 1) {
      thread(kAllReduceThread, "AllReduce");
    }
    int tid = kFirstChannelThread;
    std::vector<int> outgoing = receivers_from[static_cast<std::size_t>(g)];
    std::sort(outgoing.begin(), outgoing.end(), by_rank);
    for (int peer : outgoing) {
      send_thread[{g, peer}] = tid;
      thread(tid++, "send -> " + detail::gpu_id(view, peer));
    }
    std::vector<int> incoming = senders_to[static_cast<std::size_t>(g)];
    std::sort(incoming.begin(), incoming.end(), by_rank);
    for (int peer : incoming) {
      receive_thread[{g, peer}] = tid;
      thread(tid++, "recv <- " + detail::gpu_id(view, peer));
    }
  }

  for (const TimedCompute& e : plan.timeline.compute) {
    ordered_json args = {{"micro_batch", e.task.micro_batch},
                         {"stage", e.task.stage},
                         {"gpu", detail::gpu_id(view, e.gpu)}};
    if (v2) {
      // The group and the shares of the task's duration (spec 8.3; the execution model does not
      // place them inside the task).
      const Group& group =
          groups[static_cast<std::size_t>(group_index[static_cast<std::size_t>(e.gpu)])];
      std::vector<ordered_json> ids;
      for (int g : group.gpus) ids.emplace_back(detail::gpu_id(view, g));
      args["gpus"] = io::json_array(std::move(ids));
      args["recompute"] = plan.stages[static_cast<std::size_t>(e.task.stage)].recompute &&
                          e.task.op == Op::kBackward;
      if (view.group_figures) {
        const GroupFigures& f = (*view.group_figures)[static_cast<std::size_t>(group.stage)]
                                                     [static_cast<std::size_t>(group.replica)];
        const bool forward = e.task.op == Op::kForward;
        args["tensor_parallel_allreduce_ms"] =
            io::json_number(forward ? f.forward_allreduce_ms : f.backward_allreduce_ms);
        args["recompute_ms"] = io::json_number(forward ? 0.0 : f.recompute_ms);
      }
    }
    events.push_back(complete(detail::short_name(e.task),
                              e.task.op == Op::kForward ? "forward" : "backward",
                              pid[static_cast<std::size_t>(e.gpu)], kComputeThread, e.start_ms,
                              e.end_ms, std::move(args)));
  }
  for (const TimedUpdate& e : plan.timeline.updates) {
    events.push_back(complete("U s" + std::to_string(e.stage), "update",
                              pid[static_cast<std::size_t>(e.gpu)], kComputeThread, e.start_ms,
                              e.end_ms,
                              {{"stage", e.stage}, {"gpu", detail::gpu_id(view, e.gpu)}}));
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
    events.push_back(complete(transfer_name(e.task), category,
                              pid[static_cast<std::size_t>(e.from)], send_thread.at({e.from, e.to}),
                              e.start_ms, e.end_ms, args(e.to)));
    events.push_back(complete(transfer_name(e.task), category, pid[static_cast<std::size_t>(e.to)],
                              receive_thread.at({e.to, e.from}), e.start_ms, e.end_ms,
                              args(e.from)));
  }
  for (const TimedAllReduce& e : plan.timeline.allreduces) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(e.stage)];
    std::vector<ordered_json> peer_ids;
    for (int g : stage.gpus) peer_ids.emplace_back(detail::gpu_id(view, g));
    const ordered_json peers = io::json_array(std::move(peer_ids));
    for (int g : stage.leaders()) {
      events.push_back(
          complete("AllReduce s" + std::to_string(e.stage), "allreduce",
                   pid[static_cast<std::size_t>(g)], kAllReduceThread, e.start_ms, e.end_ms,
                   {{"stage", e.stage}, {"bytes", io::json_number(e.bytes)}, {"peers", peers}}));
    }
  }

  // Memory counters, one per group (its GPUs hold the same): +1 stash when a forward starts,
  // -1 when its backward ends, and in a v2 plan the transient bytes of a recomputing stage
  // during each backward; equal times are merged, which releases before allocating as the
  // execution model does.
  struct Change {
    int in_flight = 0;
    int backwards = 0;
  };
  std::vector<std::map<double, Change>> changes(N);
  for (const TimedCompute& e : plan.timeline.compute) {
    auto& per_gpu = changes[static_cast<std::size_t>(e.gpu)];
    if (e.task.op == Op::kForward) {
      per_gpu[to_us(e.start_ms)].in_flight += 1;
    } else {
      per_gpu[to_us(e.end_ms)].in_flight -= 1;
      if (v2) {
        per_gpu[to_us(e.start_ms)].backwards += 1;
        per_gpu[to_us(e.end_ms)].backwards -= 1;
      }
    }
  }
  const double end_us = to_us(plan.timeline.iteration_ms);
  for (const Group& group : groups) {
    const int g = group.gpus.front();
    const int p = pid[static_cast<std::size_t>(g)];
    const int stage = group.stage;
    auto sample = [&](double ts, int in_flight, int backwards) {
      ordered_json args;
      if (view.memory) {
        args = {
            {"static", io::json_number(view.memory->static_bytes[static_cast<std::size_t>(g)])},
            {"stash", io::json_number(in_flight *
                                      view.memory->stash_bytes[static_cast<std::size_t>(stage)])}};
        if (v2) {
          const auto& transient = view.memory->transient_bytes;
          args["transient"] =
              io::json_number(static_cast<std::size_t>(stage) < transient.size()
                                  ? backwards * transient[static_cast<std::size_t>(stage)]
                                  : 0.0);
        }
      } else {
        args = {{"micro_batches", in_flight}};
      }
      events.push_back({{"name", view.memory ? "memory (bytes)" : "stashed micro-batches"},
                        {"ph", "C"},
                        {"pid", p},
                        {"tid", kComputeThread},
                        {"ts", io::json_number(ts)},
                        {"args", std::move(args)}});
    };
    const auto& per_gpu = changes[static_cast<std::size_t>(g)];
    int in_flight = 0, backwards = 0;
    if (per_gpu.empty() || per_gpu.begin()->first > 0) sample(0, 0, 0);
    double last = 0;
    for (const auto& [ts, delta] : per_gpu) {
      in_flight += delta.in_flight;
      backwards += delta.backwards;
      sample(ts, in_flight, backwards);
      last = ts;
    }
    if (last < end_us) sample(end_us, in_flight, backwards);
  }

  ordered_json other = ordered_json::object();
  other["generator"] = std::string("pipeplan ") + kVersion;
  other["model"] = view.model_name;
  other["topology"] = view.topology_name;
  other["planner"] = plan.planner;
  other["schedule_policy"] = plan.schedule_policy;
  other["micro_batches"] = std::to_string(view.micro_batches);
  other["iteration"] = format_ms(plan.timeline.iteration_ms);
  if (v2) other["optimizer"] = plan.optimizer == Optimizer::kSharded ? "sharded" : "replicated";
  ordered_json out = ordered_json::object();
  out["traceEvents"] = io::json_array(std::move(events));
  out["displayTimeUnit"] = "ms";
  out["otherData"] = std::move(other);
  return out;
}

}  // namespace pipeplan::report
