// SVG Gantt chart of a plan: one row per used GPU grouped by stage, a thin band under each
// row for the transfers it sends, a time axis with 1-2-5 ticks, a legend and a title. Row
// heights and labels shrink with the GPU count, and labels that would not fit are left out
// rather than drawn over each other. O(T) for T tasks; deterministic (fixed two-decimal
// coordinates, elements in timeline order).

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "export_util.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/report/format.hpp"

namespace pipeplan::report {
namespace {

using detail::coordinate;
using detail::xml_escape;

// Colours (Tableau 10): forward blue, backward orange, AllReduce green, transfers lighter.
constexpr const char* kForward = "#4c78a8";
constexpr const char* kBackward = "#f58518";
constexpr const char* kAllReduce = "#54a24b";
constexpr const char* kActivation = "#76b7e5";
constexpr const char* kGradient = "#ffbf79";
constexpr const char* kIdle = "#e4e4e4";

constexpr double kWidth = 1200;
constexpr double kLeft = 220;  // the label column
constexpr double kRight = 28;
constexpr double kPlotTop = 104;

struct Geometry {
  double row = 0;     // compute row height
  double band = 0;    // transfer band height under the row
  double gap = 0;     // space between stage groups
  int task_font = 0;  // micro-batch label size; 0: none
  int gpu_font = 0;   // GPU label size
};

Geometry geometry_for(std::size_t gpus) {
  if (gpus <= 16) return {22, 7, 10, 11, 11};
  if (gpus <= 32) return {16, 6, 8, 9, 10};
  if (gpus <= 64) return {11, 4, 6, 8, 9};
  if (gpus <= 128) return {7, 3, 4, 0, 8};
  return {4, 2, 3, 0, 8};
}

// Most ticks on the time axis, whatever the magnitudes.
constexpr int kMaxTicks = 64;

// 1, 2 or 5 times a power of ten, so that ticks fall about every `pixels` pixels. When the
// power of ten is not a normal double (times of 1e-320 ms or 1e300 ms) the step is the whole
// iteration: two ticks, 0 and the end.
double tick_step(double iteration_ms, double plot_width, double pixels) {
  const double raw = iteration_ms / std::max(1.0, plot_width / pixels);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  if (!std::isnormal(magnitude) || !std::isnormal(raw)) return iteration_ms;
  const double normal = raw / magnitude;
  const double factor = normal <= 1 ? 1 : normal <= 2 ? 2 : normal <= 5 ? 5 : 10;
  const double step = factor * magnitude;
  return std::isnormal(step) && iteration_ms / step <= kMaxTicks ? step : iteration_ms;
}

// Ticks at the multiples of `step` from 0 to the end of the iteration: at most kMaxTicks + 1.
std::vector<double> ticks_of(double iteration_ms, double step) {
  std::vector<double> ticks;
  for (int k = 0; k <= kMaxTicks && k * step <= iteration_ms * (1 + 1e-9); ++k) {
    ticks.push_back(k * step);
  }
  return ticks;
}

// A tick's label with as many decimals as the step needs; in three significant digits when
// that would take more than six decimals or the value is beyond 1e15 ms.
std::string tick_label(double value, double step) {
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  char buffer[64];
  if (decimals > 6 || value >= 1e15) {
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  }
  return buffer;
}

std::string shorten(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  // Cut on a UTF-8 character boundary.
  std::size_t cut = limit - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "\xE2\x80\xA6";  // an ellipsis
}

class Svg {
 public:
  void rect(double x, double y, double w, double h, const char* fill,
            const char* css_class = nullptr, const std::string& tooltip = {},
            bool outline = false) {
    out_ += "<rect";
    if (css_class) out_ += std::string(" class=\"") + css_class + "\"";
    out_ += " x=\"" + coordinate(x) + "\" y=\"" + coordinate(y) + "\" width=\"" +
            coordinate(std::max(w, 0.0)) + "\" height=\"" + coordinate(std::max(h, 0.0)) +
            "\" fill=\"" + fill + "\"";
    if (outline) out_ += " stroke=\"#ffffff\" stroke-width=\"0.6\"";
    if (tooltip.empty()) {
      out_ += "/>\n";
    } else {
      out_ += "><title>" + xml_escape(tooltip) + "</title></rect>\n";
    }
  }
  void text(double x, double y, const std::string& content, int size, const char* anchor = "start",
            const char* fill = "#222222", const char* css_class = nullptr, bool bold = false) {
    out_ += "<text";
    if (css_class) out_ += std::string(" class=\"") + css_class + "\"";
    out_ += " x=\"" + coordinate(x) + "\" y=\"" + coordinate(y) + "\" font-size=\"" +
            std::to_string(size) + "\"";
    if (std::string_view(anchor) != "start") out_ += std::string(" text-anchor=\"") + anchor + "\"";
    if (std::string_view(fill) != "#222222") out_ += std::string(" fill=\"") + fill + "\"";
    if (bold) out_ += " font-weight=\"bold\"";
    // Appended piece by piece: `">" + std::string&&` inlines to a memcpy on which GCC 12's
    // -O3 reports a false -Wrestrict (GCC bug 105329), the release build's only warning.
    out_ += '>';
    out_ += xml_escape(content);
    out_ += "</text>\n";
  }
  void line(double x1, double y1, double x2, double y2, const char* stroke, double width = 1) {
    out_ += "<line x1=\"" + coordinate(x1) + "\" y1=\"" + coordinate(y1) + "\" x2=\"" +
            coordinate(x2) + "\" y2=\"" + coordinate(y2) + "\" stroke=\"" + stroke +
            "\" stroke-width=\"" + coordinate(width) + "\"/>\n";
  }
  void raw(const std::string& text) { out_ += text; }
  [[nodiscard]] std::string str() && { return std::move(out_); }

