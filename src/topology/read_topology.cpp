// Topology reading (spec section 2): topo.json into GPUs and direct links, refused with the
// file and JSON pointer of the first problem; Topology::build (pair_costs.cpp) then derives the
// effective pair costs. Complexity: O(N^2) in the GPUs for the direct links (the shorthand
// joins every pair), O(N + links) for everything else, plus O(size of the file) parsing.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_map>

#include "pipeplan/error.hpp"
#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/hardware/node_catalogue.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/io/units.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::topology {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

// kMaxGpus as a size.
constexpr std::size_t kMaxGpusAt = static_cast<std::size_t>(kMaxGpus);

std::string in_quotes(const std::string& text) { return io::quote_for_message(text); }

std::size_t at(int index) { return static_cast<std::size_t>(index); }

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_ms = 0;
};

// A bandwidth: a quantity > 0.
double read_bandwidth(const io::Node& node) {
  const auto& value = node.json();
  bool positive_number = value.is_number() && value.get<double>() > 0;
  if (value.is_number() && !positive_number) {
    node.fail("must be a bandwidth > 0, got " + io::describe_value(value));
  }
  double bandwidth = io::read_quantity(node, io::QuantityKind::kBandwidth);
  if (!(bandwidth > 0)) node.fail("must be a bandwidth > 0, got " + io::describe_value(value));
  if (bandwidth < kMinBandwidthBytesPerS) {
    node.fail("must be a bandwidth of at least 1 bit/s, got " + io::describe_value(value));
  }
  return bandwidth;
}

// A speed: a finite number >= kMinSpeed.
double read_speed(const io::Node& node) {
  const double speed = node.as_positive();
  if (speed < kMinSpeed) {
    node.fail("must be a speed of at least " + io::describe_value(nlohmann::json(kMinSpeed)) +
              ", got " + io::describe_value(node.json()));
  }
  return speed;
}

// A latency in ms: a quantity >= 0 in seconds whose value in ms is finite.
double read_latency_ms(const io::Node& node) {
  double latency_ms = io::read_quantity(node, io::QuantityKind::kLatency) * 1e3;
  if (!std::isfinite(latency_ms)) {
    node.fail("latency out of range, got " + io::describe_value(node.json()));
  }
  return latency_ms + 0.0;  // folds -0
}

LinkSpec read_link_spec(const io::Node& node, std::initializer_list<std::string_view> keys) {
  io::ObjectReader object(node, keys);
  LinkSpec spec;
  spec.bandwidth_bytes_per_s = read_bandwidth(object.required("bandwidth"));
  spec.latency_ms = read_latency_ms(object.required("latency"));
  return spec;
}

std::optional<double> read_memory(const std::optional<io::Node>& node) {
  if (!node) return std::nullopt;
  return io::read_quantity(*node, io::QuantityKind::kMemory) + 0.0;  // folds -0
}

// A GPU's (or shorthand node's) `memory` and `speed`, which a catalogue `type` defaults: the
// type's memory, and its speed relative to the model's profiled device.
struct TypedFields {
  std::optional<double> memory_bytes;
  double speed = 1.0;
};

// `node_type` is the node-catalogue entry a shorthand node's `type` names (its GPUs' type and
// memory are the defaults), nullptr when `type` names a GPU or is absent.
TypedFields read_typed_fields(const io::ObjectReader& object,
                              const std::optional<std::string>& profiled_device,
                              const hardware::NodeType* node_type = nullptr) {
  TypedFields fields;
  fields.memory_bytes = read_memory(object.optional("memory"));
  auto speed_node = object.optional("speed");
  if (speed_node) fields.speed = read_speed(*speed_node);
  auto type_node = object.optional("type");
  if (!type_node) return fields;
  const std::string name = type_node->as_nonempty_string();
  const hardware::GpuType* type =
      hardware::find_gpu(node_type != nullptr ? node_type->gpu_type : name);
  if (type == nullptr) {
    type_node->fail("unknown GPU type " + io::quote_for_message(name) +
                    " (known: " + hardware::catalogue_names() + ")");
  }
  if (!fields.memory_bytes) {
    fields.memory_bytes = node_type != nullptr ? node_type->memory_bytes : type->memory_bytes;
  }
  if (speed_node) return fields;
  if (!profiled_device) {
    type_node->fail("cannot default \"speed\": the model has no profile.device to relate " +
                    type->name + " to; give \"speed\"");
  }
  const hardware::GpuType* reference = hardware::find_gpu(*profiled_device);
  if (reference == nullptr) {
    type_node->fail("cannot default \"speed\": the model's profile.device " +
                    io::quote_for_message(*profiled_device) +
                    " is not a catalogue GPU (see pipeplan model gpus); give \"speed\"");
  }
  fields.speed =
      hardware::training_peak_flops_per_s(*type) / hardware::training_peak_flops_per_s(*reference);
  return fields;
}

