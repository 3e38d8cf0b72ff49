// Import of PipeDream's `graph.txt` (the format of PipeDream's profiler, `graph/graph.py`
// `Graph.from_str` in msr-fiddle/pipedream, also read by DAPPLE's planner HPGO).
//
// Algorithm:
//  1. Parse the text line by line: a line splitting on " -- " into 2 tokens is an edge, into
//     3 or 4 a node. Nodes are stored in file order; edges are resolved to node indices after
//     the whole file is read. O(text) expected (hash map of node ids).
//  2. Order the DAG by Kahn's algorithm with a min-heap of ready nodes keyed by file position,
//     so the order is the lexicographically smallest topological order by file position.
//     O(E + V log V). On a cycle, walk predecessors among the unplaced nodes (each has one)
//     until a node repeats, and report that cycle. O(V + E).
//  3. Cut sizes: an output is live from its producer's position to its last consumer's
//     position; adding +size at the producer and -size at the last consumer in a difference
//     array and taking prefix sums gives every cut in O(V + E).

#include "pipeplan/model/pipedream_import.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <queue>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"

namespace pipeplan::model {
namespace {

constexpr std::string_view kSeparator = " -- ";
constexpr std::string_view kWhitespace = " \t\r\n\v\f";

// The four metadata fields, in the order PipeDream writes them.
constexpr std::array<std::string_view, 4> kFields = {
    "forward_compute_time", "backward_compute_time", "activation_size", "parameter_size"};

std::string_view trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(kWhitespace);
  return text.substr(first, last - first + 1);
}

// Splits on `separator`, trimming every token.
std::vector<std::string_view> split(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(separator, start);
    if (at == std::string_view::npos) {
      tokens.push_back(trim(text.substr(start)));
      return tokens;
    }
    tokens.push_back(trim(text.substr(start, at - start)));
    start = at + separator.size();
  }
}

std::string quote(std::string_view text) { return io::quote_for_message(text); }

// A node id inside a cycle path: escaped and shortened like a quoted value, without quotes.
std::string plain(std::string_view id) {
  const std::string text = quote(id);
  return text.substr(1, text.size() - 2);
}

// Whether `text` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
// Layer names are written to JSON, which would replace invalid bytes and could so make two
// distinct ids equal.
bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (byte < 0x80) {
      ++i;
      continue;
    } else if (byte >= 0xC2 && byte <= 0xDF) {
      length = 2;
      code = byte & 0x1Fu;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      length = 3;
      code = byte & 0x0Fu;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      length = 4;
      code = byte & 0x07u;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0u) != 0x80u) return false;
      code = (code << 6) | (next & 0x3Fu);
    }
    if ((length == 3 && code < 0x800) || (length == 4 && code < 0x10000) || code > 0x10FFFF ||
        (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

// An unsigned decimal number: digits, optional fraction, optional exponent (PipeDream writes
// `2.211`, `0`, `6291456.0`). Signs, `inf`, `nan` and hexadecimal are refused; so is a value
// that overflows a double. Returns nothing when `text` is not such a number.
std::optional<double> parse_number(std::string_view text) {
  std::size_t i = 0;
  std::size_t mantissa_digits = 0;
  auto digits = [&] {
    std::size_t count = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      ++i;
      ++count;
    }
    return count;
  };
  mantissa_digits += digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa_digits += digits();
  }
  if (mantissa_digits == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return std::nullopt;
  }
  if (i != text.size()) return std::nullopt;
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value, std::chars_format::general);
  if (error != std::errc() || ptr != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

// Builds the messages of one line: `file: line N: ...`.
class LineContext {
 public:
  LineContext(const std::string& file, std::size_t line) : file_(file), line_(line) {}
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(file_, "line " + std::to_string(line_), message);
  }

 private:
  const std::string& file_;
  std::size_t line_;
};

// A metadata value: a number, or for `activation_size` a list `[a; b; ...]` that is summed.
double parse_value(const LineContext& context, std::string_view field, std::string_view value,
                   bool allow_list) {
  const std::string prefix = std::string(field) + ": ";
  if (allow_list && !value.empty() && value.front() == '[') {
    if (value.size() < 2 || value.back() != ']') {
      context.fail(prefix + "unterminated list " + quote(value) + " (expected [a; b; ...])");
    }
    double sum = 0;
    std::size_t index = 0;
    for (std::string_view element : split(value.substr(1, value.size() - 2), ";")) {
      ++index;
      std::optional<double> number = parse_number(element);
      if (!number) {
        context.fail(prefix + "list element " + std::to_string(index) +
                     ": expected a number >= 0, got " + quote(element));
      }
      sum += *number;
    }
    if (!std::isfinite(sum)) context.fail(prefix + "the sum of the list is too large");
    return sum;
  }
  std::optional<double> number = parse_number(value);
  if (!number) context.fail(prefix + "expected a number >= 0, got " + quote(value));
  return *number;
}

