// Effective pair costs (spec section 2): building a Topology from its direct links.
//
// Pair costs: a linked pair uses its link; any other pair uses the widest-bottleneck path,
// with ties broken by fewest hops, then by the lexicographically smallest sequence of GPU ids
// read from the smaller id, and latencies summed along it. Two steps:
//  1. Bottlenecks. A maximum spanning tree (Prim on the dense link matrix, O(N^2), or Kruskal
//     on the list of links when they are few, O(N^2 + E log E)) holds a
//     widest path between every pair (Hu, "The maximum capacity route problem", Operations
//     Research 9(6), 1961), so a walk of the tree from a GPU gives its bottleneck to every
//     other in O(N).
//  2. Tie-breaks. For a source s (the smaller id of its pairs) and a bottleneck w, the
//     candidate paths are those through links of bandwidth >= w. A breadth-first search from
//     s over them that expands each layer in the order of the smallest paths to its GPUs
//     (parent's rank, then own id) finds the fewest hops and, among those, the smallest
//     sequence: the first discoverer of a GPU in that order is its best parent. One search
//     per distinct bottleneck among s's unlinked partners, limited to the GPUs at bottleneck
//     >= w from s, stopped as soon as every partner at w is found.
// Twins (GPUs with the same link to every other GPU, as shorthand makes them) are searched as
// one class: discovered together, expanded once. A GPU scans either its adjacency list (GPUs
// of low degree) or the undiscovered classes through the matrix, whichever is shorter.
// When the links form a tree (N - 1 links, as in a star or a chain), every pair has one path and
// one walk of the tree per source fills them all: O(N^2), whatever the bandwidths.
// Complexity: O(N^2) time and memory when every pair is linked; otherwise O(N^2) for the tree,
// the classes and the lists, plus per search O(N + expanded classes x classes), so about
// O(N^2) for shorthand clusters; at worst O(N^3) for inputs with many distinct bandwidths and
// no twins.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <unordered_map>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::topology {
namespace {

std::size_t triangle_slot(std::size_t n, int u, int v) {
  auto a = static_cast<std::size_t>(std::min(u, v));
  auto b = static_cast<std::size_t>(std::max(u, v));
  return a * n - a * (a + 1) / 2 + (b - a - 1);
}

std::size_t pair_count(int n) {
  auto size = static_cast<std::size_t>(n);
  return n < 2 ? 0 : size * (size - 1) / 2;
}

std::string in_quotes(const std::string& text) { return io::quote_for_message(text); }

std::size_t at(int index) { return static_cast<std::size_t>(index); }

// The pair arrays under construction, with the helpers of the path search.
class PathFiller {
 public:
  PathFiller(const std::vector<Gpu>& gpus, std::vector<double>& bandwidth,
             std::vector<double>& latency_ms, std::vector<std::uint16_t>& hops,
             const std::string& file)
      : gpus_(gpus),
        n_(static_cast<int>(gpus.size())),
        bandwidth_(bandwidth),
        latency_ms_(latency_ms),
        hops_(hops),
        file_(file) {}

  void run() {
    if (n_ < 2) return;
    // hops 1 marks a direct link; 0 an unlinked pair, filled with its path below.
    std::size_t linked_pairs = 0;
    for (std::size_t i = 0; i < bandwidth_.size(); ++i) {
      hops_[i] = bandwidth_[i] > 0 ? 1 : 0;
      linked_pairs += hops_[i];
    }
    if (linked_pairs == bandwidth_.size()) return;
    if (linked_pairs <= kSparseLinksPerGpu * at(n_)) {
      sparse_spanning_tree();
    } else {
      spanning_tree();
    }
    rank_ids();
    if (linked_pairs == at(n_) - 1) {  // connected with N - 1 links: the links are the tree
      path_latency_.assign(at(n_), 0.0);
      path_hops_.assign(at(n_), 0);
      widest_.assign(at(n_), 0.0);
      for (int source = 0; source < n_; ++source) fill_from_tree(source);
      return;
    }
    build_classes();
    build_sparse_lists();
    for (int source = 0; source < n_; ++source) fill_from(source);
  }

 private:
  struct TreeEdge {
    int to;
    double bandwidth;
    double latency_ms;
  };

  // Links per GPU below which the spanning tree is built from the list of links (Kruskal)
  // rather than by Prim over the matrix, whose reads of a GPU's column miss the cache.
  static constexpr std::size_t kSparseLinksPerGpu = 8;

