#pragma once
/// \file
/// Planners by name, and the common last step every planner shares: schedule the chosen
/// stages, replay them through the execution model, check memory, compute the bounds.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/model.hpp"
#include "pipeplan/partition/search_constants.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/planners/phase_clock.hpp"
#include "pipeplan/schedule/scheduler.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::planners {

/// Whether stages recompute their forward in the backward (spec 8.4, `--recompute`).
enum class Recompute : std::uint8_t { kNever, kAlways, kAuto };

/// Whether backwards are split into `I` and `W` (spec 9.5, `--split-backward`): never, or when
/// some layer has a weight-gradient time and the policy uses a split (`uses_split_backward`).
enum class SplitBackward : std::uint8_t { kNever, kAuto };

/// What every planner is asked.
struct Request {
  const model::Model& model;
  const topology::Topology& topology;
  int micro_batches = 1;
  /// Where the optimizer state lives (`--shard-optimizer`, spec 8.4).
  Optimizer optimizer = Optimizer::kReplicated;
  /// Which stages may recompute (`--recompute`; `kAuto`: the planner chooses per stage). Empty:
  /// `kAuto` for a model that uses the fields of spec 8.1, `kNever` for a v1 profile (whose
  /// input size is unknown, and whose plans stay those of sections 1-7): `effective_recompute`.
  std::optional<Recompute> recompute{};
  /// The tensor-parallel degrees a stage may use (`--tensor-parallel LIST`), ascending; empty:
  /// every degree the model allows. The `megatron` planner takes exactly one.
  std::vector<int> tensor_parallel{};
  /// Only plans every framework can run: one replica count and one degree for all stages
  /// (`--uniform`, spec 8.4).
  bool uniform = false;
  /// The `megatron` planner's pipeline depth (`--pipeline-parallel`) and data-parallel degree
  /// (`--data-parallel`; empty: as many copies as the GPUs allow).
  std::optional<int> pipeline_parallel{};
  std::optional<int> data_parallel{};
  /// The `megatron` planner's layers on its first and last pipeline positions
  /// (`--first-stage-layers`, `--last-stage-layers`: Megatron-LM's
  /// `--decoder-first-pipeline-num-layers` and `--decoder-last-pipeline-num-layers`), the others
  /// splitting the rest evenly; empty: an even split.
  std::optional<int> first_stage_layers{};
  std::optional<int> last_stage_layers{};
  /// The `megatron` planner splits the embedding, or the output layer and loss, as one more
  /// decoder layer (`--account-for-embedding`, `--account-for-loss`: Megatron-LM's
  /// `--account-for-embedding-in-pipeline-split` and `--account-for-loss-in-pipeline-split`);
  /// for a model made by `pipeplan model transformer` only.
  bool account_for_embedding = false;
  bool account_for_loss = false;
  /// `--split-backward` (spec 9.5).
  SplitBackward split_backward = SplitBackward::kAuto;
  /// Stages per device for the multi-stage fixed policies and the `megatron` planner
  /// (`--virtual-stages`, spec 9.5); empty: 1, or 2 under `zb-v`.
  std::optional<int> virtual_stages{};
  /// The context-parallel degrees a plan may use (`--context-parallel LIST`, spec 10.4),
  /// ascending; empty: 1 only. spp chooses one for the whole plan; the `megatron` planner takes
  /// exactly one.
  std::vector<int> context_parallel{};
  /// The list policy's rules (spp's last step tries `schedule::other_list_rules` on its plan's
  /// stages; schedule_choice.hpp). Not an option: every search schedules with the default.
  schedule::ListRule list_rule{};
  /// `--schedule auto` (spp only): every policy, `V` and the split considered per candidate,
  /// the fastest plan kept (spec 9.5).
  bool schedule_auto = false;
  /// A transformer description's sequence parallelism and selective recomputation, fixed by
  /// `--sequence-parallel on|off` and `--selective-recompute on|off`; empty: as the model file
  /// says, or chosen under `choose_settings` (settings_choice.hpp).
  std::optional<bool> sequence_parallel{};
  std::optional<bool> selective_recompute{};
  /// Whether `--optimizer` or `--shard-optimizer` fixed `optimizer`.
  bool optimizer_fixed = false;
  /// The planner chooses what the request leaves open among the optimizer and the description's
  /// flags (`settings_candidates`): spp's default on the command line (`--optimizer auto`).
  bool choose_settings = false;
  /// Where the planner adds the time of each phase of its work (the summary's figures); null:
  /// not timed. Shared by every request derived from this one.
  PhaseClock* clock = nullptr;
};

