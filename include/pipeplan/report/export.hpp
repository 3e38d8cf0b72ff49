#pragma once
/// \file
/// Exports of a plan for people and launchers (docs/formats.md, "Exports"): a Chrome trace
/// (Trace Event Format), an SVG Gantt chart, a self-contained HTML report, per-rank launcher
/// instructions, the split points and the schedule for torch.distributed.pipelining, and the
/// arguments of Megatron-LM and DeepSpeed.
///
/// Every writer works from a `PlanView`: a plan together with the names and figures that
/// plan.json states. A view comes either from a plan checked against its model and topology
/// (`make_view`), or from a plan file alone (`read_plan_view`), which is enough for the
/// timeline views (Chrome trace, SVG, HTML) but has no layer names and no per-stage stash
/// sizes. Every writer is deterministic: the same view gives the same bytes.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/plan.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {

/// A stage's figures as plan.json states them (profiled sums at speed 1.0; in a stage of
/// tensor-parallel degree t > 1, per-GPU sums at that degree, communication and recomputation
/// excluded: spec 8.2).
struct StageFigures {
  double forward_ms = 0;       ///< F_s.
  double backward_ms = 0;      ///< B_s.
  double parameter_bytes = 0;  ///< W_s.
  double boundary_bytes = 0;   ///< A_s; 0 for the last stage.
  double allreduce_ms = 0;     ///< The stage's AllReduce time; 0 for one replica.
};

/// What one group (replica) of a stage spends of its task durations on tensor-parallel
/// all-reduces and on recomputation (spec 8.3), per micro-batch; known only with the model and
/// topology. All 0 for a v1 stage.
struct GroupFigures {
  double forward_allreduce_ms = 0;   ///< The all-reduce part of one forward.
  double backward_allreduce_ms = 0;  ///< The all-reduce part of one backward (with the
                                     ///< recomputed forward's all-reduces).
  double recompute_ms = 0;           ///< The recomputed forward inside one backward.
};

/// What the memory counter needs; known only with the model.
struct MemoryFigures {
  std::vector<double> static_bytes;        ///< Per GPU: its stages' static bytes and the model's
                                           ///< reserve_bytes; 0 when unused.
  std::vector<double> stash_bytes;         ///< Per stage: Y_s, held per micro-batch in flight (with
                                           ///< recomputation: the inputs of its layers, spec 8.3).
  std::vector<double> transient_bytes;     ///< Per stage: held during each backward only (with
                                           ///< recomputation: its largest layer stash), else 0.
  std::vector<double> weight_stash_bytes;  ///< Per stage: Yw_s, held per micro-batch from the
                                           ///< end of its `I` to the end of its `W` (spec 9.3).
};

/// A plan with everything the exports show. GPUs are indices into `gpu_ids` (the topology's
/// order), layers indices into the model's chain.
struct PlanView {
  Plan plan;                                            ///< Stages, schedule, timeline, bounds.
  int micro_batches = 0;                                ///< M.
  std::string model_name;                               ///< Empty when unknown.
  std::string topology_name;                            ///< Empty when unknown.
  std::vector<std::string> gpu_ids;                     ///< Per GPU.
  std::vector<std::optional<double>> memory_bytes;      ///< Capacity per GPU; empty: unlimited.
  std::vector<StageFigures> stage_figures;              ///< Per stage.
  std::optional<std::vector<std::string>> layer_names;  ///< Per layer ("" when unnamed);
                                                        ///< only with the model.
  std::string model_file;               ///< The model's file name for messages; may be empty.
  std::optional<MemoryFigures> memory;  ///< Only with the model.
  /// Per stage, per group (replica order): the tensor-parallel and recomputation shares of its
  /// tasks. Only with the model and topology.
  std::optional<std::vector<std::vector<GroupFigures>>> group_figures;
  std::string plan_file;                   ///< The plan's file name for messages; may be empty.
  std::optional<std::int64_t> batch_size;  ///< Samples per micro-batch (the model's
                                           ///< `profile.batch_size`); only with the model.
  std::vector<std::string> gpu_nodes;  ///< Per GPU: its node (host); empty without the topology.
  /// The model's transformer description (at the plan's micro-batch size), when the model has
  /// one: what the estimate assumed that a framework must be told (docs/formats.md, `megatron`).
  std::optional<model::TransformerConfig> transformer;
};

