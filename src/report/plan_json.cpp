// plan.json writing and reading. O(T) for T schedule entries.

#include "pipeplan/report/plan_json.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/batch_size.hpp"
#include "pipeplan/schedule/policy.hpp"
#include "pipeplan/simulate/execution.hpp"
#include "pipeplan/simulate/simulator.hpp"
#include "pipeplan/version.hpp"

namespace pipeplan::report {
namespace {

using io::json_number;
using nlohmann::ordered_json;

ordered_json name_or_null(const std::string& name) {
  return name.empty() ? ordered_json(nullptr) : ordered_json(name);
}

const char* kind_name(TransferKind kind) {
  return kind == TransferKind::kActivation ? "activation" : "gradient";
}

}  // namespace

bool plan_uses_v2_fields(const Plan& plan) {
  return plan.optimizer != Optimizer::kReplicated || !plan.timeline.updates.empty() ||
         std::any_of(plan.stages.begin(), plan.stages.end(),
                     [](const Stage& stage) { return stage.uses_v2_fields(); });
}

bool plan_uses_v3_fields(const Plan& plan) {
  const std::optional<schedule::Policy> policy = schedule::parse_policy(plan.schedule_policy);
  return plan.schedule.split_backward || virtual_stages(plan.stages) > 1 ||
         context_parallel(plan.stages) > 1 || (policy && schedule::policy_row(*policy).version3);
}

namespace {

// The plan's schedule arrays, element by element: one place for their layout (each element's
// members, in order), which both the DOM (plan_to_json) and the text (plan_json_text) use. O(1)
// per element (an all-reduce: its stage's GPUs).
class ScheduleEntries {
 public:
  ScheduleEntries(const Plan& plan, const topology::Topology& topology)
      : plan_(plan), topology_(topology) {}

  [[nodiscard]] ordered_json ids(const std::vector<int>& gpus) const {
    std::vector<ordered_json> out;
    out.reserve(gpus.size());
    for (int g : gpus) out.emplace_back(id(g));
    return io::json_array(std::move(out));
  }

  // `member(key, value)` for every member of an element, in the plan's order.
  template <class Member>
  void members(const TimedCompute& e, Member&& member) const {
    member("gpu", id(e.gpu));
    member("op", op_name(e.task.op));
    member("stage", e.task.stage);
    member("micro_batch", e.task.micro_batch);
    member("start_ms", e.start_ms);
    member("end_ms", e.end_ms);
  }
  template <class Member>
  void members(const TimedTransfer& e, Member&& member) const {
    member("from", id(e.from));
    member("to", id(e.to));
    member("kind", kind_name(e.task.kind));
    member("stage", e.task.stage);
    member("micro_batch", e.task.micro_batch);
    member("bytes", json_number(e.bytes));
    member("start_ms", e.start_ms);
    member("end_ms", e.end_ms);
  }
  template <class Member>
  void members(const TimedAllReduce& e, Member&& member) const {
    member("stage", e.stage);
    member("gpus", ids(plan_.stages[static_cast<std::size_t>(e.stage)].gpus));
    member("bytes", json_number(e.bytes));
    member("start_ms", e.start_ms);
    member("end_ms", e.end_ms);
  }
  template <class Member>
  void members(const TimedUpdate& e, Member&& member) const {
    member("stage", e.stage);
    member("gpu", id(e.gpu));
    member("start_ms", e.start_ms);
    member("end_ms", e.end_ms);
  }

  // An element as a JSON object (the DOM's).
  template <class Element>
  [[nodiscard]] ordered_json object(const Element& e) const {
    ordered_json out = ordered_json::object();
    members(e, [&](const char* key, ordered_json value) { out[key] = std::move(value); });
    return out;
  }

  // Calls `visit(name, elements)` for every schedule array in its order; `updates` only where
  // there are update tasks.
  template <class Visit>
  void for_each_array(Visit&& visit) const {
    const Timeline& t = plan_.timeline;
    visit("compute", t.compute);
    visit("transfers", t.transfers);
    visit("allreduces", t.allreduces);
    if (!t.updates.empty()) visit("updates", t.updates);
  }

