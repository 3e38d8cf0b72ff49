#pragma once
/// \file
/// A catalogue of GPU nodes (issue 33 item 3): GPUs per node, their catalogue GPU type and
/// memory, and the achievable bandwidths and latencies of the node's NVLink and of its NICs,
/// each the datasheet figure times a documented efficiency, with both sources (docs/topology.md
/// prints them). A topology's shorthand node names an entry in `type`; `pipeplan topology
/// cluster` writes a cluster of one.

#include <string>
#include <string_view>
#include <vector>

namespace pipeplan::hardware {

/// One way out of a GPU: NVLink to the other GPUs of its node, or its share of the node's NICs
/// to GPUs of other nodes. Bandwidths are per GPU and per direction.
struct LinkFigures {
  double datasheet_gb_per_s = 0;  ///< Line rate per GPU and direction, GB/s (1e9 bytes/s).
  std::string datasheet;          ///< How the line rate follows from the datasheet.
  std::string datasheet_source;   ///< Where the datasheet figures come from (a URL).
  double efficiency = 0;          ///< Achievable share of the line rate, in (0, 1].
  std::string efficiency_source;  ///< Where the efficiency comes from (a measurement's URL).
  double latency_us = 0;          ///< Latency of one message, microseconds.
  std::string latency_source;     ///< Where the latency comes from.

  /// The achievable bandwidth, GB/s: datasheet times efficiency, rounded to 0.1 GB/s so that
  /// it prints exactly (`369 GB/s` reads back to the same bytes/s).
  [[nodiscard]] double achievable_gb_per_s() const;
  /// The achievable bandwidth in bytes/s: `achievable_gb_per_s() * 1e9`, as a topology file's
  /// `"<achievable_gb_per_s> GB/s"` reads.
  [[nodiscard]] double achievable_bytes_per_s() const;
  /// The latency in seconds: `latency_us * 1e-6`, as a topology file's `"<latency_us> us"`
  /// reads.
  [[nodiscard]] double latency_s() const;
};

/// One node type.
struct NodeType {
  std::string name;         ///< Catalogue name, lower case, e.g. `dgx-h100`.
  std::string description;  ///< What the node is, in a few words.
  int gpus = 0;             ///< GPUs per node.
  std::string gpu_type;     ///< The GPU catalogue name of its GPUs (gpu_catalogue.hpp).
  double memory_bytes = 0;  ///< Memory per GPU, bytes (the GPU type's).
  LinkFigures nvlink;       ///< Within the node.
  LinkFigures nic;          ///< Per GPU, to other nodes.
};

/// Every catalogue entry, in a fixed order (by generation).
const std::vector<NodeType>& node_catalogue();

/// The entry named `name`, compared without regard to ASCII case; nullptr when none is.
const NodeType* find_node_type(std::string_view name);

/// The catalogue names, comma-separated, for messages (`dgx-a100-40gb, dgx-a100-80gb, ...`).
std::string node_catalogue_names();

}  // namespace pipeplan::hardware
