// The view every export draws from: built from a checked plan and its inputs, or read from a
// plan file alone with every check that needs neither model nor topology. O(T log T) for T
// schedule entries (the sorts by start time).

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "pipeplan/error.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::report {

PlanView make_view(const Plan& plan, const model::Model& model, const topology::Topology& topology,
                   std::string model_file) {
  PlanView view;
  view.plan = plan;
  view.micro_batches = plan.schedule.micro_batches;
  view.model_name = model.name;
  view.topology_name = topology.name();
  view.model_file = std::move(model_file);
  for (const topology::Gpu& gpu : topology.gpus()) {
    view.gpu_ids.push_back(gpu.id);
    view.memory_bytes.push_back(gpu.memory_bytes);
  }
  MemoryFigures memory;
  memory.static_bytes.assign(static_cast<std::size_t>(topology.size()), 0);
  for (int s = 0; s < static_cast<int>(plan.stages.size()); ++s) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(s)];
    const simulate::StageProfile p = simulate::stage_profile(model, plan.stages, s);
    view.stage_figures.push_back({p.forward_ms, p.backward_ms, p.parameter_bytes, p.boundary_bytes,
                                  simulate::allreduce_ms(topology, stage.gpus, p.parameter_bytes)});
    memory.stash_bytes.push_back(p.stash_bytes);
    for (int g : stage.gpus) {
      memory.static_bytes[static_cast<std::size_t>(g)] =
          model.parameter_memory_factor * p.parameter_bytes;
    }
  }
  view.memory = std::move(memory);
  std::vector<std::string> names;
  for (const model::Layer& layer : model.layers) names.push_back(layer.name);
  view.layer_names = std::move(names);
  return view;
}

std::vector<int> rank_order(const PlanView& view) {
  std::vector<int> out;
  for (const Stage& stage : view.plan.stages) {
    out.insert(out.end(), stage.gpus.begin(), stage.gpus.end());
  }
  return out;
}

namespace {

std::string ms(double value) { return format_number(value, 12) + " ms"; }

// Dense keys for compute tasks and transfers, as in simulate::check_plan.
struct Keys {
  std::size_t M;
  [[nodiscard]] std::size_t compute(const ComputeTask& t) const {
    return ((static_cast<std::size_t>(t.stage) * M + static_cast<std::size_t>(t.micro_batch))
            << 1) |
           (t.op == Op::kBackward ? 1U : 0U);
  }
  [[nodiscard]] std::size_t transfer(const TransferTask& t) const {
    return ((static_cast<std::size_t>(t.stage) * M + static_cast<std::size_t>(t.micro_batch))
            << 1) |
           (t.kind == TransferKind::kGradient ? 1U : 0U);
  }
};

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

}  // namespace