// The metadata token: `forward_compute_time=<ms>, backward_compute_time=<ms>,
// activation_size=<bytes or list>, parameter_size=<bytes>`, fields in any order.
void parse_metadata(const LineContext& context, std::string_view metadata, PipedreamNode& node) {
  std::array<std::optional<double>, kFields.size()> values;
  for (std::string_view part : split(metadata, ",")) {
    const std::size_t equals = part.find('=');
    if (equals == std::string_view::npos) {
      context.fail("expected <field>=<value>, got " + quote(part));
    }
    const std::string_view key = trim(part.substr(0, equals));
    const std::string_view value = trim(part.substr(equals + 1));
    auto known = std::find(kFields.begin(), kFields.end(), key);
    if (known == kFields.end()) {
      context.fail("unknown field " + quote(key) +
                   " (expected forward_compute_time, backward_compute_time, activation_size, "
                   "parameter_size)");
    }
    auto index = static_cast<std::size_t>(known - kFields.begin());
    if (values[index]) context.fail("field " + quote(key) + " given twice");
    values[index] = parse_value(context, key, value, /*allow_list=*/key == "activation_size");
  }
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    if (!values[i]) context.fail("missing field " + quote(kFields[i]));
  }
  node.forward_ms = *values[0];
  node.backward_ms = *values[1];
  node.activation_bytes = *values[2];
  node.parameter_bytes = *values[3];
}

// The optional 4th token of a node line, written by PipeDream's optimizer; checked, ignored.
void check_stage_id(const LineContext& context, std::string_view token) {
  constexpr std::string_view kKey = "stage_id=";
  std::string_view value =
      token.substr(0, kKey.size()) == kKey ? trim(token.substr(kKey.size())) : std::string_view();
  const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    context.fail("expected stage_id=<integer> as the 4th field, got " + quote(token));
  }
}

// An edge as read, before its ids are resolved.
struct RawEdge {
  std::string_view from;
  std::string_view to;
  std::size_t line = 0;
};

// Compressed adjacency: the edges of node v are `edge_index[offset[v] .. offset[v+1])`.
struct Adjacency {
  std::vector<std::size_t> offset;
  std::vector<std::size_t> edge_index;
};

// Groups edge indices by `key(edge)`, keeping file order inside each group. O(V + E).
Adjacency group_edges(const PipedreamGraph& graph,
                      const std::function<std::size_t(const PipedreamEdge&)>& key) {
  Adjacency adjacency;
  adjacency.offset.assign(graph.nodes.size() + 1, 0);
  for (const PipedreamEdge& edge : graph.edges) ++adjacency.offset[key(edge) + 1];
  for (std::size_t v = 0; v < graph.nodes.size(); ++v) {
    adjacency.offset[v + 1] += adjacency.offset[v];
  }
  std::vector<std::size_t> next(adjacency.offset.begin(), adjacency.offset.end() - 1);
  adjacency.edge_index.resize(graph.edges.size());
  for (std::size_t e = 0; e < graph.edges.size(); ++e) {
    adjacency.edge_index[next[key(graph.edges[e])]++] = e;
  }
  return adjacency;
}

