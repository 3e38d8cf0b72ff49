#pragma once
/// \file
/// Every tuning constant of spp's search (planners/spp.cpp), its local search
/// (partition/search.cpp) and the DP's grid (partition/dp.cpp), in one table, each with what it
/// bounds and where its value came from (a section of docs/ or the commit that measured it).
/// Changing one changes plans: run tests/corpus/plan_corpus.sh before and after, and the
/// quality benchmark (docs/performance.md, "Plan quality"). The recipe that uses them is
/// docs/algorithms.md, "What the DP does not see, and the final choice on the replay".
///
/// Work is counted, never timed, so every plan is deterministic: the search's budgets are in
/// replay units (a shape of S stages costs 4 S M + N: its tasks and GPUs), the DP's in grid
/// points and front entries.

#include <array>
#include <cstddef>

namespace pipeplan::partition::tuning {

// --- spp's search per candidate order (`planners::SppSearch`'s defaults; spp.cpp
// static_asserts that they equal these) -----------------------------------------------------

/// An order allowing at most this many shapes has every one replayed (step 1: exact on small
/// instances). From 48af2d4 (issue 13): the 200 seeded instances of SppQualityTest are all
/// below it, and counting stops past it (count_shapes).
inline constexpr double kExhaustiveShapes = 2000;

/// DP solutions (smallest estimate first) that seed the local search: the best always, the
/// other 7 while the budget lasts. 48af2d4 (docs/algorithms.md, "the final choice", step 3b).
inline constexpr std::size_t kDpSolutions = 8;

/// The base budget of the local search per order and schedule model, in replay units: phase 1's
/// whole budget and the least phase 2 has. About 40 ms of one core (release build). 48af2d4;
/// docs/performance.md, "Complexity of each phase".
inline constexpr double kWork = 3e4;

/// Phase 2's budget where the best start's neighbourhood is cheap: this many passes over it (its
/// neighbours times the best start's replay), at most kMaxWork. 2 in afd8f98; 4 since 388b443
/// (three example plans 1-8% faster under the fixed policies, none slower, no measurable time).
inline constexpr double kSweeps = 4;

/// Phase 2's most (about 0.3 s of one core), and the dearest single pass that still earns the
/// larger budget (plans whose one pass costs more keep kWork). afd8f98.
inline constexpr double kMaxWork = 8 * kWork;

/// A climb takes a move that replays faster by more than this fraction (phases 1, 3 and 4
/// always; phase 2 unless the slow reference search asks for more, e1b7c49). Only to keep
/// rounding noise from counting as a gain.
inline constexpr double kAnyGain = 1e-9;

// --- the starting points (spp.cpp) ----------------------------------------------------------

/// Baselines (planner table rows with `seeds_spp`) whose own planning takes at most this many
/// steps (`PlannerRow::steps`) seed the search on the input order. 48af2d4: pipedream's DP is
/// beyond it on large instances, the cheap baselines always within.
inline constexpr double kMaxSeedSteps = 2e5;

/// Megatron configurations seeding spp (models with tensor-parallel layers), most promising
/// first, are replayed whatever the budget while their replays together cost at most this many
/// kWork budgets (the first always). 64 in 20357e0; 16 since 62b3c72 (same 21 validation rows,
/// plans on 384 GPUs in about 1 s instead of 2; docs/decisions.md, "spp and Megatron's
/// configurations").
inline constexpr double kMegatronSeedWork = 16;

/// The uniform search's plan replaces spp's only when faster by more than this fraction (206fb5a:
/// "strictly faster", so that every plan it does not beat stays byte-identical).
inline constexpr double kUniformMargin = 1e-9;

// --- phase 4 of the local search, the fill splits (search.cpp; 949c5c1, db58e52) ------------

/// Phase 4's budget where phase 3 had none: this share of kWork (db58e52: small instances, whose
/// climbs end in a local optimum first, need it for the halved stages; bert-24 on heterogeneous
/// 1714.9 -> 1553.9 ms).
inline constexpr double kFillShareOfWork = 0.25;

/// Shapes phase 4 re-splits: the best and the best start of each of up to kResplitBases - 1
/// other stage counts (949c5c1: the 1,000-layer chains' deeper tapered pipelines), then the best
/// with one of its kHalvedStages widest stages halved (db58e52).
inline constexpr std::size_t kResplitBases = 6;
inline constexpr std::size_t kHalvedStages = 2;

/// Phase 4's coarse grid of (gamma, cap) per base, caps outer (949c5c1: quality benchmark, all
/// 15 instances within 1% of the slow search).
inline constexpr std::array<double, 3> kFillCaps{1.0, 0.85, 0.75};
inline constexpr std::array<double, 3> kFillGammas{0.25, 0.5, 0.75};

/// The pattern search around the grid's best (gamma, cap): steps from kPatternFirstStep halving
/// down to kPatternLastStep in gamma, half as much in cap (949c5c1).
inline constexpr double kPatternFirstStep = 0.125;
inline constexpr double kPatternLastStep = 0.03125;

/// Bisection steps of `fill_split` on the bound (949c5c1): 2^-60 of the starting interval.
inline constexpr int kFillBisections = 60;

// --- the DP's grid (dp.cpp; docs/algorithms.md, "Large inputs: the grid") -------------------

/// Most entries a Pareto front keeps (48af2d4: memory-tight profiles grew fronts into the
/// thousands; 1,000 layers on 32 GPUs spent 5 s per order in the DP). Exact below it.
inline constexpr std::size_t kMaxFront = 32;

/// The exact grid while blocks^2 x run starts x run lengths^2 x choices stays within
/// kGridBudget (about a second), with at most these blocks, starts and lengths (7ee9889).
inline constexpr int kMaxBlocks = 192;
inline constexpr int kMaxPositions = 32;
inline constexpr int kMaxLengths = 16;
inline constexpr double kGridBudget = 80e6;

/// Work one DP pass may do (entries combined times the front they enter) before it gives up and
/// the grid coarsens (6a8c47f: 200 layers on 256 GPUs, 20 s to 2 s, same plan).
inline constexpr double kMaxPassWork = 2e9;

}  // namespace pipeplan::partition::tuning