  // An entry of an adjacency list.
  struct Neighbour {
    int to;
    double bandwidth;
    double latency_ms;
  };

  // A class of twins discovered by a search, waiting to be expanded.
  struct Found {
    int parent_rank;
    int first;  // its member with the smallest id (other than the source)
  };

  [[nodiscard]] std::size_t slot(int u, int v) const { return triangle_slot(at(n_), u, v); }
  [[nodiscard]] bool linked(int u, int v) const { return hops_[slot(u, v)] == 1; }

  // Prim's maximum spanning tree over direct links; also the connectivity check.
  void spanning_tree() {
    std::vector<double> best(at(n_), 0.0);
    std::vector<int> best_from(at(n_), -1);
    std::vector<char> in_tree(at(n_), 0);
    tree_.assign(at(n_), {});
    int current = 0;
    in_tree[0] = 1;
    for (int added = 1; added < n_; ++added) {
      int next = -1;
      for (int v = 0; v < n_; ++v) {
        if (in_tree[at(v)]) continue;
        if (linked(current, v)) {
          double width = bandwidth_[slot(current, v)];
          if (width > best[at(v)]) {
            best[at(v)] = width;
            best_from[at(v)] = current;
          }
        }
        if (best[at(v)] > 0 && (next < 0 || best[at(v)] > best[at(next)])) next = v;
      }
      if (next < 0) {
        int unreached = 0;
        while (in_tree[at(unreached)]) ++unreached;
        throw_not_connected(unreached);
      }
      in_tree[at(next)] = 1;
      add_tree_edge(best_from[at(next)], next);
      current = next;
    }
    flatten_tree();
  }

  void add_tree_edge(int u, int v) {
    const std::size_t s = slot(u, v);
    tree_[at(u)].push_back(TreeEdge{v, bandwidth_[s], latency_ms_[s]});
    tree_[at(v)].push_back(TreeEdge{u, bandwidth_[s], latency_ms_[s]});
  }

  // Kruskal's maximum spanning tree over the links, read from the matrix in one sequential
  // pass: O(N^2 + E log E) for E links. Any maximum spanning tree gives the same bottlenecks;
  // when the links are a tree (N - 1 links) it is that tree. Also the connectivity check, with
  // the same message as Prim's (the first GPU outside the first GPU's component).
  void sparse_spanning_tree() {
    std::vector<std::pair<int, int>> links;
    for (int u = 0; u < n_; ++u) {
      for (int v = u + 1; v < n_; ++v) {
        if (linked(u, v)) links.emplace_back(u, v);
      }
    }
    std::stable_sort(links.begin(), links.end(), [&](const auto& x, const auto& y) {
      return bandwidth_[slot(x.first, x.second)] > bandwidth_[slot(y.first, y.second)];
    });
    std::vector<int> parent(at(n_));
    std::iota(parent.begin(), parent.end(), 0);
    auto root = [&](int v) {
      while (parent[at(v)] != v) v = parent[at(v)] = parent[at(parent[at(v)])];
      return v;
    };
    tree_.assign(at(n_), {});
    for (const auto& [u, v] : links) {
      const int ru = root(u), rv = root(v);
      if (ru == rv) continue;
      parent[at(std::max(ru, rv))] = std::min(ru, rv);
      add_tree_edge(u, v);
    }
    for (int v = 1; v < n_; ++v) {
      if (root(v) != root(0)) throw_not_connected(v);
    }
    flatten_tree();
  }

  [[noreturn]] void throw_not_connected(int unreached) const {
    throw InputError(file_ + ": topology is not connected: no path between " +
                     in_quotes(gpus_[0].id) + " and " + in_quotes(gpus_[at(unreached)].id) +
                     " (add a link, a node link or a network)");
  }

  // The tree's edges flattened, for the walks from every source.
  void flatten_tree() {
    tree_offset_.assign(at(n_) + 1, 0);
    for (int u = 0; u < n_; ++u)
      tree_offset_[at(u) + 1] = tree_offset_[at(u)] + tree_[at(u)].size();
    tree_edges_.clear();
    for (const auto& edges : tree_)
      tree_edges_.insert(tree_edges_.end(), edges.begin(), edges.end());
    tree_.clear();
  }

