// The view every export draws from: built from a checked plan and its inputs, or read from a
// plan file alone with every check that needs neither model nor topology. O(T log T) for T
// schedule entries (the sorts by start time).

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>

#include "pipeplan/error.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/execution.hpp"
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
    view.gpu_nodes.push_back(gpu.node);
  }
  if (model.profile_batch_size) view.batch_size = *model.profile_batch_size;
  view.transformer = model.transformer;
  MemoryFigures memory;
  memory.static_bytes.assign(static_cast<std::size_t>(topology.size()), 0);
  const std::vector<simulate::StageExecution> exec =
      simulate::execution(model, topology, plan.stages, plan.optimizer);
  std::vector<std::vector<GroupFigures>> groups;
  for (int s = 0; s < static_cast<int>(plan.stages.size()); ++s) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(s)];
    const simulate::StageExecution& e = exec[static_cast<std::size_t>(s)];
    view.stage_figures.push_back(
        {e.forward_ms, e.backward_ms, e.parameter_bytes, e.boundary_bytes, e.allreduce_ms});
    memory.stash_bytes.push_back(e.stash_bytes);
    memory.transient_bytes.push_back(e.transient_bytes);
    memory.weight_stash_bytes.push_back(
        model::stage_cost(model, stage.first_layer, stage.last_layer, stage.tensor_parallel)
            .weight_stash_bytes);
    // A GPU holds the static bytes of every stage it serves (spec 9.3).
    for (int g : stage.gpus) memory.static_bytes[static_cast<std::size_t>(g)] += e.static_bytes;
    std::vector<GroupFigures> figures;
    figures.reserve(e.groups.size());
    for (const simulate::GroupExecution& group : e.groups) {
      figures.push_back(
          {group.forward_allreduce_ms, group.backward_allreduce_ms, group.recompute_ms});
    }
    groups.push_back(std::move(figures));
  }
  // The framework reserve and full sharding's working copies, once per used GPU (0 for
  // profiles: the figures stay bit for bit).
  std::vector<bool> reserved(static_cast<std::size_t>(topology.size()), false);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    for (int g : plan.stages[s].gpus) {
      if (reserved[static_cast<std::size_t>(g)]) continue;
      reserved[static_cast<std::size_t>(g)] = true;
      memory.static_bytes[static_cast<std::size_t>(g)] += exec[s].device_bytes();
    }
  }
  view.memory = std::move(memory);
  view.group_figures = std::move(groups);
  std::vector<std::string> names;
  names.reserve(model.layers.size());
  for (const model::Layer& layer : model.layers) names.push_back(layer.name);
  view.layer_names = std::move(names);
  return view;
}

std::vector<int> rank_order(const PlanView& view) {
  std::vector<int> out;
  std::vector<bool> placed(view.gpu_ids.size(), false);
  for (const Stage& stage : view.plan.stages) {
    for (int g : stage.gpus) {
      // A GPU that serves several stages (spec 9.2) has the rank of its first.
      if (static_cast<std::size_t>(g) < placed.size() && placed[static_cast<std::size_t>(g)]) {
        continue;
      }
      if (static_cast<std::size_t>(g) < placed.size()) placed[static_cast<std::size_t>(g)] = true;
      out.push_back(g);
    }
  }
  return out;
}

std::vector<std::vector<int>> stages_per_gpu(const PlanView& view) {
  std::vector<std::vector<int>> out(view.gpu_ids.size());
  for (std::size_t s = 0; s < view.plan.stages.size(); ++s) {
    for (int g : view.plan.stages[s].gpus) {
      out[static_cast<std::size_t>(g)].push_back(static_cast<int>(s));
    }
  }
  return out;
}

bool shares_devices(const Plan& plan) { return virtual_stages(plan.stages) > 1; }

bool is_v2_plan(const Plan& plan) {
  if (plan.optimizer != Optimizer::kReplicated || !plan.timeline.updates.empty()) return true;
  return std::any_of(plan.stages.begin(), plan.stages.end(),
                     [](const Stage& stage) { return stage.uses_v2_fields(); });
}

