// Searches over plan shapes measured by replay: enumeration for small instances, greedy
// memory packing as a seed that always fits when any one-GPU-per-stage packing does, the fill
// splits (layers re-split by the list schedule's fill rule), and a budgeted first-improvement
// local search. See search.hpp; complexity per function there and in docs/algorithms.md.

#include "pipeplan/partition/search.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "pipeplan/partition/building_blocks.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::partition {
namespace {

constexpr double kSaturated = 1e18;

// The tuning constants of the local search and the fill splits (the table, with where each
// value came from: search_constants.hpp).
using tuning::kAnyGain;
using tuning::kHalvedStages;
using tuning::kResplitBases;

// A shape as numbers: the first layer of each stage, the length of each run (GPUs), and each
// stage's tensor-parallel degree and recomputation (spec 8.2).
struct Layout {
  std::vector<int> firsts;
  std::vector<int> runs;
  std::vector<int> degrees;
  std::vector<int> recompute;  // 0 or 1
};

Layout layout_of(const std::vector<Stage>& stages) {
  Layout layout;
  for (const Stage& stage : stages) {
    layout.firsts.push_back(stage.first_layer);
    layout.runs.push_back(static_cast<int>(stage.gpus.size()));
    layout.degrees.push_back(stage.tensor_parallel);
    layout.recompute.push_back(stage.recompute ? 1 : 0);
  }
  return layout;
}

// The recomputation choices a stage has under `limits`.
std::vector<bool> recompute_options(const ShapeLimits& limits) {
  if (limits.must_recompute) return {true};
  if (limits.may_recompute) return {false, true};
  return {false};
}

// Whether layers first..last may run at degree t under `limits`.
bool degree_allowed(const ShapeLimits& limits, int first, int last, int t) {
  if (!std::binary_search(limits.degrees.begin(), limits.degrees.end(), t)) return false;
  if (t == 1) return true;
  return limits.model != nullptr && model::stage_allows_degree(*limits.model, first, last, t);
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
    stage.tensor_parallel = layout.degrees[s];
    stage.recompute = layout.recompute[s] != 0;
    position += layout.runs[s];
    stages.push_back(std::move(stage));
  }
  return stages;
}

bool valid(const Layout& layout, const std::vector<int>& order, const ShapeLimits& limits) {
  const int S = static_cast<int>(layout.firsts.size());
  if (S < 1 || S > limits.max_stages || layout.firsts.front() != 0) return false;
  for (int s = 0; s < S; ++s) {  // layer ranges first: the degrees look at the layers
    const auto at = static_cast<std::size_t>(s);
    const int end = s + 1 < S ? layout.firsts[at + 1] : limits.layers;
    if (layout.firsts[at] >= end || end > limits.layers) return false;
  }
  for (int s = 0; s < S; ++s) {
    const auto at = static_cast<std::size_t>(s);
    const int end = s + 1 < S ? layout.firsts[at + 1] : limits.layers;
    const int n = layout.runs[at];
    const int t = layout.degrees[at];
    if (t < 1 || n < 1 || n % t != 0 || n / t > limits.max_replicas) return false;
    if (limits.equal_shares_of > 0 && !shares_equally(limits.equal_shares_of, n / t)) return false;
    if (!degree_allowed(limits, layout.firsts[at], end - 1, t)) return false;
    const bool recompute = layout.recompute[at] != 0;
    if (recompute ? !(limits.may_recompute || limits.must_recompute) : limits.must_recompute) {
      return false;
    }
  }
  if (limits.uniform) {
    for (int s = 1; s < S; ++s) {
      const auto at = static_cast<std::size_t>(s);
      if (layout.runs[at] != layout.runs[0] || layout.degrees[at] != layout.degrees[0])
        return false;
    }
  }
  return used_gpus(layout) <= static_cast<int>(order.size());
}

}  // namespace