 private:
  std::string out_;
};

std::string span(double start_ms, double end_ms) {
  return format_number(start_ms, 6) + " - " + format_number(end_ms, 6) + " ms";
}

// Where everything goes: the rows of the used GPUs in rank order, grouped by stage, and the
// time scale.
struct Layout {
  std::vector<int> ranks;
  Geometry geo;
  double pitch = 0;                              // row plus its transfer band
  double plot_width = 0;                         // px
  double scale = 0;                              // px per ms
  std::vector<double> row_y;                     // per GPU: top of its row
  std::vector<std::pair<double, double>> group;  // per stage: top and bottom
  double plot_bottom = 0;
  double height = 0;
  [[nodiscard]] double x_of(double ms) const { return kLeft + ms * scale; }
};

Layout layout_for(const PlanView& view) {
  const Plan& plan = view.plan;
  Layout layout;
  layout.ranks = rank_order(view);
  layout.geo = geometry_for(layout.ranks.size());
  const Geometry& geo = layout.geo;
  layout.pitch = geo.row + geo.band + 1;
  layout.plot_width = kWidth - kLeft - kRight;
  const double iteration = plan.timeline.iteration_ms;
  layout.scale = iteration > 0 ? layout.plot_width / iteration : 0;
  // Row positions: stage groups separated by a gap.
  layout.row_y.assign(view.gpu_ids.size(), 0);
  double y = kPlotTop + geo.gap / 2;
  for (const Stage& stage : plan.stages) {
    const double top = y;
    for (int g : stage.gpus) {
      layout.row_y[static_cast<std::size_t>(g)] = y;
      y += layout.pitch;
    }
    layout.group.emplace_back(top, y);
    y += geo.gap;
  }
  layout.plot_bottom = y - geo.gap / 2;
  layout.height = layout.plot_bottom + 48;
  return layout;
}

// The opening tag, the title lines and the legend.
void draw_header(Svg& svg, const PlanView& view, const Layout& layout) {
  const Plan& plan = view.plan;
  svg.raw("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coordinate(kWidth) +
          "\" height=\"" + coordinate(layout.height) + "\" viewBox=\"0 0 " + coordinate(kWidth) +
          " " + coordinate(layout.height) +
          "\" font-family=\"DejaVu Sans, Verdana, Arial, Helvetica, sans-serif\">\n");
  const std::string title = detail::plan_title(view);
  const std::string figures = detail::iteration_text(view);
  svg.raw("<title>" + xml_escape(title + ": " + figures) + "</title>\n");
  svg.rect(0, 0, kWidth, layout.height, "#ffffff");
  svg.text(14, 26, title, 16, "start", "#222222", "title", true);
  svg.text(14, 47, figures, 13, "start", "#222222", "subtitle");
  std::size_t used = layout.ranks.size();
  svg.text(14, 66,
           "planner " + plan.planner + ", schedule " + plan.schedule_policy + ", " +
               std::to_string(view.micro_batches) + " micro-batches, " +
               std::to_string(plan.stages.size()) + " stage" +
               (plan.stages.size() == 1 ? "" : "s") + " on " + std::to_string(used) + " of " +
               std::to_string(view.gpu_ids.size()) + " GPUs",
           11, "start", "#555555", "details");

  const std::pair<const char*, const char*> legend[] = {
      {kForward, "forward"},        {kBackward, "backward"},
      {kAllReduce, "AllReduce"},    {kActivation, "activation send"},
      {kGradient, "gradient send"}, {kIdle, "idle"}};
  double legend_x = 14;
  for (const auto& [colour, label] : legend) {
    svg.rect(legend_x, 78, 12, 12, colour, "legend");
    svg.text(legend_x + 17, 88.5, label, 11, "start", "#222222", "legend");
    legend_x += 30 + 7.0 * static_cast<double>(std::string_view(label).size());
  }
}

// `prefix` and `number`, appended piece by piece: `"stage " + std::string&&` draws a false
// -Wrestrict from GCC 12 at -O3 (GCC bug 105329).
template <typename Number>
std::string numbered(const char* prefix, Number number) {
  std::string out = prefix;
  out += std::to_string(number);
  return out;
}

// Stage groups: alternating backgrounds and labels that fit.
void draw_stage_groups(Svg& svg, const Plan& plan, const Layout& layout) {
  const Geometry& geo = layout.geo;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const auto [top, bottom] = layout.group[s];
    svg.rect(0, top - geo.gap / 2, kWidth, bottom - top + geo.gap,
             s % 2 == 0 ? "#f3f5f8" : "#ffffff", "stage");
    const double h = bottom - top;
    const Stage& stage = plan.stages[s];
    std::string layers =
        numbered(stage.first_layer == stage.last_layer ? "layer " : "layers ", stage.first_layer);
    if (stage.first_layer != stage.last_layer) layers += numbered("-", stage.last_layer);
    if (h >= 28) {
      svg.text(10, top + h / 2 - 2, numbered("stage ", s), 12, "start", "#222222", "stage-label",
               true);
      svg.text(10, top + h / 2 + 11, layers, 10, "start", "#555555", "stage-label");
    } else if (h >= 12) {
      svg.text(10, top + h / 2 + 4, numbered("stage ", s), std::min(11, static_cast<int>(h) - 1),
               "start", "#222222", "stage-label", true);
    } else if (h >= 8) {
      svg.text(10, top + h / 2 + 3, numbered("s", s), 8, "start", "#222222", "stage-label", true);
    }
  }
}

// GPU rows: idle background and labels (every k-th row when rows are too thin for each).
void draw_rows(Svg& svg, const PlanView& view, const Layout& layout) {
  const Geometry& geo = layout.geo;
  const int label_every = std::max(1, static_cast<int>(std::ceil(9.0 / layout.pitch)));
  for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
    const int g = layout.ranks[r];
    const double top = layout.row_y[static_cast<std::size_t>(g)];
    svg.rect(kLeft, top, layout.plot_width, geo.row, kIdle, "idle");
    if (static_cast<int>(r) % label_every == 0) {
      const int size =
          label_every > 1 ? geo.gpu_font : std::min(geo.gpu_font, static_cast<int>(geo.row));
      svg.text(kLeft - 8, top + geo.row / 2 + size * 0.35, shorten(detail::gpu_id(view, g), 24),
               size, "end", "#222222", "gpu-label");
    }
  }
}

