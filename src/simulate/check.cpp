// Plan checking: every rule of spec sections 3 and 4, first violation wins. O(T log T).

#include "pipeplan/simulate/check.hpp"

#include <algorithm>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::simulate {
namespace {

std::string ms(double value) { return report::format_number(value, 12) + " ms"; }

std::string gpu_name(const topology::Topology& topology, int gpu) {
  return "GPU \"" + topology.gpu(gpu).id + "\"";
}

// Dense keys for compute tasks and transfers of one plan.
struct Keys {
  int M;
  [[nodiscard]] std::size_t compute(const ComputeTask& t) const {
    return ((static_cast<std::size_t>(t.stage) * static_cast<std::size_t>(M) +
             static_cast<std::size_t>(t.micro_batch))
            << 1) |
           (t.op == Op::kBackward ? 1U : 0U);
  }
  [[nodiscard]] std::size_t transfer(const TransferTask& t) const {
    return ((static_cast<std::size_t>(t.stage) * static_cast<std::size_t>(M) +
             static_cast<std::size_t>(t.micro_batch))
            << 1) |
           (t.kind == TransferKind::kGradient ? 1U : 0U);
  }
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

Plan check_plan(const StatedPlan& stated, const model::Model& model,
                const topology::Topology& topology) {
  auto fail = [&](const std::string& pointer, const std::string& message) {
    throw InputError(stated.file, pointer, message);
  };
  auto compute_pointer = [](std::size_t i) { return "/schedule/compute/" + std::to_string(i); };
  auto transfer_pointer = [](std::size_t i) { return "/schedule/transfers/" + std::to_string(i); };

  const int M = stated.micro_batches;
  const int N = topology.size();
  if (M < 1) fail("/micro_batches", "must be an integer >= 1");
  try {
    check_stages(model, topology, stated.stages);
  } catch (const ScheduleError& error) {
    fail("/stages", error.what());
  }
  const int S = static_cast<int>(stated.stages.size());
  // Orders: the entries of each resource sorted by start, ties by position in the file.
  Schedule schedule;
  schedule.micro_batches = M;
  schedule.gpu_order.resize(static_cast<std::size_t>(N));
  const std::vector<std::size_t> order = compute_by_gpu(stated);
  for (std::size_t i : order) {
    schedule.gpu_order[static_cast<std::size_t>(stated.compute[i].gpu)].push_back(stated.compute[i].task);
  }
  const std::vector<std::size_t> transfer_order = transfers_by_channel(stated);
  for (std::size_t i : transfer_order) {
    const auto& t = stated.transfers[i];
    if (t.from == t.to) fail(transfer_pointer(i), describe(t.task) + " goes from a GPU to itself");
    schedule.channel_order[{t.from, t.to}].push_back(t.task);
  }

  Timeline timeline;
  try {
    timeline = replay(model, topology, stated.stages, schedule);
  } catch (const ScheduleError& error) {
    std::string pointer = "/schedule";
    // Point at the (last) entry of the task involved.
    if (error.compute) {
      for (std::size_t i = 0; i < stated.compute.size(); ++i) {
        if (stated.compute[i].task == *error.compute) pointer = compute_pointer(i);
      }
    } else if (error.transfer) {
      for (std::size_t i = 0; i < stated.transfers.size(); ++i) {
        if (stated.transfers[i].task == *error.transfer) pointer = transfer_pointer(i);
      }
    }
    fail(pointer, error.what());
  }

  std::vector<StageProfile> profiles;
  for (int s = 0; s < S; ++s) profiles.push_back(stage_profile(model, stated.stages, s));
  const Keys keys{M};

  // Durations and sizes. An end is compared with its start plus the duration, as times:
  // `end - start` of two large times loses the low bits of a short duration (a 1 us transfer
  // ending at 5e6 ms), so comparing it as a duration would refuse exact replays.
  for (std::size_t i = 0; i < stated.compute.size(); ++i) {
    const auto& e = stated.compute[i];
    const auto& p = profiles[static_cast<std::size_t>(e.task.stage)];
    const double speed = topology.gpu(e.gpu).speed;
    const double expected = (e.task.op == Op::kForward ? p.forward_ms : p.backward_ms) / speed;
    if (!times_equal(e.end_ms, e.start_ms + expected)) {
      fail(compute_pointer(i), describe(e.task) + " lasts " + ms(e.end_ms - e.start_ms) +
                                   " but takes " + ms(expected) + " on " + gpu_name(topology, e.gpu) +
                                   " (speed " + report::format_number(speed, 6) + ")");
    }
  }
  for (std::size_t i = 0; i < stated.transfers.size(); ++i) {
    const auto& e = stated.transfers[i];
    const double bytes = profiles[static_cast<std::size_t>(e.task.stage)].boundary_bytes;
    if (!times_equal(e.bytes, bytes)) {
      fail(transfer_pointer(i), describe(e.task) + " states " + report::format_number(e.bytes, 15) +
                                    " bytes but the boundary carries " +
                                    report::format_number(bytes, 15));
    }
    const double expected = topology.transfer_ms(e.from, e.to, bytes);
    if (!times_equal(e.end_ms, e.start_ms + expected)) {
      fail(transfer_pointer(i), describe(e.task) + " lasts " + ms(e.end_ms - e.start_ms) +
                                    " but takes " + ms(expected) + " from " + topology.gpu(e.from).id +
                                    " to " + topology.gpu(e.to).id);
    }
  }

  // One task at a time per GPU and per channel.
  for (std::size_t k = 1; k < order.size(); ++k) {
    const auto& a = stated.compute[order[k - 1]];
    const auto& b = stated.compute[order[k]];
    if (a.gpu == b.gpu && b.start_ms < a.end_ms && !times_equal(b.start_ms, a.end_ms)) {
      fail(compute_pointer(order[k]), describe(b.task) + " starts at " + ms(b.start_ms) + " on " +
                                          gpu_name(topology, b.gpu) + " while " + describe(a.task) +
                                          " runs there until " + ms(a.end_ms));
    }
  }
  for (std::size_t k = 1; k < transfer_order.size(); ++k) {
    const auto& a = stated.transfers[transfer_order[k - 1]];
    const auto& b = stated.transfers[transfer_order[k]];
    if (a.from == b.from && a.to == b.to && b.start_ms < a.end_ms && !times_equal(b.start_ms, a.end_ms)) {
      fail(transfer_pointer(transfer_order[k]),
           describe(b.task) + " starts at " + ms(b.start_ms) + " while " + describe(a.task) +
               " occupies the channel " + topology.gpu(a.from).id + " -> " + topology.gpu(a.to).id +
               " until " + ms(a.end_ms));
    }
  }

  // Dependencies, on the stated times.
  std::vector<double> compute_end(static_cast<std::size_t>(2 * S * M), 0);
  std::vector<double> transfer_end(static_cast<std::size_t>(2 * std::max(S - 1, 0) * M), 0);
  for (const auto& e : stated.compute) compute_end[keys.compute(e.task)] = e.end_ms;
  for (const auto& e : stated.transfers) transfer_end[keys.transfer(e.task)] = e.end_ms;
  auto check_after = [&](const std::string& pointer, const std::string& what, double start,
                         double dependency_end, const std::string& dependency) {
    if (start < dependency_end && !times_equal(start, dependency_end)) {
      fail(pointer, what + " starts at " + ms(start) + " before " + dependency + " ends at " +
                        ms(dependency_end));
    }
  };
  for (std::size_t i = 0; i < stated.compute.size(); ++i) {
    const auto& e = stated.compute[i];
    const int s = e.task.stage, m = e.task.micro_batch;
    if (e.task.op == Op::kForward) {
      if (s > 0) {
        TransferTask in{TransferKind::kActivation, s - 1, m};
        check_after(compute_pointer(i), describe(e.task), e.start_ms, transfer_end[keys.transfer(in)], describe(in));
      }
    } else if (s == S - 1) {
      ComputeTask forward{Op::kForward, s, m};
      check_after(compute_pointer(i), describe(e.task), e.start_ms, compute_end[keys.compute(forward)], describe(forward));
    } else {
      TransferTask in{TransferKind::kGradient, s, m};
      check_after(compute_pointer(i), describe(e.task), e.start_ms, transfer_end[keys.transfer(in)], describe(in));
    }
  }
  for (std::size_t i = 0; i < stated.transfers.size(); ++i) {
    const auto& e = stated.transfers[i];
    ComputeTask source = e.task.kind == TransferKind::kActivation
                             ? ComputeTask{Op::kForward, e.task.stage, e.task.micro_batch}
                             : ComputeTask{Op::kBackward, e.task.stage + 1, e.task.micro_batch};
    check_after(transfer_pointer(i), describe(e.task), e.start_ms, compute_end[keys.compute(source)], describe(source));
  }

  // Starts equal to the replay of the orders.
  std::vector<double> replay_start(compute_end.size(), 0);
  for (const auto& e : timeline.compute) replay_start[keys.compute(e.task)] = e.start_ms;
  std::vector<double> replay_transfer_start(transfer_end.size(), 0);
  for (const auto& e : timeline.transfers) replay_transfer_start[keys.transfer(e.task)] = e.start_ms;
  for (std::size_t i = 0; i < stated.compute.size(); ++i) {
    const auto& e = stated.compute[i];
    const double expected = replay_start[keys.compute(e.task)];
    if (!times_equal(e.start_ms, expected)) {
      fail(compute_pointer(i), describe(e.task) + " starts at " + ms(e.start_ms) +
                                   " but the replay of the orders starts it at " + ms(expected));
    }
  }
  for (std::size_t i = 0; i < stated.transfers.size(); ++i) {
    const auto& e = stated.transfers[i];
    const double expected = replay_transfer_start[keys.transfer(e.task)];
    if (!times_equal(e.start_ms, expected)) {
      fail(transfer_pointer(i), describe(e.task) + " starts at " + ms(e.start_ms) +
                                    " but the replay of the orders starts it at " + ms(expected));
    }
  }

  // AllReduces: exactly one per replicated stage, over its GPUs, with the replay's times.
  std::vector<int> seen(static_cast<std::size_t>(S), -1);
  for (std::size_t i = 0; i < stated.allreduces.size(); ++i) {
    const auto& e = stated.allreduces[i];
    const std::string pointer = "/schedule/allreduces/" + std::to_string(i);
    if (e.stage < 0 || e.stage >= S) fail(pointer, "names stage " + std::to_string(e.stage) + ", which does not exist");
    const Stage& stage = stated.stages[static_cast<std::size_t>(e.stage)];
    if (stage.gpus.size() < 2) fail(pointer, "stage " + std::to_string(e.stage) + " has one GPU and no AllReduce");
    if (seen[static_cast<std::size_t>(e.stage)] >= 0) {
      fail(pointer, "second AllReduce of stage " + std::to_string(e.stage));
    }
    seen[static_cast<std::size_t>(e.stage)] = static_cast<int>(i);
    if (e.gpus != stage.gpus) fail(pointer + "/gpus", "must list the GPUs of stage " + std::to_string(e.stage) + " in ring order");
    const double bytes = profiles[static_cast<std::size_t>(e.stage)].parameter_bytes;
    if (!times_equal(e.bytes, bytes)) {
      fail(pointer + "/bytes", "states " + report::format_number(e.bytes, 15) + " bytes but stage " +
                                   std::to_string(e.stage) + " has " + report::format_number(bytes, 15) +
                                   " parameter bytes");
    }
    for (const auto& actual : timeline.allreduces) {
      if (actual.stage != e.stage) continue;
      if (!times_equal(e.start_ms, actual.start_ms) || !times_equal(e.end_ms, actual.end_ms)) {
        fail(pointer, "the AllReduce of stage " + std::to_string(e.stage) + " runs " + ms(e.start_ms) +
                          " to " + ms(e.end_ms) + " but the replay runs it " + ms(actual.start_ms) +
                          " to " + ms(actual.end_ms));
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    if (stated.stages[static_cast<std::size_t>(s)].gpus.size() >= 2 && seen[static_cast<std::size_t>(s)] < 0) {
      fail("/schedule/allreduces", "the AllReduce of stage " + std::to_string(s) + " is missing");
    }
  }

  if (auto violation = memory_violation(topology, timeline)) fail("/stages", *violation);

  if (!times_equal(stated.iteration_ms, timeline.iteration_ms)) {
    fail("/iteration_ms", "states " + ms(stated.iteration_ms) + " but the replay ends at " +
                              ms(timeline.iteration_ms));
  }

  Plan plan;
  plan.planner = stated.planner;
  plan.schedule_policy = stated.schedule_policy;
  plan.stages = stated.stages;
  plan.schedule = std::move(schedule);
  plan.bounds = compute_bounds(model, topology, stated.stages, M);
  if (stated.bounds) {
    if (!times_equal(stated.bounds->any_plan_ms, plan.bounds.any_plan_ms)) {
      fail("/bounds/any_plan_ms", "states " + ms(stated.bounds->any_plan_ms) + " but the bound is " +
                                      ms(plan.bounds.any_plan_ms));
    }
    if (!times_equal(stated.bounds->partition_ms, plan.bounds.partition_ms)) {
      fail("/bounds/partition_ms", "states " + ms(stated.bounds->partition_ms) + " but the bound is " +
                                       ms(plan.bounds.partition_ms));
    }
  }

  for (int s = 0; s < S; ++s) {
    const auto& figures = stated.stage_figures.size() > static_cast<std::size_t>(s)
                              ? stated.stage_figures[static_cast<std::size_t>(s)]
                              : std::nullopt;
    if (!figures) continue;
    const auto& p = profiles[static_cast<std::size_t>(s)];
    const std::string pointer = "/stages/" + std::to_string(s);
    const double allreduce = allreduce_ms(topology, stated.stages[static_cast<std::size_t>(s)].gpus, p.parameter_bytes);
    const std::pair<const char*, std::pair<double, double>> checks[] = {
        {"forward_ms", {figures->forward_ms, p.forward_ms}},
        {"backward_ms", {figures->backward_ms, p.backward_ms}},
        {"parameter_bytes", {figures->parameter_bytes, p.parameter_bytes}},
        {"boundary_bytes", {figures->boundary_bytes, p.boundary_bytes}},
        {"allreduce_ms", {figures->allreduce_ms, allreduce}},
    };
    for (const auto& [key, values] : checks) {
      if (!times_equal(values.first, values.second)) {
        fail(pointer + "/" + key, "states " + report::format_number(values.first, 15) +
                                      " but the model gives " + report::format_number(values.second, 15));
      }
    }
  }

  if (stated.gpu_order) {
    std::vector<char> listed(static_cast<std::size_t>(N), 0);
    for (int g : *stated.gpu_order) {
      if (listed[static_cast<std::size_t>(g)]) fail("/gpu_order", "lists " + gpu_name(topology, g) + " twice");
      listed[static_cast<std::size_t>(g)] = 1;
    }
    for (int g = 0; g < N; ++g) {
      if (!listed[static_cast<std::size_t>(g)]) fail("/gpu_order", "does not list " + gpu_name(topology, g));
    }
    plan.gpu_order = *stated.gpu_order;
  } else {
    plan.gpu_order.resize(static_cast<std::size_t>(N));
    std::iota(plan.gpu_order.begin(), plan.gpu_order.end(), 0);
  }

  if (stated.gpus) {
    std::vector<char> listed(static_cast<std::size_t>(N), 0);
    for (std::size_t i = 0; i < stated.gpus->size(); ++i) {
      const StatedGpu& e = (*stated.gpus)[i];
      const std::string pointer = "/gpus/" + std::to_string(i);
      const GpuUsage& usage = timeline.gpus[static_cast<std::size_t>(e.gpu)];
      if (listed[static_cast<std::size_t>(e.gpu)]) fail(pointer, "lists " + gpu_name(topology, e.gpu) + " twice");
      listed[static_cast<std::size_t>(e.gpu)] = 1;
      if (e.stage != usage.stage) {
        fail(pointer + "/stage", gpu_name(topology, e.gpu) + " serves " +
                                     (usage.stage ? "stage " + std::to_string(*usage.stage) : std::string("no stage")));
      }
      if (!times_equal(e.busy_ms, usage.busy_ms)) {
        fail(pointer + "/busy_ms", "states " + ms(e.busy_ms) + " but the replay gives " + ms(usage.busy_ms));
      }
      if (!times_equal(e.peak_memory_bytes, usage.peak_memory_bytes)) {
        fail(pointer + "/peak_memory_bytes", "states " + report::format_number(e.peak_memory_bytes, 15) +
                                                 " but the replay gives " +
                                                 report::format_number(usage.peak_memory_bytes, 15));
      }
    }
    for (int g = 0; g < N; ++g) {
      if (!listed[static_cast<std::size_t>(g)]) fail("/gpus", "does not list " + gpu_name(topology, g));
    }
  }

  plan.timeline = std::move(timeline);
  return plan;
}

}  // namespace pipeplan::simulate