double count_shapes(const ShapeLimits& limits, int gpus, double stop_above) {
  const int L = limits.layers;
  const int most_stages = std::min({limits.max_stages, L, gpus});
  // Every stage with every degree and recomputation choice: exact for the v1 shapes, an upper
  // bound otherwise.
  const double choices = static_cast<double>(limits.degrees.size()) *
                         static_cast<double>(recompute_options(limits).size());
  const int longest = limits.max_replicas * limits.degrees.back();
  // runs[n]: sequences of s run lengths in 1..longest summing to n (n <= gpus).
  std::vector<double> runs(static_cast<std::size_t>(gpus) + 1, 0);
  runs[0] = 1;
  double total = 0;
  double layer_ways = 1;  // C(L-1, s-1)
  for (int s = 1; s <= most_stages; ++s) {
    std::vector<double> next(runs.size(), 0);
    for (int n = 0; n <= gpus; ++n) {
      if (runs[static_cast<std::size_t>(n)] == 0) continue;
      for (int r = 1; r <= longest && n + r <= gpus; ++r) {
        const auto to = static_cast<std::size_t>(n) + static_cast<std::size_t>(r);
        next[to] = std::min(kSaturated, next[to] + choices * runs[static_cast<std::size_t>(n)]);
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
    const std::vector<bool> options = recompute_options(limits);
    // A uniform shape's later stages take the first one's degree and run length.
    const bool follow = limits.uniform && !current.empty();
    for (int last = layer; last < L; ++last) {
      for (const int t : limits.degrees) {
        if (!degree_allowed(limits, layer, last, t)) continue;
        if (follow && t != current.front().tensor_parallel) continue;
        for (int r = 1; r <= limits.max_replicas && position + r * t <= N; ++r) {
          if (follow && r != current.front().replicas()) continue;
          if (limits.equal_shares_of > 0 && !shares_equally(limits.equal_shares_of, r)) continue;
          for (const bool recompute : options) {
            Stage stage{layer, last, {}};
            for (int p = position; p < position + r * t; ++p)
              stage.gpus.push_back(order[static_cast<std::size_t>(p)]);
            stage.tensor_parallel = t;
            stage.recompute = recompute;
            current.push_back(std::move(stage));
            extend(last + 1, position + r * t);
            current.pop_back();
          }
        }
      }
    }
  };
  extend(0, 0);
}

std::optional<std::vector<Stage>> greedy_packing(const model::Model& model,
                                                 const topology::Topology& topology,
                                                 const std::vector<int>& order, long stashes,
                                                 int max_stages, int* gpus_needed,
                                                 const Packing& packing) {
  const LayerSums sums(model);
  const int L = static_cast<int>(model.layers.size());
  const int N = static_cast<int>(order.size());
  const int t = packing.tensor_parallel;
  const int groups = N / t;
  // The smallest memory of group g (of the order's groups, counted round again past its end).
  auto capacity = [&](int g) {
    std::optional<double> smallest;
    for (int k = 0; k < t; ++k) {
      const auto& memory =
          topology
              .gpu(order[static_cast<std::size_t>(g % groups) * static_cast<std::size_t>(t) +
                         static_cast<std::size_t>(k)])
              .memory_bytes;
      if (memory) smallest = std::min(smallest.value_or(*memory), *memory);
    }
    return smallest;
  };
  auto holds = [&](int g, int i, int j) {  // layers [i, j) on group g
    if (t == 1 && !packing.recompute) {
      const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
      return simulate::max_in_flight(
                 model.parameter_memory_factor * (sums.parameters[b] - sums.parameters[a]) +
                     sums.largest_working(i, j) + model.reserve_bytes,
                 sums.stash[b] - sums.stash[a], capacity(g), stashes) >= stashes;
    }
    if (!model::stage_allows_degree(model, i, j - 1, t)) return false;
    const model::StageCost cost = model::stage_cost(model, i, j - 1, t);
    const double fixed = model.parameter_memory_factor * cost.parameter_bytes +
                         cost.transient_bytes(packing.recompute) + model.reserve_bytes;
    const double stash = packing.recompute ? cost.recompute_input_bytes : cost.stash_bytes;
    return simulate::max_in_flight(fixed, stash, capacity(g), stashes) >= stashes;
  };
  if (groups < 1) {
    if (gpus_needed) *gpus_needed = N + 1;
    return std::nullopt;
  }
  std::vector<Stage> stages;
  int layer = 0, g = 0;
  // Past the order's end the count goes on over its groups again (exact for equal memories),
  // only to say how many GPUs the packing would need.
  while (layer < L) {
    if (!holds(g, layer, layer + 1)) {
      if (gpus_needed) *gpus_needed = -1;
      return std::nullopt;
    }
    int end = layer + 1;
    while (end < L && holds(g, layer, end + 1)) ++end;
    if (g < groups) {
      Stage stage{layer, end - 1, {}};
      for (int k = 0; k < t; ++k) {
        stage.gpus.push_back(order[static_cast<std::size_t>(g) * static_cast<std::size_t>(t) +
                                   static_cast<std::size_t>(k)]);
      }
      stage.tensor_parallel = t;
      stage.recompute = packing.recompute;
      stages.push_back(std::move(stage));
    }
    layer = end;
    ++g;
    if (g > 4 * groups + L) break;  // cannot happen (each group takes a layer); a guard
  }
  if (gpus_needed) *gpus_needed = g * t;
  if (g > groups || g > max_stages) return std::nullopt;
  return stages;
}

namespace {

// The stage split at its middle of compute: the first layer of its second half.
int middle_of_compute(const model::Model& model, int first, int end) {
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
  return cut;
}

// The moves of spec 8: another degree for a stage (keeping its GPUs, then keeping its
// replicas), and the other recomputation choice.
void degree_and_recompute_moves(const Layout& base, const ShapeLimits& limits, int N,
                                const std::function<void(const Layout&)>& offer) {
  const int S = static_cast<int>(base.firsts.size());
  const int used = used_gpus(base);
  if (limits.degrees.size() > 1) {
    for (int s = 0; s < S; ++s) {
      const auto at = static_cast<std::size_t>(s);
      const int n = base.runs[at], t = base.degrees[at], r = n / t;
      for (const int other : limits.degrees) {
        if (other == t) continue;
        Layout layout = base;
        layout.degrees[at] = other;
        if (n % other == 0) offer(layout);
        if (r * other != n && used - n + r * other <= N) {
          layout.runs[at] = r * other;
          offer(layout);
        }
      }
    }
  }
  if (limits.may_recompute && !limits.must_recompute) {
    for (int s = 0; s < S; ++s) {
      Layout layout = base;
      layout.recompute[static_cast<std::size_t>(s)] ^= 1;
      offer(layout);
    }
  }
}

// The moves that keep a shape uniform (every run of n GPUs at degree t): every stage one
// group more or fewer, every stage at another degree (keeping its GPUs, or its groups), two
// neighbours merged onto one run, a stage split in two with a run from the unused tail.
void uniform_moves(const model::Model& model, const Layout& base, const ShapeLimits& limits, int N,
                   const std::function<void(const Layout&)>& offer) {
  const int S = static_cast<int>(base.firsts.size());
  const int n = base.runs.front(), t = base.degrees.front(), r = n / t;
  const int used = used_gpus(base);
  auto all = [&](int runs, int degree) {
    Layout layout = base;
    layout.runs.assign(static_cast<std::size_t>(S), runs);
    layout.degrees.assign(static_cast<std::size_t>(S), degree);
    offer(layout);
  };
  for (int sign : {1, -1}) {
    if (sign < 0 || used + S * t <= N) all(n + sign * t, t);
  }
  for (const int other : limits.degrees) {
    if (other == t) continue;
    if (n % other == 0) all(n, other);
    if (S * r * other <= N) all(r * other, other);
  }
  for (int s = 0; s + 1 < S; ++s) {
    Layout layout = base;
    layout.firsts.erase(layout.firsts.begin() + s + 1);
    layout.runs.erase(layout.runs.begin() + s + 1);
    layout.degrees.erase(layout.degrees.begin() + s + 1);
    layout.recompute.erase(layout.recompute.begin() + s + 1);
    offer(layout);
  }
  for (int s = 0; s < S && S < limits.max_stages && used + n <= N; ++s) {
    const int first = base.firsts[static_cast<std::size_t>(s)];
    const int end = s + 1 < S ? base.firsts[static_cast<std::size_t>(s) + 1] : limits.layers;
    if (end - first < 2) continue;
    Layout layout = base;
    layout.firsts.insert(layout.firsts.begin() + s + 1, middle_of_compute(model, first, end));
    layout.runs.insert(layout.runs.begin() + s + 1, n);
    layout.degrees.insert(layout.degrees.begin() + s + 1, t);
    layout.recompute.insert(layout.recompute.begin() + s + 1,
                            base.recompute[static_cast<std::size_t>(s)]);
    offer(layout);
  }
}

// The next boundary shift of the compound moves after `step`: 1, 2, 4, 8, ... or, `fine`,
// 1, 2, 3, 4, 6, 8, 12, ... (the powers of two and the midpoints between them).
int next_step(int step, bool fine) {
  if (step < 1) return 1;
  if (!fine || step < 2) return step * 2;
  const int power = 1 << (31 - __builtin_clz(static_cast<unsigned>(step)));  // largest <= step
  return step == power ? step + step / 2 : 2 * power;
}

// The compound moves of `neighbours`: several boundaries at once, and GPUs moved with their
// work; `fine`: with the finer shifts (next_step). `offer` says whether the shape was valid.
// O(S (S log L + log N log L)) shapes.
void compound_moves(const Layout& base, const ShapeLimits& limits, bool fine,
                    const std::function<bool(const Layout&)>& offer) {
  const int S = static_cast<int>(base.firsts.size());
  const int L = limits.layers;
  auto end_of = [&](int s) { return s + 1 < S ? base.firsts[static_cast<std::size_t>(s) + 1] : L; };
  auto degree = [&](int s) { return base.degrees[static_cast<std::size_t>(s)]; };
  // Several boundaries at once, by 1, 2, 4, ... layers either way: every boundary from the
  // s-th on (a suffix) or up to the s-th (a prefix), which moves work between the pipeline's
  // ends without unbalancing the stages between (one boundary alone is a single move).
  for (int s = 1; s < S; ++s) {
    for (const bool suffix : {true, false}) {
      const int from = suffix ? s : 1, to = suffix ? S - 1 : s;  // boundaries moved
      if (to - from < 1) continue;
      for (int step = 1; step < L; step = next_step(step, fine)) {
        bool any = false;
        for (int sign : {-1, 1}) {
          Layout layout = base;
          for (int b = from; b <= to; ++b)
            layout.firsts[static_cast<std::size_t>(b)] += sign * step;
          if (!offer(layout)) continue;
          any = true;
        }
        if (!any) break;
      }
    }
  }
  // 1, 2, 4, ... GPUs (groups) from one run to its neighbour with the work following them (the
  // boundary between the two stages moved by 1, 2, 4, ... layers towards the giver: the taker
  // takes more layers), and 2, 4, ... GPUs alone.
  for (int s = 0; s + 1 < S; ++s) {
    std::vector<int> sizes{degree(s)};
    if (degree(s + 1) != degree(s)) sizes.push_back(degree(s + 1));
    const int low = base.firsts[static_cast<std::size_t>(s)], high = end_of(s + 1);
    const int longest = std::max(base.runs[static_cast<std::size_t>(s)],
                                 base.runs[static_cast<std::size_t>(s) + 1]);
    for (int sign : {1, -1}) {
      for (const int size : sizes) {
        for (int count = 1; count * size < longest; count *= 2) {
          for (int step = count > 1 ? 0 : 1; step < high - low; step = next_step(step, fine)) {
            Layout layout = base;
            layout.runs[static_cast<std::size_t>(s)] += sign * count * size;
            layout.runs[static_cast<std::size_t>(s) + 1] -= sign * count * size;
            layout.firsts[static_cast<std::size_t>(s) + 1] += sign * step;
            offer(layout);
          }
        }
      }
    }
  }
}

}  // namespace

std::vector<std::vector<Stage>> neighbours(const model::Model& model,
                                           const std::vector<Stage>& stages,
                                           const std::vector<int>& order, const ShapeLimits& limits,
                                           bool compound, bool fine) {
  const Layout base = layout_of(stages);
  const int S = static_cast<int>(base.firsts.size());
  const int L = limits.layers;
  const int N = static_cast<int>(order.size());
  const int used = used_gpus(base);
  std::vector<std::vector<Stage>> out;
  auto offer = [&](const Layout& layout) {
    if (!valid(layout, order, limits)) return false;
    out.push_back(stages_of(layout, order, L));
    return true;
  };
  auto end_of = [&](int s) { return s + 1 < S ? base.firsts[static_cast<std::size_t>(s) + 1] : L; };
  auto degree = [&](int s) { return base.degrees[static_cast<std::size_t>(s)]; };
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
  // A GPU (a group of the giving stage, then of the taking one) from one run to its neighbour.
  for (int s = 0; s + 1 < S; ++s) {
    std::vector<int> sizes{degree(s)};
    if (degree(s + 1) != degree(s)) sizes.push_back(degree(s + 1));
    for (int sign : {1, -1}) {
      for (const int size : sizes) {
        Layout layout = base;
        layout.runs[static_cast<std::size_t>(s)] += sign * size;
        layout.runs[static_cast<std::size_t>(s) + 1] -= sign * size;
        offer(layout);
      }
    }
  }
  // One replica more (from the unused tail) or fewer.
  for (int s = 0; s < S; ++s) {
    for (int sign : {1, -1}) {
      if (sign > 0 && used + degree(s) > N) continue;
      Layout layout = base;
      layout.runs[static_cast<std::size_t>(s)] += sign * degree(s);
      offer(layout);
    }
  }
  // Merge neighbours (at the first one's degree).
  for (int s = 0; s + 1 < S; ++s) {
    Layout layout = base;
    const auto at = static_cast<std::size_t>(s);
    const int t = layout.degrees[at];
    layout.runs[at] =
        std::min(limits.max_replicas * t, (layout.runs[at] + layout.runs[at + 1]) / t * t);
    layout.firsts.erase(layout.firsts.begin() + s + 1);
    layout.runs.erase(layout.runs.begin() + s + 1);
    layout.degrees.erase(layout.degrees.begin() + s + 1);
    layout.recompute.erase(layout.recompute.begin() + s + 1);
    offer(layout);
  }
  // Split a stage at its middle of compute.
  for (int s = 0; s < S && S < limits.max_stages; ++s) {
    const int first = base.firsts[static_cast<std::size_t>(s)], end = end_of(s);
    if (end - first < 2) continue;
    const int t = degree(s);
    const int r = base.runs[static_cast<std::size_t>(s)] / t;
    if (r < 2 && used + t > N) continue;
    const int cut = middle_of_compute(model, first, end);
    Layout layout = base;
    const auto at = static_cast<std::size_t>(s);
    layout.firsts.insert(layout.firsts.begin() + s + 1, cut);
    const int left = r >= 2 ? r / 2 : 1, right = r >= 2 ? r - r / 2 : 1;
    layout.runs[at] = left * t;
    layout.runs.insert(layout.runs.begin() + s + 1, right * t);
    layout.degrees.insert(layout.degrees.begin() + s + 1, t);
    layout.recompute.insert(layout.recompute.begin() + s + 1, layout.recompute[at]);
    offer(layout);
  }
  degree_and_recompute_moves(base, limits, N, offer);
  if (limits.uniform) uniform_moves(model, base, limits, N, offer);
  if (compound) compound_moves(base, limits, fine, offer);
  return out;
}

std::optional<std::vector<Stage>> fill_split(const model::Model& model,
                                             const topology::Topology& topology,
                                             const std::vector<Stage>& stages, int micro_batches,
                                             double gamma, double cap) {
  const int L = static_cast<int>(model.layers.size());
  const int S = static_cast<int>(stages.size());
  if (S < 2 || S > L) return std::nullopt;
  const LayerSums sums(model);
  // tau of layers [i, j) on stage s: forward and backward (and the forward again when it
  // recomputes), at the speed of its slowest GPU, divided by its degree.
  std::vector<double> speed(static_cast<std::size_t>(S));
  std::vector<double> load(static_cast<std::size_t>(S));  // M / r_k
  for (std::size_t s = 0; s < stages.size(); ++s) {
    double slowest = std::numeric_limits<double>::infinity();
    for (const int g : stages[s].gpus) slowest = std::min(slowest, topology.gpu(g).speed);
    speed[s] = slowest * stages[s].tensor_parallel;
    load[s] = static_cast<double>(micro_batches) / stages[s].replicas();
  }
  auto tau = [&](std::size_t s, int i, int j) {
    const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
    const double recomputed = stages[s].recompute ? sums.forward[b] - sums.forward[a] : 0;
    return (sums.work[b] - sums.work[a] + recomputed) / speed[s];
  };
  // Whether every stage fits under bound T, each stage taking the most layers within it (and
  // within cap T) that leave one for each later stage; `firsts` receives the split.
  auto split = [&](double T, std::vector<int>& firsts) {
    firsts.assign(1, 0);
    double before = 0;  // P_k
    int layer = 0;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const bool last = s + 1 == stages.size();
      const int most = L - (S - 1 - static_cast<int>(s));
      int end = last ? L : layer + 1;
      while (!last && end < most && gamma * before + load[s] * tau(s, layer, end + 1) <= T &&
             load[s] * tau(s, layer, end + 1) <= cap * T) {
        ++end;
      }
      if (gamma * before + load[s] * tau(s, layer, end) > T) return false;
      before += tau(s, layer, end);
      layer = end;
      if (!last) firsts.push_back(layer);
    }
    return true;
  };
  // A bound every split meets: P_k and every stage's own term at most the whole model's.
  double high = 1;
  for (std::size_t s = 0; s < stages.size(); ++s) high += (gamma + load[s]) * tau(s, 0, L);
  double low = 0;
  std::vector<int> firsts;
  for (int step = 0; step < tuning::kFillBisections; ++step) {
    const double middle = (low + high) / 2;
    (split(middle, firsts) ? high : low) = middle;
  }
  if (!split(high, firsts)) return std::nullopt;
  std::vector<Stage> out = stages;
  for (std::size_t s = 0; s < out.size(); ++s) {
    out[s].first_layer = firsts[s];
    out[s].last_layer = (s + 1 < out.size() ? firsts[s + 1] : L) - 1;
  }
  return out;
}

std::vector<Stage> random_shape(std::mt19937& rng, const std::vector<int>& order,
                                const ShapeLimits& limits) {
  const int N = static_cast<int>(order.size());
  const int most_stages = std::min({limits.max_stages, limits.layers, N});
  const int S = 1 + static_cast<int>(rng() % static_cast<unsigned>(most_stages));
  // Cuts: S - 1 distinct layer boundaries out of 1..L-1.
  std::vector<int> boundaries(static_cast<std::size_t>(limits.layers) - 1);
  std::iota(boundaries.begin(), boundaries.end(), 1);
  std::shuffle(boundaries.begin(), boundaries.end(), rng);
  Layout layout;
  layout.firsts.assign(boundaries.begin(), boundaries.begin() + (S - 1));
  layout.firsts.push_back(0);
  std::sort(layout.firsts.begin(), layout.firsts.end());
  // Runs: one GPU each, then the rest of a random number of GPUs handed out one by one; the
  // smallest allowed degree, without recomputation unless it must (an invalid start is skipped
  // by the search).
  layout.runs.assign(static_cast<std::size_t>(S), 1);
  layout.degrees.assign(static_cast<std::size_t>(S), 1);
  layout.recompute.assign(static_cast<std::size_t>(S), limits.must_recompute ? 1 : 0);
  const int extra = static_cast<int>(rng() % static_cast<unsigned>(N - S + 1));
  for (int x = 0; x < extra; ++x) {
    auto& run = layout.runs[rng() % static_cast<unsigned>(S)];
    if (run < limits.max_replicas) ++run;
  }
  return stages_of(layout, order, limits.layers);
}

namespace {

// A start of local_search, evaluated: its value, its index among the starts, and what
// evaluating it cost.
struct Ranked {
  double ms;
  std::size_t start;
  double work;
};

// `ranked` (best first) with the best start of each stage count first, then the others, each
// part best first (phase 2's climbs with SearchBudget::diverse). O(R D) for D stage counts.
std::vector<Ranked> each_depth_first(const std::vector<Ranked>& ranked,
                                     const std::vector<std::vector<Stage>>& starts) {
  std::vector<Ranked> firsts, others;
  for (const Ranked& start : ranked) {
    const std::size_t depth = starts[start.start].size();
    const bool first = std::none_of(firsts.begin(), firsts.end(), [&](const Ranked& other) {
      return starts[other.start].size() == depth;
    });
    (first ? firsts : others).push_back(start);
  }
  firsts.insert(firsts.end(), others.begin(), others.end());
  return firsts;
}

// `stages` with stage s split in two, each half of its groups (the first half of its layers to
// the first): the runs of a pipeline one stage deeper, for `fill_split` to balance. Nothing
// where the stage has one group or one layer. O(S + N).
std::optional<std::vector<Stage>> halved(const std::vector<Stage>& stages, std::size_t s) {
  const Stage& stage = stages[s];
  const int r = stage.replicas();
  if (r < 2 || stage.last_layer == stage.first_layer) return std::nullopt;
  Stage left = stage, right = stage;
  left.last_layer = stage.first_layer + (stage.last_layer - stage.first_layer + 1) / 2 - 1;
  right.first_layer = left.last_layer + 1;
  const auto middle =
      stage.gpus.begin() + static_cast<std::ptrdiff_t>(r / 2) * stage.tensor_parallel;
  left.gpus.assign(stage.gpus.begin(), middle);
  right.gpus.assign(middle, stage.gpus.end());
  std::vector<Stage> out = stages;
  out[s] = std::move(left);
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(s) + 1, std::move(right));
  return out;
}

// The shapes phase 4 re-splits: `best`; the best start of each of up to kResplitBases - 1
// other stage counts (`ranked`: the starts, best first); `best` with one of its kHalvedStages
// stages of the most groups halved (`halved`: on a heterogeneous cluster the best plan may
// give each kind of GPU a stage of its own, which the split move, cutting at the middle of
// compute, replays slower than the one stage it came from). O(R + S log S) shapes' copies.
std::vector<std::vector<Stage>> resplit_bases(const std::vector<Stage>& best,
                                              const std::vector<std::vector<Stage>>& starts,
                                              const std::vector<Ranked>& ranked) {
  std::vector<std::vector<Stage>> bases{best};
  for (const Ranked& ranked_start : ranked) {
    const auto& start = starts[ranked_start.start];
    if (start.size() < 2 || bases.size() >= kResplitBases) continue;
    if (std::none_of(bases.begin(), bases.end(),
                     [&](const auto& base) { return base.size() == start.size(); })) {
      bases.push_back(start);
    }
  }
  std::vector<std::size_t> widest(best.size());
  std::iota(widest.begin(), widest.end(), 0);
  std::stable_sort(widest.begin(), widest.end(), [&](std::size_t a, std::size_t b) {
    return best[a].replicas() > best[b].replicas();
  });
  for (std::size_t x = 0; x < widest.size() && x < kHalvedStages; ++x) {
    if (auto shape = halved(best, widest[x])) bases.push_back(std::move(*shape));
  }
  return bases;
}

// Phase 4 of local_search: the fill splits (SearchBudget::resplit) of `resplit_bases` on a
// coarse grid of (gamma, cap) (tuning::kFillGammas x kFillCaps), then a pattern search on
// (gamma, cap) around the best point, halving its step from kPatternFirstStep to kPatternLastStep
// in gamma (half as much in cap). `value` replays a
// shape (nothing: infeasible, outside the limits or beyond the budget). Returns the fastest
// split replayed. O(B x 9 + 4 x pattern steps) splits of O(L + S) each (fill_split) for the B
// bases, and as many replays.
std::optional<Found> best_fill_split(
    const std::vector<Stage>& best, const std::vector<std::vector<Stage>>& starts,
    const std::vector<Ranked>& ranked, const SearchBudget::Resplit& resplit,
    const std::function<std::optional<double>(const std::vector<Stage>&)>& value) {
  const std::vector<std::vector<Stage>> bases = resplit_bases(best, starts, ranked);
  struct Point {
    std::size_t base = 0;
    double gamma = 0, cap = 1;
  } top;
  std::optional<Found> found;
  auto at = [&](std::size_t base, double gamma, double cap) {
    if (gamma < 0 || cap <= 0 || cap > 1) return;
    auto shape = resplit(bases[base], gamma, cap);
    if (!shape) return;
    const auto ms = value(*shape);
    if (!ms || (found && *ms >= found->iteration_ms)) return;
    found = Found{std::move(*shape), *ms};
    top = Point{base, gamma, cap};
  };
  for (std::size_t base = 0; base < bases.size(); ++base) {
    for (const double cap : tuning::kFillCaps) {
      for (const double gamma : tuning::kFillGammas) at(base, gamma, cap);
    }
  }
  for (double step = tuning::kPatternFirstStep; step >= tuning::kPatternLastStep && found;
       step /= 2) {
    for (bool moved = true; moved;) {
      const double from = found->iteration_ms;
      const Point centre = top;
      for (const auto& [dg, dc] : {std::pair{1, 0}, {-1, 0}, {0, 1}, {0, -1}}) {
        at(centre.base, centre.gamma + dg * step, centre.cap + dc * step / 2);
      }
      moved = found->iteration_ms < from;
    }
  }
  return found;
}

// How a climb moves. `compound`: the compound moves too, each scan of a new neighbourhood
// resuming at the move that improved last (first the same move again), wrapping around; else
// the single moves, each scan from the first. `fine`: the compound moves' finer shifts. A move
// is taken when it replays faster by more than `min_gain`.
struct Moves {
  bool compound = false;
  bool fine = false;
  double min_gain = kAnyGain;
};

// What the phases of local_search share: every shape evaluated so far (each once: memoised by
// its layout), the work those evaluations cost, and the best shape seen. O(S log shapes) per
// lookup.
class SearchState {
 public:
  SearchState(const model::Model& model, const std::vector<int>& order, const ShapeLimits& limits,
              const Evaluate& evaluate)
      : model_(model), order_(order), limits_(limits), evaluate_(evaluate) {}

  double work() const { return work_; }
  const std::optional<Found>& best() const { return best_; }
  bool allowed(const std::vector<Stage>& stages) const {
    return valid(layout_of(stages), order_, limits_);
  }

  // The value of `stages` (nothing: does not fit), evaluated on first sight only.
  std::optional<double> value(const std::vector<Stage>& stages) {
    const Layout layout = layout_of(stages);
    std::vector<int> key = layout.firsts;
    key.insert(key.end(), layout.runs.begin(), layout.runs.end());
    key.insert(key.end(), layout.degrees.begin(), layout.degrees.end());
    key.insert(key.end(), layout.recompute.begin(), layout.recompute.end());
    if (auto it = seen_.find(key); it != seen_.end()) return it->second;
    const Evaluation evaluation = evaluate_(stages);
    work_ += evaluation.work;
    seen_.emplace(std::move(key), evaluation.iteration_ms);
    return evaluation.iteration_ms;
  }

  // Keeps `stages` if it is the fastest yet (the first of equal ones).
  void consider(const std::vector<Stage>& stages, double ms) {
    if (!best_ || ms < best_->iteration_ms) best_ = Found{stages, ms};
  }

  // One climb from `current` by first improvement while the work is within `limit`; a whole
  // scan of the neighbourhood without improvement ends it. O(neighbours) evaluations per step.
  void climb(std::vector<Stage> current, double current_ms, const Moves& moves, double limit) {
    std::size_t from = 0;
    bool improved = true;
    while (improved && work_ <= limit) {
      improved = false;
      auto candidates = neighbours(model_, current, order_, limits_, moves.compound, moves.fine);
      const std::size_t n = candidates.size();
      for (std::size_t k = 0; k < n && work_ <= limit; ++k) {
        const std::size_t at = (from + k) % n;
        const auto ms = value(candidates[at]);
        if (ms && *ms < current_ms * (1 - moves.min_gain)) {
          current = std::move(candidates[at]);
          current_ms = *ms;
          consider(current, current_ms);
          improved = true;
          from = moves.compound ? at : 0;
          break;
        }
      }
    }
  }

 private:
  const model::Model& model_;
  const std::vector<int>& order_;
  const ShapeLimits& limits_;
  const Evaluate& evaluate_;
  std::map<std::vector<int>, std::optional<double>> seen_;
  double work_ = 0;
  std::optional<Found> best_;
};

// The starts that `limits` allow, evaluated in order: the first `always` whatever the budget,
// the others while the work is within `budget`. Those that fit, best first (stable: ties keep
// the start order). O(starts) evaluations.
std::vector<Ranked> evaluate_starts(SearchState& state,
                                    const std::vector<std::vector<Stage>>& starts,
                                    std::size_t always, double budget) {
  std::vector<Ranked> ranked;
  for (std::size_t x = 0; x < starts.size(); ++x) {
    if (x >= always && state.work() > budget) break;
    if (!state.allowed(starts[x])) continue;  // outside the allowed shapes
    const double before = state.work();
    if (auto ms = state.value(starts[x])) {
      ranked.push_back({*ms, x, state.work() - before});
      state.consider(starts[x], *ms);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return a.ms < b.ms; });
  return ranked;
}

// Phase 2's work limit (SearchBudget): `budget.work`, or more where it buys at least one whole
// pass over the best start's neighbourhood (a local optimum confirmed). Sized before any climb;
// the single moves are counted first, which spares making the compound ones of a large plan.
// O(neighbours) to count them.
double phase_two_limit(const SearchState& state, const model::Model& model,
                       const std::vector<std::vector<Stage>>& starts,
                       const std::vector<Ranked>& ranked, const std::vector<int>& order,
                       const ShapeLimits& limits, const SearchBudget& budget) {
  double limit = budget.work;
  const bool may_grow = !ranked.empty() && budget.sweeps > 0 && state.work() < budget.max_work;
  if (!may_grow) return limit;
  const auto& best_start = starts[ranked.front().start];
  auto pass = [&](bool compound) {
    return static_cast<double>(neighbours(model, best_start, order, limits, compound).size()) *
           ranked.front().work;
  };
  if (pass(false) <= budget.max_work) {
    const double sweep = pass(true);
    if (sweep <= budget.max_work) {
      limit = std::max(limit, std::min(budget.sweeps * sweep, budget.max_work));
    }
  }
  return limit;
}

// Phases 1 and 2: one climb from each of `climbs` in turn while the work is within `limit`.
void climb_each(SearchState& state, const std::vector<std::vector<Stage>>& starts,
                const std::vector<Ranked>& climbs, const Moves& moves, double limit) {
  for (std::size_t x = 0; x < climbs.size() && state.work() <= limit; ++x) {
    state.climb(starts[climbs[x].start], climbs[x].ms, moves, limit);
  }
}

// Phase 4: the fill splits of the best shape and its kin (best_fill_split), every one allowed
// and replayed while the work is within `limit`, then a climb from the fastest as in phase 3.
void fill_split_phase(SearchState& state, const std::vector<std::vector<Stage>>& starts,
                      const std::vector<Ranked>& ranked, const SearchBudget::Resplit& resplit,
                      double limit) {
  const auto split =
      best_fill_split(state.best()->stages, starts, ranked, resplit,
                      [&](const std::vector<Stage>& stages) -> std::optional<double> {
                        if (state.work() > limit || !state.allowed(stages)) return std::nullopt;
                        const auto ms = state.value(stages);
                        if (ms) state.consider(stages, *ms);
                        return ms;
                      });
  if (split) state.climb(split->stages, split->iteration_ms, {true, true}, limit);
}

// A uniform start whose replica count r does not share `limits.equal_shares_of` equally, moved to
// the largest count below r that does (same layers, degree and recomputation; fewer GPUs per
// stage); any other start as it is. The DP proposes every count (its plans are starts, not
// plans), so that the search starts from its best shapes and moves them where the rule allows
// (bert-24 on the heterogeneous cluster: 5 + 5 replicas become 4 + 4, which the DP restricted to
// the allowed counts did not propose). A start whose stages share GPUs (spec 9.2) is not a
// layout of disjoint runs, so it stays as it is. O(S log S + r).
std::vector<Stage> with_equal_shares(const std::vector<Stage>& stages,
                                     const std::vector<int>& order, const ShapeLimits& limits) {
  if (limits.equal_shares_of <= 0 || stages.empty()) return stages;
  std::set<int> leaders;
  for (const Stage& stage : stages) {
    if (stage.gpus.empty() || !leaders.insert(stage.gpus.front()).second) return stages;
  }
  Layout layout = layout_of(stages);
  const int t = layout.degrees.front();
  const int n = layout.runs.front();
  for (std::size_t s = 0; s < layout.runs.size(); ++s) {
    if (layout.runs[s] != n || layout.degrees[s] != t) return stages;  // not uniform
  }
  if (t < 1 || n % t != 0) return stages;
  int r = n / t;
  while (r > 1 && !shares_equally(limits.equal_shares_of, r)) --r;
  if (r == n / t) return stages;
  for (int& run : layout.runs) run = r * t;
  return stages_of(layout, order, limits.layers);
}

}  // namespace