// Compute tasks with their micro-batch labels, AllReduces in the rows of their GPUs (which
// compute nothing more for the stage), transfers in the band under the sending GPU
// (activations above, gradients below).
void draw_tasks(Svg& svg, const PlanView& view, const Layout& layout) {
  const Plan& plan = view.plan;
  const Geometry& geo = layout.geo;
  const double scale = layout.scale;
  for (const TimedCompute& e : plan.timeline.compute) {
    const bool forward = e.task.op == Op::kForward;
    const double top = layout.row_y[static_cast<std::size_t>(e.gpu)];
    const double x = layout.x_of(e.start_ms);
    const double w = (e.end_ms - e.start_ms) * scale;
    // A white outline separates neighbouring boxes where they are wide enough to keep colour.
    svg.rect(x, top, w, geo.row, forward ? kForward : kBackward, forward ? "fwd" : "bwd",
             detail::short_name(e.task) + " on " + detail::gpu_id(view, e.gpu) + ": " +
                 span(e.start_ms, e.end_ms),
             w >= 4);
    if (geo.task_font > 0) {
      const std::string label = std::to_string(e.task.micro_batch);
      const double needed = static_cast<double>(label.size()) * geo.task_font * 0.62 + 4;
      if (w >= needed) {
        svg.text(x + w / 2, top + geo.row / 2 + geo.task_font * 0.36, label, geo.task_font,
                 "middle", "#ffffff", "mb");
      }
    }
  }
  for (const TimedAllReduce& e : plan.timeline.allreduces) {
    for (int g : plan.stages[static_cast<std::size_t>(e.stage)].gpus) {
      const double x = layout.x_of(e.start_ms);
      const double w = (e.end_ms - e.start_ms) * scale;
      const double top = layout.row_y[static_cast<std::size_t>(g)];
      svg.rect(x, top, w, geo.row, kAllReduce, "ar",
               "AllReduce of stage " + std::to_string(e.stage) + " (" + format_bytes(e.bytes) +
                   "): " + span(e.start_ms, e.end_ms));
      if (geo.task_font > 0 && w >= 9 * geo.task_font * 0.62 + 4) {
        svg.text(x + w / 2, top + geo.row / 2 + geo.task_font * 0.36, "AllReduce", geo.task_font,
                 "middle", "#ffffff", "ar-label");
      }
    }
  }
  for (const TimedTransfer& e : plan.timeline.transfers) {
    const bool activation = e.task.kind == TransferKind::kActivation;
    const double top = layout.row_y[static_cast<std::size_t>(e.from)] + geo.row + 0.5 +
                       (activation ? 0 : geo.band / 2);
    // At least 1.5 px: short transfers stay visible.
    const double w = std::max((e.end_ms - e.start_ms) * scale, 1.5);
    svg.rect(layout.x_of(e.start_ms), top, w, geo.band / 2, activation ? kActivation : kGradient,
             activation ? "act" : "grad",
             std::string(activation ? "activation" : "gradient") + " m" +
                 std::to_string(e.task.micro_batch) + " " + detail::gpu_id(view, e.from) + " -> " +
                 detail::gpu_id(view, e.to) + " (" + format_bytes(e.bytes) +
                 "): " + span(e.start_ms, e.end_ms));
  }
}

}  // namespace

