#pragma once
/// \file
/// The settings a user would otherwise fix, chosen by the planner (issue 33 item 8,
/// docs/transformer-model.md "Settings spp chooses"): the optimizer's sharding and, for a model
/// with a transformer description, Megatron-LM's sequence parallelism, selective recomputation
/// and full sharding (torch FSDP2). Each candidate is a whole plan of the planner on the request so
/// changed; the fastest is kept, the request's own settings on ties.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/transformer.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::planners {

/// One combination of settings: the description's flags (empty: as the model file says) and the
/// optimizer.
struct SettingsCandidate {
  model::TransformerSettings settings;
  Optimizer optimizer = Optimizer::kReplicated;
};

/// The combinations `request` asks to plan, the request's own first (the model file's flags,
/// or those `--sequence-parallel` and `--selective-recompute` fix, and `request.optimizer`).
/// With `request.choose_settings` (spp's default from the command line), for what the request
/// leaves open:
/// * the optimizer, for a model that uses the fields of spec 8.1 (a v1 profile keeps its
///   sections 1-7 plans) on more than one GPU, where sharding changes a time or a byte (some
///   update time, or a sharded memory factor above 0): replicated and sharded;
/// * sequence parallelism, for a described model that some stage may split (a degree above 1):
///   off and on;
/// * selective recomputation, for a described model without fused attention (with it there
///   are no sequence x sequence tensors to drop): off and on.
/// A sharded optimizer is never slower and never needs more memory than a replicated one for
/// the same stages (spec 8.3), so the description's other flag combinations are planned only
/// with the optimizer's last choice. O(1).
std::vector<SettingsCandidate> settings_candidates(const Request& request);

/// Whether `plan_choosing_settings`, choosing settings (`choose_settings`), gives its final plan
/// spp's last scheduling step again: every fixed policy and every rule of the list policy on its
/// stages, and its devices with 2 to 4 stages each. So it does for a described model under the
/// list policy, not under `--schedule auto` (whose searches had that step already). An earlier
/// step whose choice among the rules is lost may leave it to this one (context_parallel.cpp).
/// O(1).
bool reschedules_final_plan(const Request& request, schedule::Policy policy);

/// Plans `request` with `plan_one` at every candidate of `settings_candidates` and keeps the
/// fastest: a later candidate replaces the kept plan only when strictly faster (beyond spec 4's
/// 1e-9 equality), so a request with nothing to choose plans exactly as `plan_one` alone. Every
/// candidate is planned (an estimate that ranked them left out faster plans); a candidate that
/// does not fit (`InfeasibleError`) is skipped, and when none fits the first's error is
/// rethrown. Then each plan's stages are replayed under every other candidate's settings (the
/// searches are heuristic: a shape found under one can be faster under another). The steps
/// below run under the kept candidate's request, or its sharded twin's where the replicated one
/// is kept (sharded is never slower nor larger for the same stages, spec 8.3). For a
/// described model under the list policy with `choose_settings`, the kept plan's devices are
/// then tried with 2 to 4 stages each (fastest_schedule, as `--schedule auto` on its final
/// plan), and the three Megatron-LM configurations of the smallest estimates interleaved with
/// every V dividing their decoders per stage; then, with the optimizer left open
/// (`!optimizer_fixed`), the fastest fully sharded plan among the kept stages and Megatron-LM's
/// one-stage configurations, its devices shared so too (within a budget of scheduling steps),
/// then the latter under each other candidate's flags; each kept only where strictly faster.
/// Where no candidate fits and spp may choose full sharding, the fastest fully sharded one-stage
/// configuration of `planner` under any candidate's flags is the plan; when none fits either,
/// the refusal is the sharded candidate's (else the first's), saying full sharding was tried. The
/// plan
/// records the flags it was made with where they differ from the model file
/// (`Plan::sequence_parallel`, `Plan::selective_recompute`); notes list each candidate's time. O(K)
/// plans and O(K^2) replays for K candidates (at most 5), each set on parallel threads (up to four)
/// and read in order, so the result does not depend on the threads; `plan_one` must be safe to call
/// from several threads at once (the planners share no mutable state).
Plan plan_choosing_settings(const Request& request, const std::string& planner,
                            schedule::Policy policy,
                            const std::function<Plan(const Request&, schedule::Policy)>& plan_one);

/// The end of the last backward of `shape` (a Megatron-LM configuration: r identical replicas)
/// under `policy`, from replica 0's pipeline alone with its `M / r` micro-batches, each GPU's
/// static bytes as on r replicas (fully sharded: divided by r, without FSDP's working copies and
/// gathers, which only add) and no optimizer step. On a cluster of identical nodes and a
/// fixed policy this is exactly where the whole plan's last backward ends (the replicas run the
/// same pipeline until their AllReduces), so a lower bound of its iteration: spp screens
/// Megatron-LM's configurations with it before planning them whole. nullopt for one replica, `r`
/// not dividing `M`, or no plan of replica 0. O(one plan of S M / r tasks).
std::optional<double> one_replica_ms(const Request& request, const Partition& shape,
                                     schedule::Policy policy);

/// The description's settings `plan` was made with, for model::transformer_variant: its
/// micro-batch size and the flags it records. O(1).
model::TransformerSettings settings_of(const Plan& plan);

}  // namespace pipeplan::planners
