#pragma once
// Brute-force enumeration of v2 plans (spec 8.2) for the oracles: written independently of
// `partition::for_each_shape`, which it checks.

#include <functional>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"

namespace pipeplan::testing {

/// Calls `visit` on every plan of contiguous layer ranges on consecutive runs of `order` from
/// its first GPU: each stage at a degree t of `degrees` that its layers allow, r groups of t
/// GPUs with 1 <= r <= `max_replicas`, recomputing or not as `recompute` lists, at most
/// `max_stages` stages.
inline void for_each_v2_plan(const model::Model& model, const std::vector<int>& order,
                             const std::vector<int>& degrees, const std::vector<bool>& recompute,
                             int max_replicas, int max_stages,
                             const std::function<void(const std::vector<Stage>&)>& visit) {
  const int layers = static_cast<int>(model.layers.size());
  const int N = static_cast<int>(order.size());
  std::vector<Stage> current;
  std::function<void(int, int)> extend = [&](int layer, int position) {
    if (layer == layers) {
      visit(current);
      return;
    }
    if (static_cast<int>(current.size()) == max_stages) return;
    for (int last = layer; last < layers; ++last) {
      for (const int t : degrees) {
        if (!model::stage_allows_degree(model, layer, last, t)) continue;
        for (int r = 1; r <= max_replicas && position + r * t <= N; ++r) {
          for (const bool again : recompute) {
            Stage stage{layer, last, {}};
            for (int p = position; p < position + r * t; ++p)
              stage.gpus.push_back(order[static_cast<std::size_t>(p)]);
            stage.tensor_parallel = t;
            stage.recompute = again;
            current.push_back(stage);
            extend(last + 1, position + r * t);
            current.pop_back();
          }
        }
      }
    }
  };
  extend(0, 0);
}

}  // namespace pipeplan::testing
