// Topology reading (spec section 2) and effective pair costs.
//
// Pair costs: a linked pair uses its link; any other pair uses the widest-bottleneck path
// (max-min Dijkstra, O(E log N) per source), with ties broken by fewest hops, then by the
// lexicographically smallest sequence of GPU ids read from the smaller id (a layered BFS over
// the links at least as wide as the bottleneck, O(E) per distinct bottleneck value).

#include "pipeplan/topology/topology.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <set>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/io/units.hpp"

namespace pipeplan::topology {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

struct Edge {
  int to;
  double bandwidth_bytes_per_s;
  double latency_ms;
};

// Direct links as upper-triangle arrays; bandwidth 0 means "no link".
struct DirectCosts {
  std::vector<double> bandwidth;
  std::vector<double> latency_ms;
};

std::size_t triangle_slot(std::size_t n, int u, int v) {
  auto a = static_cast<std::size_t>(std::min(u, v));
  auto b = static_cast<std::size_t>(std::max(u, v));
  return a * n - a * (a + 1) / 2 + (b - a - 1);
}

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

}  // namespace

std::optional<int> Topology::index_of(std::string_view id) const {
  auto it = index_.find(std::string(id));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

PairCost Topology::pair(int u, int v) const {
  std::size_t at = slot(u, v);
  return PairCost{bandwidth_[at], latency_ms_[at], hops_[at]};
}

namespace {

// Fills every unlinked pair of `topology` arrays with its widest path (see file comment).
void fill_paths(const std::vector<Gpu>& gpus, std::vector<double>& bandwidth,
                std::vector<double>& latency_ms, std::vector<std::uint16_t>& hops,
                const std::string& file) {
  const int n = static_cast<int>(gpus.size());
  const auto size = static_cast<std::size_t>(n);
  bool any_missing = std::any_of(bandwidth.begin(), bandwidth.end(), [](double b) { return b == 0; });
  if (!any_missing) return;

  std::vector<std::vector<Edge>> adjacency(size);
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) {
      std::size_t at = triangle_slot(size, u, v);
      if (bandwidth[at] == 0) continue;
      adjacency[static_cast<std::size_t>(u)].push_back(Edge{v, bandwidth[at], latency_ms[at]});
      adjacency[static_cast<std::size_t>(v)].push_back(Edge{u, bandwidth[at], latency_ms[at]});
    }
  }

  // Connectivity: everything must be reachable from GPU 0.
  {
    std::vector<char> seen(size, 0);
    std::vector<int> stack{0};
    seen[0] = 1;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (const Edge& e : adjacency[static_cast<std::size_t>(u)]) {
        if (!seen[static_cast<std::size_t>(e.to)]) {
          seen[static_cast<std::size_t>(e.to)] = 1;
          stack.push_back(e.to);
        }
      }
    }
    for (int v = 0; v < n; ++v) {
      if (!seen[static_cast<std::size_t>(v)]) {
        throw InputError(file + ": topology is not connected: no path between " +
                         in_quotes(gpus[0].id) + " and " + in_quotes(gpus[static_cast<std::size_t>(v)].id) +
                         " (add a link, a node link or a network)");
      }
    }
  }

  // Rank of every id in byte order, for the lexicographic tie-break.
  std::vector<int> by_id(size);
  std::iota(by_id.begin(), by_id.end(), 0);
  std::sort(by_id.begin(), by_id.end(), [&](int a, int b) {
    return gpus[static_cast<std::size_t>(a)].id < gpus[static_cast<std::size_t>(b)].id;
  });
  std::vector<int> id_rank(size);
  for (int r = 0; r < n; ++r) id_rank[static_cast<std::size_t>(by_id[static_cast<std::size_t>(r)])] = r;

  std::vector<double> widest(size);
  std::vector<int> stamp(size, -1);  // BFS visit marker, one generation per BFS
  std::vector<int> layer_rank(size);
  std::vector<double> path_latency(size);
  std::vector<int> path_hops(size);
  int generation = 0;

  for (int source = 0; source < n; ++source) {
    const auto s = static_cast<std::size_t>(source);
    // Targets: unlinked partners with a larger id (paths are read from the smaller id).
    std::vector<int> targets;
    for (int v = 0; v < n; ++v) {
      if (v == source || id_rank[static_cast<std::size_t>(v)] < id_rank[s]) continue;
      if (bandwidth[triangle_slot(size, source, v)] == 0) targets.push_back(v);
    }
    if (targets.empty()) continue;

    // Widest (max-min) bottleneck from the source to every GPU.
    std::fill(widest.begin(), widest.end(), 0.0);
    widest[s] = std::numeric_limits<double>::infinity();
    std::priority_queue<std::pair<double, int>> queue;
    queue.emplace(widest[s], source);
    while (!queue.empty()) {
      auto [width, u] = queue.top();
      queue.pop();
      if (width < widest[static_cast<std::size_t>(u)]) continue;
      for (const Edge& e : adjacency[static_cast<std::size_t>(u)]) {
        double through = std::min(width, e.bandwidth_bytes_per_s);
        if (through > widest[static_cast<std::size_t>(e.to)]) {
          widest[static_cast<std::size_t>(e.to)] = through;
          queue.emplace(through, e.to);
        }
      }
    }

    // One layered BFS per distinct bottleneck value among the targets.
    std::map<double, std::vector<int>, std::greater<>> by_width;
    for (int t : targets) by_width[widest[static_cast<std::size_t>(t)]].push_back(t);
    for (const auto& [width, group] : by_width) {
      ++generation;
      std::vector<int> layer{source};
      stamp[s] = generation;
      layer_rank[s] = 0;
      path_latency[s] = 0;
      path_hops[s] = 0;
      std::size_t found = 0;
      std::size_t wanted = group.size();
      while (!layer.empty() && found < wanted) {
        std::vector<int> next;
        // The layer is in path order, so the first discoverer of a GPU is its best parent.
        for (int x : layer) {
          const auto xs = static_cast<std::size_t>(x);
          for (const Edge& e : adjacency[xs]) {
            if (e.bandwidth_bytes_per_s < width) continue;
            const auto ys = static_cast<std::size_t>(e.to);
            if (stamp[ys] == generation) continue;
            stamp[ys] = generation;
            layer_rank[ys] = layer_rank[xs];  // parent's rank, replaced below
            path_latency[ys] = path_latency[xs] + e.latency_ms;
            path_hops[ys] = path_hops[xs] + 1;
            next.push_back(e.to);
          }
        }
        std::sort(next.begin(), next.end(), [&](int a, int b) {
          const auto as = static_cast<std::size_t>(a), bs = static_cast<std::size_t>(b);
          if (layer_rank[as] != layer_rank[bs]) return layer_rank[as] < layer_rank[bs];
          return id_rank[as] < id_rank[bs];
        });
        for (std::size_t r = 0; r < next.size(); ++r) {
          layer_rank[static_cast<std::size_t>(next[r])] = static_cast<int>(r);
        }
        found = 0;
        for (int t : group) found += stamp[static_cast<std::size_t>(t)] == generation ? 1 : 0;
        layer = std::move(next);
      }
      for (int t : group) {
        const auto ts = static_cast<std::size_t>(t);
        std::size_t at = triangle_slot(size, source, t);
        bandwidth[at] = width;
        latency_ms[at] = path_latency[ts];
        hops[at] = static_cast<std::uint16_t>(path_hops[ts]);
      }
    }
  }
}

}  // namespace