// The node-catalogue entry a shorthand node's `type` names; nullptr when it has no `type` or
// names a GPU type (the GPU catalogue is looked up first, so every file that named a GPU reads
// as before). A name in neither catalogue is an error listing both.
const hardware::NodeType* read_node_type(const io::ObjectReader& shorthand) {
  auto type_node = shorthand.optional("type");
  if (!type_node) return nullptr;
  const std::string name = type_node->as_nonempty_string();
  if (hardware::find_gpu(name) != nullptr) return nullptr;
  const hardware::NodeType* node_type = hardware::find_node_type(name);
  if (node_type == nullptr) {
    type_node->fail("unknown type " + io::quote_for_message(name) +
                    ": neither a GPU type (known: " + hardware::catalogue_names() +
                    ") nor a node type (known: " + hardware::node_catalogue_names() + ")");
  }
  return node_type;
}

// A catalogue link as a file would give it: `"<GB/s> GB/s"` and `"<us> us"` read to the same
// numbers.
LinkSpec catalogue_link(const hardware::LinkFigures& figures) {
  return LinkSpec{figures.achievable_bytes_per_s(), figures.latency_s() * 1e3 + 0.0};
}

// A node name or GPU id: non-empty and at most kMaxNameBytes long.
std::string read_name(const io::Node& node) {
  std::string name = node.as_nonempty_string();
  if (name.size() > kMaxNameBytes) {
    node.fail("must be at most " + std::to_string(kMaxNameBytes) + " bytes long, got " +
              std::to_string(name.size()));
  }
  return name;
}

// A node of the cluster as the reader builds it.
struct NodeInfo {
  enum class Kind {
    kShorthand,  // generated by an entry of "nodes"
    kNamed,      // named by the "node" of explicit GPUs
    kOwn,        // of one explicit GPU without "node", named after it
  };
  Kind kind;
  std::optional<LinkSpec> link;  // joins its GPUs pairwise
  std::string origin;            // pointer of the entry that made it
};

// An explicit link as read, before the pair matrices exist.
struct ExplicitLink {
  int a;
  int b;
  LinkSpec spec;
};

// Refuses a cluster that is not connected, from the link specifications alone: before the
// O(N^2) pair matrices are allocated (8,192 GPUs of a disconnected cluster once took 1.2 GiB
// before their refusal). Union-find over node links, the network (which joins every GPU to
// every GPU of another node, so all of them once there are two nodes) and explicit links.
// The message names the first GPU that GPU 0 cannot reach, as the spanning tree would.
void check_connected(const std::vector<Gpu>& gpus, const std::vector<int>& gpu_node,
                     const std::vector<NodeInfo>& nodes, bool network,
                     const std::vector<ExplicitLink>& links, const std::string& file) {
  std::vector<int> parent(gpus.size());
  std::iota(parent.begin(), parent.end(), 0);
  const auto find = [&parent](int x) {
    while (parent[at(x)] != x) x = parent[at(x)] = parent[at(parent[at(x)])];
    return x;
  };
  const auto join = [&](int x, int y) { parent[at(find(x))] = find(y); };
  std::vector<int> first_of_node(nodes.size(), -1);
  for (int g = 0; g < static_cast<int>(gpus.size()); ++g) {
    const auto node = at(gpu_node[at(g)]);
    if (first_of_node[node] < 0) {
      first_of_node[node] = g;
    } else if (nodes[node].link) {
      join(g, first_of_node[node]);
    }
  }
  if (network && nodes.size() >= 2) {
    for (int g = 1; g < static_cast<int>(gpus.size()); ++g) join(g, 0);
  }
  for (const ExplicitLink& link : links) join(link.a, link.b);
  for (int g = 1; g < static_cast<int>(gpus.size()); ++g) {
    if (find(g) != find(0)) {
      throw InputError(file + ": topology is not connected: no path between " +
                       in_quotes(gpus[0].id) + " and " + in_quotes(gpus[at(g)].id) +
                       " (add a link, a node link or a network)");
    }
  }
}

