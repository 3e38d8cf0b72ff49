// The model a plan was made for (report::model_for_plan): one parse of the plan text, then at
// most one regeneration of the model.

#include "pipeplan/report/plan_model.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "pipeplan/error.hpp"
#include "pipeplan/model/transformer.hpp"

namespace pipeplan::report {

model::Model model_for_plan(model::Model model, const io::Source& plan) {
  const nlohmann::json root = nlohmann::json::parse(plan.text, nullptr, false);
  if (!root.is_object()) return model;
  model::TransformerSettings settings;
  auto size = root.find("micro_batch_size");
  if (size != root.end() && size->is_number_integer()) {
    const auto b = size->get<std::int64_t>();
    if (b >= 1 && b <= model::kMaxTransformerMicroBatchSize)
      settings.micro_batch_size = static_cast<int>(b);
  }
  const std::pair<const char*, std::optional<bool>*> flags[] = {
      {"sequence_parallel", &settings.sequence_parallel},
      {"selective_recompute", &settings.selective_recompute}};
  for (const auto& [key, target] : flags) {
    auto flag = root.find(key);
    if (flag == root.end() || !flag->is_boolean()) continue;
    // A plan made for a changed description cannot be costed with a profile alone.
    if (!model.transformer) {
      throw InputError(plan.name, std::string("/") + key,
                       std::string("the plan was made for a transformer description with ") + key +
                           " " + (flag->get<bool>() ? "on" : "off") +
                           ", but the model has no \"transformer\" description to cost it with "
                           "(give the model file the plan was made from)");
    }
    *target = flag->get<bool>();
  }
  if (!model.transformer) return model;
  return model::transformer_variant(model, settings);
}

}  // namespace pipeplan::report