// The recipe (docs/algorithms.md, "the final choice", step 3b): the starts, then four phases,
// each with its work limit.
std::optional<Found> local_search(const model::Model& model,
                                  const std::vector<std::vector<Stage>>& proposed,
                                  std::size_t always, const std::vector<int>& order,
                                  const ShapeLimits& limits, const Evaluate& evaluate,
                                  const SearchBudget& budget) {
  std::vector<std::vector<Stage>> starts;
  starts.reserve(proposed.size());
  for (const auto& start : proposed) starts.push_back(with_equal_shares(start, order, limits));
  SearchState state(model, order, limits, evaluate);
  // The starts: the first `always` whatever the budget, the others within budget.work.
  const std::vector<Ranked> ranked = evaluate_starts(state, starts, always, budget.work);
  // Phase 2's limit, sized on the best start before any climb: budget.work or more.
  const double second_limit = phase_two_limit(state, model, starts, ranked, order, limits, budget);
  // Phase 1, within budget.work: single moves from every start, best first (the search as it
  // was before the compound moves, so that no plan gets slower).
  climb_each(state, starts, ranked, {false, false}, budget.work);
  // Phase 2, within second_limit: every move, each scan resuming at the move that improved last.
  climb_each(state, starts, budget.diverse ? each_depth_first(ranked, starts) : ranked,
             {true, false, budget.min_gain}, second_limit);
  // Phase 3, with as much again as phase 2 had beyond phase 1 (none where it had no more): one
  // climb from the best with the finer shifts. It starts from the best, so it only improves.
  const bool phase_two_had_more = second_limit > budget.work;
  if (state.best() && phase_two_had_more) {
    state.climb(state.best()->stages, state.best()->iteration_ms, {true, true},
                state.work() + (second_limit - budget.work));
  }
  // Phase 4, with as much again as phase 3 had (or a share of budget.work where it had none):
  // the fill splits, then a climb. It too only improves.
  if (state.best() && budget.resplit) {
    fill_split_phase(state, starts, ranked, budget.resplit,
                     state.work() + (phase_two_had_more ? second_limit - budget.work
                                                        : budget.work * tuning::kFillShareOfWork));
  }
  return state.best();
}

}  // namespace pipeplan::partition
