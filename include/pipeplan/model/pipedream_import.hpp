#pragma once
/// \file
/// Import of PipeDream's layer-graph text format (`graph.txt`, also used by DAPPLE's planner)
/// into a `model::Model` (spec section 1). The graph is a DAG; the importer orders it
/// topologically (Kahn's algorithm, ties broken by position in the file) and sets each
/// layer's `activation_bytes` to the size of the cut after it: the outputs produced at or
/// before the layer and consumed after it. `docs/formats.md` describes the rules for users.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"

namespace pipeplan::model {

/// One node line of a `graph.txt`:
/// `id -- description -- forward_compute_time=<ms>, backward_compute_time=<ms>,
/// activation_size=<bytes or [a; b; ...]>, parameter_size=<bytes>[ -- stage_id=<n>]`.
struct PipedreamNode {
  std::string id;               ///< Unique, non-empty node id (`node12`).
  std::string description;      ///< The operator, e.g. `ReLU(inplace)`; may be empty.
  double forward_ms = 0;        ///< Forward time of one profiled minibatch, ms (finite, >= 0).
  double backward_ms = 0;       ///< Backward time of one profiled minibatch, ms (finite, >= 0).
  double activation_bytes = 0;  ///< Size of the node's output(s), bytes; a list is summed.
  double parameter_bytes = 0;   ///< Size of the node's weights, bytes.
  std::size_t line = 0;         ///< 1-based line number in the file, for messages.
};

/// One edge line of a `graph.txt`, `nodeA -- nodeB`: the output of `from` feeds `to`.
struct PipedreamEdge {
  std::size_t from = 0;  ///< Index into `PipedreamGraph::nodes`.
  std::size_t to = 0;    ///< Index into `PipedreamGraph::nodes`.
  std::size_t line = 0;  ///< 1-based line number in the file, for messages.
};

/// A parsed `graph.txt`: nodes in file order and edges in file order, every edge naming two
/// known nodes. Not yet checked for cycles (`pipedream_topological_order` does that).
struct PipedreamGraph {
  std::string file;                  ///< Display name of the source, used in messages.
  std::vector<PipedreamNode> nodes;  ///< In file order; ids unique; at least one.
  std::vector<PipedreamEdge> edges;  ///< In file order; repeated edges are kept.
};

/// Parses a `graph.txt`. Blank lines are skipped; a line (with surrounding whitespace
/// removed) that splits on `" -- "` into 2 tokens is an edge, into 3 or 4 tokens a node (the
/// 4th must be `stage_id=<integer>` and is ignored); anything else is an error. Nodes may
/// appear after edges that name them. Throws `InputError` `file: line N: <problem>` for a
/// malformed line, a malformed or negative number, a missing, unknown or repeated field, a
/// duplicate node id or an edge naming an unknown node, and `file: <problem>` for a file
/// without nodes. Complexity: O(size of the text) expected.
PipedreamGraph parse_pipedream_graph(const io::Source& graph);

/// A topological order of `graph` (indices into `graph.nodes`) by Kahn's algorithm: among the
/// nodes whose inputs are all placed, the one that appears first in the file comes next, so
/// the result is the lexicographically smallest order by file position and a file already in
/// topological order keeps its order. Throws `InputError`
/// `file: line N: edge "a -- b" closes a cycle: b -> ... -> a -> b` (N the cycle's last edge in
/// the file) when the graph has a cycle. Complexity: O(E + V log V) (a binary heap of ready
/// nodes).
std::vector<std::size_t> pipedream_topological_order(const PipedreamGraph& graph);

/// For each position `p` of `order` (a topological order of `graph`), the cut size after it:
/// the sum of `activation_bytes` of every node at a position `<= p` with a consumer at a
/// position `> p`. The last entry is 0. Outputs consumed by nobody cross no cut. Exact when
/// all sizes are integers whose total is below 2^53. Complexity: O(V + E) (each output is
/// live from its producer to its last consumer; a difference array sums the live ranges).
std::vector<double> pipedream_cut_bytes(const PipedreamGraph& graph,
                                        const std::vector<std::size_t>& order);

/// Converts a PipeDream `graph.txt` into a model. Layers follow
/// `pipedream_topological_order`; a layer's `name` is the node id, `forward_ms`,
/// `backward_ms` and `parameter_bytes` are the node's values, `activation_bytes` is the cut
/// after it (`pipedream_cut_bytes`) and `stash_bytes` is the node's own output size. The
/// profiled times and sizes are taken as those of one micro-batch of `batch_size` samples
/// (recorded as `profile.batch_size`). The model is named after the file's stem (`vgg16_graph`
/// for `profiles/vgg16_graph.txt`; empty for standard input). Preconditions: `batch_size >= 1`
/// and `micro_batches`, when given, `>= 1` (else `InternalError`). Throws `InputError` as
/// `parse_pipedream_graph` and `pipedream_topological_order` do.
/// Complexity: O(size of the text + E + V log V).
Model import_pipedream(const io::Source& graph, std::int64_t batch_size,
                       std::optional<std::int64_t> micro_batches);

}  // namespace pipeplan::model
