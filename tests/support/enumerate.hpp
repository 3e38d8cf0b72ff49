#pragma once
// Brute-force enumeration of plans for the oracles of the property tests.

#include <functional>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/simulate/simulator.hpp"

namespace pipeplan::testing {

/// Calls `visit` on every plan whose stages are contiguous layer ranges (of `layers` layers)
/// on consecutive runs of `order` from its first GPU, each of 1 to `max_replicas` GPUs, at most
/// `max_stages` stages (unused GPUs form the order's tail). Written independently of
/// `partition::for_each_shape`, which it checks.
inline void for_each_plan(int layers, const std::vector<int>& order, int max_replicas,
                          int max_stages,
                          const std::function<void(const std::vector<Stage>&)>& visit) {
  const int N = static_cast<int>(order.size());
  std::vector<Stage> current;
  std::function<void(int, int)> extend = [&](int layer, int position) {
    if (layer == layers) {
      visit(current);
      return;
    }
    if (static_cast<int>(current.size()) == max_stages) return;
    for (int last = layer; last < layers; ++last) {
      for (int r = 1; r <= max_replicas && position + r <= N; ++r) {
        Stage stage{layer, last, {}};
        for (int p = position; p < position + r; ++p)
          stage.gpus.push_back(order[static_cast<std::size_t>(p)]);
        current.push_back(stage);
        extend(last + 1, position + r);
        current.pop_back();
      }
    }
  };
  extend(0, 0);
}

/// The fewest stages among the plans of `for_each_plan` whose every stage holds its static
/// bytes (phi = 4) and one stash in `memory` bytes (as the list schedule needs), or 0 when none
/// does.
inline int fewest_fitting_stages(const model::Model& model, const std::vector<int>& order,
                                 int max_replicas, int max_stages, double memory) {
  int fewest = 0;
  const int layers = static_cast<int>(model.layers.size());
  for_each_plan(layers, order, max_replicas, max_stages, [&](const std::vector<Stage>& stages) {
    for (const Stage& stage : stages) {
      double w = 0, y = 0;
      for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
        w += model.layers[static_cast<std::size_t>(l)].parameter_bytes;
        y += model.layers[static_cast<std::size_t>(l)].stash_bytes;
      }
      if (simulate::max_in_flight(4 * w, y, memory, 1) < 1) return;
    }
    const int S = static_cast<int>(stages.size());
    if (fewest == 0 || S < fewest) fewest = S;
  });
  return fewest;
}

}  // namespace pipeplan::testing
