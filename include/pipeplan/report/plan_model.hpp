#pragma once
/// \file
/// The model a plan file was made for, when it differs from the model file as read.

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"

namespace pipeplan::report {

/// `model` at the micro-batch size the plan in `plan` records: a model read from a transformer
/// description is regenerated at the plan's `micro_batch_size` (what `plan --global-batch`
/// chose; model::transformer_model_at), so that `simulate` and `export --model` check the plan
/// against the model it was made for. Any other model, a plan at the model's own size, or a plan
/// without a valid `micro_batch_size` (an integer from 1 to
/// model::kMaxTransformerMicroBatchSize) is returned as it is: the plan reader reports a broken
/// plan. O(size of the plan text + L).
model::Model model_for_plan(model::Model model, const io::Source& plan);

}  // namespace pipeplan::report