/// The view of a plan that `simulate::check_plan` (or a planner) produced for `model` and
/// `topology`; `model_file` names the model in messages. O(N + layers + S).
PlanView make_view(const Plan& plan, const model::Model& model, const topology::Topology& topology,
                   std::string model_file = {});

/// Reads a plan file without its model and topology (`read_standalone_plan`) and checks all
/// that can be checked without them, so that no export shows a malformed plan: contiguous
/// stages from layer 0 with stated figures (>= 0), no GPU in two stages, every task and
/// transfer exactly once on the GPUs and channels its stages imply (a backward on the GPU of
/// its forward), 0 <= start <= end <= iteration_ms, no overlap on a GPU or channel, every
/// dependency of spec section 3 respected, one AllReduce per replicated stage over its GPUs,
/// and `/gpus` stages matching the placement. Not checked (it needs the model and topology):
/// durations, transfer sizes, memory and bounds. Throws `InputError` naming the file and JSON
/// pointer of the first problem. O(T log T) for T schedule entries.
PlanView read_plan_view(const io::Source& source);

/// The used GPUs in launcher rank order: stage by stage, each stage's GPUs as the plan lists
/// them (group by group, each group leader first), so that every GPU of a tensor-parallel
/// group has a rank. For a plan every stage of which has the same `r` and `t`, this is the
/// order of Megatron-LM and DeepSpeed (tensor innermost, then data, then pipeline). A GPU
/// that serves several stages (spec 9.2) appears once, at its first stage: devices in the
/// order of their first stages. Unused GPUs are left out. O(N).
std::vector<int> rank_order(const PlanView& view);

/// Per GPU of the view: the stages it serves, ascending; several when stages share it (a
/// device, spec 9.2), none when unused. O(N + sum of stage sizes).
std::vector<std::vector<int>> stages_per_gpu(const PlanView& view);

/// Whether some stages share their GPUs (spec 9.2, `virtual_stages > 1`): the views then show
/// every stage of a device in its row. O(S log S).
bool shares_devices(const Plan& plan);

/// Whether the plan uses a field of spec 8.2 (a stage with `t > 1` or recomputation, a sharded
/// optimizer, optimizer steps): the views then show groups, recomputation and updates, and
/// otherwise stay exactly what they were for v1 plans. O(S).
bool is_v2_plan(const Plan& plan);

/// The degrees a framework runs a plan with (spec 8.4): every stage must have the same replica
/// count `r` and tensor-parallel degree `t`.
struct FrameworkShape {
  int pipeline = 1;        ///< P, the pipeline-parallel size: the devices (spec 9.2), which are
                           ///< the stages S when no stages share GPUs.
  int data = 1;            ///< r, the data-parallel size.
  int tensor = 1;          ///< t, the tensor-parallel size.
  int virtual_stages = 1;  ///< The most stages on one device (`virtual_stages`).
  int context = 1;         ///< c, the context-parallel size (spec 10.2).
};

/// The plan's devices (spec 9.2): the stages of each GPU list, ascending, the devices in the
/// order of their first stage (the pipeline ranks of the framework exports); `of_stage[s]` is
/// stage `s`'s device. With no GPUs shared, device `s` is stage `s`. O(S log S).
struct PipelineDevices {
  std::vector<std::vector<int>> stages;
  std::vector<int> of_stage;
};
PipelineDevices pipeline_devices(const Plan& plan);

