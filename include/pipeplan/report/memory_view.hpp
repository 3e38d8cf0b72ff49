#pragma once
/// \file
/// Each stage's peak memory per GPU, broken down (docs/memory.md): weights, gradients,
/// optimizer state, activations in flight at the peak and the framework reserve, computed from
/// the execution figures (`simulate::execution`) and the replay's peak, never by a second copy of
/// the memory rule.

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {

/// The split of `parameter_memory_factor` the breakdown uses (model::factor_split).
using model::factor_split;
using model::FactorSplit;

/// One stage's peak on its fullest GPU. `weights + gradients + optimizer` is the static bytes
/// of every stage of that GPU's device (spec 8.3), `activations` what its micro-batches hold
/// at the peak, `reserve` the model's framework reserve; they add up to `peak`.
struct StageMemory {
  int stage = 0;
  int gpu = 0;  ///< The stage's GPU with the highest peak (the first on ties).
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double reserve = 0;
  double peak = 0;                 ///< The replay's peak_memory_bytes of `gpu`.
  std::optional<double> capacity;  ///< The GPU's memory; empty when unlimited.
  double stash_bytes = 0;          ///< What one micro-batch in flight holds on the stage.
  double transient_bytes = 0;      ///< What the stage holds during each backward only.
};

/// The breakdown of every stage of `plan` (whose timeline is the replay's). O(S + N) after the
/// execution figures' O(layers x degrees).
std::vector<StageMemory> memory_breakdown(const Plan& plan, const model::Model& model,
                                          const topology::Topology& topology);

/// The breakdown as text, a heading and one line per stage, no trailing newline:
/// `  stage 0 on g0: weights 1 GiB + gradients 1 GiB + ... = 9 GiB of 16 GiB`. Stages sharing a
/// device whose lines read alike share one (`  stages 0, 4, ..., 76 on g0: ...`).
std::string memory_summary(const Plan& plan, const model::Model& model,
                           const topology::Topology& topology);

}  // namespace pipeplan::report
