#pragma once
/// \file
/// The model a plan file was made for, when it differs from the model file as read.

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"

namespace pipeplan::report {

/// `model` as the plan in `plan` was made for it: a model read from a transformer description
/// is regenerated with the plan's `micro_batch_size` (what `plan --global-batch` chose), and its
/// `sequence_parallel` and `selective_recompute` (what spp's knob search chose;
/// model::transformer_variant), so that `simulate` and `export --model` check the plan against
/// the model it was made for. A plan that records either flag, given a model without a
/// description, is an `InputError` naming the flag's pointer. Any other model, or a plan without
/// valid fields (a `micro_batch_size` from 1 to model::kMaxTransformerMicroBatchSize, boolean
/// flags) is returned as it is: the plan reader reports a broken plan. O(size of the plan text +
/// L).
model::Model model_for_plan(model::Model model, const io::Source& plan);

}  // namespace pipeplan::report