std::string svg_gantt(const PlanView& view) {
  const Plan& plan = view.plan;
  const Layout layout = layout_for(view);
  const double iteration = plan.timeline.iteration_ms;
  const double plot_bottom = layout.plot_bottom;
  Svg svg;
  draw_header(svg, view, layout);
  draw_stage_groups(svg, plan, layout);

  // Grid and ticks.
  std::vector<double> ticks;
  double step = 0;
  if (iteration > 0) {
    step = tick_step(iteration, layout.plot_width, 90);
    ticks = ticks_of(iteration, step);
  } else {
    ticks.push_back(0);
  }
  for (double t : ticks) {
    svg.line(layout.x_of(t), kPlotTop, layout.x_of(t), plot_bottom, "#cfd4da", 0.6);
  }
  draw_rows(svg, view, layout);
  draw_tasks(svg, view, layout);

  // Time axis.
  svg.line(kLeft, plot_bottom, kLeft + layout.plot_width, plot_bottom, "#555555", 1);
  for (double t : ticks) {
    svg.line(layout.x_of(t), plot_bottom, layout.x_of(t), plot_bottom + 4, "#555555", 1);
    svg.text(layout.x_of(t), plot_bottom + 16, step > 0 ? tick_label(t, step) : "0", 10, "middle",
             "#333333", "tick");
  }
  svg.text(kLeft + layout.plot_width / 2, plot_bottom + 36, "time (ms)", 11, "middle", "#333333",
           "axis-title");
  svg.raw("</svg>\n");
  return std::move(svg).str();
}

}  // namespace pipeplan::report