 private:
  [[nodiscard]] const std::string& id(int gpu) const { return topology_.gpu(gpu).id; }

  const Plan& plan_;
  const topology::Topology& topology_;
};

// Everything but the schedule's arrays, which `with_arrays` fills (else they are left empty
// for plan_json_text to write).
ordered_json plan_document(const Plan& plan, const model::Model& model,
                           const topology::Topology& topology, bool with_arrays) {
  auto id = [&](int gpu) { return topology.gpu(gpu).id; };
  // Arrays are built as vectors and made JSON once (io::json_array): with JSON_DIAGNOSTICS,
  // each push_back onto an ordered_json array re-links all its elements, O(n^2) for the
  // schedule's tasks (16 s of 18 s at the task limit).
  const ScheduleEntries entries(plan, topology);
  auto ids = [&](const std::vector<int>& gpus) { return entries.ids(gpus); };
  const bool v3 = plan_uses_v3_fields(plan);
  const bool v2 = v3 || plan_uses_v2_fields(plan);
  const int c = context_parallel(plan.stages);
  const std::vector<simulate::StageExecution> exec =
      simulate::execution(model, topology, plan.stages, plan.optimizer);
  ordered_json out = ordered_json::object();
  out["schema"] = v3 ? kPlanSchemaV3 : v2 ? kPlanSchemaV2 : kPlanSchema;
  out["generator"] = {{"name", "pipeplan"}, {"version", kVersion}};
  out["planner"] = plan.planner;
  out["schedule_policy"] = plan.schedule_policy;
  out["model"] = name_or_null(model.name);
  out["topology"] = name_or_null(topology.name());
  out["micro_batches"] = plan.schedule.micro_batches;
  if (plan.micro_batch_size) out["micro_batch_size"] = *plan.micro_batch_size;
  if (plan.sequence_parallel) out["sequence_parallel"] = *plan.sequence_parallel;
  if (plan.selective_recompute) out["selective_recompute"] = *plan.selective_recompute;
  out["iteration_ms"] = plan.timeline.iteration_ms;
  out["bounds"] = {{"any_plan_ms", plan.bounds.any_plan_ms},
                   {"partition_ms", plan.bounds.partition_ms}};
  out["gpu_order"] = ids(plan.gpu_order);
  if (v2) out["optimizer"] = optimizer_name(plan.optimizer);
  if (v3) {
    out["split_backward"] = plan.schedule.split_backward;
    out["virtual_stages"] = virtual_stages(plan.stages);
  }
  if (c > 1) out["context_parallel"] = c;  // spec 10.2: absent means 1

  std::vector<ordered_json> stages;
  for (int s = 0; s < static_cast<int>(plan.stages.size()); ++s) {
    const Stage& stage = plan.stages[static_cast<std::size_t>(s)];
    const simulate::StageProfile p = simulate::stage_profile(model, plan.stages, s);
    ordered_json entry = ordered_json::object();
    entry["index"] = s;
    entry["first_layer"] = stage.first_layer;
    entry["last_layer"] = stage.last_layer;
    entry["gpus"] = ids(stage.gpus);
    if (v2) {
      entry["tensor_parallel"] = stage.tensor_parallel;
      entry["recompute"] = stage.recompute;
    }
    entry["forward_ms"] = p.forward_ms;
    entry["backward_ms"] = p.backward_ms;
    entry["parameter_bytes"] = json_number(p.parameter_bytes);
    entry["boundary_bytes"] = json_number(p.boundary_bytes);
    entry["allreduce_ms"] = exec[static_cast<std::size_t>(s)].allreduce_ms;
    stages.push_back(std::move(entry));
  }
  out["stages"] = io::json_array(std::move(stages));

  std::vector<ordered_json> gpus;
  for (int g = 0; g < topology.size(); ++g) {
    const GpuUsage& usage = plan.timeline.gpus[static_cast<std::size_t>(g)];
    ordered_json entry = ordered_json::object();
    entry["id"] = id(g);
    if (usage.stages.size() > 1) {
      entry["stages"] = usage.stages;
    } else {
      entry["stage"] =
          usage.stages.empty() ? ordered_json(nullptr) : ordered_json(usage.stages.front());
    }
    entry["busy_ms"] = usage.busy_ms;
    entry["peak_memory_bytes"] = json_number(usage.peak_memory_bytes);
    const auto& capacity = topology.gpu(g).memory_bytes;
    entry["memory_bytes"] = capacity ? json_number(*capacity) : ordered_json(nullptr);
    gpus.push_back(std::move(entry));
  }
  out["gpus"] = io::json_array(std::move(gpus));

  out["schedule"] = ordered_json::object();
  entries.for_each_array([&](const char* name, const auto& elements) {
    std::vector<ordered_json> array;
    if (with_arrays) {
      array.reserve(elements.size());
      for (const auto& e : elements) array.push_back(entries.object(e));
    }
    out["schedule"][name] = io::json_array(std::move(array));
  });
  return out;
}

}  // namespace

ordered_json plan_to_json(const Plan& plan, const model::Model& model,
                          const topology::Topology& topology) {
  return plan_document(plan, model, topology, true);
}

namespace {

// A schedule element's member value as the DOM's dump writes it, without making its JSON value
// (most members are integers, times and GPU ids: millions of them at 16,384 GPUs). O(size).
template <class Value>
void append_member(std::string& text, const Value& value) {
  if constexpr (std::is_same_v<Value, ordered_json>) {
    io::append_json(text, value, "\n        ");  // member values nest at depth 4
  } else if constexpr (std::is_integral_v<Value> && !std::is_same_v<Value, bool>) {
    io::append_json_integer(text, value);  // a bool would print as 1: it takes the JSON path
  } else if constexpr (std::is_floating_point_v<Value>) {
    io::append_json_number(text, value);
  } else {
    static_assert(std::is_convertible_v<Value, std::string_view>,
                  "a member is JSON, an integer, a number or a string");
    io::append_json_string(text, value);
  }
}

}  // namespace

void write_plan_json(const Plan& plan, const model::Model& model,
                     const topology::Topology& topology, const io::TextSink& sink) {
  // The document without the schedule's arrays, then each array written element by element
  // where its empty brackets stand: the same bytes as io::dump_json(plan_to_json(...)) without
  // a DOM of every task, whose building and destruction took most of a plan of 2^19 tasks.
  const std::string document = io::dump_json(plan_document(plan, model, topology, false));
  const ScheduleEntries entries(plan, topology);
  // Handed on in pieces of about kPieceBytes: a writer's two buffers of this size, reused, in
  // place of a text of hundreds of MB faulted in page by page and copied whole.
  constexpr std::size_t kPieceBytes = std::size_t{4} << 20;
  std::string text;
  text.reserve(kPieceBytes + 4096);
  const auto hand_on = [&] {
    if (text.size() < kPieceBytes) return;
    sink(text);
    text.reserve(kPieceBytes + 4096);
  };
  std::size_t copied = 0;  // of `document`
  const std::size_t schedule = document.find("\n  \"schedule\": {");
  entries.for_each_array([&](const char* name, const auto& elements) {
    const std::string empty = std::string("\"") + name + "\": []";
    const std::size_t at = document.find(empty, std::max(copied, schedule));
    if (schedule == std::string::npos || at == std::string::npos) {
      throw InternalError("plan text without its schedule arrays");
    }
    text.append(document, copied, at - copied);
    copied = at + empty.size();
    // Elements sit at depth 3 (6 spaces), their members at depth 4 (8 spaces), each member's
    // value dumped alone (an all-reduce's GPU list on several lines) and indented to there: no
    // object per element, which took most of the writing of a plan of 2^21 tasks.
    text += std::string("\"") + name + "\": [";
    bool first = true;
    for (const auto& e : elements) {
      text += first ? "\n      {" : ",\n      {";
      first = false;
      bool first_member = true;
      entries.members(e, [&](const char* key, const auto& value) {
        text += first_member ? "\n        \"" : ",\n        \"";
        first_member = false;
        text += key;
        text += "\": ";
        append_member(text, value);
      });
      text += "\n      }";
      hand_on();
    }
    text += first ? "]" : "\n    ]";
  });
  text.append(document, copied);
  if (!text.empty()) sink(text);
}

std::string plan_json_text(const Plan& plan, const model::Model& model,
                           const topology::Topology& topology) {
  // Reserved once, above the largest element's size (an all-reduce's GPU list aside) and the
  // document's: growing the text by doubling copied it many times (a third of the writing of a
  // plan of 2^21 tasks); pages reserved and never written cost no memory.
  constexpr std::size_t kElementBytes = 320;
  constexpr std::size_t kDocumentBytes = std::size_t{1} << 20;
  const Timeline& timeline = plan.timeline;
  return io::whole_text(
      [&](const io::TextSink& sink) { write_plan_json(plan, model, topology, sink); },
      kDocumentBytes + kElementBytes * (timeline.compute.size() + timeline.transfers.size() +
                                        timeline.updates.size()));
}

namespace {

constexpr std::int64_t kMaxIndex = std::numeric_limits<int>::max() / 4;

// Plan readers ignore unknown keys (spec section 1), so members are looked up directly.
class Members {
 public:
  explicit Members(const io::Node& node) : node_(node) {
    if (!node.json().is_object()) {
      node.fail(std::string("must be an object, got ") + io::Node::type_name(node.json()));
    }
  }
  [[nodiscard]] std::optional<io::Node> optional(std::string_view key) const {
    auto it = node_.json().find(key);
    if (it == node_.json().end()) return std::nullopt;
    return io::Node(*node_.document_ptr(), *it, io::pointer_append(node_.pointer(), key));
  }
  [[nodiscard]] io::Node required(std::string_view key) const {
    auto member = optional(key);
    if (!member) node_.fail("missing required key \"" + std::string(key) + "\"");
    return *member;
  }