// Where a GPU id came from, for collision messages.
struct GpuOrigin {
  std::string pointer;
  bool generated;
};

// When the first unknown key of the root is a model's, the user probably swapped the files.
void hint_model_file(const io::Node& root, std::initializer_list<std::string_view> known) {
  if (!root.json().is_object()) return;
  for (const auto& [key, value] : root.json().items()) {
    if (key.rfind("x-", 0) == 0 || std::find(known.begin(), known.end(), key) != known.end()) {
      continue;
    }
    if (key == "layers" || key == "micro_batches" || key == "profile" ||
        key == "parameter_memory_factor") {
      io::Node(*root.document_ptr(), value, io::pointer_append("", key))
          .fail("unknown key (is this a model file?)");
    }
    return;
  }
}

// The cluster as the reader builds it, section by section.
struct Cluster {
  std::vector<Gpu> gpus;
  std::vector<int> gpu_node;  // per GPU: index into `nodes`
  std::vector<NodeInfo> nodes;
  std::map<std::string, int> node_index;  // node name -> index into `nodes`
  std::map<std::string, GpuOrigin> gpu_origin;
  std::optional<LinkSpec> network;
  // The network a file without `network` gets from the NICs of its catalogue node types: the
  // slowest (a pair of nodes is as fast as its slower end); absent without node types.
  std::optional<LinkSpec> catalogue_network;
  std::vector<ExplicitLink> links;
};

// The schema and name at the root.
std::string read_header(const io::ObjectReader& object) {
  if (auto schema = object.optional("schema")) {
    std::string text = schema->as_string();
    if (text != kTopologySchema) {
      std::string hint = text.rfind("pipeplan/model/", 0) == 0 ? " (is this a model file?)" : "";
      schema->fail(std::string("must be \"") + kTopologySchema + "\", got " +
                   io::describe_value(schema->json()) + hint);
    }
  }
  std::string name;
  if (auto name_node = object.optional("name")) name = name_node->as_nonempty_string();
  return name;
}

// The name of node `index` of a shorthand entry named `base` that makes `count` nodes: `base`
// alone when it makes one, else `<base><index>`, with a `-` between when `base` ends in a digit
// (`node` gives `node0`, `dgx-h100` gives `dgx-h100-0`, never `dgx-h1000`), so that no name
// reads as another entry's node: two entries that would still make the same name are refused
// by the caller. O(length of the name).
std::string shorthand_node_name(const std::string& base, std::int64_t count, std::int64_t index) {
  if (count == 1) return base;
  std::string name = base;
  if (!name.empty() && name.back() >= '0' && name.back() <= '9') name += '-';
  name += std::to_string(index);
  return name;
}

