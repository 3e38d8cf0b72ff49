// Searches over plan shapes measured by replay: enumeration for small instances, greedy
// memory packing as a seed that always fits when any one-GPU-per-stage packing does, and a
// budgeted first-improvement local search. See search.hpp; complexity per function there and
// in docs/algorithms.md.

#include "pipeplan/partition/search.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "pipeplan/partition/building_blocks.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

constexpr double kSaturated = 1e18;

// A shape as numbers: the first layer of each stage and the length of each run.
struct Layout {
  std::vector<int> firsts;
  std::vector<int> runs;
};

Layout layout_of(const std::vector<Stage>& stages) {
  Layout layout;
  for (const Stage& stage : stages) {
    layout.firsts.push_back(stage.first_layer);
    layout.runs.push_back(static_cast<int>(stage.gpus.size()));
  }
  return layout;
}

int used_gpus(const Layout& layout) {
  int used = 0;
  for (int r : layout.runs) used += r;
  return used;
}

std::vector<Stage> stages_of(const Layout& layout, const std::vector<int>& order, int layers) {
  std::vector<Stage> stages;
  int position = 0;
  for (std::size_t s = 0; s < layout.firsts.size(); ++s) {
    Stage stage;
    stage.first_layer = layout.firsts[s];
    stage.last_layer = (s + 1 < layout.firsts.size() ? layout.firsts[s + 1] : layers) - 1;
    for (int g = position; g < position + layout.runs[s]; ++g) {
      stage.gpus.push_back(order[static_cast<std::size_t>(g)]);
    }
    position += layout.runs[s];
    stages.push_back(std::move(stage));
  }
  return stages;
}

bool valid(const Layout& layout, const std::vector<int>& order, const ShapeLimits& limits) {
  const int S = static_cast<int>(layout.firsts.size());
  if (S < 1 || S > limits.max_stages || layout.firsts.front() != 0) return false;
  for (int s = 0; s < S; ++s) {
    const int end = s + 1 < S ? layout.firsts[static_cast<std::size_t>(s) + 1] : limits.layers;
    if (layout.firsts[static_cast<std::size_t>(s)] >= end) return false;
    const int r = layout.runs[static_cast<std::size_t>(s)];
    if (r < 1 || r > limits.max_replicas) return false;
  }
  return used_gpus(layout) <= static_cast<int>(order.size());
}

}  // namespace

double count_shapes(const ShapeLimits& limits, int gpus, double stop_above) {
  const int L = limits.layers;
  const int S_max = std::min({limits.max_stages, L, gpus});
  // runs[n]: sequences of s run lengths in 1..max_replicas summing to n (n <= gpus).
  std::vector<double> runs(static_cast<std::size_t>(gpus) + 1, 0);
  runs[0] = 1;
  double total = 0;
  double layer_ways = 1;  // C(L-1, s-1)
  for (int s = 1; s <= S_max; ++s) {
    std::vector<double> next(runs.size(), 0);
    for (int n = 0; n <= gpus; ++n) {
      if (runs[static_cast<std::size_t>(n)] == 0) continue;
      for (int r = 1; r <= limits.max_replicas && n + r <= gpus; ++r) {
        next[static_cast<std::size_t>(n + r)] = std::min(
            kSaturated, next[static_cast<std::size_t>(n + r)] + runs[static_cast<std::size_t>(n)]);
      }
    }
    runs = std::move(next);
    if (s > 1) layer_ways = std::min(kSaturated, layer_ways * (L - s + 1) / (s - 1));
    double placements = 0;
    for (double ways : runs) placements = std::min(kSaturated, placements + ways);
    total = std::min(kSaturated, total + layer_ways * placements);
    if (total >= kSaturated || total > stop_above) break;
  }
  return total;
}

void for_each_shape(const ShapeLimits& limits, const std::vector<int>& order,
                    const std::function<void(const std::vector<Stage>&)>& visit) {
  const int L = limits.layers;
  const int N = static_cast<int>(order.size());
  std::vector<Stage> current;
  std::function<void(int, int)> extend = [&](int layer, int position) {
    if (layer == L) {
      visit(current);
      return;
    }
    if (static_cast<int>(current.size()) == limits.max_stages) return;
    for (int last = layer; last < L; ++last) {
      for (int r = 1; r <= limits.max_replicas && position + r <= N; ++r) {
        Stage stage{layer, last, {}};
        for (int p = position; p < position + r; ++p)
          stage.gpus.push_back(order[static_cast<std::size_t>(p)]);
        current.push_back(std::move(stage));
        extend(last + 1, position + r);
        current.pop_back();
      }
    }
  };
  extend(0, 0);
}

