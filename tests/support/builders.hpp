#pragma once
// Small builders for models, topologies and plans in tests.

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::testing {

/// The model `pipeplan model transformer` writes for `config`, completed first (a failure when
/// the config is incomplete or inconsistent).
inline model::Model described_model(const model::TransformerConfig& config) {
  auto [completed, problem] = model::complete_transformer_config(config);
  EXPECT_EQ(problem, "");
  return model::transformer_model(completed);
}

/// A layer: forward ms, backward ms, activation bytes, parameter bytes, stash bytes.
struct L {
  double f = 1, b = 1, a = 0, w = 0, y = 0;
};

inline model::Model make_model(const std::vector<L>& layers, double factor = 4) {
  model::Model m;
  m.name = "test";
  m.parameter_memory_factor = factor;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    model::Layer layer;
    layer.name = "l" + std::to_string(i);
    layer.forward_ms = layers[i].f;
    layer.backward_ms = layers[i].b;
    layer.activation_bytes = layers[i].a;
    layer.parameter_bytes = layers[i].w;
    layer.stash_bytes = layers[i].y;
    m.layers.push_back(layer);
  }
  return m;
}

/// `n` GPUs, every pair linked with the same bandwidth (bytes/s) and latency (ms).
inline topology::Topology uniform_topology(int n, double bandwidth, double latency_ms,
                                           std::vector<double> speeds = {},
                                           std::optional<double> memory = std::nullopt) {
  std::vector<topology::Gpu> gpus;
  for (int i = 0; i < n; ++i) {
    topology::Gpu g;
    g.id = "g" + std::to_string(i);
    g.node = g.id;
    g.speed = speeds.empty() ? 1.0 : speeds[static_cast<std::size_t>(i)];
    g.memory_bytes = memory;
    gpus.push_back(g);
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) links.push_back({u, v, bandwidth, latency_ms});
  }
  return topology::Topology::build("uniform", gpus, links, "test");
}

/// GPUs with given ids (each its own node) and explicit links.
inline topology::Topology linked_topology(const std::vector<std::string>& ids,
                                          const std::vector<topology::Link>& links) {
  std::vector<topology::Gpu> gpus;
  for (const auto& id : ids) {
    topology::Gpu g;
    g.id = id;
    g.node = id;
    gpus.push_back(g);
  }
  return topology::Topology::build("linked", gpus, links, "test");
}

/// Stages from (first, last, gpus) triples.
inline std::vector<Stage> stages(std::initializer_list<Stage> list) { return {list}; }

/// Schedule from per-GPU orders (channel orders empty: fill them separately).
inline Schedule schedule_of(int micro_batches, std::vector<std::vector<ComputeTask>> orders) {
  Schedule s;
  s.micro_batches = micro_batches;
  s.gpu_order = std::move(orders);
  return s;
}

/// A random complete topology for property tests: bandwidths 1-100 GB/s, latencies 0-20 us,
/// speeds 0.25-2, memories uniform in [memory_low, memory_high] on three GPUs out of four
/// (the others unlimited).
inline topology::Topology random_topology(std::mt19937& rng, int n, double memory_low,
                                          double memory_high) {
  std::uniform_real_distribution<double> bandwidth(1e9, 100e9), latency(0, 0.02), speed(0.25, 2),
      memory(memory_low, memory_high);
  std::vector<topology::Gpu> gpus;
  for (int i = 0; i < n; ++i) {
    topology::Gpu g;
    g.id = "g" + std::to_string(i);
    g.node = g.id;
    g.speed = speed(rng);
    if (rng() % 4 != 0) g.memory_bytes = memory(rng);
    gpus.push_back(g);
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) links.push_back({u, v, bandwidth(rng), latency(rng)});
  }
  return topology::Topology::build("random", gpus, links, "test");
}

/// A random model for property tests: forward 0.1-10 ms, backward 1-3 times that, activations
/// and stashes up to `max_bytes`, parameters up to 2 MB.
inline model::Model random_model(std::mt19937& rng, int layers, double max_bytes) {
  std::uniform_real_distribution<double> time(0.1, 10), bytes(0, max_bytes), params(0, 2e6);
  std::vector<L> spec;
  for (int l = 0; l < layers; ++l) {
    const double f = time(rng);
    spec.push_back(
        L{f, f * (1 + static_cast<double>(rng() % 3)), bytes(rng), params(rng), bytes(rng)});
  }
  return make_model(spec);
}

/// Stages as text: `0-3@0,1 4-5@2` (layer range @ GPU indices).
inline std::string stages_text(const std::vector<Stage>& stages) {
  std::string out;
  for (const Stage& stage : stages) {
    out += (out.empty() ? "" : " ") + std::to_string(stage.first_layer) + "-" +
           std::to_string(stage.last_layer) + "@";
    for (std::size_t x = 0; x < stage.gpus.size(); ++x)
      out += (x ? "," : "") + std::to_string(stage.gpus[x]);
  }
  return out;
}

inline ComputeTask F(int s, int m) { return {Op::kForward, s, m}; }
inline ComputeTask B(int s, int m) { return {Op::kBackward, s, m}; }
inline TransferTask Act(int s, int m) { return {TransferKind::kActivation, s, m}; }
inline TransferTask Grad(int s, int m) { return {TransferKind::kGradient, s, m}; }

// Measured bandwidths: `clusters` groups of `size` GPUs, every pair's bandwidth different
// (100-110 GB/s inside a group, 1-2 GB/s between groups), ids interleaved across groups.
inline topology::Topology noisy_clusters(int clusters, int size, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(0, 1);
  const int n = clusters * size;
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back("c" + std::to_string(i % clusters) + "/g" + std::to_string(1000 + i / clusters));
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) {
      const bool same = u % clusters == v % clusters;
      links.push_back({u, v, same ? 100e9 + 10e9 * noise(rng) : 1e9 + 1e9 * noise(rng), 0.005});
    }
  }
  return linked_topology(ids, links);
}

}  // namespace pipeplan::testing