// One entry of `nodes`: `count` nodes of `gpus` GPUs each, named `<node>/gpu<j>` where `<node>`
// is `shorthand_node_name`.
void read_shorthand(const io::Node& entry, const std::optional<std::string>& profiled_device,
                    Cluster& cluster) {
  io::ObjectReader shorthand(entry, {"name", "count", "gpus", "memory", "speed", "type", "link"});
  io::Node name_node = shorthand.required("name");
  std::string base = read_name(name_node);
  std::int64_t count = 1;
  if (auto count_node = shorthand.optional("count")) count = count_node->as_integer(1, kMaxInt);
  const hardware::NodeType* node_type = read_node_type(shorthand);
  std::int64_t per_node = 0;
  if (node_type == nullptr || shorthand.optional("gpus")) {
    per_node = shorthand.required("gpus").as_integer(1, kMaxInt);
  } else {
    per_node = node_type->gpus;
  }
  // Each factor is checked first, so the product cannot overflow.
  if (count > kMaxNodeGpus || per_node > kMaxNodeGpus ||
      static_cast<std::int64_t>(cluster.gpus.size()) + count * per_node > kMaxNodeGpus) {
    entry.fail("too many GPUs: pipeplan handles at most " + std::to_string(kMaxNodeGpus));
  }
  const TypedFields typed = read_typed_fields(shorthand, profiled_device, node_type);
  std::optional<LinkSpec> link;
  if (auto link_node = shorthand.optional("link")) {
    link = read_link_spec(*link_node, {"bandwidth", "latency"});
  } else if (node_type != nullptr) {
    link = catalogue_link(node_type->nvlink);
  }
  if (node_type != nullptr) {
    const LinkSpec nic = catalogue_link(node_type->nic);
    auto& network = cluster.catalogue_network;
    if (!network || nic.bandwidth_bytes_per_s < network->bandwidth_bytes_per_s ||
        (nic.bandwidth_bytes_per_s == network->bandwidth_bytes_per_s &&
         nic.latency_ms > network->latency_ms)) {
      network = nic;
    }
  }
  for (std::int64_t i = 0; i < count; ++i) {
    std::string node_name = shorthand_node_name(base, count, i);
    auto [it, inserted] =
        cluster.node_index.emplace(node_name, static_cast<int>(cluster.nodes.size()));
    if (!inserted) {
      name_node.fail("generated node name " + in_quotes(node_name) +
                     " collides with the one from " + cluster.nodes[at(it->second)].origin);
    }
    cluster.nodes.push_back(NodeInfo{NodeInfo::Kind::kShorthand, link, entry.pointer()});
    for (std::int64_t j = 0; j < per_node; ++j) {
      Gpu gpu;
      gpu.id = node_name + "/gpu" + std::to_string(j);
      gpu.node = node_name;
      gpu.speed = typed.speed;
      gpu.memory_bytes = typed.memory_bytes;
      auto [origin, fresh] = cluster.gpu_origin.emplace(gpu.id, GpuOrigin{entry.pointer(), true});
      if (!fresh) {
        name_node.fail("generated GPU id " + in_quotes(gpu.id) + " collides with the one from " +
                       origin->second.pointer);
      }
      cluster.gpus.push_back(std::move(gpu));
      cluster.gpu_node.push_back(it->second);
    }
  }
}

// One entry of `gpus`. Without `node`, a GPU is a node of its own, named after the GPU; that
// name must not be another node's, in either order.
void read_explicit_gpu(const io::Node& entry, const std::optional<std::string>& profiled_device,
                       Cluster& cluster) {
  io::ObjectReader explicit_gpu(entry, {"id", "node", "memory", "speed", "type"});
  io::Node id_node = explicit_gpu.required("id");
  Gpu gpu;
  gpu.id = read_name(id_node);
  auto [origin, fresh] = cluster.gpu_origin.emplace(gpu.id, GpuOrigin{entry.pointer(), false});
  if (!fresh) {
    if (origin->second.generated) {
      id_node.fail("GPU id " + in_quotes(gpu.id) + " is already generated by " +
                   origin->second.pointer);
    }
    id_node.fail("duplicate GPU id " + in_quotes(gpu.id) + " (also " + origin->second.pointer +
                 ")");
  }
  auto& nodes = cluster.nodes;
  if (auto node_name = explicit_gpu.optional("node")) {
    gpu.node = read_name(*node_name);
    auto [it, inserted] = cluster.node_index.emplace(gpu.node, static_cast<int>(nodes.size()));
    if (inserted) {
      nodes.push_back(NodeInfo{NodeInfo::Kind::kNamed, std::nullopt, entry.pointer()});
    } else if (nodes[at(it->second)].kind == NodeInfo::Kind::kOwn) {
      node_name->fail("node " + in_quotes(gpu.node) + " is taken: the GPU at " +
                      nodes[at(it->second)].origin +
                      " has no \"node\" and so is a node of its own named after its id");
    }
    cluster.gpu_node.push_back(it->second);
  } else {
    gpu.node = gpu.id;
    auto [it, inserted] = cluster.node_index.emplace(gpu.node, static_cast<int>(nodes.size()));
    if (!inserted) {
      id_node.fail("a GPU without \"node\" is a node of its own named after its id, but node " +
                   in_quotes(gpu.node) + " already exists (from " + nodes[at(it->second)].origin +
                   ")");
    }
    nodes.push_back(NodeInfo{NodeInfo::Kind::kOwn, std::nullopt, entry.pointer()});
    cluster.gpu_node.push_back(it->second);
  }
  const TypedFields typed = read_typed_fields(explicit_gpu, profiled_device);
  gpu.memory_bytes = typed.memory_bytes;
  gpu.speed = typed.speed;
  cluster.gpus.push_back(std::move(gpu));
}

