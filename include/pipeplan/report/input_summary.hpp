#pragma once
/// \file
/// One-line human summaries of the inputs and of the models pipeplan writes, for standard error:
/// what `validate`, `import pipedream` and `model transformer` print.

#include <cstdint>
#include <optional>
#include <string>

#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {

/// `model.json: model "bert-24", 24 layers, forward 45.6 ms and backward 91.2 ms per
/// micro-batch, 1.2 GiB of parameters, 16 micro-batches`, then, for a model that uses any
/// field of spec 8.1, `, tensor-parallel up to degree 8 on 98 of 98 layers, optimizer step
/// 12.5 ms, input 16 KiB, sharded memory factor 6` (each where it applies; ` (default)` after
/// the factor when the model does not state it). The name is quoted with control characters
/// escaped as `\xNN`; `file` is as given. O(L).
std::string model_summary(const std::string& file, const model::Model& model);

/// `topo.json: topology "2x DGX-1", 16 GPUs on 2 nodes, pair bandwidth 12.5 GB/s to 25 GB/s,
/// speed 1, memory 32 GiB`: each range one value when its ends format alike; no bandwidth for
/// one GPU; memory `unlimited` where no GPU states it. O(N^2).
std::string topology_summary(const std::string& file, const topology::Topology& topology);

/// `model "gpt3-1.3b": 24 decoder layers, 2.5 GiB of bf16 weights, forward 30 ms and backward
/// 60 ms per micro-batch of 1 on one A100-80GB, tensor-parallel degrees 1, 2, 4, 8`: what
/// `model transformer` made of `config`. O(L).
std::string transformer_summary(const model::Model& model, const model::TransformerConfig& config);

/// `graph.txt: imported 25 layers as model "vgg16", forward 12 ms and backward 24 ms per
/// micro-batch of 64, 528 MiB of parameters, largest cut 12 MiB, 8 micro-batches`: what `import
/// pipedream` made of `file` at `batch_size` samples per micro-batch (the micro-batches only
/// when given; no model name when it is empty). O(L).
std::string import_summary(const std::string& file, const model::Model& model,
                           std::int64_t batch_size, std::optional<std::int64_t> micro_batches);

}  // namespace pipeplan::report
