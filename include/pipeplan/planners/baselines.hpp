#pragma once
/// \file
/// The baseline planners of spec section 5, each re-implemented from its published
/// description and finished by `finish_plan`, so that every plan is scored by the same
/// execution model as `spp`:
///
/// * `gpipe`: one stage per GPU, layers split by an exact min-max of stage compute.
/// * `pipedream`: PipeDream's dynamic program minimising the slowest replicated stage.
/// * `uniform`: equal layer counts, one GPU per stage.
/// * `data-parallel`: one stage on every GPU.
///
/// All four take the GPUs in input order (`gpu_order` is 0..N-1). Each respects memory under
/// the policy that will schedule it (see `peak_stashes`), so re-scheduling a baseline with
/// `--schedule` never yields a plan that breaks memory; when memory does not bind, the stages do
/// not depend on the policy. Each function below states its rule, tie-breaking and complexity;
/// docs/results.md compares the four with `spp` on the example models and topologies.

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/partition/dp.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::planners {

/// Stashes a GPU of stage `s` holds at its peak when `stages` are scheduled with `policy` for
/// `micro_batches` micro-batches: `ceil(M / r_s)` under `kGpipe`, `ceil(w_s / r_s)` under
/// `kOneFOneB` (`w_s` the warm-up of `schedule::one_f_one_b_warmup`), and 1 under `kList`
/// (the list scheduler caps in-flight work by memory, so one stash is all a stage needs).
/// Exact for the fixed policies: the replay of their orders reaches this peak on the first
/// replica of the stage and never exceeds it on any.
long peak_stashes(const std::vector<Stage>& stages, int s, int micro_batches,
                  schedule::Policy policy);

/// Whether every GPU of `stage` holds its static bytes (`parameter_memory_factor * W`) plus
/// `stashes` stashes of `Y` bytes, counted as the replay counts them
/// (`simulate::max_in_flight`). `stashes >= 1`.
bool stage_fits(const model::Model& model, const topology::Topology& topology, const Stage& stage,
                long stashes);

/// Why `stage` (stage `s`) does not hold `stashes` stashes, naming its tightest GPU:
/// `stage 2 (layers 10-19) needs 20 GiB (4 x parameters + 3 stashes) but GPU "g2" has 16 GiB`.
/// Nothing when it fits.
std::optional<std::string> memory_shortfall(const model::Model& model,
                                            const topology::Topology& topology, const Stage& stage,
                                            int s, long stashes);

/// The reason behind `infeasibility_message`, without its `no placement fits in GPU memory: `
/// prefix: the most demanding layer alone against the largest GPU, or the model's static memory
/// against all GPUs together.
std::string infeasibility_reason(const Request& request);

/// The `megatron` planner (issue 14): Megatron-LM's placement for `--tensor-parallel T
/// --pipeline-parallel P [--data-parallel D]` (D defaults to N / (T P)): the first D T P GPUs of
/// the input order, tensor groups innermost, then data-parallel copies, then stages; layers in
/// equal counts (the first stages take one more when they do not divide), in a model made by
/// `pipeplan model transformer` the decoder layers split evenly with the embedding on the first
/// stage and the output layer on the last. With `--recompute auto` every stage recomputes when
/// the plan does not fit without it under Megatron-LM's own 1F1B schedule or under `policy`,
/// none otherwise (so `--schedule list` reschedules the configuration Megatron-LM would run).
/// Throws `UsageError` without exactly one degree and a depth, `InfeasibleError` when the GPUs
/// or layers do not suffice or a stage cannot run at T. O(L D + N).
Partition megatron_partition(const Request& request, schedule::Policy policy);

/// Why Megatron-LM could not run `request`'s configuration, or nothing: it interleaves
/// (`--virtual-stages` above 1) only on two pipeline stages or more, and it gives every
/// data-parallel replica the same number of micro-batches (`partition::shares_equally`), so the
/// micro-batches must be a multiple of `D` (`--data-parallel`, else the GPUs over `T P`). The
/// megatron planner refuses such a request (a usage error naming `--micro-batches`), `compare`
/// leaves such configurations out, the batch-size search skips such sizes. Nothing too when the
/// request lacks a degree or a depth (`megatron_partition` says so). O(1).
std::optional<std::string> megatron_refusal(const Request& request);

/// `data-parallel --uniform` refuses, as `megatron_refusal`, micro-batches that its replicas (every
/// GPU) cannot share equally; nothing without `--uniform`. O(1).
std::optional<std::string> data_parallel_refusal(const Request& request);

/// The megatron configurations that use every GPU, for a model with tensor-parallel layers
/// (none otherwise): each context-parallel degree `C` of the request (1 when it gives none; each
/// of a list that the model allows, as `context_parallel = {C}`, in the list's order), each
/// degree `t` of `degrees`, each depth `P` up to the layers with `t P C` dividing the GPUs,
/// `D = N / (t P C)`, as `request` with `tensor_parallel = {t}`, `pipeline_parallel = P` and
/// `data_parallel = D`. `compare` lists them and spp starts its search and its variants from
/// them. O(C x degrees x L).
std::vector<Request> megatron_configurations(const Request& request,
                                             const std::vector<int>& degrees);

/// `megatron_configurations` at `choices.degrees` whose plans stay within the task limit
/// (`max_stages_within_task_limit` stages), each without and with recomputation where
/// `choices` allow both (so never only `auto`: Megatron's `auto` decides by fit, and under the
/// list schedule nearly everything fits without recomputation, if slowly). O(degrees x L).
std::vector<Request> megatron_candidates(const Request& request,
                                         const partition::StageChoices& choices);

/// A quick estimate of a megatron-shaped plan's iteration, to rank candidates before planning
/// them (spp's Megatron seeds, the batch-size search): the bottleneck stage's share of the
/// micro-batches plus one pass through every stage (fill and drain), or, when memory lets a
/// group hold only `k` of its `ceil(M / r)` micro-batches in flight, `ceil(ceil(M / r) / k)`
/// round trips from its stage to the last and back if that is longer; plus the longest
/// AllReduce; each group at its slowest GPU's speed. Infinity when a group cannot hold one
/// micro-batch. Not a bound either way. O(S + N).
double megatron_estimate(const Request& request, const std::vector<Stage>& stages,
                         Optimizer optimizer);

/// The smallest `megatron_estimate` of a request over the megatron configurations it allows:
/// its own when it fixes one degree and a depth (`--planner megatron`), else every
/// configuration that uses all GPUs at the degrees it allows (`megatron_candidates`), each
/// shaped by `megatron_partition` and kept when every group holds what `policy` keeps in
/// flight. Infinity when none fits or the model has no tensor-parallel layers.
/// O(configurations x (L D + N)).
double estimate_iteration_ms(const Request& request, schedule::Policy policy);

/// A GPipe split: one stage per GPU and its bottleneck.
struct GpipeSplit {
  std::vector<Stage> stages;  ///< Stage `s` on `gpus[s]`.
  double bottleneck_ms = 0;   ///< `max_s (F_s + B_s) / speed_s`, ms.
};

/// GPipe's partition (Huang et al., NeurIPS 2019, with torchgpipe's balance by time): the
/// layers split into `gpus.size()` contiguous non-empty stages, stage `s` on `gpus[s]`,
/// minimising the slowest stage's `(F_s + B_s) / speed_s` among the splits where every stage
/// holds `peak_stashes(.., policy)` stashes. Exact (dynamic program over stage index and layer
/// suffix); ties go to the split whose stage boundaries come earliest (lexicographically
/// smallest sequence of last layers). Nothing when no split fits. Requires
/// `1 <= gpus.size() <= layers`. O(S L^2) for S stages and L layers.
std::optional<GpipeSplit> gpipe_split(const model::Model& model, const topology::Topology& topology,
                                      const std::vector<int>& gpus, int micro_batches,
                                      schedule::Policy policy);

/// The `gpipe` planner's partition: `gpipe_split` on the first `min(N, L)` GPUs in input
/// order. Throws `InfeasibleError` when no split fits in memory.
Partition gpipe_partition(const Request& request,
                          schedule::Policy policy = schedule::Policy::kGpipe);

/// A solution of PipeDream's dynamic program.
struct PipeDreamSolution {
  std::vector<Stage> stages;  ///< Runs of the input order, together using every GPU.
  double slowest_ms = 0;      ///< The objective: its slowest stage or boundary, ms.
};

/// PipeDream's objective for `stages` (Narayanan et al., SOSP 2019, section 3.1): the largest
/// of every stage's `((F_s + B_s) / v_s + AR_s) / r_s` (`v_s` the slowest speed among its
/// replicas, as round-robin waits for it; `AR_s` the ring AllReduce of `W_s` over its GPUs)
/// and every boundary's `2 A_s / bandwidth` between the last GPU of stage `s` and the first of
/// `s + 1` (latency ignored, as PipeDream's optimizer does). Nothing when a stage does not hold
/// `peak_stashes(.., policy)` stashes. Independent of the micro-batch count otherwise.
/// Requires `simulate::check_stages` to hold. O(S + N).
std::optional<double> pipedream_objective(const model::Model& model,
                                          const topology::Topology& topology,
                                          const std::vector<Stage>& stages, int micro_batches,
                                          schedule::Policy policy);

/// PipeDream's dynamic program over (layer suffix, GPU-order suffix) with the GPUs in input
/// order, every GPU used: the stages minimising `pipedream_objective` among all contiguous
/// layer ranges on consecutive runs of GPUs with any replica count. Memory is exact: the
/// 1F1B warm-up of a stage depends on the stages after it, so each state keeps the Pareto
/// front of (slowest, stage count, warm-up), all three of which only grow as stages are
/// added in front. Ties: fewer stages, then smaller warm-up, then the first found (first
/// stage shortest, then fewest replicas). Nothing when no partition fits.
/// O(L^2 N^2 F) for L layers, N GPUs and fronts of size F <= min(L, N) * M. With
/// `only_replicas` > 0 every stage has exactly that many replicas (`--uniform`; it must divide
/// N for a solution to exist): O(L^2 N F).
std::optional<PipeDreamSolution> pipedream_solve(const model::Model& model,
                                                 const topology::Topology& topology,
                                                 int micro_batches, schedule::Policy policy,
                                                 int only_replicas = 0);

/// The `pipedream` planner's partition: `pipedream_solve`. Throws `InfeasibleError` when no
/// partition fits in memory.
Partition pipedream_partition(const Request& request,
                              schedule::Policy policy = schedule::Policy::kOneFOneB);

/// The `uniform` planner's partition: `S = min(N, L)` stages of `L / S` layers, the first
/// `L mod S` stages one layer more, stage `s` alone on GPU `s` of the input order. Throws
/// `InfeasibleError` when a stage does not fit under `policy`. O(L + N).
Partition uniform_partition(const Request& request,
                            schedule::Policy policy = schedule::Policy::kOneFOneB);

/// The `data-parallel` planner's partition: one stage holding every layer on every GPU, the
/// AllReduce ring in input order. Throws `InfeasibleError` when a GPU cannot hold the model
/// under `policy`. O(L + N).
Partition data_parallel_partition(const Request& request,
                                  schedule::Policy policy = schedule::Policy::kOneFOneB);

}  // namespace pipeplan::planners