 private:
  io::Node node_;
};

// Resolves GPU ids to indices, against a topology or against the plan's own GPU list.
class GpuIds {
 public:
  GpuIds(std::function<std::optional<int>(std::string_view)> lookup, std::string where)
      : lookup_(std::move(lookup)), where_(std::move(where)) {}
  [[nodiscard]] int resolve(const io::Node& node) const {
    std::string id = node.as_string();
    auto index = lookup_(id);
    if (!index) node.fail("unknown GPU " + io::quote_for_message(id) + " (" + where_ + ")");
    return *index;
  }
  [[nodiscard]] std::vector<int> resolve_list(const io::Node& node) const {
    std::vector<int> out;
    for (const io::Node& element : node.elements()) out.push_back(resolve(element));
    return out;
  }

 private:
  std::function<std::optional<int>(std::string_view)> lookup_;
  std::string where_;
};

double read_time(const Members& members, std::string_view key) {
  return members.required(key).as_number();
}

// The plan's top-level figures: schema, optimizer, planner, policy, micro-batches, iteration,
// bounds and GPU order.
void read_header(const Members& plan, const GpuIds& gpus, simulate::StatedPlan& stated) {
  if (auto schema = plan.optional("schema")) {
    const std::string text = schema->as_string();
    if (text != kPlanSchema && text != kPlanSchemaV2 && text != kPlanSchemaV3) {
      schema->fail(std::string("must be \"") + kPlanSchema + "\", \"" + kPlanSchemaV2 + "\" or \"" +
                   kPlanSchemaV3 + "\", got " + io::describe_value(schema->json()));
    }
  }
  if (auto split = plan.optional("split_backward")) stated.split_backward = split->as_bool();
  if (auto v = plan.optional("virtual_stages")) {
    stated.virtual_stages = static_cast<int>(v->as_integer(1, kMaxIndex));
  }
  if (auto c = plan.optional("context_parallel")) {
    stated.context_parallel = static_cast<int>(c->as_integer(1, model::kMaxContextParallelDegree));
  }
  if (auto optimizer = plan.optional("optimizer")) {
    const std::optional<Optimizer> parsed = parse_optimizer(optimizer->as_string());
    if (!parsed) {
      optimizer->fail(
          "must be \"replicated\", \"sharded\", \"sharded-gradients\" or \"fully-sharded\", "
          "got " +
          io::describe_value(optimizer->json()));
    }
    stated.optimizer = *parsed;
  }
  if (auto planner = plan.optional("planner")) stated.planner = planner->as_string();
  if (auto policy = plan.optional("schedule_policy")) stated.schedule_policy = policy->as_string();
  stated.micro_batches = static_cast<int>(plan.required("micro_batches").as_integer(1, kMaxIndex));
  // The sequences per micro-batch: checked like the model's fields though the replay does not
  // need it (a plan of a transformer description is costed at it, report::model_for_plan); at
  // most the largest global batch a plan is made for.
  if (auto size = plan.optional("micro_batch_size")) {
    static_cast<void>(size->as_integer(1, planners::kMaxGlobalBatch));
  }
  // The description's settings the plan was made with (report::model_for_plan costs it so).
  for (const char* key : {"sequence_parallel", "selective_recompute"}) {
    if (auto flag = plan.optional(key)) static_cast<void>(flag->as_bool());
  }
  stated.iteration_ms = plan.required("iteration_ms").as_number();
  if (auto bounds = plan.optional("bounds")) {
    Members b(*bounds);
    stated.bounds =
        Bounds{b.required("any_plan_ms").as_number(), b.required("partition_ms").as_number()};
  }
  if (auto order = plan.optional("gpu_order")) stated.gpu_order = gpus.resolve_list(*order);
}

// `/stages/<s>`: its layers, GPUs, degree, recomputation and (all or none) its figures.
void read_stage(const io::Node& node, const GpuIds& gpus, simulate::StatedPlan& stated) {
  Members stage(node);
  Stage out;
  const auto index = stage.optional("index");
  if (index && index->as_integer(0, kMaxIndex) != static_cast<std::int64_t>(stated.stages.size())) {
    index->fail("must be " + std::to_string(stated.stages.size()) + ", the stage's position");
  }
  out.first_layer = static_cast<int>(stage.required("first_layer").as_integer(0, kMaxIndex));
  out.last_layer = static_cast<int>(stage.required("last_layer").as_integer(0, kMaxIndex));
  io::Node stage_gpus = stage.required("gpus");
  out.gpus = gpus.resolve_list(stage_gpus);
  if (auto t = stage.optional("tensor_parallel")) {
    out.tensor_parallel = static_cast<int>(t->as_integer(1, model::kMaxTensorParallelDegree));
  }
  if (auto recompute = stage.optional("recompute")) out.recompute = recompute->as_bool();
  out.context_parallel = stated.context_parallel;  // one value for the plan (spec 10.2)
  std::optional<simulate::StatedStageFigures> figures;
  if (stage.optional("forward_ms") || stage.optional("backward_ms") ||
      stage.optional("parameter_bytes") || stage.optional("boundary_bytes") ||
      stage.optional("allreduce_ms")) {
    figures = simulate::StatedStageFigures{
        stage.required("forward_ms").as_number(), stage.required("backward_ms").as_number(),
        stage.required("parameter_bytes").as_number(), stage.required("boundary_bytes").as_number(),
        stage.required("allreduce_ms").as_number()};
  }
  stated.stages.push_back(std::move(out));
  stated.stage_figures.push_back(figures);
}

// `/gpus/<g>`: the GPU, its stage, busy time, peak and (when stated) its capacity.
simulate::StatedGpu read_gpu(const io::Node& node, const GpuIds& gpus) {
  Members gpu(node);
  simulate::StatedGpu entry;
  entry.gpu = gpus.resolve(gpu.required("id"));
  // `stage` (an index or null), or `stages` for a GPU that serves several (spec 9.2).
  if (auto list = gpu.optional("stages")) {
    for (const io::Node& s : list->elements()) {
      entry.stages.push_back(static_cast<int>(s.as_integer(0, kMaxIndex)));
    }
  } else {
    io::Node stage = gpu.required("stage");
    if (!stage.json().is_null()) entry.stages = {static_cast<int>(stage.as_integer(0, kMaxIndex))};
  }
  entry.busy_ms = gpu.required("busy_ms").as_number();
  entry.peak_memory_bytes = gpu.required("peak_memory_bytes").as_number();
  if (auto memory = gpu.optional("memory_bytes")) {
    entry.memory_stated = true;
    if (!memory->json().is_null()) entry.memory_bytes = memory->as_nonnegative();
  }
  return entry;
}

// A string member that must be one of two words: the first gives `first`, the second `second`.
template <typename T>
T read_choice(const Members& entry, std::string_view key, const char* word1, T first,
              const char* word2, T second) {
  io::Node node = entry.required(key);
  const std::string text = node.as_string();
  if (text == word1) return first;
  if (text != word2) {
    node.fail(std::string("must be \"") + word1 + "\" or \"" + word2 + "\", got " +
              io::describe_value(node.json()));
  }
  return second;
}

// A compute entry's `op`: `forward`, `backward`, `backward_input` or `backward_weight`.
Op read_op(const Members& entry) {
  io::Node node = entry.required("op");
  const std::string text = node.as_string();
  for (const Op op : {Op::kForward, Op::kBackward, Op::kBackwardInput, Op::kBackwardWeight}) {
    if (text == op_name(op)) return op;
  }
  node.fail(R"(must be "forward", "backward", "backward_input" or "backward_weight", got )" +
            io::describe_value(node.json()));
}

int read_index(const Members& entry, std::string_view key) {
  return static_cast<int>(entry.required(key).as_integer(0, kMaxIndex));
}

simulate::StatedCompute read_compute(const io::Node& node, const GpuIds& gpus) {
  Members entry(node);
  simulate::StatedCompute task;
  task.gpu = gpus.resolve(entry.required("gpu"));
  task.task.op = read_op(entry);
  task.task.stage = read_index(entry, "stage");
  task.task.micro_batch = read_index(entry, "micro_batch");
  task.start_ms = read_time(entry, "start_ms");
  task.end_ms = read_time(entry, "end_ms");
  return task;
}

simulate::StatedTransfer read_transfer(const io::Node& node, const GpuIds& gpus) {
  Members entry(node);
  simulate::StatedTransfer task;
  task.from = gpus.resolve(entry.required("from"));
  task.to = gpus.resolve(entry.required("to"));
  task.task.kind = read_choice(entry, "kind", "activation", TransferKind::kActivation, "gradient",
                               TransferKind::kGradient);
  task.task.stage = read_index(entry, "stage");
  task.task.micro_batch = read_index(entry, "micro_batch");
  task.bytes = entry.required("bytes").as_number();
  task.start_ms = read_time(entry, "start_ms");
  task.end_ms = read_time(entry, "end_ms");
  return task;
}

// `/schedule`: its compute, transfers, AllReduces and optimizer steps, in that order.
void read_schedule(const Members& plan, const GpuIds& gpus, simulate::StatedPlan& stated) {
  Members schedule(plan.required("schedule"));
  for (const io::Node& node : schedule.required("compute").elements()) {
    stated.compute.push_back(read_compute(node, gpus));
  }
  for (const io::Node& node : schedule.required("transfers").elements()) {
    stated.transfers.push_back(read_transfer(node, gpus));
  }
  if (auto allreduces = schedule.optional("allreduces")) {
    for (const io::Node& node : allreduces->elements()) {
      Members entry(node);
      simulate::StatedAllReduce task;
      task.stage = read_index(entry, "stage");
      task.gpus = gpus.resolve_list(entry.required("gpus"));
      task.bytes = entry.required("bytes").as_number();
      task.start_ms = read_time(entry, "start_ms");
      task.end_ms = read_time(entry, "end_ms");
      stated.allreduces.push_back(std::move(task));
    }
  }
  if (auto updates = schedule.optional("updates")) {
    for (const io::Node& node : updates->elements()) {
      Members entry(node);
      simulate::StatedUpdate task;
      task.stage = read_index(entry, "stage");
      task.gpu = gpus.resolve(entry.required("gpu"));
      task.start_ms = read_time(entry, "start_ms");
      task.end_ms = read_time(entry, "end_ms");
      stated.updates.push_back(task);
    }
  }
}

// Everything but the GPU list's own reading; ids resolve through `gpus`. Members are read in
// document order of the spec's plan (section 4), so that the first error is the same whichever
// way a plan is read.
simulate::StatedPlan read_stated(const io::Document& document, const GpuIds& gpus) {
  io::Node root(document, document.root, "");
  Members plan(root);
  simulate::StatedPlan stated;
  stated.file = document.file;
  read_header(plan, gpus, stated);
  for (const io::Node& node : plan.required("stages").elements()) read_stage(node, gpus, stated);
  if (auto gpu_list = plan.optional("gpus")) {
    std::vector<simulate::StatedGpu> entries;
    for (const io::Node& node : gpu_list->elements()) entries.push_back(read_gpu(node, gpus));
    stated.gpus = std::move(entries);
  }
  read_schedule(plan, gpus, stated);
  return stated;
}

}  // namespace

simulate::StatedPlan read_plan(const io::Source& source, const topology::Topology& topology) {
  const io::Document document = io::parse_json(source);
  const GpuIds gpus([&](std::string_view id) { return topology.index_of(id); },
                    "not in the topology");
  return read_stated(document, gpus);
}

StandalonePlan read_standalone_plan(const io::Source& source) {
  const io::Document document = io::parse_json(source);
  const io::Node root(document, document.root, "");
  const Members plan(root);
  StandalonePlan out;
  auto name = [](const std::optional<io::Node>& node) {
    return node && !node->json().is_null() ? node->as_string() : std::string();
  };
  out.model = name(plan.optional("model"));
  out.topology = name(plan.optional("topology"));
  // The plan's own GPU list (spec section 4: every GPU of the topology) names the GPUs.
  std::unordered_map<std::string, int> index;
  const io::Node list = plan.required("gpus");
  for (const io::Node& node : list.elements()) {
    const Members gpu(node);
    const io::Node id = gpu.required("id");
    std::string text = id.as_nonempty_string();
    if (!index.emplace(text, static_cast<int>(out.gpu_ids.size())).second) {
      id.fail("GPU " + io::quote_for_message(text) + " is listed twice");
    }
    out.gpu_ids.push_back(std::move(text));
  }
  if (out.gpu_ids.empty()) list.fail("must list at least one GPU");
  const GpuIds gpus(
      [&](std::string_view id) -> std::optional<int> {
        auto it = index.find(std::string(id));
        if (it == index.end()) return std::nullopt;
        return it->second;
      },
      "not in /gpus");
  out.stated = read_stated(document, gpus);
  // Capacities as the GPU entries state them (read once, by read_stated).
  out.memory_bytes.assign(out.gpu_ids.size(), std::nullopt);
  for (const simulate::StatedGpu& gpu : *out.stated.gpus) {
    out.memory_bytes[static_cast<std::size_t>(gpu.gpu)] = gpu.memory_bytes;
  }
  return out;
}

}  // namespace pipeplan::report
