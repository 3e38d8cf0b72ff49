#pragma once
// Random models with the fields of spec 8.1, for the v2 property tests and oracles.

#include <random>

#include "builders.hpp"
#include "pipeplan/model/model.hpp"

namespace pipeplan::testing {

/// `random_model`, plus spec 8.1: most layers split over the degrees in `degrees` (per-degree
/// times a little worse than 1/t, all-reduces up to 2 MB), and, when `updates`, optimizer steps
/// of 0.1-2 ms; an input of up to `max_bytes`.
inline model::Model random_v2_model(std::mt19937& rng, int layers, double max_bytes,
                                    std::vector<int> degrees = {1, 2}, bool updates = false) {
  model::Model model = random_model(rng, layers, max_bytes);
  std::uniform_real_distribution<double> overhead(1.0, 1.3), bytes(0, 2e6), step(0.1, 2),
      input(0, max_bytes);
  model.input_bytes = input(rng);
  for (model::Layer& layer : model.layers) {
    if (updates) layer.update_ms = step(rng);
    if (rng() % 10 < 3) continue;  // a layer that never splits
    model::TensorParallel tp;
    tp.degrees = degrees;
    tp.allreduce_bytes = bytes(rng);
    for (const int t : degrees) {
      const double slower = t == 1 ? 1.0 : overhead(rng);
      tp.forward_ms.push_back(t == 1 ? layer.forward_ms : layer.forward_ms / t * slower);
      tp.backward_ms.push_back(t == 1 ? layer.backward_ms : layer.backward_ms / t * slower);
    }
    layer.tensor_parallel = tp;
  }
  return model;
}

}  // namespace pipeplan::testing