std::optional<std::vector<Stage>> greedy_packing(const model::Model& model,
                                                 const topology::Topology& topology,
                                                 const std::vector<int>& order, long stashes,
                                                 int max_stages, int* gpus_needed) {
  const LayerSums sums(model);
  const int L = static_cast<int>(model.layers.size());
  const int N = static_cast<int>(order.size());
  auto holds = [&](int g, int i, int j) {  // layers [i, j) on GPU order[g mod N]
    const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
    const auto& gpu = topology.gpu(order[static_cast<std::size_t>(g % N)]);
    return simulate::max_in_flight(
               model.parameter_memory_factor * (sums.parameters[b] - sums.parameters[a]),
               sums.stash[b] - sums.stash[a], gpu.memory_bytes, stashes) >= stashes;
  };
  std::vector<Stage> stages;
  int layer = 0, g = 0;
  // Past the order's end the count goes on over its GPUs again (exact for equal memories),
  // only to say how many GPUs the packing would need.
  while (layer < L) {
    if (!holds(g, layer, layer + 1)) {
      if (gpus_needed) *gpus_needed = -1;
      return std::nullopt;
    }
    int end = layer + 1;
    while (end < L && holds(g, layer, end + 1)) ++end;
    if (g < N) stages.push_back(Stage{layer, end - 1, {order[static_cast<std::size_t>(g)]}});
    layer = end;
    ++g;
    if (g > 4 * N + L) break;  // cannot happen (each GPU takes a layer); a guard
  }
  if (gpus_needed) *gpus_needed = g;
  if (g > N || g > max_stages) return std::nullopt;
  return stages;
}

std::vector<std::vector<Stage>> neighbours(const model::Model& model,
                                           const std::vector<Stage>& stages,
                                           const std::vector<int>& order,
                                           const ShapeLimits& limits) {
  const Layout base = layout_of(stages);
  const int S = static_cast<int>(base.firsts.size());
  const int L = limits.layers;
  const int N = static_cast<int>(order.size());
  const int used = used_gpus(base);
  std::vector<std::vector<Stage>> out;
  auto offer = [&](const Layout& layout) {
    if (valid(layout, order, limits)) out.push_back(stages_of(layout, order, L));
  };
  auto end_of = [&](int s) { return s + 1 < S ? base.firsts[static_cast<std::size_t>(s) + 1] : L; };
  // Stage boundaries, by 1, 2, 4, ... layers either way.
  for (int s = 1; s < S; ++s) {
    const int low = base.firsts[static_cast<std::size_t>(s) - 1], high = end_of(s);
    for (int step = 1; step < high - low; step *= 2) {
      for (int sign : {-1, 1}) {
        Layout layout = base;
        layout.firsts[static_cast<std::size_t>(s)] += sign * step;
        offer(layout);
      }
    }
  }
  // A GPU from one run to its neighbour.
  for (int s = 0; s + 1 < S; ++s) {
    for (int sign : {1, -1}) {
      Layout layout = base;
      layout.runs[static_cast<std::size_t>(s)] += sign;
      layout.runs[static_cast<std::size_t>(s) + 1] -= sign;
      offer(layout);
    }
  }
  // One replica more (from the unused tail) or fewer.
  for (int s = 0; s < S; ++s) {
    for (int sign : {1, -1}) {
      if (sign > 0 && used >= N) continue;
      Layout layout = base;
      layout.runs[static_cast<std::size_t>(s)] += sign;
      offer(layout);
    }
  }
  // Merge neighbours.
  for (int s = 0; s + 1 < S; ++s) {
    Layout layout = base;
    const auto at = static_cast<std::size_t>(s);
    layout.runs[at] = std::min(limits.max_replicas, layout.runs[at] + layout.runs[at + 1]);
    layout.firsts.erase(layout.firsts.begin() + s + 1);
    layout.runs.erase(layout.runs.begin() + s + 1);
    offer(layout);
  }
  // Split a stage at its middle of compute.
  for (int s = 0; s < S && S < limits.max_stages; ++s) {
    const int first = base.firsts[static_cast<std::size_t>(s)], end = end_of(s);
    if (end - first < 2) continue;
    const int r = base.runs[static_cast<std::size_t>(s)];
    if (r < 2 && used >= N) continue;
    double total = 0;
    for (int l = first; l < end; ++l) {
      total += model.layers[static_cast<std::size_t>(l)].forward_ms +
               model.layers[static_cast<std::size_t>(l)].backward_ms;
    }
    int cut = first + 1;
    double seen = model.layers[static_cast<std::size_t>(first)].forward_ms +
                  model.layers[static_cast<std::size_t>(first)].backward_ms;
    while (cut + 1 < end && seen < total / 2) {
      seen += model.layers[static_cast<std::size_t>(cut)].forward_ms +
              model.layers[static_cast<std::size_t>(cut)].backward_ms;
      ++cut;
    }
    Layout layout = base;
    const auto at = static_cast<std::size_t>(s);
    layout.firsts.insert(layout.firsts.begin() + s + 1, cut);
    const int left = r >= 2 ? r / 2 : 1, right = r >= 2 ? r - r / 2 : 1;
    layout.runs[at] = left;
    layout.runs.insert(layout.runs.begin() + s + 1, right);
    offer(layout);
  }
  return out;
}