namespace {

// The timeline a structurally checked plan states: entries sorted as the replay sorts them
// (by start, then GPU or channel, then position in the resource's order). O(T log T).
Timeline stated_timeline(const simulate::StatedPlan& stated, const simulate::StatedIndex& index,
                         std::size_t gpu_count) {
  std::vector<std::size_t> position(stated.compute.size(), 0);
  std::vector<std::size_t> placed(gpu_count, 0);
  for (const std::size_t i : index.compute_order) {
    position[i] = placed[static_cast<std::size_t>(stated.compute[i].gpu)]++;
  }
  std::vector<std::size_t> transfer_position(stated.transfers.size(), 0);
  for (std::size_t k = 0; k < index.transfer_order.size(); ++k) {
    const std::size_t i = index.transfer_order[k];
    const bool same_channel =
        k > 0 && stated.transfers[index.transfer_order[k - 1]].from == stated.transfers[i].from &&
        stated.transfers[index.transfer_order[k - 1]].to == stated.transfers[i].to;
    transfer_position[i] = same_channel ? transfer_position[index.transfer_order[k - 1]] + 1 : 0;
  }
  Timeline timeline;
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
  for (const std::size_t i : by_start) {
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
  for (const std::size_t i : transfers_by_start) {
    const auto& e = stated.transfers[i];
    timeline.transfers.push_back({e.from, e.to, e.task, e.bytes, e.start_ms, e.end_ms});
  }
  for (const std::size_t i : index.allreduce_entry) {
    if (i == simulate::kNoEntry) continue;
    const auto& e = stated.allreduces[i];
    timeline.allreduces.push_back({e.stage, e.bytes, e.start_ms, e.end_ms});
  }
  timeline.gpus.resize(gpu_count);
  // Every stage a GPU serves, ascending (spec 9.2: several when stages share it).
  for (std::size_t s = 0; s < stated.stages.size(); ++s) {
    for (int g : stated.stages[s].gpus) {
      timeline.gpus[static_cast<std::size_t>(g)].stages.push_back(static_cast<int>(s));
    }
  }
  if (stated.gpus) {
    for (const simulate::StatedGpu& e : *stated.gpus) {
      timeline.gpus[static_cast<std::size_t>(e.gpu)].peak_memory_bytes = e.peak_memory_bytes;
    }
  }
  for (const auto& e : stated.compute) {
    timeline.gpus[static_cast<std::size_t>(e.gpu)].busy_ms += e.end_ms - e.start_ms;
  }
  // Every GPU of a group runs its leader's tasks (spec 8.2).
  for (std::size_t g = 0; g < gpu_count; ++g) {
    if (index.stage_of[g] < 0) continue;
    const Stage& stage = stated.stages[static_cast<std::size_t>(index.stage_of[g])];
    const auto leader = static_cast<std::size_t>(stage.leader(index.group_of[g]));
    if (leader != g) timeline.gpus[g].busy_ms = timeline.gpus[leader].busy_ms;
  }
  // Optimizer steps as the replay orders them: by stage, then group.
  timeline.updates = stated.updates;
  std::sort(timeline.updates.begin(), timeline.updates.end(),
            [&](const TimedUpdate& a, const TimedUpdate& b) {
              if (a.stage != b.stage) return a.stage < b.stage;
              return index.group_of[static_cast<std::size_t>(a.gpu)] <
                     index.group_of[static_cast<std::size_t>(b.gpu)];
            });
  return timeline;
}

}  // namespace

PlanView read_plan_view(const io::Source& source) {
  StandalonePlan standalone = read_standalone_plan(source);
  const simulate::StatedPlan& stated = standalone.stated;
  const simulate::StatedIndex index = simulate::check_structure(stated, standalone.gpu_ids);
  const auto N = standalone.gpu_ids.size();

  // Without the model, the stage figures must be stated.
  std::vector<StageFigures> figures;
  for (std::size_t s = 0; s < stated.stages.size(); ++s) {
    const auto& f = stated.stage_figures[s];
    if (!f) {
      throw InputError(stated.file, "/stages/" + std::to_string(s),
                       "missing required key \"forward_ms\" (needed without --model)");
    }
    figures.push_back(
        {f->forward_ms, f->backward_ms, f->parameter_bytes, f->boundary_bytes, f->allreduce_ms});
  }

  Plan plan = simulate::stated_plan(stated, index, static_cast<int>(N));
  plan.bounds = stated.bounds.value_or(Bounds{});
  plan.timeline = stated_timeline(stated, index, N);

  PlanView view;
  view.plan = std::move(plan);
  view.micro_batches = stated.micro_batches;
  view.model_name = standalone.model;
  view.topology_name = standalone.topology;
  view.plan_file = source.name;
  view.gpu_ids = std::move(standalone.gpu_ids);
  view.memory_bytes = std::move(standalone.memory_bytes);
  view.stage_figures = std::move(figures);
  return view;
}

}  // namespace pipeplan::report
