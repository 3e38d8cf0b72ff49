#pragma once
// Brute-force enumeration of plans for the oracles of the property tests.

#include <functional>
#include <vector>

#include "pipeplan/plan.hpp"

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

}  // namespace pipeplan::testing