std::vector<Stage> random_shape(std::mt19937& rng, const std::vector<int>& order,
                                const ShapeLimits& limits) {
  const int N = static_cast<int>(order.size());
  const int S_max = std::min({limits.max_stages, limits.layers, N});
  const int S = 1 + static_cast<int>(rng() % static_cast<unsigned>(S_max));
  // Cuts: S - 1 distinct layer boundaries out of 1..L-1.
  std::vector<int> boundaries(static_cast<std::size_t>(limits.layers) - 1);
  std::iota(boundaries.begin(), boundaries.end(), 1);
  std::shuffle(boundaries.begin(), boundaries.end(), rng);
  Layout layout;
  layout.firsts.assign(boundaries.begin(), boundaries.begin() + (S - 1));
  layout.firsts.push_back(0);
  std::sort(layout.firsts.begin(), layout.firsts.end());
  // Runs: one GPU each, then the rest of a random number of GPUs handed out one by one.
  layout.runs.assign(static_cast<std::size_t>(S), 1);
  const int extra = static_cast<int>(rng() % static_cast<unsigned>(N - S + 1));
  for (int x = 0; x < extra; ++x) {
    auto& run = layout.runs[rng() % static_cast<unsigned>(S)];
    if (run < limits.max_replicas) ++run;
  }
  return stages_of(layout, order, limits.layers);
}

std::optional<Found> local_search(const model::Model& model,
                                  const std::vector<std::vector<Stage>>& starts, std::size_t always,
                                  const std::vector<int>& order, const ShapeLimits& limits,
                                  const Evaluate& evaluate, double max_work) {
  std::map<std::vector<int>, std::optional<double>> seen;
  double work = 0;
  auto value = [&](const std::vector<Stage>& stages) -> std::optional<double> {
    const Layout layout = layout_of(stages);
    std::vector<int> key = layout.firsts;
    key.insert(key.end(), layout.runs.begin(), layout.runs.end());
    if (auto it = seen.find(key); it != seen.end()) return it->second;
    const Evaluation evaluation = evaluate(stages);
    work += evaluation.work;
    seen.emplace(std::move(key), evaluation.iteration_ms);
    return evaluation.iteration_ms;
  };
  std::optional<Found> best;
  auto consider = [&](const std::vector<Stage>& stages, double ms) {
    if (!best || ms < best->iteration_ms) best = Found{stages, ms};
  };
  // Evaluate every start, then search from the best first (stable: ties keep start order).
  std::vector<std::pair<double, std::size_t>> ranked;
  for (std::size_t x = 0; x < starts.size(); ++x) {
    if (x >= always && work > max_work) break;
    if (auto ms = value(starts[x])) {
      ranked.emplace_back(*ms, x);
      consider(starts[x], *ms);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [start_ms, x] : ranked) {
    std::vector<Stage> current = starts[x];
    double current_ms = start_ms;
    bool improved = true;
    while (improved && work <= max_work) {
      improved = false;
      for (auto& candidate : neighbours(model, current, order, limits)) {
        if (work > max_work) break;
        const auto ms = value(candidate);
        if (ms && *ms < current_ms * (1 - 1e-9)) {
          current = std::move(candidate);
          current_ms = *ms;
          consider(current, current_ms);
          improved = true;
          break;
        }
      }
    }
    if (work > max_work) break;
  }
  return best;
}

}  // namespace pipeplan::partition
