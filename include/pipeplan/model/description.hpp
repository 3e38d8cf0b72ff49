#pragma once
/// \file
/// A model file's `transformer` object (docs/formats.md): the description of a decoder-only
/// transformer, read from and written to a model file, and the profile a file may carry beside
/// it, which must be exactly the one the description generates.

#include <nlohmann/json.hpp>

#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/model/transformer_config.hpp"

namespace pipeplan::model {

/// The `transformer` object, completed (`check_transformer_config`); every problem names its
/// pointer. `micro_batch_size_fixed` says whether the object set `micro_batch_size`. O(size of
/// the object + degrees).
TransformerConfig read_description(const io::Node& node);

/// `config` as a `transformer` object that `read_description` reads back to the same completed
/// config: every field of the completed shape and training options (no `preset`),
/// `micro_batch_size` only when the description fixed it.
nlohmann::ordered_json description_to_json(const TransformerConfig& config);

/// The micro-batch size whose layers a model file holds beside its description: the
/// description's fixed size, else the file's `profile.batch_size` when it is a valid size, else
/// the description's default.
int written_micro_batch_size(const io::ObjectReader& file, const TransformerConfig& config);

/// Checks that the profile keys a model file carries beside its `transformer` object (`layers`,
/// `profile`, `parameter_memory_factor`, `sharded_memory_factor`, `input_bytes`) are none, or
/// exactly those of `generated`, the model the description generates (`model_to_json`; numbers
/// compared by value, keys starting with `x-` ignored). Throws `InputError` at the first
/// difference. O(size of the profile).
void check_written_profile(const io::ObjectReader& file, const Model& generated);

}  // namespace pipeplan::model
