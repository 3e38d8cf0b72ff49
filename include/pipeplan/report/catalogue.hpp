#pragma once
/// \file
/// The GPU catalogue as `pipeplan model gpus` prints it and the node catalogue as `pipeplan
/// topology types` prints it: an aligned table, or JSON with the sources; and the topology
/// `pipeplan topology cluster` writes.

#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/hardware/node_catalogue.hpp"

namespace pipeplan::report {

/// A header line, one line per GPU (name, memory, memory bandwidth, then the dense peak
/// TFLOP/s in fp32, tf32, bf16, fp16 and fp8 to one decimal, `-` where unsupported), and a
/// closing note; columns aligned for names of up to 10 characters. O(GPUs).
std::string gpu_catalogue_table(const std::vector<hardware::GpuType>& gpus);

/// A JSON array, one object per GPU with the keys `name`, `aliases`, `memory_bytes`,
/// `memory_bandwidth_bytes_per_s`, `dense_tflops` (`fp32` .. `fp8`) and `source`, in that
/// order, ending in a newline. O(GPUs).
std::string gpu_catalogue_json(const std::vector<hardware::GpuType>& gpus);

/// A header line, one line per node type (name, GPUs, GPU type, memory per GPU, then for
/// NVLink and for the NIC share of one GPU: the achievable GB/s as datasheet x efficiency and
/// the latency), then each type's datasheet sources and the efficiency and latency sources.
/// O(types).
std::string node_catalogue_table(const std::vector<hardware::NodeType>& types);

/// A JSON array, one object per node type with the keys `name`, `description`, `gpus`,
/// `gpu_type`, `memory_bytes`, `nvlink` and `nic` (each with `achievable_gb_per_s`,
/// `datasheet_gb_per_s`, `efficiency`, `latency_us`, `datasheet`, `datasheet_source`,
/// `efficiency_source`, `latency_source`), ending in a newline. O(types).
std::string node_catalogue_json(const std::vector<hardware::NodeType>& types);

/// A topology of `nodes` nodes of `type` (1 <= nodes): the shorthand entry `node` naming the
/// type, and the `network` of its NIC figures written out, ending in a newline. It reads as a
/// file giving every field by hand would. O(1).
std::string cluster_topology_json(const hardware::NodeType& type, std::int64_t nodes);

}  // namespace pipeplan::report