/// The shape of `view`'s plan for `framework` (named in the message), or `InputError` (exit 3)
/// naming the plan file, the JSON pointer of the first stage whose `r` or `t` differs from stage
/// 0's, and `--uniform`; also when M is not a multiple of `r` (every data-parallel replica gets
/// the same number of micro-batches). O(S log S).
FrameworkShape framework_shape(const PlanView& view, std::string_view framework);

/// The Megatron-LM arguments for the plan (docs/formats.md, "megatron"): tensor, pipeline and
/// data-parallel sizes, `--num-virtual-stages-per-pipeline-rank V` for stages that share GPUs
/// the way Megatron-LM interleaves them (stage `s` on pipeline rank `s mod P`),
/// `--num-layers` and `--pipeline-model-parallel-layout` for a model shaped like `pipeplan
/// model transformer`'s, recomputation, the distributed optimizer and the batch sizes, plus the
/// global rank of every GPU and how to launch so that the ranks land on the plan's GPUs. Needs
/// the model and topology. Throws as `framework_shape`, and `InputError` naming `--schedule
/// 1f1b` for a split backward, a `zb-*` policy or stages shared otherwise (spec 9.5).
/// O(N + layers + S log S).
nlohmann::ordered_json megatron_json(const PlanView& view);

/// The DeepSpeed `PipelineModule` partition (`parts`), degrees, activation checkpointing and
/// batch configuration for the plan, with the rank order as for Megatron-LM. Needs the model
/// and topology. Throws as `framework_shape`, and `InputError` naming `--schedule 1f1b` for a
/// split backward or stages that share GPUs (spec 9.5). O(N + layers + S log S).
nlohmann::ordered_json deepspeed_json(const PlanView& view);

/// The compute-only schedule CSV of torch.distributed.pipelining: one row per pipeline rank
/// (device, spec 9.2: a stage, or the stages that share its GPUs), the actions `<stage>F<m>`,
/// `<stage>B<m>` (the full backward) or, for a split backward, `<stage>I<m>` and `<stage>W<m>`,
/// with the global stage index, in the order the device's group (replica 0's, with r > 1) runs
/// them. With r > 1 every micro-batch must run on the same replica index on every stage and
/// every replica must run the same order of its own micro-batches (numbered 0..M/r-1 in
/// ascending order), else `InputError` saying which is broken; throws as `framework_shape` too.
/// O(T log T).
std::string torch_schedule_csv(const PlanView& view);

/// What a user of `torch_schedule_csv`'s file must know, which the CSV itself cannot hold: the
/// torch release whose grammar it follows (2.6 or later for `I`/`W` actions or several stages
/// per rank, where `B` means the full backward since PyTorch PR #138886; 2.5 or later
/// otherwise), the schedule class that runs it (`_PipelineScheduleRuntime` with
/// `_load_csv(path, "compute_only")`), and the stages each rank builds when ranks hold several.
/// O(S log S).
std::vector<std::string> torch_schedule_notes(const PlanView& view);

/// A Chrome trace (Trace Event Format, JSON object form; opens in Perfetto and
/// chrome://tracing): one process per used GPU in rank order (pid = rank + 1), threads for
/// compute, AllReduce, and one per channel for sends and for receives; complete events with
/// `ts` and `dur` in microseconds; a memory counter per GPU (static and stash bytes with the
/// model, micro-batches in flight without it). In a v2 plan (`is_v2_plan`) one process per
/// group named after its GPUs, the tensor-parallel and recomputation shares in the args of each
/// task (with `group_figures`), optimizer steps, and transient bytes in the counter.
/// O(T log T).
nlohmann::ordered_json chrome_trace(const PlanView& view);

/// `chrome_trace` as the text `export --format chrome-trace` and `plan --trace` write: an
/// event per line (chrome_trace parses it). O(T log T).
std::string chrome_trace_text(const PlanView& view);