/// `request` with another model and topology, its planning settings and its clock kept (a
/// request holds its inputs by reference: a planner that plans a derived problem asks with
/// this). O(size of the lists).
Request with_inputs(const Request& request, const model::Model& model,
                    const topology::Topology& topology);

/// The stages per device a plan of `request` under `policy` has: `--virtual-stages`, else 2
/// under `zb-v` and 1 otherwise (spec 9.5).
int virtual_stages_of(const Request& request, schedule::Policy policy);

/// The policy a planner uses when `--schedule` is not given: its row's default, or Megatron-LM's
/// `interleaved-1f1b` when that runs one stage per device and the request asks for more.
schedule::Policy default_policy_for(std::string_view planner, const Request& request);

/// Whether a plan of `request` under `policy` splits its backwards (spec 9.5): `--split-backward
/// auto`, a policy that uses a split, and a model with weight-gradient times. O(L x degrees).
bool uses_split_backward(const Request& request, schedule::Policy policy);

/// \name Planner limits
/// Inputs beyond these are refused up front with `InfeasibleError` (exit 4) and a message
/// naming the limit, instead of planning for hours or running out of memory. They were set
/// from measurements (docs/errors.md, "Limits"); raise them as the planners get faster.
/// `check_limits` applies them all.
///@{

/// Most stages per device (`--virtual-stages`).
inline constexpr int kMaxVirtualStages = 64;

/// Most layers a model may have to be planned.
inline constexpr int kMaxPlanLayers = 4096;

/// Most tasks (forwards, backwards and transfers: 4 S M - 2 M for S stages and M
/// micro-batches) in one plan of a fixed configuration (the megatron planner) and in a plan
/// `simulate` reads. Scheduling, replay and plan.json all grow with it: a plan at this limit is
/// about 480 MiB of JSON, and GPT-3 175B on 2,048 GPUs as NVIDIA runs it (96 stages, 4,096
/// micro-batches: 1,564,672 tasks) plans in about 6 s and 830 MB, the release build. Drawings
/// have their own, lower limit (`report::kMaxViewTasks`).
inline constexpr std::int64_t kMaxPlanTasks = std::int64_t{1} << 21;

/// Most tasks of one candidate plan of a planner that searches shapes (spp, gpipe, pipedream,
/// uniform, data-parallel, and the megatron planner's choice of the pipeline degree): such a
/// planner schedules many candidates, so each stays within a quarter of `kMaxPlanTasks`. A plan
/// at this limit takes about 4 s and 630 MB to plan and write (one stage on one GPU); the
/// 530B-parameter runs of 35 stages with 2,240 micro-batches (309,120 tasks) fit.
inline constexpr std::int64_t kMaxSearchTasks = std::int64_t{1} << 19;

/// The most tasks a plan of `planner` may have (its row's `task_limit`): `kMaxPlanTasks` for
/// the megatron planner (one fixed configuration), `kMaxSearchTasks` for the planners that
/// search, and for a name that is not a planner's. O(planners).
std::int64_t plan_task_limit(std::string_view planner);

/// Most steps a planner's search may take, as estimated by `planning_steps` in units of about
/// 40 ns of one core (the `dev` build): about four seconds at the limit.
inline constexpr double kMaxPlanSteps = 1e8;

/// Most steps the event-driven scheduler may take (`scheduling_steps`), about 20 ns each in the
/// dev build: about eight seconds (one stage of 720 replicas at the task limit: 3.9e8 steps,
/// 7.7 s).
inline constexpr double kMaxScheduleSteps = 4e8;

/// Longest time the execution model may have to handle, ms (about 30,000 years): every input
/// whose slowest conceivable iteration (all work in series on the slowest GPU and the
/// narrowest link) stays below it has finite times everywhere.
inline constexpr double kMaxPlanTimeMs = 1e15;

///@}

/// The estimated search steps of `planner` on `request` (its row's `steps`), the quantity
/// `kMaxPlanSteps` bounds. Throws `UsageError` for an unknown planner.
double planning_steps(std::string_view planner, const Request& request);

/// The steps of scheduling `stages` on `topology` for `micro_batches`, the quantity
/// `kMaxScheduleSteps` bounds: the scheduler's O(T (log T + r) + G) for T tasks, r the most
/// steps of a stage's replica choice (`schedule::replica_choice_steps`: its replicas, or on a
/// node-cost topology those on one node times log r) and G groups (a group of `t` GPUs is one
/// compute resource, spec 8.3): each event dispatches only the groups it touched. O(N).
double scheduling_steps(const topology::Topology& topology, const std::vector<Stage>& stages,
                        int micro_batches);

