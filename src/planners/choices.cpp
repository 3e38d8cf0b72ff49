// The search space of spec 8.4 a request allows; see choices.hpp. O(L D).

#include "pipeplan/planners/choices.hpp"

#include <algorithm>

namespace pipeplan::planners {

Recompute effective_recompute(const Request& request) {
  if (request.recompute) return *request.recompute;
  return model::uses_v2_fields(request.model) ? Recompute::kAuto : Recompute::kNever;
}

std::vector<int> candidate_degrees(const Request& request) {
  std::vector<int> degrees{1};
  for (const model::Layer& layer : request.model.layers) {
    if (!layer.tensor_parallel) continue;
    degrees.insert(degrees.end(), layer.tensor_parallel->degrees.begin(),
                   layer.tensor_parallel->degrees.end());
  }
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  std::vector<int> out;
  for (const int t : degrees) {
    if (t > request.topology.size()) continue;
    const auto& asked = request.tensor_parallel;
    if (!asked.empty() && !std::binary_search(asked.begin(), asked.end(), t)) continue;
    out.push_back(t);
  }
  return out;
}

partition::StageChoices stage_choices(const Request& request) {
  partition::StageChoices choices;
  choices.degrees = candidate_degrees(request);
  const Recompute recompute = effective_recompute(request);
  choices.may_recompute = recompute == Recompute::kAuto;
  choices.must_recompute = recompute == Recompute::kAlways;
  choices.optimizer = request.optimizer;
  choices.uniform = request.uniform;
  if (request.uniform) choices.equal_shares_of = request.micro_batches;
  return choices;
}

void restrict_shapes(const Request& request, const partition::StageChoices& choices,
                     partition::ShapeLimits& limits) {
  limits.degrees = choices.degrees;
  limits.may_recompute = choices.may_recompute;
  limits.must_recompute = choices.must_recompute;
  limits.model = &request.model;
  limits.uniform = choices.uniform;
  limits.equal_shares_of = choices.equal_shares_of;
}

}  // namespace pipeplan::planners