  // Rank of every id in byte order, for the lexicographic tie-break.
  void rank_ids() {
    std::vector<int> by_id(at(n_));
    std::iota(by_id.begin(), by_id.end(), 0);
    std::sort(by_id.begin(), by_id.end(),
              [&](int a, int b) { return gpus_[at(a)].id < gpus_[at(b)].id; });
    id_rank_.assign(at(n_), 0);
    for (int r = 0; r < n_; ++r) id_rank_[at(by_id[at(r)])] = r;
  }

  static std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }

  // Hash of the direct link in a slot (0 for none).
  [[nodiscard]] std::uint64_t link_hash(std::size_t s) const {
    if (hops_[s] != 1) return 0;
    std::uint64_t bandwidth_bits = 0, latency_bits = 0;
    std::memcpy(&bandwidth_bits, &bandwidth_[s], sizeof bandwidth_bits);
    std::memcpy(&latency_bits, &latency_ms_[s], sizeof latency_bits);
    return mix(bandwidth_bits ^ mix(latency_bits)) | 1;
  }

  // Whether two slots hold the same direct link (or both none).
  [[nodiscard]] bool same_link(std::size_t a, std::size_t b) const {
    if ((hops_[a] == 1) != (hops_[b] == 1)) return false;
    return hops_[a] != 1 || (bandwidth_[a] == bandwidth_[b] && latency_ms_[a] == latency_ms_[b]);
  }

  // Classes of twins: GPUs with the same direct link (or none) to every other GPU, an
  // equivalence relation. A search treats a class as one: its GPUs are discovered together,
  // by the same parent, and only the first is expanded (the others would discover nothing
  // more). Candidates are GPUs of the same node (where shorthand makes twins) whose rows hash
  // alike, then one sweep of the triangle confirms each against the first GPU of its class
  // and makes any that differs a class of its own, so a class only ever holds twins.
  // O(N^2), reading the triangle row by row.
  void build_classes() {
    std::vector<std::uint64_t> weight(at(n_)), row(at(n_), 0);
    for (int z = 0; z < n_; ++z) weight[at(z)] = mix(static_cast<std::uint64_t>(z) + 1);
    for (int u = 0; u < n_; ++u) {
      for (int v = u + 1; v < n_; ++v) {
        std::uint64_t h = link_hash(slot(u, v));
        row[at(u)] += weight[at(v)] * h;
        row[at(v)] += weight[at(u)] * h;
      }
    }
    // Twins u, v have row(u) - weight(v) h(u,v) == row(v) - weight(u) h(u,v).
    std::unordered_map<std::string_view, std::vector<int>> reps_of_node;
    std::vector<int> rep(at(n_));  // the GPU of smallest index of each candidate class
    for (int v = 0; v < n_; ++v) {
      std::vector<int>& reps = reps_of_node[gpus_[at(v)].node];
      rep[at(v)] = v;
      for (int r : reps) {
        std::uint64_t h = link_hash(slot(v, r));
        if (row[at(v)] - weight[at(r)] * h == row[at(r)] - weight[at(v)] * h) {
          rep[at(v)] = r;
          break;
        }
      }
      if (rep[at(v)] == v) reps.push_back(v);
    }

    // Confirm v against r = rep(v) < v: every pair (u, w), u < w, is z = u for v = w and
    // z = w for v = u. Reading L(r, u) for r < u is the only access across rows, once per
    // row and class.
    std::vector<char> has_members(at(n_), 0);
    for (int v = 0; v < n_; ++v) {
      if (rep[at(v)] != v) has_members[at(rep[at(v)])] = 1;
    }
    std::vector<int> multi;  // representatives with other members, by index
    for (int v = 0; v < n_; ++v) {
      if (has_members[at(v)]) multi.push_back(v);
    }
    std::vector<std::size_t> rep_slot(at(n_), 0);  // slot of (r, u) for representatives r < u
    std::vector<char> differs(at(n_), 0);
    for (int u = 0; u < n_; ++u) {
      for (int r : multi) {
        if (r >= u) break;
        rep_slot[at(r)] = slot(r, u);
      }
      const int rep_u = rep[at(u)];
      for (int w = u + 1; w < n_; ++w) {
        const std::size_t here = slot(u, w);
        const int rep_w = rep[at(w)];
        if (rep_w != w && rep_w != u) {
          std::size_t other = rep_w > u ? slot(u, rep_w) : rep_slot[at(rep_w)];
          if (!same_link(here, other)) differs[at(w)] = 1;
        }
        if (rep_u != u && !same_link(here, slot(rep_u, w))) differs[at(u)] = 1;
      }
    }

    class_of_.assign(at(n_), -1);
    classes_.clear();
    for (int v = 0; v < n_; ++v) {
      int r = differs[at(v)] ? v : rep[at(v)];
      if (class_of_[at(r)] < 0) {
        class_of_[at(r)] = static_cast<int>(classes_.size());
        classes_.emplace_back();
      }
      class_of_[at(v)] = class_of_[at(r)];
      classes_[at(class_of_[at(v)])].push_back(v);
    }
    for (auto& members : classes_) {
      std::sort(members.begin(), members.end(),
                [&](int a, int b) { return id_rank_[at(a)] < id_rank_[at(b)]; });
    }
  }