/// Refuses, with `InfeasibleError` naming the limit, a request that `planner` cannot plan
/// within the limits above: too many layers, more micro-batches than one stage's plan
/// may have tasks, too many search steps, or times that could exceed
/// `kMaxPlanTimeMs`. `make_plan` calls it first, for every planner; `UsageError` for an
/// unknown planner. O(L + N^2).
void check_limits(std::string_view planner, const Request& request);

/// Refuses, with `InfeasibleError`, stages whose plan would have more than `limit` tasks for
/// `micro_batches` micro-batches.
void check_task_limit(std::size_t stages, int micro_batches, std::int64_t limit = kMaxPlanTasks);
/// Why `check_task_limit` refuses, or nothing (counting `I` and `W` with a split backward).
/// `try_finish_plan` asks it with its planner's `plan_task_limit`. O(1).
std::optional<std::string> task_limit_refusal(std::size_t stages, int micro_batches,
                                              bool split_backward = false,
                                              std::int64_t limit = kMaxPlanTasks);

/// Refuses, with `InfeasibleError`, `stages` whose scheduling on `topology` would take more
/// than `kMaxScheduleSteps` (`scheduling_steps`). `finish_plan` calls it before scheduling.
void check_schedule_limit(const topology::Topology& topology, const std::vector<Stage>& stages,
                          int micro_batches);
/// Why `check_schedule_limit` refuses, or nothing. O(N).
std::optional<std::string> schedule_limit_refusal(const topology::Topology& topology,
                                                  const std::vector<Stage>& stages,
                                                  int micro_batches);

/// A planner's choice before scheduling.
struct Partition {
  std::vector<int> gpu_order;  ///< Every GPU once, in the order the planner considered them.
  std::vector<Stage> stages;
};

/// Turns a partition into a complete plan: schedules it with `policy`, replays the schedule
/// (so every time is the execution model's), checks memory and computes the bounds. Throws
/// `InfeasibleError` when the plan would have more than `plan_task_limit(planner)` tasks or the
/// schedule exceeds a GPU's memory, `InternalError` when the scheduler and the replay disagree.
Plan finish_plan(std::string planner, const Partition& partition, const Request& request,
                 schedule::Policy policy);

/// A finished plan, or why the partition cannot be one.
struct Finished {
  std::optional<Plan> plan;
  std::string refusal;  ///< When `plan` is empty: the message `finish_plan` throws.
};

/// `finish_plan` with "does not fit" as a value (over the task or scheduling limit, a stage
/// that cannot hold one micro-batch, a replay over memory), for searches that try many
/// partitions; other failures (a malformed partition, a scheduler bug) still throw.
Finished try_finish_plan(std::string planner, const Partition& partition, const Request& request,
                         schedule::Policy policy);
/// The same with the task limit given: spp's Megatron-LM configurations past `kMaxSearchTasks`
/// that a one-replica screen found faster are planned within `kMaxPlanTasks`
/// (settings_choice.cpp, `try_megatron_variant`).
Finished try_finish_plan(std::string planner, const Partition& partition, const Request& request,
                         schedule::Policy policy, std::int64_t task_limit);

/// A search's candidate: `try_finish_plan`'s plan without what only a kept plan needs, its
/// timeline's task lists (`Timeline::compute` and `transfers`, empty here) and its bounds;
/// every decision, time and peak is the same. The lists' sort is about half of the replay at
/// 16,384 GPUs, and a search drops most candidates: it completes the one it keeps.
struct Candidate {
  std::optional<Plan> sketch;  ///< Never written out as it is: `complete_plan` first.
  std::string refusal;         ///< When `sketch` is empty: the message `finish_plan` throws.
};

/// `try_finish_plan` for a search's candidate (`Candidate`): O(T) replay instead of O(T log T).
Candidate try_candidate_plan(std::string planner, const Partition& partition,
                             const Request& request, schedule::Policy policy);
/// The same with the task limit given (as `try_finish_plan`'s).
Candidate try_candidate_plan(std::string planner, const Partition& partition,
                             const Request& request, schedule::Policy policy,
                             std::int64_t task_limit);

/// The plan `try_finish_plan` makes from the same partition and `request` (the one the
/// candidate was made with): its schedule replayed again with the tasks listed, and the bounds.
/// A complete plan (its timeline lists its tasks) is returned as it is, so a step that keeps
/// either completes once, at its end. O(T log T), no scheduling; O(1) for a complete plan.
Plan complete_plan(Plan sketch, const Request& request);

/// Whether every stage has the same replica count and tensor-parallel degree (spec 8.4,
/// `--uniform`: the plans every framework can run). O(S).
bool is_uniform(const std::vector<Stage>& stages);