DirectLinks::DirectLinks(int gpu_count)
    : gpu_count_(gpu_count),
      bandwidth_(static_cast<std::size_t>(gpu_count) * static_cast<std::size_t>(gpu_count - 1) / 2,
                 0.0),
      latency_ms_(bandwidth_.size(), 0.0) {}

void DirectLinks::set(int a, int b, double bandwidth_bytes_per_s, double latency_ms) {
  std::size_t at = triangle_slot(static_cast<std::size_t>(gpu_count_), a, b);
  bandwidth_[at] = bandwidth_bytes_per_s;
  latency_ms_[at] = latency_ms;
}

bool DirectLinks::has(int a, int b) const {
  return bandwidth_[triangle_slot(static_cast<std::size_t>(gpu_count_), a, b)] > 0;
}

Topology Topology::build(std::string name, std::vector<Gpu> gpus, const std::vector<Link>& links,
                         const std::string& file) {
  DirectLinks direct(static_cast<int>(gpus.size()));
  for (const Link& link : links) direct.set(link.a, link.b, link.bandwidth_bytes_per_s, link.latency_ms);
  return build(std::move(name), std::move(gpus), std::move(direct), file);
}

Topology Topology::build(std::string name, std::vector<Gpu> gpus, DirectLinks links,
                         const std::string& file) {
  Topology topology;
  topology.name_ = std::move(name);
  topology.gpus_ = std::move(gpus);
  topology.bandwidth_ = std::move(links.bandwidth_);
  topology.latency_ms_ = std::move(links.latency_ms_);
  std::set<std::string> nodes;
  for (std::size_t i = 0; i < topology.gpus_.size(); ++i) {
    topology.index_.emplace(topology.gpus_[i].id, static_cast<int>(i));
    nodes.insert(topology.gpus_[i].node);
  }
  topology.node_count_ = static_cast<int>(nodes.size());
  topology.hops_.assign(topology.bandwidth_.size(), 1);
  fill_paths(topology.gpus_, topology.bandwidth_, topology.latency_ms_, topology.hops_, file);
  return topology;
}