  // Adjacency lists, with the links' costs so that a search of sparse GPUs reads no matrix
  // (whose random reads miss the cache), for GPUs of low degree: at most N/16, and 2^21
  // entries in all, fewest first. The others scan the undiscovered classes instead.
  void build_sparse_lists() {
    const int limit = std::max(64, n_ / 16);
    constexpr std::size_t kMaxEntries = std::size_t{1} << 21;
    std::vector<int> degree(at(n_), 0);
    for (int u = 0; u < n_; ++u) {
      for (int v = u + 1; v < n_; ++v) {
        if (linked(u, v)) ++degree[at(u)], ++degree[at(v)];
      }
    }
    std::vector<int> by_degree(at(n_));
    std::iota(by_degree.begin(), by_degree.end(), 0);
    std::stable_sort(by_degree.begin(), by_degree.end(),
                     [&](int a, int b) { return degree[at(a)] < degree[at(b)]; });
    has_list_.assign(at(n_), 0);
    neighbours_.assign(at(n_), {});
    std::size_t entries = 0;
    for (int u : by_degree) {
      if (degree[at(u)] > limit || entries + at(degree[at(u)]) > kMaxEntries) break;
      entries += at(degree[at(u)]);
      has_list_[at(u)] = 1;
      neighbours_[at(u)].reserve(at(degree[at(u)]));
      for (int v = 0; v < n_; ++v) {
        if (v != u && linked(u, v)) {
          neighbours_[at(u)].push_back(
              Neighbour{v, bandwidth_[slot(u, v)], latency_ms_[slot(u, v)]});
        }
      }
    }
    target_stamp_.assign(at(n_), 0);
    target_of_source_.assign(at(n_), -1);
    linked_to_.assign(at(n_), -1);
    rank_.assign(at(n_), 0);
    path_latency_.assign(at(n_), 0.0);
    path_hops_.assign(at(n_), 0);
    widest_.assign(at(n_), 0.0);
    class_found_.assign(classes_.size(), 0);
    class_expanded_.assign(classes_.size(), 0);
    class_position_.assign(classes_.size(), 0);
  }

  // Walks the spanning tree from `source`, calling visit(u, e) for every edge e from a GPU u
  // already reached to one that is not (depth first). O(N).
  template <typename Visit>
  void walk_tree(int source, Visit visit) {
    tree_stack_.assign(1, {source, -1});
    while (!tree_stack_.empty()) {
      auto [u, parent] = tree_stack_.back();
      tree_stack_.pop_back();
      for (std::size_t i = tree_offset_[at(u)]; i < tree_offset_[at(u) + 1]; ++i) {
        const TreeEdge& e = tree_edges_[i];
        if (e.to == parent) continue;
        visit(u, e);
        tree_stack_.emplace_back(e.to, u);
      }
    }
  }

  // Bottleneck from `source` to every GPU, along the spanning tree.
  void tree_widths(int source) {
    widest_[at(source)] = std::numeric_limits<double>::infinity();
    walk_tree(source, [&](int u, const TreeEdge& e) {
      widest_[at(e.to)] = std::min(widest_[at(u)], e.bandwidth);
    });
  }