/// A run of a planner that `compare` adds beside its plain rows: the request with some settings
/// of its own, and a label naming them.
struct CompareVariant {
  /// What the run adds to the request, as `compare` prints it: `--uniform`, or a megatron
  /// configuration `t4 p2 d2`.
  std::string label;
  Request request;
};

/// One planner: everything the library and the command line know of it. `planner_table()`
/// holds one row per planner, so adding a planner is adding a row: its name becomes a
/// `--planner` choice with its description in the help, `make_plan` runs it within the limits
/// (`check_limits`, with its `steps`), and `compare` and spp's seeds follow its flags.
/// Exactly one of `plan` and `partition` is set.
struct PlannerRow {
  /// The `--planner` name, as plans record it in `planner`.
  std::string_view name;
  /// What it does, one line for `--help`.
  std::string_view description;
  /// The schedule policy it uses unless told otherwise (`--schedule`).
  schedule::Policy default_policy = schedule::Policy::kList;
  /// The policies `compare` runs it under, one row each, in order; empty: `compare` runs it
  /// only as its `compare_variants` (a planner that needs settings of its own in the `Request`,
  /// say).
  std::vector<schedule::Policy> compare_policies;
  /// Whether `compare` also runs it under `--uniform` (under its default policy, after its
  /// plain rows) when the request is not uniform already, so that users see what uniformity
  /// costs.
  bool compare_uniform = false;
  /// The configurations `compare` runs it in besides, each under its default policy, after its
  /// other rows; nullptr: none.
  std::vector<CompareVariant> (*compare_variants)(const Request& request) = nullptr;
  /// Its estimated search steps on a request, in units of about 40 ns of one core (the `dev`
  /// build); `check_limits` refuses a request beyond `kMaxPlanSteps`.
  double (*steps)(const Request& request) = nullptr;
  /// A planner that makes whole plans (it schedules and replays its own candidates): the plan
  /// under the given policy.
  Plan (*plan)(const Request& request, schedule::Policy policy) = nullptr;
  /// A planner that chooses stages only: its partition shaped for the given policy, which
  /// `finish_plan` schedules, replays and checks.
  Partition (*partition)(const Request& request, schedule::Policy policy) = nullptr;
  /// Whether it is a baseline: `compare`'s speed-ups are against the fastest baseline row.
  bool baseline = true;
  /// The planning options of `plan` it takes beside those every planner takes
  /// (`--shard-optimizer`, `--split-backward`, `--global-batch`; `--virtual-stages` follows
  /// `shares_devices`): `plan` refuses any other with a usage error naming the option and the
  /// planners that take it (issue 34). Names as on the command line.
  std::vector<std::string_view> options;
  /// Whether it places several stages on one device (`--virtual-stages`, `zb-v`); a planner
  /// that places one stage per GPU refuses them with a usage error (`make_plan`).
  bool shares_devices = false;
  /// Why the frameworks could not run the plan it would make of a request, or nothing
  /// (Megatron-LM gives every replica the same number of micro-batches): `make_plan` refuses
  /// such a request with a usage error, the batch-size search skips such sizes (`refusal`).
  /// nullptr: it never refuses.
  std::optional<std::string> (*refuses)(const Request& request) = nullptr;
  /// Whether spp's search starts from its partition too (on the input order, when its `steps`
  /// are cheap), so that spp is never slower than it under the same policy. Needs `partition`.
  bool seeds_spp = false;
  /// Whether it chooses the settings a request leaves open (`Request::choose_settings`,
  /// settings_choice.hpp: the optimizer, sequence parallelism, selective recomputation); the
  /// others plan with the request's and the model file's, and refuse `auto` for them.
  bool chooses_settings = false;
  /// The most tasks one of its plans may have (`plan_task_limit`): `kMaxSearchTasks` for a
  /// planner that schedules many candidates, `kMaxPlanTasks` for one that plans the
  /// configuration it is given.
  std::int64_t task_limit = kMaxSearchTasks;
};

/// Why the planner `name` refuses `request` (its row's `refuses`), or nothing. O(1).
std::optional<std::string> refusal(std::string_view name, const Request& request);

/// Every planner, in the order `compare` lists them and `--help` names them: `spp` first.
const std::vector<PlannerRow>& planner_table();

/// The row of the planner `name`; `UsageError` naming the known planners when there is none.
const PlannerRow& find_planner(std::string_view name);

/// The planners whose row lists `option` among its `options`, in table order.
std::vector<std::string> planners_taking(std::string_view option);

/// The planners' names, in table order.
const std::vector<std::string>& planner_names();

