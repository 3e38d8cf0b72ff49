#pragma once
// Seeded generators of large synthetic models and clusters for the benchmarks.

#include <random>
#include <string>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::bench {

/// `layers` transformer-like layers with +-30% jitter: ~2 ms forward, 2x backward, 8 MB
/// activations, 25 MB parameters, 16 MB stash (seeded, deterministic).
inline model::Model synthetic_model(int layers, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.7, 1.3);
  model::Model m;
  m.name = "synthetic-" + std::to_string(layers);
  for (int l = 0; l < layers; ++l) {
    model::Layer layer;
    layer.name = "layer" + std::to_string(l);
    layer.forward_ms = 2 * jitter(rng);
    layer.backward_ms = 2 * layer.forward_ms;
    layer.activation_bytes = 8e6 * jitter(rng);
    layer.parameter_bytes = 25e6 * jitter(rng);
    layer.stash_bytes = 16e6 * jitter(rng);
    m.layers.push_back(layer);
  }
  return m;
}

/// `layers` layers of a real transformer's mix, repeating norm, attention, reshape, MLP and
/// residual add: costs that differ by 100x or are zero (reshapes and adds hold no stash and
/// no parameters), 9 ms MLPs, 32 MB activations after the MLP, and 400 MB embeddings at both
/// ends (the input embedding and the output head), +-20% jitter (seeded, deterministic).
/// `parameter_scale` multiplies every parameter size (memory-tight variants).
inline model::Model mixed_model(int layers, unsigned seed = 1, double parameter_scale = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  model::Model m;
  m.name = "mixed-" + std::to_string(layers);
  for (int l = 0; l < layers; ++l) {
    model::Layer layer;
    layer.name = "layer" + std::to_string(l);
    double forward = 0, parameters = 0, activation = 8e6, stash = 0;
    if (l == 0 || l == layers - 1) {
      forward = 0.8;
      parameters = 400e6;
      stash = 8e6;
    } else {
      const double j = jitter(rng);
      switch ((l - 1) % 5) {
        case 0:  // layer norm
          forward = 0.08 * j, parameters = 0.02e6, stash = 8e6;
          break;
        case 1:  // attention
          forward = 3 * j, parameters = 16e6, stash = 40e6;
          break;
        case 2:  // reshape: free
          break;
        case 3:  // MLP
          forward = 9 * j, parameters = 64e6, activation = 32e6, stash = 48e6;
          break;
        default:  // residual add
          forward = 0.05 * j;
          break;
      }
    }
    layer.forward_ms = forward;
    layer.backward_ms = 2 * forward;
    layer.activation_bytes = activation;
    layer.parameter_bytes = parameters * parameter_scale;
    layer.stash_bytes = stash;
    m.layers.push_back(layer);
  }
  return m;
}

/// `nodes` servers of `per_node` GPUs: NVLink 150 GB/s inside, 25 GB/s InfiniBand between,
/// 80 GiB each, built through the reader's shorthand path (DirectLinks).
/// With `noise` > 0, every pair's bandwidth is scaled by a seeded factor in [1 - noise,
/// 1 + noise], as measured bandwidths are: no two pairs alike, so no structure to exploit.
inline topology::Topology synthetic_cluster(int nodes, int per_node, double noise = 0,
                                            unsigned seed = 1,
                                            double memory_bytes = 80.0 * 1024 * 1024 * 1024) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> factor(1 - noise, 1 + noise);
  std::vector<topology::Gpu> gpus;
  for (int n = 0; n < nodes; ++n) {
    for (int g = 0; g < per_node; ++g) {
      gpus.push_back({"node" + std::to_string(n) + "/gpu" + std::to_string(g),
                      "node" + std::to_string(n), 1.0, memory_bytes});
    }
  }
  const int total = nodes * per_node;
  topology::DirectLinks links(total);
  for (int u = 0; u < total; ++u) {
    for (int v = u + 1; v < total; ++v) {
      const bool same = u / per_node == v / per_node;
      const double scale = noise > 0 ? factor(rng) : 1.0;
      links.set(u, v, (same ? 150e9 : 25e9) * scale, same ? 0.002 : 0.005);
    }
  }
  return topology::Topology::build("synthetic", gpus, std::move(links), "synthetic");
}

}  // namespace pipeplan::bench
