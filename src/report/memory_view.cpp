// Each stage's peak memory per GPU, broken down (docs/memory.md).
//
// Complexity: the execution figures (O(layers x degrees)), then O(S + N) for the stages and
// their GPUs.

#include "pipeplan/report/memory_view.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "pipeplan/io/format.hpp"
#include "pipeplan/report/summary.hpp"
#include "pipeplan/simulate/execution.hpp"

namespace pipeplan::report {

namespace {

// The stages of the device that `stage` belongs to: those listed for its first GPU.
const std::vector<int>& device_stages(const Plan& plan, const Stage& stage) {
  return plan.timeline.gpus[static_cast<std::size_t>(stage.gpus.front())].stages;
}

StageMemory stage_memory(const Plan& plan, const topology::Topology& topology,
                         const std::vector<simulate::StageExecution>& exec, int s) {
  const Stage& stage = plan.stages[static_cast<std::size_t>(s)];
  StageMemory out;
  out.stage = s;
  out.gpu = stage.gpus.front();
  for (const int g : stage.gpus) {
    const double peak = plan.timeline.gpus[static_cast<std::size_t>(g)].peak_memory_bytes;
    if (peak > plan.timeline.gpus[static_cast<std::size_t>(out.gpu)].peak_memory_bytes) out.gpu = g;
  }
  out.peak = plan.timeline.gpus[static_cast<std::size_t>(out.gpu)].peak_memory_bytes;
  out.capacity = topology.gpu(out.gpu).memory_bytes;
  double static_bytes = 0;
  const std::vector<int>& stages = device_stages(plan, stage);
  for (const int d : stages) {
    const simulate::StageExecution& e = exec[static_cast<std::size_t>(d)];
    static_bytes += e.static_bytes;
    out.weights += e.weight_bytes;
    out.gradients += e.gradient_bytes;
  }
  // The optimizer state is the rest of the static bytes, so that the parts add up to the
  // execution figure exactly (sharded or not).
  out.optimizer = static_bytes - out.weights - out.gradients;
  // Full sharding's working copies: once per device, like the reserve.
  const simulate::StageExecution& own = exec[static_cast<std::size_t>(s)];
  out.weights += own.working_weight_bytes;
  out.gradients += own.working_gradient_bytes;
  out.reserve = own.reserve_bytes;
  out.activations = std::max(0.0, out.peak - static_bytes - own.device_bytes());
  out.stash_bytes = own.stash_bytes;
  out.transient_bytes = own.transient_bytes;
  return out;
}

// How many stashes `bytes` is, when a whole number of them (within 1e-9), else 0.
double whole_stashes(double bytes, double stash_bytes) {
  const double count = bytes / stash_bytes;
  const double whole = std::round(count);
  return whole >= 1 && std::fabs(count - whole) <= 1e-9 * whole ? whole : 0;
}

// ` (16 x 2.389 GiB)` when the activations are a whole number of stashes, ` (1 x 39.14 GiB +
// 15.66 GiB in a backward)` when they are that and the transient (a peak during a backward:
// recomputation's layer stash, a loss's working set), else empty. `stash_bytes` is 0 when the
// device's stages hold stashes of different sizes: then nothing is said.
std::string in_flight(double activations, double stash_bytes, double transient_bytes) {
  if (stash_bytes <= 0 || activations <= 0) return {};
  const std::string stash = " x " + io::format_bytes(stash_bytes);
  if (const double whole = whole_stashes(activations, stash_bytes); whole > 0) {
    return " (" + io::format_number(whole, 15) + stash + ")";
  }
  if (transient_bytes <= 0) return {};
  const double whole = whole_stashes(activations - transient_bytes, stash_bytes);
  if (whole == 0) return {};
  return " (" + io::format_number(whole, 15) + stash + " + " + io::format_bytes(transient_bytes) +
         " in a backward)";
}

// The line of `m` after its stages' names: the parts of its device's fullest GPU, the device's
// stashes counted when all its stages' stashes are alike (`device`: those stages, ascending).
std::string memory_line(const StageMemory& m, const std::vector<StageMemory>& all,
                        const std::vector<int>& device, const topology::Topology& topology) {
  using io::format_bytes;
  double stash = m.stash_bytes, transient = 0;
  for (const int s : device) {
    const StageMemory& other = all[static_cast<std::size_t>(s)];
    if (std::fabs(other.stash_bytes - stash) > 1e-9 * stash) stash = 0;
    transient = std::max(transient, other.transient_bytes);
  }
  return " on " + topology.gpu(m.gpu).id + ": weights " + format_bytes(m.weights) +
         " + gradients " + format_bytes(m.gradients) + " + optimizer " + format_bytes(m.optimizer) +
         " + activations " + format_bytes(m.activations) +
         in_flight(m.activations, stash, transient) + " + reserve " + format_bytes(m.reserve) +
         " = " + format_bytes(m.peak) +
         (m.capacity ? " of " + format_bytes(*m.capacity) : std::string(" (unlimited)"));
}

}  // namespace

std::vector<StageMemory> memory_breakdown(const Plan& plan, const model::Model& model,
                                          const topology::Topology& topology) {
  const std::vector<simulate::StageExecution> exec =
      simulate::execution(model, topology, plan.stages, plan.optimizer);
  std::vector<StageMemory> out;
  out.reserve(plan.stages.size());
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    out.push_back(stage_memory(plan, topology, exec, static_cast<int>(s)));
  }
  return out;
}

std::string memory_summary(const Plan& plan, const model::Model& model,
                           const topology::Topology& topology) {
  const std::vector<StageMemory> all = memory_breakdown(plan, model, topology);
  // Stages that share a device and read alike share a line, named together. O(S log S).
  std::vector<std::pair<std::vector<int>, std::string>> lines;
  std::map<std::string, std::size_t> line_of;
  for (const StageMemory& m : all) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(m.stage)];
    std::string text = memory_line(m, all, device_stages(plan, stage), topology);
    const auto [at, added] = line_of.try_emplace(text, lines.size());
    if (added) lines.emplace_back(std::vector<int>{}, std::move(text));
    lines[at->second].first.push_back(m.stage);
  }
  std::string out = "  peak memory per GPU (the stage's fullest GPU):";
  for (const auto& [stages, text] : lines) out += "\n  " + stage_names(stages) + text;
  return out;
}

}  // namespace pipeplan::report