/// The names in table order as prose, for help text: `spp, gpipe, ..., megatron`.
std::string planner_names_text();

/// The extra runs `compare` makes of `row` beside its `compare_policies`: its `--uniform` run
/// (`compare_uniform`, unless `request.uniform`), then its `compare_variants`. O(variants).
std::vector<CompareVariant> compare_variants(const PlannerRow& row, const Request& request);

/// The policies `compare` runs `row` under on `request`, one row each: its `compare_policies`,
/// then every other policy that can run its stages and orders them differently here, in table
/// order: `list`, `1f1b` and `gpipe`; `zb-h1` when the backward is split (else it is `1f1b`);
/// `interleaved-1f1b` and `looped-bfs` with `--virtual-stages` above 1 (else they order as
/// `1f1b` and `gpipe` do) and `zb-v`, both for a planner that `shares_devices`. Empty when
/// `compare_policies` is (megatron: `compare_variants` only). O(policies^2).
std::vector<schedule::Policy> compare_policies_for(const PlannerRow& row, const Request& request);

/// The policy a planner uses unless told otherwise (its row's `default_policy`). Throws
/// `UsageError` for an unknown planner.
schedule::Policy default_policy(std::string_view planner);

/// Runs the planner `name` (one of `planner_names()`), rescheduled with `policy` when given:
/// `check_limits` first, then its row's `plan`, or its `partition` finished by `finish_plan`.
/// Throws `UsageError` for an unknown name and `InfeasibleError` when the request is beyond
/// the planner limits (`check_limits`) or nothing fits.
Plan make_plan(std::string_view name, const Request& request,
               std::optional<schedule::Policy> policy = std::nullopt);

/// The batch-size search's estimate of what the planner `name` plans for `request` under
/// `policy` (`estimate_iteration_ms`): where the planner chooses the settings
/// (`PlannerRow::chooses_settings` and `request.choose_settings`), the smallest over the
/// combinations it plans (`settings_candidates`: the description's flags and the optimizer),
/// as it keeps the fastest of them; else the request's own. O(K configurations x (L D + N)) for
/// K <= 5 combinations.
double estimate_for_planner(std::string_view name, const Request& request, schedule::Policy policy);

/// How hard `plan_spp` searches. The defaults are what `pipeplan plan` uses, each the constant
/// of partition/search_constants.hpp that says where its value came from; tests and the quality
/// benchmark turn them (docs/algorithms.md, "The final choice").
struct SppSearch {
  /// An order allowing at most this many shapes has every one replayed (exact).
  double exhaustive_shapes = partition::tuning::kExhaustiveShapes;
  /// DP solutions (smallest estimate first) that seed the local search.
  std::size_t dp_solutions = partition::tuning::kDpSolutions;
  /// Work of the local search per order and DP model: tasks scheduled and replayed (each shape
  /// of S stages costs 4 S M + N).
  double work = partition::tuning::kWork;
  /// More work for the second phase of the search (partition::local_search) where the best
  /// start's neighbourhood is large: enough for this many passes over it, up to `max_work`;
  /// the third phase gets as much again beyond `work`. 0: `work` only, and no third phase.
  double sweeps = partition::tuning::kSweeps;
  double max_work = partition::tuning::kMaxWork;
  /// Phase 2's acceptance and climb order (partition::SearchBudget::min_gain, `diverse`): the
  /// slow reference search's variants; spp keeps the defaults.
  double min_gain = partition::tuning::kAnyGain;
  bool diverse = false;
  /// Random starting shapes added to the seeds (0 for spp; the slow reference search uses many).
  int restarts = 0;
  unsigned seed = 1;  ///< Seed of the random starts (plus the order's index).
};

/// The most stages a searched plan of `micro_batches` micro-batches may have within
/// `kMaxSearchTasks` (at least 1: one stage's plan is checked against its planner's limit).
int max_stages_within_task_limit(int micro_batches);

/// The main planner (spec section 5): recursive min-cut GPU order, DP partition and
/// placement, list scheduling. The DP runs on the min-cut order, its reverse and the input
/// order; its best solutions and the greedy memory packing seed a local search whose moves
/// are replayed under `policy` (or, on small instances, every shape is replayed), and the
/// plan with the smallest replayed iteration time is kept (ties: the earlier order). At most
/// `max_stages_within_task_limit` stages.
Plan plan_spp(const Request& request, schedule::Policy policy = schedule::Policy::kList,
              const SppSearch& search = {});

/// Explains why nothing fits: what the most demanding layer needs alone against the largest
/// GPU, or the model's static memory against all GPUs together.
std::string infeasibility_message(const Request& request);

}  // namespace pipeplan::planners