  // When the links form a tree (a star, a chain) every pair has one path: the tree's. Fills the
  // unlinked pairs from `source` to the GPUs after it in id order by one walk, latencies summed
  // from `source` outward as the search would. O(N) per source, O(N^2) in all.
  void fill_from_tree(int source) {
    path_latency_[at(source)] = 0;
    path_hops_[at(source)] = 0;
    widest_[at(source)] = std::numeric_limits<double>::infinity();
    walk_tree(source, [&](int u, const TreeEdge& e) {
      widest_[at(e.to)] = std::min(widest_[at(u)], e.bandwidth);
      path_latency_[at(e.to)] = path_latency_[at(u)] + e.latency_ms;
      path_hops_[at(e.to)] = path_hops_[at(u)] + 1;
      if (path_hops_[at(e.to)] > 1 && id_rank_[at(e.to)] > id_rank_[at(source)]) {
        record_path(source, e.to, widest_[at(e.to)]);
      }
    });
  }

  // The member of class `c` that stands for it in a search from `source`.
  [[nodiscard]] int representative(int c, int source) const {
    const std::vector<int>& members = classes_[at(c)];
    return members.front() != source ? members.front() : members[1];
  }

  void fill_from(int source) {
    // Targets: unlinked partners with a larger id (paths are read from the smaller id). Twins
    // of each other are all linked to the source or all not. A source with a list marks its
    // partners instead of reading a column of the matrix.
    const bool listed = has_list_[at(source)] != 0;
    if (listed) {
      for (const Neighbour& neighbour : neighbours_[at(source)]) {
        linked_to_[at(neighbour.to)] = source;
      }
    }
    std::vector<int> targets;
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      const std::vector<int>& members = classes_[c];
      if (members.size() == 1 && members.front() == source) continue;
      const int r = representative(static_cast<int>(c), source);
      if (listed ? linked_to_[at(r)] == source : linked(source, r)) continue;
      for (int v : members) {
        if (v != source && id_rank_[at(v)] > id_rank_[at(source)]) {
          targets.push_back(v);
          target_of_source_[at(representative(static_cast<int>(c), source))] = source;
        }
      }
    }
    if (targets.empty()) return;
    tree_widths(source);