PlanView read_plan_view(const io::Source& source) {
  StandalonePlan standalone = read_standalone_plan(source);
  const simulate::StatedPlan& stated = standalone.stated;
  auto fail = [&](const std::string& pointer, const std::string& message) {
    throw InputError(stated.file, pointer, message);
  };
  auto gpu_name = [&](int g) {
    return "GPU \"" + standalone.gpu_ids[static_cast<std::size_t>(g)] + "\"";
  };
  const int N = static_cast<int>(standalone.gpu_ids.size());
  const int M = stated.micro_batches;
  const int S = static_cast<int>(stated.stages.size());
  const std::string compute_at = "/schedule/compute/";
  const std::string transfer_at = "/schedule/transfers/";

  if (stated.iteration_ms < 0) {
    fail("/iteration_ms", "must be >= 0, got " + format_number(stated.iteration_ms, 15));
  }
  if (S == 0) fail("/stages", "must list at least one stage");

  // Stages: contiguous from layer 0, at least one GPU each, no GPU twice, figures stated.
  std::vector<int> stage_of(static_cast<std::size_t>(N), -1);
  std::vector<StageFigures> figures;
  for (int s = 0; s < S; ++s) {
    const Stage& stage = stated.stages[static_cast<std::size_t>(s)];
    const std::string at = "/stages/" + std::to_string(s);
    const int first = s == 0 ? 0 : stated.stages[static_cast<std::size_t>(s) - 1].last_layer + 1;
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
    for (std::size_t k = 0; k < stage.gpus.size(); ++k) {
      int& owner = stage_of[static_cast<std::size_t>(stage.gpus[k])];
      if (owner >= 0) {
        fail(at + "/gpus/" + std::to_string(k),
             gpu_name(stage.gpus[k]) + (owner == s
                                            ? " is listed twice"
                                            : " already serves stage " + std::to_string(owner)));
      }
      owner = s;
    }
    const auto& stated_figures = stated.stage_figures[static_cast<std::size_t>(s)];
    if (!stated_figures) fail(at, "missing required key \"forward_ms\" (needed without --model)");
    const StageFigures f{stated_figures->forward_ms, stated_figures->backward_ms,
                         stated_figures->parameter_bytes, stated_figures->boundary_bytes,
                         stated_figures->allreduce_ms};
    const std::pair<const char*, double> values[] = {{"forward_ms", f.forward_ms},
                                                     {"backward_ms", f.backward_ms},
                                                     {"parameter_bytes", f.parameter_bytes},
                                                     {"boundary_bytes", f.boundary_bytes},
                                                     {"allreduce_ms", f.allreduce_ms}};
    for (const auto& [key, value] : values) {
      if (value < 0) fail(at + "/" + key, "must be >= 0, got " + format_number(value, 15));
    }
    figures.push_back(f);
  }

  auto check_times = [&](const std::string& at, const std::string& what, double start, double end) {
    if (start < 0) fail(at + "/start_ms", "must be >= 0, got " + format_number(start, 15));
    if (end < start && !simulate::times_equal(end, start)) {
      fail(at + "/end_ms", what + " ends at " + ms(end) + ", before it starts at " + ms(start));
    }
    if (end > stated.iteration_ms && !simulate::times_equal(end, stated.iteration_ms)) {
      fail(at + "/end_ms", what + " ends at " + ms(end) + ", after the stated iteration_ms " +
                               ms(stated.iteration_ms));
    }
  };

  // Compute: ranges and placement per entry, then the count, then each task once.
  for (std::size_t i = 0; i < stated.compute.size(); ++i) {
    const simulate::StatedCompute& e = stated.compute[i];
    const std::string at = compute_at + std::to_string(i);
    if (e.task.stage >= S) {
      fail(at + "/stage", "names stage " + std::to_string(e.task.stage) + " but the plan has " +
                              std::to_string(S));
    }
    if (e.task.micro_batch >= M) {
      fail(at + "/micro_batch", "must be < micro_batches (" + std::to_string(M) + ")");
    }
    if (stage_of[static_cast<std::size_t>(e.gpu)] != e.task.stage) {
      fail(at + "/gpu", gpu_name(e.gpu) + " does not serve stage " + std::to_string(e.task.stage));
    }
    check_times(at, simulate::describe(e.task), e.start_ms, e.end_ms);
  }
  const std::int64_t compute_count = std::int64_t{2} * S * M;
  if (static_cast<std::int64_t>(stated.compute.size()) != compute_count) {
    fail("/schedule/compute", "lists " + std::to_string(stated.compute.size()) + " tasks but " +
                                  std::to_string(S) + " stages and " + std::to_string(M) +
                                  " micro-batches make " + std::to_string(compute_count) +
                                  " (a forward and a backward each)");
  }
  const Keys keys{static_cast<std::size_t>(M)};
  std::vector<std::size_t> compute_entry(static_cast<std::size_t>(compute_count), kNone);
  for (std::size_t i = 0; i < stated.compute.size(); ++i) {
    std::size_t& slot = compute_entry[keys.compute(stated.compute[i].task)];
    if (slot != kNone) {
      fail(compute_at + std::to_string(i), simulate::describe(stated.compute[i].task) +
                                               " is listed twice (also at " + compute_at +
                                               std::to_string(slot) + ")");
    }
    slot = i;
  }
  auto compute_of = [&](Op op, int s, int m) -> const simulate::StatedCompute& {
    return stated.compute[compute_entry[keys.compute(ComputeTask{op, s, m})]];
  };
  for (std::size_t i = 0; i < stated.compute.size(); ++i) {
    const simulate::StatedCompute& e = stated.compute[i];
    if (e.task.op != Op::kBackward) continue;
    const int forward_gpu = compute_of(Op::kForward, e.task.stage, e.task.micro_batch).gpu;
    if (e.gpu != forward_gpu) {
      fail(compute_at + std::to_string(i) + "/gpu",
           simulate::describe(e.task) + " runs on " + gpu_name(e.gpu) +
               " but its forward runs on " + gpu_name(forward_gpu));
    }
  }

  // Transfers: boundary and micro-batch ranges, endpoints implied by the compute placement.
  for (std::size_t i = 0; i < stated.transfers.size(); ++i) {
    const simulate::StatedTransfer& e = stated.transfers[i];
    const std::string at = transfer_at + std::to_string(i);
    if (e.task.stage >= S - 1) {
      fail(at + "/stage", "names the boundary after stage " + std::to_string(e.task.stage) +
                              " but the plan has " + std::to_string(S) + " stage" +
                              (S == 1 ? "" : "s"));
    }
    if (e.task.micro_batch >= M) {
      fail(at + "/micro_batch", "must be < micro_batches (" + std::to_string(M) + ")");
    }
    const int s = e.task.stage, m = e.task.micro_batch;
    const int lower = compute_of(Op::kForward, s, m).gpu;
    const int upper = compute_of(Op::kForward, s + 1, m).gpu;
    const bool activation = e.task.kind == TransferKind::kActivation;
    const int from = activation ? lower : upper;
    const int to = activation ? upper : lower;
    if (e.from != from) {
      fail(at + "/from", simulate::describe(e.task) + " must leave from " + gpu_name(from) +
                             ", which runs micro-batch " + std::to_string(m) + " on stage " +
                             std::to_string(activation ? s : s + 1));
    }
    if (e.to != to) {
      fail(at + "/to", simulate::describe(e.task) + " must go to " + gpu_name(to) +
                           ", which runs micro-batch " + std::to_string(m) + " on stage " +
                           std::to_string(activation ? s + 1 : s));
    }
    if (e.bytes < 0) fail(at + "/bytes", "must be >= 0, got " + format_number(e.bytes, 15));
    check_times(at, simulate::describe(e.task), e.start_ms, e.end_ms);
  }
  const std::int64_t transfer_count = std::int64_t{2} * (S - 1) * M;
  if (static_cast<std::int64_t>(stated.transfers.size()) != transfer_count) {
    fail("/schedule/transfers", "lists " + std::to_string(stated.transfers.size()) +
                                    " transfers but " + std::to_string(S - 1) + " boundaries and " +
                                    std::to_string(M) + " micro-batches make " +
                                    std::to_string(transfer_count) +
                                    " (an activation and a gradient each)");
  }
  std::vector<std::size_t> transfer_entry(static_cast<std::size_t>(transfer_count), kNone);
  for (std::size_t i = 0; i < stated.transfers.size(); ++i) {
    std::size_t& slot = transfer_entry[keys.transfer(stated.transfers[i].task)];
    if (slot != kNone) {
      fail(transfer_at + std::to_string(i), simulate::describe(stated.transfers[i].task) +
                                                " is listed twice (also at " + transfer_at +
                                                std::to_string(slot) + ")");
    }
    slot = i;
  }

  // One task at a time per GPU and per channel: entries ordered by start, ties by position.
  const std::vector<std::size_t> order = simulate::compute_by_gpu(stated);
  for (std::size_t k = 1; k < order.size(); ++k) {
    const auto& a = stated.compute[order[k - 1]];
    const auto& b = stated.compute[order[k]];
    if (a.gpu == b.gpu && b.start_ms < a.end_ms && !simulate::times_equal(b.start_ms, a.end_ms)) {
      fail(compute_at + std::to_string(order[k]),
           simulate::describe(b.task) + " starts at " + ms(b.start_ms) + " on " + gpu_name(b.gpu) +
               " while " + simulate::describe(a.task) + " runs there until " + ms(a.end_ms));
    }
  }
  const std::vector<std::size_t> transfer_order = simulate::transfers_by_channel(stated);
  for (std::size_t k = 1; k < transfer_order.size(); ++k) {
    const auto& a = stated.transfers[transfer_order[k - 1]];
    const auto& b = stated.transfers[transfer_order[k]];
    if (a.from == b.from && a.to == b.to && b.start_ms < a.end_ms &&
        !simulate::times_equal(b.start_ms, a.end_ms)) {
      fail(transfer_at + std::to_string(transfer_order[k]),
           simulate::describe(b.task) + " starts at " + ms(b.start_ms) + " while " +
               simulate::describe(a.task) + " occupies the channel " +
               standalone.gpu_ids[static_cast<std::size_t>(a.from)] + " -> " +
               standalone.gpu_ids[static_cast<std::size_t>(a.to)] + " until " + ms(a.end_ms));
    }
  }

  // Dependencies of spec section 3, on the stated times.
  auto check_after = [&](const std::string& at, const std::string& what, double start, double end,
                         const std::string& dependency) {
    if (start < end && !simulate::times_equal(start, end)) {
      fail(at, what + " starts at " + ms(start) + " before " + dependency + " ends at " + ms(end));
    }
  };
  for (std::size_t i = 0; i < stated.compute.size(); ++i) {
    const auto& e = stated.compute[i];
    const int s = e.task.stage, m = e.task.micro_batch;
    const std::string at = compute_at + std::to_string(i);
    if (e.task.op == Op::kForward) {
      if (s > 0) {
        const TransferTask in{TransferKind::kActivation, s - 1, m};
        check_after(at, simulate::describe(e.task), e.start_ms,
                    stated.transfers[transfer_entry[keys.transfer(in)]].end_ms,
                    simulate::describe(in));
      }
    } else if (s == S - 1) {
      check_after(at, simulate::describe(e.task), e.start_ms, compute_of(Op::kForward, s, m).end_ms,
                  simulate::describe(ComputeTask{Op::kForward, s, m}));
    } else {
      const TransferTask in{TransferKind::kGradient, s, m};
      check_after(at, simulate::describe(e.task), e.start_ms,
                  stated.transfers[transfer_entry[keys.transfer(in)]].end_ms,
                  simulate::describe(in));
    }
  }
  for (std::size_t i = 0; i < stated.transfers.size(); ++i) {
    const auto& e = stated.transfers[i];
    const ComputeTask from = e.task.kind == TransferKind::kActivation
                                 ? ComputeTask{Op::kForward, e.task.stage, e.task.micro_batch}
                                 : ComputeTask{Op::kBackward, e.task.stage + 1, e.task.micro_batch};
    check_after(transfer_at + std::to_string(i), simulate::describe(e.task), e.start_ms,
                compute_of(from.op, from.stage, from.micro_batch).end_ms, simulate::describe(from));
  }

  // AllReduces: one per replicated stage, over its GPUs in ring order, after its backwards.
  std::vector<double> last_backward_end(static_cast<std::size_t>(S), 0);
  for (const auto& e : stated.compute) {
    if (e.task.op == Op::kBackward) {
      double& end = last_backward_end[static_cast<std::size_t>(e.task.stage)];
      end = std::max(end, e.end_ms);
    }
  }
  std::vector<std::size_t> allreduce_entry(static_cast<std::size_t>(S), kNone);
  for (std::size_t i = 0; i < stated.allreduces.size(); ++i) {
    const auto& e = stated.allreduces[i];
    const std::string at = "/schedule/allreduces/" + std::to_string(i);
    if (e.stage >= S) {
      fail(at + "/stage",
           "names stage " + std::to_string(e.stage) + " but the plan has " + std::to_string(S));
    }
    const Stage& stage = stated.stages[static_cast<std::size_t>(e.stage)];
    if (stage.gpus.size() < 2) {
      fail(at, "stage " + std::to_string(e.stage) + " has one GPU and no AllReduce");
    }
    if (allreduce_entry[static_cast<std::size_t>(e.stage)] != kNone) {
      fail(at, "second AllReduce of stage " + std::to_string(e.stage));
    }
    allreduce_entry[static_cast<std::size_t>(e.stage)] = i;
    if (e.gpus != stage.gpus) {
      fail(at + "/gpus",
           "must list the GPUs of stage " + std::to_string(e.stage) + " in ring order");
    }
    if (e.bytes < 0) fail(at + "/bytes", "must be >= 0, got " + format_number(e.bytes, 15));
    check_times(at, "the AllReduce of stage " + std::to_string(e.stage), e.start_ms, e.end_ms);
    check_after(at, "the AllReduce of stage " + std::to_string(e.stage), e.start_ms,
                last_backward_end[static_cast<std::size_t>(e.stage)],
                "the last backward of stage " + std::to_string(e.stage));
  }
  for (int s = 0; s < S; ++s) {
    if (stated.stages[static_cast<std::size_t>(s)].gpus.size() >= 2 &&
        allreduce_entry[static_cast<std::size_t>(s)] == kNone) {
      fail("/schedule/allreduces", "the AllReduce of stage " + std::to_string(s) + " is missing");
    }
  }

  // The iteration ends with its last task.
  double last_end = 0;
  for (const auto& e : stated.compute) last_end = std::max(last_end, e.end_ms);
  for (const auto& e : stated.transfers) last_end = std::max(last_end, e.end_ms);
  for (const auto& e : stated.allreduces) last_end = std::max(last_end, e.end_ms);
  if (!simulate::times_equal(last_end, stated.iteration_ms)) {
    fail("/iteration_ms",
         "states " + ms(stated.iteration_ms) + " but the last task ends at " + ms(last_end));
  }

  // GPU order and GPU entries: every GPU once, stages as the placement says.
  Plan plan;
  if (stated.gpu_order) {
    std::vector<char> listed(static_cast<std::size_t>(N), 0);
    for (int g : *stated.gpu_order) {
      if (listed[static_cast<std::size_t>(g)]) {
        fail("/gpu_order", "lists " + gpu_name(g) + " twice");
      }
      listed[static_cast<std::size_t>(g)] = 1;
    }
    for (int g = 0; g < N; ++g) {
      if (!listed[static_cast<std::size_t>(g)]) fail("/gpu_order", "does not list " + gpu_name(g));
    }
    plan.gpu_order = *stated.gpu_order;
  } else {
    plan.gpu_order.resize(static_cast<std::size_t>(N));
    std::iota(plan.gpu_order.begin(), plan.gpu_order.end(), 0);
  }
  std::vector<double> peak(static_cast<std::size_t>(N), 0);
  if (stated.gpus) {
    for (std::size_t i = 0; i < stated.gpus->size(); ++i) {
      const simulate::StatedGpu& e = (*stated.gpus)[i];
      const std::string at = "/gpus/" + std::to_string(i);
      const int owner = stage_of[static_cast<std::size_t>(e.gpu)];
      if (e.stage.value_or(-1) != owner) {
        fail(at + "/stage",
             gpu_name(e.gpu) + " serves " +
                 (owner >= 0 ? "stage " + std::to_string(owner) : std::string("no stage")));
      }
      if (e.busy_ms < 0) fail(at + "/busy_ms", "must be >= 0, got " + format_number(e.busy_ms, 15));
      if (e.peak_memory_bytes < 0) {
        fail(at + "/peak_memory_bytes",
             "must be >= 0, got " + format_number(e.peak_memory_bytes, 15));
      }
      peak[static_cast<std::size_t>(e.gpu)] = e.peak_memory_bytes;
    }
  }

  // The plan: orders by start (ties by position in the file), timeline sorted as the replay's.
  plan.planner = stated.planner;
  plan.schedule_policy = stated.schedule_policy;
  plan.stages = stated.stages;
  plan.bounds = stated.bounds.value_or(Bounds{});
  plan.schedule.micro_batches = M;
  plan.schedule.gpu_order.resize(static_cast<std::size_t>(N));
  std::vector<std::size_t> position(stated.compute.size(), 0);
  for (std::size_t i : order) {
    auto& list = plan.schedule.gpu_order[static_cast<std::size_t>(stated.compute[i].gpu)];
    position[i] = list.size();
    list.push_back(stated.compute[i].task);
  }
  std::vector<std::size_t> transfer_position(stated.transfers.size(), 0);
  for (std::size_t i : transfer_order) {
    const auto& t = stated.transfers[i];
    auto& list = plan.schedule.channel_order[{t.from, t.to}];
    transfer_position[i] = list.size();
    list.push_back(t.task);
  }
  Timeline& timeline = plan.timeline;
  timeline.iteration_ms = stated.iteration_ms;
  std::vector<std::size_t> by_start(stated.compute.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = stated.compute[a];
    const auto& y = stated.compute[b];
    if (x.start_ms != y.start_ms) return x.start_ms < y.start_ms;
    if (x.gpu != y.gpu) return x.gpu < y.gpu;
    return position[a] < position[b];
  });
  for (std::size_t i : by_start) {
    const auto& e = stated.compute[i];
    timeline.compute.push_back({e.gpu, e.task, e.start_ms, e.end_ms});
  }
  std::vector<std::size_t> transfers_by_start(stated.transfers.size());
  std::iota(transfers_by_start.begin(), transfers_by_start.end(), 0);
  std::sort(transfers_by_start.begin(), transfers_by_start.end(),
            [&](std::size_t a, std::size_t b) {
              const auto& x = stated.transfers[a];
              const auto& y = stated.transfers[b];
              if (x.start_ms != y.start_ms) return x.start_ms < y.start_ms;
              if (x.from != y.from) return x.from < y.from;
              if (x.to != y.to) return x.to < y.to;
              return transfer_position[a] < transfer_position[b];
            });
  for (std::size_t i : transfers_by_start) {
    const auto& e = stated.transfers[i];
    timeline.transfers.push_back({e.from, e.to, e.task, e.bytes, e.start_ms, e.end_ms});
  }
  for (int s = 0; s < S; ++s) {
    const std::size_t i = allreduce_entry[static_cast<std::size_t>(s)];
    if (i == kNone) continue;
    const auto& e = stated.allreduces[i];
    timeline.allreduces.push_back({e.stage, e.bytes, e.start_ms, e.end_ms});
  }
  timeline.gpus.resize(static_cast<std::size_t>(N));
  for (int g = 0; g < N; ++g) {
    GpuUsage& usage = timeline.gpus[static_cast<std::size_t>(g)];
    if (stage_of[static_cast<std::size_t>(g)] >= 0) {
      usage.stage = stage_of[static_cast<std::size_t>(g)];
    }
    usage.peak_memory_bytes = peak[static_cast<std::size_t>(g)];
  }
  for (const auto& e : stated.compute) {
    timeline.gpus[static_cast<std::size_t>(e.gpu)].busy_ms += e.end_ms - e.start_ms;
  }

  PlanView view;
  view.plan = std::move(plan);
  view.micro_batches = M;
  view.model_name = standalone.model;
  view.topology_name = standalone.topology;
  view.gpu_ids = std::move(standalone.gpu_ids);
  view.memory_bytes = std::move(standalone.memory_bytes);
  view.stage_figures = std::move(figures);
  return view;
}

}  // namespace pipeplan::report
