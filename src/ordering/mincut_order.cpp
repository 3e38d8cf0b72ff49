// GPU ordering by recursive minimum cut.
//
// Reference: Luo et al., "Efficient Pipeline Planning for Expedited Distributed DNN Training",
// INFOCOM 2022, section on GPU ordering; Stoer and Wagner, "A simple min-cut algorithm",
// JACM 1997 (Boost.Graph's stoer_wagner_min_cut).
// Complexity: see mincut_order.hpp.

#include "pipeplan/ordering/mincut_order.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/one_bit_color_map.hpp>
#include <boost/graph/stoer_wagner_min_cut.hpp>
#include <boost/property_map/property_map.hpp>
#include <limits>
#include <numeric>
#include <optional>

namespace pipeplan::ordering {
namespace {

enum class Measure { kBandwidth, kLatency };

// Pair weights within one group: how much better than the group's worst pair a pair is.
// Stored as the upper triangle (n (n - 1) / 2 doubles: 0.25 GiB for 8,192 GPUs).
class Weights {
 public:
  Weights(const topology::Topology& topology, const std::vector<int>& group, Measure measure)
      : n_(group.size()), weight_(n_ * (n_ - 1) / 2, 0.0) {
    // One pass reads the pair costs (row by row, as the triangle is laid out), a second turns
    // them into weights in place: O(n^2).
    const bool by_bandwidth = measure == Measure::kBandwidth;
    double worst = by_bandwidth ? std::numeric_limits<double>::infinity() : 0;
    std::size_t at = 0;
    for (std::size_t a = 0; a < n_; ++a) {
      for (std::size_t b = a + 1; b < n_; ++b, ++at) {
        const double cost = by_bandwidth ? topology.bandwidth_bytes_per_s(group[a], group[b])
                                         : topology.latency_ms(group[a], group[b]);
        worst = by_bandwidth ? std::min(worst, cost) : std::max(worst, cost);
        weight_[at] = cost;
      }
    }
    for (double& w : weight_) w = by_bandwidth ? w - worst : worst - w;
  }
  [[nodiscard]] double operator()(std::size_t a, std::size_t b) const {
    if (a == b) return 0;
    return a < b ? weight_[slot(a, b)] : weight_[slot(b, a)];
  }
  [[nodiscard]] bool uniform() const {
    return std::all_of(weight_.begin(), weight_.end(), [](double w) { return w == 0; });
  }

 private:
  // Position of the pair a < b in the row-major upper triangle.
  [[nodiscard]] std::size_t slot(std::size_t a, std::size_t b) const {
    return a * (2 * n_ - a - 1) / 2 + (b - a - 1);
  }
  std::size_t n_;
  std::vector<double> weight_;
};

// Connected components of the graph of positive weights, each sorted, in order of their
// smallest member. Members are positions in the group.
std::vector<std::vector<std::size_t>> components(const Weights& w, std::size_t n) {
  std::vector<int> label(n, -1);
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t start = 0; start < n; ++start) {
    if (label[start] >= 0) continue;
    const int id = static_cast<int>(out.size());
    out.emplace_back();
    std::vector<std::size_t> stack{start};
    label[start] = id;
    while (!stack.empty()) {
      std::size_t u = stack.back();
      stack.pop_back();
      out.back().push_back(u);
      for (std::size_t v = 0; v < n; ++v) {
        if (label[v] < 0 && w(u, v) > 0) {
          label[v] = id;
          stack.push_back(v);
        }
      }
    }
    std::sort(out.back().begin(), out.back().end());
  }
  return out;
}

// Global minimum cut by Stoer-Wagner (Boost); true marks one side. Requires a connected
// graph of positive weights on n >= 2 vertices.
std::vector<bool> stoer_wagner(const Weights& w, std::size_t n) {
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property,
                            boost::property<boost::edge_weight_t, double>>;
  Graph graph(n);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      if (w(a, b) > 0) boost::add_edge(a, b, w(a, b), graph);
    }
  }
  std::vector<bool> side(n, false);
  auto parity = boost::make_one_bit_color_map(n, boost::get(boost::vertex_index, graph));
  boost::stoer_wagner_min_cut(graph, boost::get(boost::edge_weight, graph),
                              boost::parity_map(parity));
  for (std::size_t v = 0; v < n; ++v)
    side[v] = boost::get(parity, v) != boost::one_bit_color_type{};
  return side;
}