// Called when Kahn's algorithm stops early: every unplaced node has an unplaced predecessor,
// so walking predecessors from one of them must repeat a node. Reports that cycle, naming
// the edge of the cycle that comes last in the file.
[[noreturn]] void report_cycle(const PipedreamGraph& graph, const std::vector<bool>& placed) {
  const Adjacency incoming = group_edges(graph, [](const PipedreamEdge& edge) { return edge.to; });
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> step_of(graph.nodes.size(), kNone);
  // walk_edges[i] enters the i-th node of the walk from the next one.
  std::vector<std::size_t> walk_edges;
  std::size_t node =
      static_cast<std::size_t>(std::find(placed.begin(), placed.end(), false) - placed.begin());
  if (node == graph.nodes.size()) throw InternalError("report_cycle: every node is placed");
  while (step_of[node] == kNone) {
    step_of[node] = walk_edges.size();
    std::size_t via = kNone;
    for (std::size_t k = incoming.offset[node]; k < incoming.offset[node + 1]; ++k) {
      const std::size_t e = incoming.edge_index[k];
      if (!placed[graph.edges[e].from]) {
        via = e;
        break;
      }
    }
    if (via == kNone) throw InternalError("report_cycle: an unplaced node has no unplaced input");
    walk_edges.push_back(via);
    node = graph.edges[via].from;
  }
  // The cycle's edges are walk_edges[step_of[node] ..], each pointing backwards in the walk.
  std::vector<std::size_t> cycle(walk_edges.begin() + static_cast<std::ptrdiff_t>(step_of[node]),
                                 walk_edges.end());
  // Forward order: reverse the backward walk.
  std::reverse(cycle.begin(), cycle.end());
  auto last = std::max_element(cycle.begin(), cycle.end(), [&](std::size_t a, std::size_t b) {
    return graph.edges[a].line < graph.edges[b].line;
  });
  std::rotate(cycle.begin(), last, cycle.end());
  // Now cycle[0] is the closing edge a -> b; cycle[1..] lead from b back to a.
  const PipedreamEdge& closing = graph.edges[cycle.front()];
  std::vector<std::string> path;
  for (std::size_t i = 1; i < cycle.size(); ++i) {
    path.push_back(plain(graph.nodes[graph.edges[cycle[i]].to].id));
  }
  path.push_back(plain(graph.nodes[closing.to].id));
  constexpr std::size_t kShown = 8;
  std::string text = plain(graph.nodes[closing.to].id);
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path.size() > kShown && i == kShown / 2) {
      text += " -> ... (" + std::to_string(path.size() - kShown) + " more)";
      i = path.size() - kShown / 2 - 1;
      continue;
    }
    text += " -> " + path[i];
  }
  throw InputError(graph.file, "line " + std::to_string(closing.line),
                   "edge " +
                       quote(graph.nodes[closing.from].id + " -- " + graph.nodes[closing.to].id) +
                       " closes a cycle: " + text);
}

std::string model_name_for(const std::string& source_name) {
  if (source_name == "<stdin>") return {};
  return std::filesystem::path(source_name).stem().string();
}

}  // namespace

PipedreamGraph parse_pipedream_graph(const io::Source& graph) {
  PipedreamGraph result;
  result.file = graph.name;
  std::string_view text = graph.text;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);

  std::unordered_map<std::string, std::size_t> index_of;
  std::vector<RawEdge> raw_edges;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const LineContext context(result.file, line_number);
    const std::vector<std::string_view> tokens = split(line, kSeparator);
    if (tokens.size() == 2) {
      if (tokens[0].empty() || tokens[1].empty()) context.fail("an edge needs two node ids");
      raw_edges.push_back(RawEdge{tokens[0], tokens[1], line_number});
      continue;
    }
    if (tokens.size() != 3 && tokens.size() != 4) {
      context.fail("expected a node (id -- description -- metadata) or an edge (id -- id), got " +
                   std::to_string(tokens.size()) + " field" + (tokens.size() == 1 ? "" : "s") +
                   " separated by \" -- \"");
    }
    PipedreamNode node;
    if (tokens[0].empty()) context.fail("empty node id");
    if (!is_valid_utf8(tokens[0]))
      context.fail("node id " + quote(tokens[0]) + " is not valid UTF-8");
    node.id = std::string(tokens[0]);
    node.description = std::string(tokens[1]);
    node.line = line_number;
    parse_metadata(context, tokens[2], node);
    if (tokens.size() == 4) check_stage_id(context, tokens[3]);
    auto [it, inserted] = index_of.emplace(node.id, result.nodes.size());
    if (!inserted) {
      context.fail("duplicate node " + quote(node.id) + " (first on line " +
                   std::to_string(result.nodes[it->second].line) + ")");
    }
    result.nodes.push_back(std::move(node));
  }
  if (result.nodes.empty()) {
    throw InputError(result.file, "", "no nodes: not a PipeDream graph.txt");
  }
  result.edges.reserve(raw_edges.size());
  for (const RawEdge& raw : raw_edges) {
    PipedreamEdge edge;
    edge.line = raw.line;
    for (auto [id, slot] : {std::pair{raw.from, &edge.from}, std::pair{raw.to, &edge.to}}) {
      auto it = index_of.find(std::string(id));
      if (it == index_of.end()) {
        LineContext(result.file, raw.line).fail("edge names unknown node " + quote(id));
      }
      *slot = it->second;
    }
    result.edges.push_back(edge);
  }
  return result;
}