    // Distinct bottlenecks, widest first, and the classes that first become reachable at each
    // (twins are equally far from the source).
    std::vector<double> levels;
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      if (classes_[c].size() == 1 && classes_[c].front() == source) continue;
      int r = representative(static_cast<int>(c), source);
      if (target_of_source_[at(r)] == source) levels.push_back(widest_[at(r)]);
    }
    std::sort(levels.begin(), levels.end(), std::greater<>());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    auto level_of = [&](double width) {
      // The first level whose bottleneck is <= width; levels.size() when width is narrower.
      return static_cast<std::size_t>(
          std::lower_bound(levels.begin(), levels.end(), width, std::greater<>()) - levels.begin());
    };
    std::vector<std::vector<int>> targets_at(levels.size()), classes_at(levels.size());
    for (int t : targets) targets_at[level_of(widest_[at(t)])].push_back(t);
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      if (classes_[c].size() == 1 && classes_[c].front() == source) continue;
      std::size_t level = level_of(widest_[at(representative(static_cast<int>(c), source))]);
      if (level < levels.size()) classes_at[level].push_back(static_cast<int>(c));
    }

    std::vector<int> members;  // classes reachable from `source` at bottleneck >= the level's
    for (std::size_t level = 0; level < levels.size(); ++level) {
      members.insert(members.end(), classes_at[level].begin(), classes_at[level].end());
      search(source, levels[level], targets_at[level], members);
    }
  }

  // Breadth-first search from `source` over links of bandwidth >= `width`, by classes of twins
  // (see file comment).
  void search(int source, double width, const std::vector<int>& targets,
              const std::vector<int>& members) {
    const int generation = ++generation_;
    charge(targets.size() + 1);
    for (int t : targets) target_stamp_[at(t)] = generation;
    std::size_t remaining = targets.size();
    rank_[at(source)] = 0;
    path_latency_[at(source)] = 0;
    path_hops_[at(source)] = 0;

    // The classes not yet discovered, built on first use; `class_position_` allows O(1)
    // removal.
    std::vector<int> unvisited;
    bool unvisited_built = false;
    auto remove_unvisited = [&](int c) {
      std::size_t p = class_position_[at(c)];
      int last = unvisited.back();
      unvisited[p] = last;
      class_position_[at(last)] = p;
      unvisited.pop_back();
    };
    std::vector<int> layer{source};
    std::vector<Found> next;
    // Class c found from x through a link of latency `link_ms` (the same link joins x to every
    // twin: x is never one of them, or is the source).
    auto discover = [&](int x, int c, double link_ms) {
      class_found_[at(c)] = generation;
      const int first = representative(c, source);
      const double latency = path_latency_[at(x)] + link_ms;
      const int hops = path_hops_[at(x)] + 1;
      for (int y : classes_[at(c)]) {
        if (y == source) continue;
        path_latency_[at(y)] = latency;
        path_hops_[at(y)] = hops;
        if (target_stamp_[at(y)] == generation) --remaining;
      }
      next.push_back(Found{rank_[at(x)], first});
    };

    while (remaining > 0) {
      if (layer.empty()) {
        throw InternalError("widest path search lost a target from " +
                            in_quotes(gpus_[at(source)].id));
      }
      next.clear();
      for (int x : layer) {
        if (remaining == 0) break;
        const int own = class_of_[at(x)];
        if (class_expanded_[at(own)] == generation) continue;  // a twin of the source
        class_expanded_[at(own)] = generation;
        bool use_list =
            has_list_[at(x)] && (!unvisited_built || neighbours_[at(x)].size() <= unvisited.size());
        if (use_list) {
          charge(neighbours_[at(x)].size());
          for (const Neighbour& neighbour : neighbours_[at(x)]) {
            const int y = neighbour.to;
            if (neighbour.bandwidth < width || y == source) continue;
            const int c = class_of_[at(y)];
            if (class_found_[at(c)] == generation) continue;
            if (unvisited_built) remove_unvisited(c);
            discover(x, c, neighbour.latency_ms);
            if (remaining == 0) break;
          }
          continue;
        }
        if (!unvisited_built) {
          unvisited_built = true;
          charge(members.size());
          for (int c : members) {
            if (class_found_[at(c)] == generation) continue;
            class_position_[at(c)] = unvisited.size();
            unvisited.push_back(c);
          }
        }
        charge(unvisited.size());
        for (std::size_t i = 0; i < unvisited.size() && remaining > 0;) {
          const int c = unvisited[i];
          std::size_t s = slot(x, representative(c, source));
          if (hops_[s] == 1 && bandwidth_[s] >= width) {
            remove_unvisited(c);  // moves the last one to i
            discover(x, c, latency_ms_[s]);
          } else {
            ++i;
          }
        }
      }
      if (remaining == 0) break;
      advance(next, layer);
    }
    record_paths(source, width, targets);
  }

  // The next layer of the search: the GPUs found, ranked by their paths in lexicographic order
  // (the parent's, then the GPU's own id). O(F log F) for F found.
  void advance(std::vector<Found>& next, std::vector<int>& layer) {
    std::sort(next.begin(), next.end(), [&](const Found& a, const Found& b) {
      if (a.parent_rank != b.parent_rank) return a.parent_rank < b.parent_rank;
      return id_rank_[at(a.first)] < id_rank_[at(b.first)];
    });
    layer.clear();
    for (std::size_t r = 0; r < next.size(); ++r) {
      rank_[at(next[r].first)] = static_cast<int>(r);
      layer.push_back(next[r].first);
    }
  }

  // Stores the widest paths found from `source` at bottleneck `width` to `targets`.
  void record_paths(int source, double width, const std::vector<int>& targets) {
    for (int t : targets) record_path(source, t, width);
  }

  // Stores the path found from `source` to `target` at bottleneck `width`.
  void record_path(int source, int target, double width) {
    if (!std::isfinite(path_latency_[at(target)])) {
      throw InputError(file_ + ": the latency along the path between " +
                       in_quotes(gpus_[at(source)].id) + " and " + in_quotes(gpus_[at(target)].id) +
                       " is too large");
    }
    std::size_t s = slot(source, target);
    bandwidth_[s] = width;
    latency_ms_[s] = path_latency_[at(target)];
    hops_[s] = static_cast<std::uint16_t>(path_hops_[at(target)]);
  }

  // Counts the work of the searches (GPUs and classes looked at) against kMaxPathSteps, so that
  // a topology that would take minutes fails at once instead. Deterministic: steps, not time.
  void charge(std::size_t steps) {
    steps_ += steps;
    if (steps_ > kMaxPathSteps) {
      throw InputError(
          file_ + ": too many distinct paths to search: the widest paths between the " +
          std::to_string(n_) + " GPUs' unlinked pairs take more than " +
          format_steps(kMaxPathSteps) +
          " steps (many distinct link bandwidths and few links); link more pairs "
          "directly or use fewer distinct bandwidths (see \"Limits\" in docs/errors.md)");
    }
  }
  static std::string format_steps(std::uint64_t steps) {
    char text[32];
    std::snprintf(text, sizeof text, "%.0e", static_cast<double>(steps));
    return text;
  }

  std::uint64_t steps_ = 0;
  const std::vector<Gpu>& gpus_;
  const int n_;
  std::vector<double>& bandwidth_;
  std::vector<double>& latency_ms_;
  std::vector<std::uint16_t>& hops_;
  const std::string& file_;

  std::vector<std::vector<TreeEdge>> tree_;  // while building
  std::vector<std::size_t> tree_offset_;     // tree edges of u: [offset[u], offset[u + 1])
  std::vector<TreeEdge> tree_edges_;
  std::vector<std::pair<int, int>> tree_stack_;
  std::vector<int> id_rank_;
  std::vector<int> class_of_;
  std::vector<std::vector<int>> classes_;  // members in id order
  std::vector<char> has_list_;
  std::vector<std::vector<Neighbour>> neighbours_;
  // Per-search state. The stamps hold the generation of the search that last set them, so
  // nothing needs clearing between searches.
  int generation_ = 0;
  std::vector<int> target_stamp_;
  std::vector<int> target_of_source_;  // by representative: the last source it had targets for
  std::vector<int> linked_to_;         // the last listed source linked to a GPU
  std::vector<int> class_found_;
  std::vector<int> class_expanded_;
  std::vector<std::size_t> class_position_;
  std::vector<int> rank_;
  std::vector<double> path_latency_;
  std::vector<int> path_hops_;
  std::vector<double> widest_;
};

}  // namespace