// Improves cut(A, B) / (|A| |B|) by single moves, best first, ties to the lowest position.
void improve_ratio(const Weights& w, std::size_t n, std::vector<bool>& in_a) {
  std::vector<double> to_a(n, 0), to_b(n, 0);
  std::size_t size_a = 0;
  for (std::size_t v = 0; v < n; ++v) size_a += in_a[v] ? 1 : 0;
  double cut = 0;
  for (std::size_t u = 0; u < n; ++u) {
    for (std::size_t v = 0; v < n; ++v) {
      (in_a[v] ? to_a : to_b)[u] += w(u, v);
    }
    if (in_a[u]) cut += to_b[u];
  }
  const std::size_t max_moves = n * n;
  for (std::size_t moves = 0; moves < max_moves; ++moves) {
    const double ratio = cut / static_cast<double>(size_a * (n - size_a));
    double best_ratio = ratio * (1 - 1e-12);
    std::size_t best = n;
    for (std::size_t v = 0; v < n; ++v) {
      const bool from_a = in_a[v];
      const std::size_t new_a = from_a ? size_a - 1 : size_a + 1;
      if (new_a == 0 || new_a == n) continue;
      const double new_cut = from_a ? cut - to_b[v] + to_a[v] : cut - to_a[v] + to_b[v];
      const double new_ratio = new_cut / static_cast<double>(new_a * (n - new_a));
      if (new_ratio < best_ratio) {
        best_ratio = new_ratio;
        best = v;
      }
    }
    if (best == n) return;
    const bool from_a = in_a[best];
    cut = from_a ? cut - to_b[best] + to_a[best] : cut - to_a[best] + to_b[best];
    in_a[best] = !from_a;
    size_a = from_a ? size_a - 1 : size_a + 1;
    for (std::size_t u = 0; u < n; ++u) {
      if (from_a) {
        to_a[u] -= w(u, best);
        to_b[u] += w(u, best);
      } else {
        to_b[u] -= w(u, best);
        to_a[u] += w(u, best);
      }
    }
  }
}

// Orders join: the orientation of `left` and `right` whose junction has the widest
// bandwidth, then the lowest latency; ties keep the first of (L R, L R', L' R, L' R').
std::vector<int> join(const topology::Topology& topology, std::vector<int> left,
                      std::vector<int> right) {
  struct Option {
    bool flip_left, flip_right;
  };
  const Option options[] = {{false, false}, {false, true}, {true, false}, {true, true}};
  const Option* best = &options[0];
  double best_bandwidth = -1, best_latency = 0;
  for (const Option& option : options) {
    const int a = option.flip_left ? left.front() : left.back();
    const int b = option.flip_right ? right.back() : right.front();
    const double bandwidth = topology.bandwidth_bytes_per_s(a, b);
    const double latency = topology.latency_ms(a, b);
    if (bandwidth > best_bandwidth || (bandwidth == best_bandwidth && latency < best_latency)) {
      best = &option;
      best_bandwidth = bandwidth;
      best_latency = latency;
    }
  }
  if (best->flip_left) std::reverse(left.begin(), left.end());
  if (best->flip_right) std::reverse(right.begin(), right.end());
  left.insert(left.end(), right.begin(), right.end());
  return left;
}

// Work left to the cuts of one ordering, in units of about one nanosecond: n^2 for each
// group's weights and components, n^3 for each Stoer-Wagner cut. It starts at kMaxOrderWork
// plus N^2 (the first level's matrix, which every ordering needs). A group whose turn comes
// when its work would pass what is left is ordered by its spanning tree instead.
struct Budget {
  double left = 0;
  OrderStats* stats = nullptr;
  bool spend(double work) {
    if (work > left) return false;
    left -= work;
    return true;
  }
};