namespace {

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_ms = 0;
};

LinkSpec read_link_spec(const io::Node& node, std::initializer_list<std::string_view> keys) {
  io::ObjectReader object(node, keys);
  io::Node bandwidth = object.required("bandwidth");
  LinkSpec spec;
  spec.bandwidth_bytes_per_s = io::read_quantity(bandwidth, io::QuantityKind::kBandwidth);
  if (!(spec.bandwidth_bytes_per_s > 0)) {
    bandwidth.fail("bandwidth must be > 0, got " + io::describe_value(bandwidth.json()));
  }
  spec.latency_ms = io::read_quantity(object.required("latency"), io::QuantityKind::kLatency) * 1e3;
  return spec;
}

double read_speed(const io::Node& node) { return node.as_positive(); }

std::optional<double> read_memory(const std::optional<io::Node>& node) {
  if (!node) return std::nullopt;
  return io::read_quantity(*node, io::QuantityKind::kMemory);
}

// A node of the cluster as the reader builds it.
struct NodeInfo {
  std::optional<LinkSpec> link;  // joins its GPUs pairwise
};

}  // namespace

Topology read_topology(const io::Source& source) {
  io::Document document = io::parse_json(source);
  io::Node root(document, document.root, "");
  io::ObjectReader object(root, {"schema", "name", "nodes", "network", "gpus", "links"});
  if (auto schema = object.optional("schema")) {
    if (schema->as_string() != kTopologySchema) {
      schema->fail(std::string("must be \"") + kTopologySchema + "\", got " +
                   io::describe_value(schema->json()));
    }
  }
  std::string name;
  if (auto name_node = object.optional("name")) name = name_node->as_nonempty_string();

  std::optional<LinkSpec> network;
  if (auto network_node = object.optional("network")) {
    network = read_link_spec(*network_node, {"bandwidth", "latency"});
  }

  std::vector<Gpu> gpus;
  std::vector<int> gpu_node;  // index into `nodes`
  std::vector<NodeInfo> nodes;
  std::map<std::string, int> node_index;      // node name -> index
  std::map<std::string, std::string> origin;  // node name -> pointer that made it
  std::map<std::string, std::string> gpu_origin;

  if (auto nodes_node = object.optional("nodes")) {
    for (const io::Node& entry : nodes_node->elements()) {
      io::ObjectReader shorthand(entry, {"name", "count", "gpus", "memory", "speed", "link"});
      io::Node name_node = shorthand.required("name");
      std::string base = name_node.as_nonempty_string();
      std::int64_t count = 1;
      if (auto count_node = shorthand.optional("count")) count = count_node->as_integer(1, kMaxInt);
      io::Node gpus_node = shorthand.required("gpus");
      std::int64_t per_node = gpus_node.as_integer(1, kMaxInt);
      if (count > kMaxGpus || per_node > kMaxGpus ||
          static_cast<std::int64_t>(gpus.size()) + count * per_node > kMaxGpus) {
        entry.fail("too many GPUs: pipeplan handles at most " + std::to_string(kMaxGpus));
      }
      auto memory = read_memory(shorthand.optional("memory"));
      double speed = 1.0;
      if (auto speed_node = shorthand.optional("speed")) speed = read_speed(*speed_node);
      std::optional<LinkSpec> link;
      if (auto link_node = shorthand.optional("link")) {
        link = read_link_spec(*link_node, {"bandwidth", "latency"});
      }
      for (std::int64_t i = 0; i < count; ++i) {
        std::string node_name = count == 1 ? base : base + std::to_string(i);
        if (auto it = origin.find(node_name); it != origin.end()) {
          name_node.fail("generated node name " + in_quotes(node_name) + " collides with the one from " +
                         it->second);
        }
        origin.emplace(node_name, entry.pointer());
        int index = static_cast<int>(nodes.size());
        node_index.emplace(node_name, index);
        nodes.push_back(NodeInfo{link});
        for (std::int64_t j = 0; j < per_node; ++j) {
          Gpu gpu;
          gpu.id = node_name + "/gpu" + std::to_string(j);
          gpu.node = node_name;
          gpu.speed = speed;
          gpu.memory_bytes = memory;
          if (auto it = gpu_origin.find(gpu.id); it != gpu_origin.end()) {
            name_node.fail("generated GPU id " + in_quotes(gpu.id) + " collides with the one from " +
                           it->second);
          }
          gpu_origin.emplace(gpu.id, entry.pointer());
          gpus.push_back(std::move(gpu));
          gpu_node.push_back(index);
        }
      }
    }
  }

  if (auto gpus_node = object.optional("gpus")) {
    std::vector<io::Node> entries = gpus_node->elements();
    if (gpus.size() + entries.size() > static_cast<std::size_t>(kMaxGpus)) {
      gpus_node->fail("too many GPUs: pipeplan handles at most " + std::to_string(kMaxGpus));
    }
    for (const io::Node& entry : entries) {
      io::ObjectReader explicit_gpu(entry, {"id", "node", "memory", "speed"});
      io::Node id_node = explicit_gpu.required("id");
      Gpu gpu;
      gpu.id = id_node.as_nonempty_string();
      if (auto it = gpu_origin.find(gpu.id); it != gpu_origin.end()) {
        id_node.fail("duplicate GPU id " + in_quotes(gpu.id) + " (also from " + it->second + ")");
      }
      gpu_origin.emplace(gpu.id, entry.pointer());
      // Without `node`, a GPU is a node of its own, named after the GPU.
      gpu.node = gpu.id;
      if (auto node_name = explicit_gpu.optional("node")) gpu.node = node_name->as_nonempty_string();
      gpu.memory_bytes = read_memory(explicit_gpu.optional("memory"));
      if (auto speed_node = explicit_gpu.optional("speed")) gpu.speed = read_speed(*speed_node);
      auto [it, inserted] = node_index.emplace(gpu.node, static_cast<int>(nodes.size()));
      if (inserted) nodes.push_back(NodeInfo{std::nullopt});
      gpu_node.push_back(it->second);
      gpus.push_back(std::move(gpu));
    }
  }

  if (gpus.empty()) root.fail("the topology has no GPUs (give \"nodes\" or \"gpus\")");

  // Direct links: the shorthand's node links and network, then explicit links replace them.
  const int n = static_cast<int>(gpus.size());
  DirectLinks direct(n);
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) {
      const int nu = gpu_node[static_cast<std::size_t>(u)];
      const int nv = gpu_node[static_cast<std::size_t>(v)];
      const std::optional<LinkSpec>& spec = nu == nv ? nodes[static_cast<std::size_t>(nu)].link : network;
      if (spec) direct.set(u, v, spec->bandwidth_bytes_per_s, spec->latency_ms);
    }
  }

  std::map<std::string, int> id_to_index;
  for (int i = 0; i < n; ++i) id_to_index.emplace(gpus[static_cast<std::size_t>(i)].id, i);

  if (auto links_node = object.optional("links")) {
    std::map<std::pair<int, int>, std::string> seen;
    for (const io::Node& entry : links_node->elements()) {
      io::ObjectReader link(entry, {"between", "bandwidth", "latency"});
      io::Node between = link.required("between");
      std::vector<io::Node> ends = between.elements();
      if (ends.size() != 2) {
        between.fail("must list exactly two GPU ids, got " + std::to_string(ends.size()));
      }
      int end_index[2];
      for (int k = 0; k < 2; ++k) {
        std::string id = ends[static_cast<std::size_t>(k)].as_nonempty_string();
        auto it = id_to_index.find(id);
        if (it == id_to_index.end()) ends[static_cast<std::size_t>(k)].fail("unknown GPU " + in_quotes(id));
        end_index[k] = it->second;
      }
      if (end_index[0] == end_index[1]) between.fail("a link needs two different GPUs");
      auto key = std::minmax(end_index[0], end_index[1]);
      if (auto it = seen.find(key); it != seen.end()) {
        entry.fail("second link between " + in_quotes(gpus[static_cast<std::size_t>(key.first)].id) +
                   " and " + in_quotes(gpus[static_cast<std::size_t>(key.second)].id) + " (first at " +
                   it->second + ")");
      }
      seen.emplace(key, entry.pointer());
      LinkSpec spec = read_link_spec(entry, {"between", "bandwidth", "latency"});
      direct.set(end_index[0], end_index[1], spec.bandwidth_bytes_per_s, spec.latency_ms);
    }
  }

  return Topology::build(std::move(name), std::move(gpus), std::move(direct), source.name);
}

}  // namespace pipeplan::topology
