#pragma once
/// \file
/// spp's last step (spec 9.5): the schedule of the chosen stages. The list scheduler is greedy,
/// so a fixed policy can beat it on the same stages; spp keeps whichever is fastest, and under
/// `--schedule auto` also tries the chosen devices with several stages each (interleaved,
/// looped, V-shaped) and a split backward.

#include <string>
#include <vector>

#include "pipeplan/planners/planner.hpp"

namespace pipeplan::planners {

/// The stages of `stages`' devices re-split into `V` stages per device (`V` times as many
/// stages, layers balanced by compute at the devices' degree), placed as `policy` places
/// them (`schedule::placed_stage`), at the devices' tensor- and context-parallel degrees. Empty
/// when the devices differ in replica count or either degree, when there are fewer layers than
/// stages, or when a new stage cannot run at the degree.
/// O(L + S V).
std::vector<Stage> virtual_variant(const model::Model& model, const std::vector<Stage>& stages,
                                   int V, schedule::Policy policy);

/// spp's plan under a fixed policy that places `V > 1` stages per device (`--virtual-stages V`,
/// or `zb-v`'s 2; spec 9.5): `plan`'s devices with `virtual_variant`'s stages, scheduled under
/// `policy`. `plan` as it is under `list` or a one-stage policy, when it has several stages
/// per device already, or when `V` is 1.
/// Throws `InfeasibleError` naming `--virtual-stages` when the variant cannot be made (devices
/// of different replica counts or degrees, fewer layers than stages), the policy cannot run it
/// or it does not fit.
/// O(L + S V) plus one schedule and replay.
Plan spread_over_devices(const Request& request, Plan plan, schedule::Policy policy);

/// The fastest plan that fits among `plan` (spp's plan of its stages under `policy`), the same
/// stages with whole backwards where `plan` splits them, the same devices under every other
/// fixed policy that can run them (list: never slower than a fixed policy on the same stages),
/// and, when `request.schedule_auto`, with 2, 3 and 4 stages per
/// device under every multi-stage policy and the list scheduler. Ties keep the earlier
/// (`plan` first). The kept plan's `schedule_policy` names the policy whose order it runs; a
/// note says what was tried. Another schedule's plan is returned as a search's candidate
/// (`Candidate`): the caller completes the plan it keeps (`complete_plan`). O(K T) for K
/// candidates (at most 8 + 3 x 5 here), made on parallel threads (`for_each_index`), holding
/// only the plans that can still be the fastest.
Plan fastest_schedule(const Request& request, Plan plan, schedule::Policy policy);

}  // namespace pipeplan::planners