std::vector<std::size_t> pipedream_topological_order(const PipedreamGraph& graph) {
  const std::size_t n = graph.nodes.size();
  const Adjacency outgoing =
      group_edges(graph, [](const PipedreamEdge& edge) { return edge.from; });
  std::vector<std::size_t> waiting_inputs(n, 0);
  for (const PipedreamEdge& edge : graph.edges) ++waiting_inputs[edge.to];
  // Nodes are indexed in file order, so the smallest ready index is the earliest in the file.
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t v = 0; v < n; ++v) {
    if (waiting_inputs[v] == 0) ready.push(v);
  }
  std::vector<std::size_t> order;
  order.reserve(n);
  std::vector<bool> placed(n, false);
  while (!ready.empty()) {
    const std::size_t v = ready.top();
    ready.pop();
    order.push_back(v);
    placed[v] = true;
    for (std::size_t k = outgoing.offset[v]; k < outgoing.offset[v + 1]; ++k) {
      const std::size_t to = graph.edges[outgoing.edge_index[k]].to;
      if (--waiting_inputs[to] == 0) ready.push(to);
    }
  }
  if (order.size() != n) report_cycle(graph, placed);
  return order;
}

std::vector<double> pipedream_cut_bytes(const PipedreamGraph& graph,
                                        const std::vector<std::size_t>& order) {
  const std::size_t n = graph.nodes.size();
  if (order.size() != n) throw InternalError("pipedream_cut_bytes: order has the wrong size");
  std::vector<std::size_t> position(n, n);
  for (std::size_t p = 0; p < n; ++p) {
    if (order[p] >= n || position[order[p]] != n) {
      throw InternalError("pipedream_cut_bytes: order is not a permutation");
    }
    position[order[p]] = p;
  }
  // last_consumer[v]: the largest position of a node that reads v's output (or v's own).
  std::vector<std::size_t> last_consumer(position);
  for (const PipedreamEdge& edge : graph.edges) {
    if (position[edge.to] <= position[edge.from]) {
      throw InternalError("pipedream_cut_bytes: order is not topological");
    }
    last_consumer[edge.from] = std::max(last_consumer[edge.from], position[edge.to]);
  }
  std::vector<double> delta(n, 0.0);
  for (std::size_t v = 0; v < n; ++v) {
    if (last_consumer[v] == position[v]) continue;  // nobody reads it: it crosses no cut
    delta[position[v]] += graph.nodes[v].activation_bytes;
    delta[last_consumer[v]] -= graph.nodes[v].activation_bytes;
  }
  std::vector<double> cut(n, 0.0);
  double live = 0;
  for (std::size_t p = 0; p < n; ++p) {
    live += delta[p];
    // Only rounding of non-integral sizes can make this negative.
    cut[p] = std::max(live, 0.0);
  }
  cut[n - 1] = 0;
  return cut;
}

Model import_pipedream(const io::Source& graph, std::int64_t batch_size,
                       std::optional<std::int64_t> micro_batches) {
  if (batch_size < 1) throw InternalError("import_pipedream: batch_size must be >= 1");
  if (micro_batches && *micro_batches < 1) {
    throw InternalError("import_pipedream: micro_batches must be >= 1");
  }
  const PipedreamGraph parsed = parse_pipedream_graph(graph);
  double total_activation_bytes = 0;
  for (const PipedreamNode& node : parsed.nodes) total_activation_bytes += node.activation_bytes;
  if (!std::isfinite(total_activation_bytes)) {
    throw InputError(parsed.file, "", "the activation sizes are too large: their sum overflows");
  }
  const std::vector<std::size_t> order = pipedream_topological_order(parsed);
  const std::vector<double> cut = pipedream_cut_bytes(parsed, order);

  Model model;
  model.name = model_name_for(graph.name);
  model.micro_batches = micro_batches;
  model.profile_batch_size = batch_size;
  model.layers.reserve(order.size());
  for (std::size_t p = 0; p < order.size(); ++p) {
    const PipedreamNode& node = parsed.nodes[order[p]];
    Layer layer;
    layer.name = node.id;
    layer.forward_ms = node.forward_ms;
    layer.backward_ms = node.backward_ms;
    layer.activation_bytes = cut[p];
    layer.parameter_bytes = node.parameter_bytes;
    // What the layer keeps for its backward pass: its own output, per micro-batch.
    layer.stash_bytes = node.activation_bytes;
    model.layers.push_back(std::move(layer));
  }
  return model;
}

}  // namespace pipeplan::model