// The entries of `links`: two known, distinct GPUs each, no pair twice.
void read_links(const io::Node& links_node, Cluster& cluster) {
  const auto& gpus = cluster.gpus;
  std::unordered_map<std::string_view, int> id_to_index;
  for (int i = 0; i < static_cast<int>(gpus.size()); ++i) id_to_index.emplace(gpus[at(i)].id, i);
  std::map<std::pair<int, int>, std::string> seen;
  for (const io::Node& entry : links_node.elements()) {
    io::ObjectReader link(entry, {"between", "bandwidth", "latency"});
    io::Node between = link.required("between");
    std::vector<io::Node> ends = between.elements();
    if (ends.size() != 2) {
      between.fail("must list exactly two GPU ids, got " + std::to_string(ends.size()));
    }
    int end_index[2];
    for (std::size_t k = 0; k < 2; ++k) {
      std::string id = ends[k].as_nonempty_string();
      auto it = id_to_index.find(id);
      if (it == id_to_index.end()) ends[k].fail("unknown GPU " + in_quotes(id));
      end_index[k] = it->second;
    }
    if (end_index[0] == end_index[1]) between.fail("a link needs two different GPUs");
    auto key = std::minmax(end_index[0], end_index[1]);
    if (auto it = seen.find(key); it != seen.end()) {
      entry.fail("second link between " + in_quotes(gpus[at(key.first)].id) + " and " +
                 in_quotes(gpus[at(key.second)].id) + " (first at " + it->second + ")");
    }
    seen.emplace(key, entry.pointer());
    LinkSpec spec = read_link_spec(entry, {"between", "bandwidth", "latency"});
    cluster.links.push_back(ExplicitLink{end_index[0], end_index[1], spec});
  }
}

// Direct links: the shorthand's node links and network, then explicit links replace them.
// O(N^2).
DirectLinks direct_links(const Cluster& cluster) {
  const int n = static_cast<int>(cluster.gpus.size());
  DirectLinks direct(n);
  for (int u = 0; u < n; ++u) {
    const int nu = cluster.gpu_node[at(u)];
    for (int v = u + 1; v < n; ++v) {
      const int nv = cluster.gpu_node[at(v)];
      const std::optional<LinkSpec>& spec = nu == nv ? cluster.nodes[at(nu)].link : cluster.network;
      if (spec) direct.set(u, v, spec->bandwidth_bytes_per_s, spec->latency_ms);
    }
  }
  for (const ExplicitLink& link : cluster.links) {
    direct.set(link.a, link.b, link.spec.bandwidth_bytes_per_s, link.spec.latency_ms);
  }
  return direct;
}

