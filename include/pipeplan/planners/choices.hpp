#pragma once
/// \file
/// What a planning request allows each stage (spec 8.4): the tensor-parallel degrees, whether
/// it may or must recompute, and the optimizer, as the partition searches take them. One place
/// for the rules that turn `--tensor-parallel`, `--recompute` and `--shard-optimizer` into a
/// search space.

#include <vector>

#include "pipeplan/partition/dp.hpp"
#include "pipeplan/partition/search.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::planners {

/// `request.recompute`, or its default: `kAuto` when the model uses a field of spec 8.1
/// (`model::uses_v2_fields`), else `kNever`.
Recompute effective_recompute(const Request& request);

/// The degrees a stage may take: every degree some layer lists (and 1), or those of
/// `--tensor-parallel` among them, at most the number of GPUs; ascending. O(L D).
std::vector<int> candidate_degrees(const Request& request);

/// The request's stage choices for the DP. O(L D).
partition::StageChoices stage_choices(const Request& request);

/// `limits` with the degrees, recomputation and uniformity of `choices` (for the replayed
/// searches of `request`).
void restrict_shapes(const Request& request, const partition::StageChoices& choices,
                     partition::ShapeLimits& limits);

}  // namespace pipeplan::planners