// Single-linkage order of a group (GPU indices, sorted), for groups beyond the budget: the
// links of a maximum spanning tree (Prim, widest bandwidth, then lowest latency, then lowest
// position) merge clusters strongest first (Kruskal's order), each merge a `join`, so strong
// links stay inside contiguous runs and the weakest fall between them, as with the cuts.
// O(n^2) time (Prim on the dense pair costs, and the joins), O(n) memory.
std::vector<int> order_by_spanning_tree(const topology::Topology& topology,
                                        const std::vector<int>& group) {
  const std::size_t n = group.size();
  struct Edge {
    double bandwidth, latency;
    std::size_t a, b;
  };
  auto better = [](double bandwidth, double latency, double than_bandwidth, double than_latency) {
    return bandwidth > than_bandwidth || (bandwidth == than_bandwidth && latency < than_latency);
  };
  std::vector<Edge> tree;
  std::vector<char> in_tree(n, 0);
  std::vector<double> best_bandwidth(n, -1), best_latency(n, 0);
  std::vector<std::size_t> best_from(n, 0);
  std::size_t current = 0;
  in_tree[0] = 1;
  for (std::size_t added = 1; added < n; ++added) {
    std::size_t next = n;
    for (std::size_t v = 0; v < n; ++v) {
      if (in_tree[v]) continue;
      // The latency is read only on a tie of bandwidths (the reads of a column miss the cache).
      const double bandwidth = topology.bandwidth_bytes_per_s(group[current], group[v]);
      if (bandwidth >= best_bandwidth[v]) {
        const double latency = topology.latency_ms(group[current], group[v]);
        if (better(bandwidth, latency, best_bandwidth[v], best_latency[v])) {
          best_bandwidth[v] = bandwidth;
          best_latency[v] = latency;
          best_from[v] = current;
        }
      }
      if (next == n ||
          better(best_bandwidth[v], best_latency[v], best_bandwidth[next], best_latency[next])) {
        next = v;
      }
    }
    in_tree[next] = 1;
    tree.push_back(Edge{best_bandwidth[next], best_latency[next], best_from[next], next});
    current = next;
  }
  std::stable_sort(tree.begin(), tree.end(), [&](const Edge& x, const Edge& y) {
    return better(x.bandwidth, x.latency, y.bandwidth, y.latency);
  });
  // Union-find over positions; each root holds its cluster's order.
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto root = [&](std::size_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  std::vector<std::vector<int>> order(n);
  for (std::size_t v = 0; v < n; ++v) order[v] = {group[v]};
  for (const Edge& edge : tree) {
    std::size_t ra = root(edge.a), rb = root(edge.b);
    if (rb < ra) std::swap(ra, rb);  // the cluster of the smaller root goes first
    order[ra] = join(topology, std::move(order[ra]), std::move(order[rb]));
    order[rb].clear();
    parent[rb] = ra;
  }
  return order[root(0)];
}

// What a group of a node-cost topology (`Topology::costs_by_node`) splits into, read from its
// nodes instead of its n^2 pair weights.
struct NodeSplit {
  enum class Kind { kUniform, kParts, kNeedsCut } kind = Kind::kUniform;
  std::vector<std::vector<std::size_t>> parts;  // for kParts, as `components` gives them
};

// The split of `group` (GPU indices, sorted) that `split_group` would find from the weights,
// found from the nodes. A pair of node k costs c_k, a pair across nodes c_net; only values of
// pairs present in the group count: c_k for a node with two GPUs or more in it, c_net when it
// spans two nodes or more. With `worst` the slowest of them (the highest latency), a pair
// weighs its value minus the worst (the worst minus its latency), so:
//  * all weights are 0 exactly when every present value equals the worst: uniform;
//  * when c_net weighs more than 0 (and two nodes are present), each GPU is joined to every
//    GPU of another node, so the positive graph is connected: a cut is needed (kNeedsCut, left
//    to the general path);
//  * otherwise the positive pairs are exactly those inside a node whose c_k weighs more than
//    0: its GPUs in the group form one component, every other GPU is a component of its own,
//    and the components come in order of their smallest position, each sorted, as
//    `components` orders them.
// Exact (the same parts as the weights would give), and O(n log n) time, O(n) memory.
NodeSplit split_by_node(const topology::Topology& topology, const std::vector<int>& group,
                        Measure measure) {
  const std::size_t n = group.size();
  const bool by_bandwidth = measure == Measure::kBandwidth;
  auto value = [&](const topology::PairCost& cost) {
    return by_bandwidth ? cost.bandwidth_bytes_per_s : cost.latency_ms;
  };
  // Positions grouped by node: runs of equal nodes, positions ascending within a run.
  std::vector<std::pair<int, std::size_t>> by_node(n);
  for (std::size_t p = 0; p < n; ++p) by_node[p] = {topology.node_of(group[p]), p};
  std::sort(by_node.begin(), by_node.end());
  std::vector<std::size_t> run_start{0};
  for (std::size_t i = 1; i < n; ++i) {
    if (by_node[i].first != by_node[i - 1].first) run_start.push_back(i);
  }
  run_start.push_back(n);
  const std::size_t runs = run_start.size() - 1;
  double worst = by_bandwidth ? std::numeric_limits<double>::infinity() : 0;
  auto count = [&](double cost) {
    worst = by_bandwidth ? std::min(worst, cost) : std::max(worst, cost);
  };
  if (runs >= 2) count(value(topology.network_cost()));
  for (std::size_t r = 0; r < runs; ++r) {
    if (run_start[r + 1] - run_start[r] >= 2)
      count(value(topology.node_cost(by_node[run_start[r]].first)));
  }
  auto weight = [&](double cost) { return by_bandwidth ? cost - worst : worst - cost; };
  NodeSplit split;
  if (runs >= 2 && weight(value(topology.network_cost())) > 0) {
    split.kind = NodeSplit::Kind::kNeedsCut;
    return split;
  }
  // The component of each position, labelled by its smallest position.
  std::vector<std::size_t> label(n);
  bool any_positive = false;
  for (std::size_t r = 0; r < runs; ++r) {
    const std::size_t begin = run_start[r], end = run_start[r + 1];
    const bool joined =
        end - begin >= 2 && weight(value(topology.node_cost(by_node[begin].first))) > 0;
    any_positive = any_positive || joined;
    for (std::size_t i = begin; i < end; ++i) {
      label[by_node[i].second] = joined ? by_node[begin].second : by_node[i].second;
    }
  }
  if (!any_positive) return split;  // uniform
  std::vector<std::size_t> part_of(n, n);
  for (std::size_t p = 0; p < n; ++p) {
    std::size_t& part = part_of[label[p]];
    if (part == n) {
      part = split.parts.size();
      split.parts.emplace_back();
    }
    split.parts[part].push_back(p);
  }
  split.kind = split.parts.size() >= 2 ? NodeSplit::Kind::kParts : NodeSplit::Kind::kNeedsCut;
  return split;
}

// How one level of the recursion splits a group (positions in the group): its components,
// or the two sides of its best ratio cut; nothing when all weights are equal. The weights
// (n^2 doubles) live only here, so that the recursion holds one level's matrix at a time: a
// chain of GPUs that the cuts peel one by one would otherwise keep O(N^3) bytes alive.
// Sets `over_budget` (and returns nothing) when the budget cannot pay for the level.
std::optional<std::vector<std::vector<std::size_t>>> split_group(const topology::Topology& topology,
                                                                 const std::vector<int>& group,
                                                                 Measure measure, Budget& budget,
                                                                 bool& over_budget) {
  const std::size_t n = group.size();
  const double size = static_cast<double>(n);
  over_budget = !budget.spend(size * size);
  if (over_budget) return std::nullopt;
  if (topology.costs_by_node()) {
    NodeSplit by_node = split_by_node(topology, group, measure);
    if (by_node.kind == NodeSplit::Kind::kUniform) return std::nullopt;
    if (by_node.kind == NodeSplit::Kind::kParts) return std::move(by_node.parts);
    // One component: the cut below, unless the budget cannot pay for it (checked before the
    // n^2 weights are built, which a node-cost topology of 131,072 GPUs could not hold).
    if (size * size * size > budget.left) {
      over_budget = true;
      return std::nullopt;
    }
  }
  const Weights w(topology, group, measure);
  if (w.uniform()) return std::nullopt;
  std::vector<std::vector<std::size_t>> parts = components(w, n);
  if (parts.size() == 1) {
    over_budget = !budget.spend(size * size * size);
    if (over_budget) return std::nullopt;
    std::vector<bool> in_a = stoer_wagner(w, n);
    improve_ratio(w, n, in_a);
    parts.assign(2, {});
    for (std::size_t v = 0; v < n; ++v) parts[in_a[v] == in_a[0] ? 0 : 1].push_back(v);
  }
  return parts;
}

std::vector<int> order_group(const topology::Topology& topology, std::vector<int> group,
                             Measure measure, Budget& budget) {
  std::sort(group.begin(), group.end());
  const std::size_t n = group.size();
  if (n <= 2) return group;
  bool over_budget = false;
  auto split = split_group(topology, group, measure, budget, over_budget);
  if (over_budget) {
    if (budget.stats != nullptr) {
      ++budget.stats->spanning_tree_groups;
      budget.stats->spanning_tree_gpus += n;
    }
    return order_by_spanning_tree(topology, group);
  }
  if (!split) {
    return measure == Measure::kBandwidth ? order_group(topology, group, Measure::kLatency, budget)
                                          : group;
  }
  const std::vector<std::vector<std::size_t>> parts = std::move(*split);
  std::vector<int> result;
  for (const auto& part : parts) {
    std::vector<int> members;
    members.reserve(part.size());
    for (std::size_t p : part) members.push_back(group[p]);
    std::vector<int> ordered = order_group(topology, members, Measure::kBandwidth, budget);
    result = result.empty() ? ordered : join(topology, std::move(result), std::move(ordered));
  }
  return result;
}

}  // namespace

std::vector<int> mincut_order(const topology::Topology& topology, OrderStats* stats,
                              double max_work) {
  std::vector<int> all(static_cast<std::size_t>(topology.size()));
  std::iota(all.begin(), all.end(), 0);
  const double n = static_cast<double>(all.size());
  Budget budget{max_work + n * n, stats};
  return order_group(topology, all, Measure::kBandwidth, budget);
}

double ratio_cut(const topology::Topology& topology, const std::vector<int>& group,
                 const std::vector<bool>& in_a) {
  const Weights w(topology, group, Measure::kBandwidth);
  double cut = 0;
  std::size_t size_a = 0;
  for (std::size_t a = 0; a < group.size(); ++a) {
    if (!in_a[a]) continue;
    ++size_a;
    for (std::size_t b = 0; b < group.size(); ++b) {
      if (!in_a[b]) cut += w(a, b);
    }
  }
  return cut / static_cast<double>(size_a * (group.size() - size_a));
}

}  // namespace pipeplan::ordering