std::optional<int> Topology::index_of(std::string_view id) const {
  auto it = index_.find(std::string(id));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

PairCost Topology::worst_pair(const std::vector<int>& from, const std::vector<int>& to) const {
  PairCost worst{std::numeric_limits<double>::infinity(), 0, 0};
  auto widen = [&worst](const PairCost& cost) {
    worst.bandwidth_bytes_per_s = std::min(worst.bandwidth_bytes_per_s, cost.bandwidth_bytes_per_s);
    worst.latency_ms = std::max(worst.latency_ms, cost.latency_ms);
  };
  if (!by_node_) {
    for (const int u : from) {
      for (const int v : to) {
        widen({bandwidth_bytes_per_s(u, v), latency_ms(u, v), 0});
      }
    }
    return worst;
  }
  if (from.empty() || to.empty()) return worst;
  // A pair costs its node's cost when both GPUs are on one node, the network's otherwise: the
  // nodes both sets touch, and the network unless both sets lie on one and the same node.
  auto nodes_of = [this](const std::vector<int>& gpus) {
    std::vector<int> nodes;
    nodes.reserve(gpus.size());
    for (const int gpu : gpus) nodes.push_back(gpu_node_[static_cast<std::size_t>(gpu)]);
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    return nodes;
  };
  const std::vector<int> a = nodes_of(from), b = nodes_of(to);
  std::vector<int> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  for (const int node : both) widen(node_costs_[static_cast<std::size_t>(node)]);
  if (!(a.size() == 1 && b.size() == 1 && a == b)) widen(network_);
  return worst;
}

PairCost Topology::pair(int u, int v) const {
  if (by_node_) return by_node(u, v);
  std::size_t at = slot(u, v);
  return PairCost{bandwidth_[at], latency_ms_[at], hops_[at]};
}

DirectLinks::DirectLinks(int gpu_count) : gpu_count_(gpu_count) {
  if (gpu_count < 0 || gpu_count > kMaxGpus) {
    throw InternalError("DirectLinks for " + std::to_string(gpu_count) + " GPUs");
  }
  bandwidth_.assign(pair_count(gpu_count), 0.0);
  latency_ms_.assign(bandwidth_.size(), 0.0);
}

void DirectLinks::set(int a, int b, double bandwidth_bytes_per_s, double latency_ms) {
  if (a < 0 || b < 0 || a >= gpu_count_ || b >= gpu_count_ || a == b) {
    throw InternalError("link between GPUs " + std::to_string(a) + " and " + std::to_string(b) +
                        " of " + std::to_string(gpu_count_));
  }
  if (!(bandwidth_bytes_per_s > 0) || !std::isfinite(bandwidth_bytes_per_s) || !(latency_ms >= 0) ||
      !std::isfinite(latency_ms)) {
    throw InternalError("link with bandwidth " + std::to_string(bandwidth_bytes_per_s) +
                        " and latency " + std::to_string(latency_ms));
  }
  std::size_t at = triangle_slot(static_cast<std::size_t>(gpu_count_), a, b);
  bandwidth_[at] = bandwidth_bytes_per_s;
  latency_ms_[at] = latency_ms + 0.0;  // folds -0
}

bool DirectLinks::has(int a, int b) const {
  if (a < 0 || b < 0 || a >= gpu_count_ || b >= gpu_count_ || a == b) return false;
  return bandwidth_[triangle_slot(static_cast<std::size_t>(gpu_count_), a, b)] > 0;
}

Topology Topology::build(std::string name, std::vector<Gpu> gpus, const std::vector<Link>& links,
                         const std::string& file) {
  if (gpus.size() > static_cast<std::size_t>(kMaxGpus)) {
    throw InternalError("topology with " + std::to_string(gpus.size()) + " GPUs");
  }
  DirectLinks direct(static_cast<int>(gpus.size()));
  for (const Link& link : links) {
    if (direct.has(link.a, link.b)) {
      throw InternalError("two links between GPUs " + std::to_string(link.a) + " and " +
                          std::to_string(link.b));
    }
    direct.set(link.a, link.b, link.bandwidth_bytes_per_s, link.latency_ms);
  }
  return build(std::move(name), std::move(gpus), std::move(direct), file);
}

Topology Topology::build(std::string name, std::vector<Gpu> gpus, DirectLinks links,
                         const std::string& file) {
  if (static_cast<std::size_t>(links.gpu_count_) != gpus.size()) {
    throw InternalError("links for " + std::to_string(links.gpu_count_) + " GPUs, given " +
                        std::to_string(gpus.size()));
  }
  Topology topology;
  topology.name_ = std::move(name);
  topology.gpus_ = std::move(gpus);
  topology.bandwidth_ = std::move(links.bandwidth_);
  topology.latency_ms_ = std::move(links.latency_ms_);
  std::set<std::string> nodes;
  for (std::size_t i = 0; i < topology.gpus_.size(); ++i) {
    if (!topology.index_.emplace(topology.gpus_[i].id, static_cast<int>(i)).second) {
      throw InternalError("duplicate GPU id " + in_quotes(topology.gpus_[i].id));
    }
    nodes.insert(topology.gpus_[i].node);
  }
  topology.node_count_ = static_cast<int>(nodes.size());
  topology.hops_.assign(topology.bandwidth_.size(), 1);
  PathFiller(topology.gpus_, topology.bandwidth_, topology.latency_ms_, topology.hops_, file).run();
  return topology;
}

Topology Topology::build_by_node(std::string name, std::vector<Gpu> gpus, std::vector<int> gpu_node,
                                 std::vector<PairCost> node_costs, PairCost network) {
  if (gpus.size() > static_cast<std::size_t>(kMaxNodeGpus) || gpu_node.size() != gpus.size()) {
    throw InternalError("node-cost topology with " + std::to_string(gpus.size()) + " GPUs and " +
                        std::to_string(gpu_node.size()) + " node indices");
  }
  Topology topology;
  topology.name_ = std::move(name);
  topology.gpus_ = std::move(gpus);
  topology.index_.reserve(topology.gpus_.size());
  std::vector<char> used(node_costs.size(), 0);
  for (std::size_t i = 0; i < topology.gpus_.size(); ++i) {
    if (gpu_node[i] < 0 || at(gpu_node[i]) >= node_costs.size()) {
      throw InternalError("GPU " + std::to_string(i) + " of node " + std::to_string(gpu_node[i]) +
                          " of " + std::to_string(node_costs.size()));
    }
    if (!topology.index_.emplace(topology.gpus_[i].id, static_cast<int>(i)).second) {
      throw InternalError("duplicate GPU id " + in_quotes(topology.gpus_[i].id));
    }
    topology.node_count_ += used[at(gpu_node[i])] ? 0 : 1;
    used[at(gpu_node[i])] = 1;
  }
  if (at(topology.node_count_) != node_costs.size()) {
    throw InternalError("node-cost topology with a node without GPUs");
  }
  topology.by_node_ = true;
  topology.gpu_node_ = std::move(gpu_node);
  topology.node_costs_ = std::move(node_costs);
  topology.network_ = network;
  return topology;
}

}  // namespace pipeplan::topology
