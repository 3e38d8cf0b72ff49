// Export formats by name, dispatch, and the helpers the writers share. O(size of the output).

#include "pipeplan/report/export.hpp"

#include <cmath>
#include <cstdio>

#include "export_util.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/summary.hpp"

namespace pipeplan::report {

using io::format_ms;
using io::format_number;

namespace detail {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in XML 1.0; ids never need them.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string coordinate(double value) {
  if (!std::isfinite(value)) return "0";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  if (text == "-0") text = "0";
  return text;
}

namespace {

void dump_into(std::string& out, const nlohmann::ordered_json& value, int depth,
               int compact_depth) {
  const bool container = value.is_object() || value.is_array();
  if (!container || depth >= compact_depth || value.empty()) {
    out += value.dump(-1, ' ', /*ensure_ascii=*/false,
                      nlohmann::ordered_json::error_handler_t::replace);
    return;
  }
  const std::string indent(static_cast<std::size_t>(depth) + 1, ' ');
  out += value.is_object() ? "{\n" : "[\n";
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out += indent;
    if (value.is_object()) {
      out += nlohmann::ordered_json(it.key()).dump(
          -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      out += ": ";
    }
    dump_into(out, *it, depth + 1, compact_depth);
  }
  out += "\n" + std::string(static_cast<std::size_t>(depth), ' ') + (value.is_object() ? "}" : "]");
}

}  // namespace

std::string dump_compact_below(const nlohmann::ordered_json& value, int compact_depth) {
  std::string out;
  dump_into(out, value, 0, compact_depth);
  return out + "\n";
}

std::string short_name(const ComputeTask& task) {
  return std::string(1, op_letter(task.op)) + " m" + std::to_string(task.micro_batch) + " s" +
         std::to_string(task.stage);
}

std::string stage_list(const std::vector<int>& stages, const char* separator) {
  std::string out;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    if (k > 0) out += separator;
    out += std::to_string(stages[k]);
  }
  return out;
}

std::string stages_text(const std::vector<int>& stages) {
  return (stages.size() == 1 ? "stage " : "stages ") + stage_list(stages);
}

std::string plan_file(const PlanView& view) {
  return view.plan_file.empty() ? std::string("plan") : view.plan_file;
}

std::string model_file(const PlanView& view) {
  return view.model_file.empty() ? std::string("model") : view.model_file;
}

const std::string& gpu_id(const PlanView& view, int gpu) {
  return view.gpu_ids[static_cast<std::size_t>(gpu)];
}

std::string plan_title(const PlanView& view) {
  if (view.model_name.empty() && view.topology_name.empty()) return "pipeplan plan";
  if (view.topology_name.empty()) return view.model_name;
  return (view.model_name.empty() ? std::string("plan") : view.model_name) + " on " +
         view.topology_name;
}

std::string iteration_text(const PlanView& view) {
  const double iteration = view.plan.timeline.iteration_ms;
  std::string out = "iteration " + format_ms(iteration);
  auto bound = [&](double value, const char* name) {
    if (const std::optional<double> ratio = bound_ratio(iteration, value)) {
      out +=
          ", " + format_number(*ratio, 3) + "x the " + name + " bound (" + format_ms(value) + ")";
    }
  };
  bound(view.plan.bounds.partition_ms, "partition");
  bound(view.plan.bounds.any_plan_ms, "any-plan");
  return out;
}

}  // namespace detail

const std::vector<std::string>& export_format_names() {
  static const std::vector<std::string> kNames = {"chrome-trace", "svg",         "html",
                                                  "ranks",        "torch-split", "torch-schedule",
                                                  "megatron",     "deepspeed"};
  return kNames;
}

std::optional<ExportFormat> parse_export_format(std::string_view name) {
  if (name == "chrome-trace") return ExportFormat::kChromeTrace;
  if (name == "svg") return ExportFormat::kSvg;
  if (name == "html") return ExportFormat::kHtml;
  if (name == "ranks") return ExportFormat::kRanks;
  if (name == "torch-split") return ExportFormat::kTorchSplit;
  if (name == "torch-schedule") return ExportFormat::kTorchSchedule;
  if (name == "megatron") return ExportFormat::kMegatron;
  if (name == "deepspeed") return ExportFormat::kDeepSpeed;
  return std::nullopt;
}

bool export_needs_model(ExportFormat format) {
  return format == ExportFormat::kRanks || format == ExportFormat::kTorchSplit ||
         format == ExportFormat::kMegatron || format == ExportFormat::kDeepSpeed;
}

namespace {

// Refuses to draw a plan beyond kMaxViewTasks (docs/errors.md, "Limits"). O(1).
void check_view_limit(const PlanView& view, std::string_view what) {
  const auto tasks = static_cast<std::int64_t>(view.plan.timeline.compute.size() +
                                               view.plan.timeline.transfers.size());
  if (tasks <= kMaxViewTasks) return;
  throw InfeasibleError("cannot draw a plan of " + std::to_string(tasks) + " tasks as " +
                        std::string(what) + ": drawings show at most " +
                        std::to_string(kMaxViewTasks) +
                        "; plan fewer micro-batches or stages, or leave the drawing out (see "
                        "\"Limits\" in docs/errors.md)");
}

}  // namespace

namespace {

// Spec 10.4: only Megatron-LM runs context parallelism; the other framework exports refuse it.
void refuse_context_parallel(const PlanView& view, ExportFormat format) {
  const int c = context_parallel(view.plan.stages);
  const bool framework = format == ExportFormat::kRanks || format == ExportFormat::kTorchSplit ||
                         format == ExportFormat::kTorchSchedule ||
                         format == ExportFormat::kDeepSpeed;
  if (c == 1 || !framework) return;
  const char* name = format == ExportFormat::kDeepSpeed ? "DeepSpeed"
                     : format == ExportFormat::kRanks   ? "the ranks export"
                                                        : "torch.distributed.pipelining";
  throw InputError(detail::plan_file(view), "/context_parallel",
                   "the plan splits each sequence over " + std::to_string(c) +
                       " GPUs (context parallelism), which " + name +
                       " does not run: make the plan with --context-parallel 1");
}

}  // namespace

std::string export_plan(const PlanView& view, ExportFormat format) {
  refuse_context_parallel(view, format);
  if (format == ExportFormat::kChromeTrace) check_view_limit(view, "a Chrome trace");
  if (format == ExportFormat::kSvg) check_view_limit(view, "an SVG");
  if (format == ExportFormat::kHtml) check_view_limit(view, "an HTML report");
  switch (format) {
    case ExportFormat::kChromeTrace:
      return chrome_trace_text(view);
    case ExportFormat::kSvg:
      return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svg_gantt(view);
    case ExportFormat::kHtml:
      return html_report(view);
    case ExportFormat::kRanks:
      return detail::dump_compact_below(ranks_json(view), 3);
    case ExportFormat::kTorchSplit:
      return io::dump_json(torch_split_json(view));
    case ExportFormat::kTorchSchedule:
      return torch_schedule_csv(view);
    case ExportFormat::kMegatron:
      return io::dump_json(megatron_json(view));
    case ExportFormat::kDeepSpeed:
      return io::dump_json(deepspeed_json(view));
  }
  throw InternalError("unknown export format");
}

}  // namespace pipeplan::report
