#pragma once
/// \file
/// Planning with context parallelism (spec 10.4): a planner of one-stage-per-group plans runs at
/// every context-parallel degree `c` of `--context-parallel LIST`, and the fastest plan is kept
/// (spp: its whole settings search at each degree, `plan_each_context_degree`).
///
/// At `c > 1` the planner sees a **reduced problem**: every block of `c` GPUs is one GPU (its
/// slowest speed, its smallest memory, between two blocks the slowest of the pairs of their j-th
/// GPUs), and the model is the one a GPU of a context-parallel group sees
/// (model::at_context_degree), with each layer's ring steps folded into its times as spec 10.3
/// overlaps them (at speed 1.0, over the slowest block's ring). Blocks are taken from the min-cut
/// order at stride 1 (each context ring on the closest GPUs) and at stride `t` for each
/// tensor-parallel degree `t` the request allows (Megatron-LM's order: tensor-parallel groups on
/// consecutive GPUs, context rings across them); each stride is planned and the fastest kept. A
/// plan is expanded so that a group of `t` blocks becomes a replica of `c` tensor-parallel groups,
/// the j-th made of the j-th GPU of each block. The expanded stages are scheduled and replayed
/// again by the exact execution model of spec 10.3 (`finish_plan`): every figure of the plan is
/// the real one, and the reduced problem only guides the search.

#include <functional>
#include <optional>
#include <string>

#include "pipeplan/planners/planner.hpp"

namespace pipeplan::planners {

/// A planner at context-parallel degree 1 (the request's `context_parallel` is {1} or empty).
using PlanAtOne = std::function<Plan(const Request&, schedule::Policy)>;

/// Why `model` cannot run at context-parallel degree `c` (spec 10.1: some layer's
/// `context_parallel` does not list it), or nothing. Every planner refuses such a degree with this
/// reason. O(L x degrees).
std::optional<std::string> context_degree_refusal(const model::Model& model, int c);

/// A planner at the one context-parallel degree of its request (`context_parallel = {c}`).
using PlanAtDegree = std::function<Plan(const Request&)>;

/// The fastest of `plan_at`'s plans over the degrees of `request.context_parallel` that the model
/// allows, each planned as if given alone (`context_parallel = {c}`), so that a list is never
/// slower than any of its degrees; ties keep the earlier (smaller) degree. Throws
/// `InfeasibleError` when no degree gives a plan (the last degree's reason). `make_plan` runs
/// the planners that choose their settings (spp) so: everything they choose besides the degree
/// is chosen at each degree (issue 33 item 8). One run of `plan_at` per degree.
Plan plan_each_context_degree(const Request& request, const PlanAtDegree& plan_at);

/// `plan_at_one`'s plan at the request's one context-parallel degree (1 when empty): at 1,
/// `plan_at_one(request, policy)` itself; above, the fastest over the strides of the reduced
/// problem (the file comment). A list is planned degree by degree (`plan_each_context_degree`).
/// Throws `InfeasibleError` when the degree gives no plan. Complexity: one run of
/// `plan_at_one` per stride (1 + the tensor-parallel degrees), plus O((N/c)^2 c) for each
/// reduced topology and O(L x degrees) for each reduced model.
Plan plan_context_parallel(const Request& request, schedule::Policy policy,
                           const PlanAtOne& plan_at_one);

/// The reduced model of degree `c` (see the file comment): `model::at_context_degree(model, c)`
/// with each layer that exchanges keys and values taking, per tensor-parallel degree `t`,
/// `max(f, (c-1) s)` forward and `max(b - w, 2 (c-1) s) + w` backward (`f`, `b`, `w` its divided
/// times, `s = ring.latency + ring_step_bytes / ring.bandwidth` in ms), and a recomputed part
/// that leaves a recomputing stage `max(b - r - w, 2 (c-1) s) + w` (`r` its divided
/// `backward_recompute_ms`). O(L x degrees).
model::Model reduced_model(const model::Model& model, int c, double ring_bandwidth_bytes_per_s,
                           double ring_latency_ms);

}  // namespace pipeplan::planners