// The topology with its pair costs held per node, for a file without explicit links (which
// `read_topology` checks): the direct links are then a node's link between two of its GPUs and
// the network between any others. A pair of a node without a link has no direct link; its
// widest path is two hops of the network through a GPU of another node (each of its GPUs has
// only network links, so no path is wider, and none is shorter), so it costs the network's
// bandwidth and twice its latency, summed as the path search sums them (0 + l, then + l).
// Nothing when that sum overflows (the dense search reports the pair). O(N + nodes).
std::optional<Topology> build_by_node(const std::string& name, Cluster& cluster) {
  const PairCost network = cluster.network ? PairCost{cluster.network->bandwidth_bytes_per_s,
                                                      cluster.network->latency_ms, 1}
                                           : PairCost{};
  std::vector<int> node_size(cluster.nodes.size(), 0);
  for (int node : cluster.gpu_node) ++node_size[at(node)];
  std::vector<PairCost> node_costs(cluster.nodes.size());
  for (std::size_t k = 0; k < cluster.nodes.size(); ++k) {
    if (const std::optional<LinkSpec>& link = cluster.nodes[k].link) {
      node_costs[k] = PairCost{link->bandwidth_bytes_per_s, link->latency_ms, 1};
    } else if (node_size[k] >= 2) {
      // Connected (checked), so there is a network and another node.
      const double two_hops = (0.0 + network.latency_ms) + network.latency_ms;
      if (!std::isfinite(two_hops)) return std::nullopt;
      node_costs[k] = PairCost{network.bandwidth_bytes_per_s, two_hops, 2};
    }
  }
  return Topology::build_by_node(name, std::move(cluster.gpus), std::move(cluster.gpu_node),
                                 std::move(node_costs), network);
}

}  // namespace

Topology read_topology(const io::Source& source, const std::optional<std::string>& profiled_device,
                       PairLayout layout) {
  io::Document document = io::parse_json(source);
  io::Node root(document, document.root, "");
  std::initializer_list<std::string_view> known_keys = {"schema",  "name", "nodes",
                                                        "network", "gpus", "links"};
  hint_model_file(root, known_keys);
  io::ObjectReader object(root, known_keys);
  std::string name = read_header(object);

  Cluster cluster;
  if (auto nodes_node = object.optional("nodes")) {
    for (const io::Node& entry : nodes_node->elements()) {
      read_shorthand(entry, profiled_device, cluster);
    }
  }
  if (auto network_node = object.optional("network")) {
    cluster.network = read_link_spec(*network_node, {"bandwidth", "latency"});
  } else {
    cluster.network = cluster.catalogue_network;
  }
  if (auto gpus_node = object.optional("gpus")) {
    std::vector<io::Node> entries = gpus_node->elements();
    if (cluster.gpus.size() + entries.size() > static_cast<std::size_t>(kMaxNodeGpus)) {
      gpus_node->fail("too many GPUs: pipeplan handles at most " + std::to_string(kMaxNodeGpus));
    }
    for (const io::Node& entry : entries) read_explicit_gpu(entry, profiled_device, cluster);
  }
  if (cluster.gpus.empty()) root.fail("the topology has no GPUs (give \"nodes\" or \"gpus\")");
  auto links_node = object.optional("links");
  if (links_node && cluster.gpus.size() > static_cast<std::size_t>(kMaxGpus)) {
    links_node->fail(
        "too many GPUs for a topology with \"links\": " + std::to_string(cluster.gpus.size()) +
        "; pipeplan handles at most " + std::to_string(kMaxGpus) + " with links (" +
        std::to_string(kMaxNodeGpus) + " without)");
  }
  if (links_node) read_links(*links_node, cluster);
  check_connected(cluster.gpus, cluster.gpu_node, cluster.nodes, cluster.network.has_value(),
                  cluster.links, source.name);
  if (!links_node && layout == PairLayout::kAuto) {
    if (std::optional<Topology> by_node = build_by_node(name, cluster)) return std::move(*by_node);
  }
  if (cluster.gpus.size() > kMaxGpusAt) {
    root.fail("too many GPUs: " + std::to_string(cluster.gpus.size()) +
              "; pipeplan handles at most " + std::to_string(kMaxGpus) +
              " whose pair costs are not a function of their nodes");
  }
  DirectLinks direct = direct_links(cluster);
  return Topology::build(std::move(name), std::move(cluster.gpus), std::move(direct), source.name);
}

}  // namespace pipeplan::topology
