// The model a plan was made for (report::model_for_plan): one parse of the plan text, then at
// most one regeneration of the model.

#include "pipeplan/report/plan_model.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "pipeplan/model/transformer.hpp"

namespace pipeplan::report {

model::Model model_for_plan(model::Model model, const io::Source& plan) {
  if (!model.transformer) return model;
  const nlohmann::json root = nlohmann::json::parse(plan.text, nullptr, false);
  if (!root.is_object()) return model;
  auto size = root.find("micro_batch_size");
  if (size == root.end() || !size->is_number_integer()) return model;
  const auto b = size->get<std::int64_t>();
  if (b < 1 || b > model::kMaxTransformerMicroBatchSize ||
      b == model.transformer->micro_batch_size) {
    return model;
  }
  return model::transformer_model_at(model, static_cast<int>(b));
}

}  // namespace pipeplan::report