/// A self-contained SVG Gantt chart: one row per used GPU grouped by stage, forwards and
/// backwards in distinct colours with micro-batch labels where they fit, AllReduces in the
/// GPU's row, transfers in a thin band under the sending GPU, a time axis in ms, a legend
/// and a title with the iteration time and its ratio to the bounds. In a v2 plan one row per
/// group named by its GPUs, strips with each task's recomputation and tensor-parallel shares
/// (with `group_figures`) and the optimizer steps. Starts with `<svg` (no XML declaration), so it
/// can be embedded in HTML as is. O(T).
std::string svg_gantt(const PlanView& view);

/// One self-contained HTML page (no scripts, no network, no external fonts): the Gantt chart,
/// the stage table, and per-GPU utilisation, bubble and peak memory against capacity; in a v2
/// plan also each stage's degrees, recomputation and optimizer step and each GPU's group. O(T).
std::string html_report(const PlanView& view);

/// One JSON object per used GPU, as a JSON array in `rank_order`: its stage, layers (with
/// names when known), its tensor-parallel group (v2 plans only), its data-parallel group (the
/// GPUs at its place in every group of its stage), its micro-batches with their activation and
/// gradient peers, and its ordered operations. Every rank's operations are a subsequence of
/// one global order of the plan's tasks (by start time, dependencies first on ties), so the
/// lists run without deadlock with blocking or non-blocking send and receive. Every GPU of a
/// group runs the leader's operations; a transfer between groups of t and t' GPUs is min(t, t')
/// pieces between the GPUs at the same place; optimizer steps come last. I and W operations are
/// `backward_input` and `backward_weight`. A GPU that serves several stages (spec 9.2) lists
/// them in `stages`, names each compute operation's `stage`, and keeps `stage`, `layers` and
/// `micro_batches` for the first of them; a boundary inside one device has no transfer.
/// O(T log T + T t).
nlohmann::ordered_json ranks_json(const PlanView& view);

/// The split points for torch.distributed.pipelining: the name of the layer that begins each
/// stage after the first, plus every stage's layers and GPUs. Throws `InputError` naming the
/// model file and the layer's JSON pointer when such a layer has no name, or when the view
/// has no layer names at all. O(S).
nlohmann::ordered_json torch_split_json(const PlanView& view);

/// The export formats.
enum class ExportFormat : std::uint8_t {
  kChromeTrace,
  kSvg,
  kHtml,
  kRanks,
  kTorchSplit,
  kTorchSchedule,
  kMegatron,
  kDeepSpeed
};

/// Names of the formats as the command line spells them: chrome-trace, svg, html, ranks,
/// torch-split, torch-schedule, megatron, deepspeed.
const std::vector<std::string>& export_format_names();

/// The format named `name`; empty when there is none.
std::optional<ExportFormat> parse_export_format(std::string_view name);

/// Whether the format needs the model (layer names, batch size, hosts): ranks, torch-split,
/// megatron and deepspeed.
bool export_needs_model(ExportFormat format);

/// Most compute and transfer tasks a drawing (Chrome trace, SVG, HTML report) shows: an eighth of
/// the plan limit (`planners::kMaxPlanTasks`). A plan with 2^18 tasks and both `--trace` and
/// `--report` takes about 8 s and 800 MB to write; the plan alone at 2^19 about 4 s and 630 MB.
inline constexpr std::int64_t kMaxViewTasks = std::int64_t{1} << 18;

/// The text of `view` in `format`: JSON formats end with a newline (Chrome trace and ranks on
/// one line per event or operation, the rest indented), the SVG with an XML declaration, the
/// torch schedule one CSV line per pipeline rank. The drawings refuse, with `InfeasibleError`, a
/// plan of more than `kMaxViewTasks` tasks.
std::string export_plan(const PlanView& view, ExportFormat format);

/// The notes of an export that has no place for them in its own text (`torch-schedule`:
/// `torch_schedule_notes`), for the command to show; empty for the other formats, whose JSON
/// carries its notes. O(S log S).
std::vector<std::string> export_notes(const PlanView& view, ExportFormat format);

}  // namespace pipeplan::report
