// SVG Gantt chart of a plan: one row per used GPU (per tensor-parallel group in a plan that uses
// spec 8.2) grouped by stage, a thin band under each
// row for the transfers it sends, a time axis with 1-2-5 ticks, a legend and a title. Row
// heights and labels shrink with the GPU count, and labels that would not fit are left out
// rather than drawn over each other. O(T) for T tasks; deterministic (fixed two-decimal
// coordinates, elements in timeline order).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "export_util.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/report/export.hpp"

namespace pipeplan::report {

using io::format_bytes;
using io::format_ms;
using io::format_number;

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
// Spec 8 plans only: optimizer steps teal, and in the bottom strip of a task its recomputation
// share purple and its tensor-parallel all-reduce share brown.
constexpr const char* kUpdate = "#72b7b2";
constexpr const char* kRecompute = "#b279a2";
constexpr const char* kTensorParallel = "#9d755d";
// A split backward (spec 9.2): its input-gradient half `I` red, its weight-gradient half `W`
// yellow (labelled in dark text).
constexpr const char* kBackwardInput = "#e45756";
constexpr const char* kBackwardWeight = "#eeca3b";

constexpr double kWidth = 1200;
constexpr double kLeft = 220;  // the label column
constexpr double kRight = 28;
constexpr double kPlotTop = 104;  // with a legend of one line
constexpr double kLegendLine = 16;

struct Geometry {
  double row;     // compute row height
  double band;    // transfer band height under the row
  double gap;     // space between stage groups
  int task_font;  // micro-batch label size; 0: none
  int gpu_font;   // GPU label size
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
            const char* fill = "#222222", const char* css_class = nullptr, bool bold = false,
            const std::string& tooltip = {}) {
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
    if (!tooltip.empty()) {
      out_ += "<title>";
      out_ += xml_escape(tooltip);
      out_ += "</title>";
    }
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

// `#rrggbb` moved `amount` (0..1) of the way to black (`darker`) or white. O(1).
std::string mix(const char* colour, double amount, bool darker) {
  unsigned red = 0, green = 0, blue = 0;
  std::sscanf(colour, "#%2x%2x%2x", &red, &green, &blue);
  auto channel = [&](unsigned value) {
    const double target = darker ? 0 : 255;
    return static_cast<unsigned>(std::lround(value + (target - value) * amount));
  };
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", channel(red) & 0xffu,
                channel(green) & 0xffu, channel(blue) & 0xffu);
  return buffer;
}

// The shade of a task of the `k`-th stage of its device (spec 9.2): the colour itself for the
// first, then darker and lighter in turn, each pair further from it. O(1).
std::string shade(const char* colour, int k) {
  if (k == 0) return colour;
  const int pair = (k - 1) / 2;  // 0 for the second and third stage, 1 for the next two, ...
  const double amount = std::min(0.3 + 0.2 * pair, 0.7);
  return mix(colour, amount, k % 2 == 1);
}

// Whether a label on `colour` reads better in dark text: the yellow of `W` and light shades.
bool light(const std::string& colour) {
  unsigned red = 0, green = 0, blue = 0;
  std::sscanf(colour.c_str(), "#%2x%2x%2x", &red, &green, &blue);
  return 0.299 * red + 0.587 * green + 0.114 * blue > 170;
}

std::string span(double start_ms, double end_ms) {
  return format_number(start_ms, 6) + " - " + format_number(end_ms, 6) + " ms";
}

// A group's GPUs in a row label: the id of a single GPU; for a group, the part up to the last
// `/` that all share, then each GPU's rest (`n0/gpu0,gpu1`), else the ids joined by commas.
std::string group_label(const PlanView& view, const std::vector<int>& gpus) {
  if (gpus.size() == 1) return detail::gpu_id(view, gpus.front());
  const std::string& first = detail::gpu_id(view, gpus.front());
  std::size_t prefix = first.rfind('/');
  prefix = prefix == std::string::npos ? 0 : prefix + 1;
  for (int g : gpus) {
    if (detail::gpu_id(view, g).compare(0, prefix, first, 0, prefix) != 0) prefix = 0;
  }
  std::string out = first.substr(0, prefix);
  for (std::size_t k = 0; k < gpus.size(); ++k) {
    // Appended piece by piece (GCC bug 105329, as in Svg::text).
    if (k > 0) out += ',';
    out.append(detail::gpu_id(view, gpus[k]), prefix);
  }
  return out;
}

// The stages that share one GPU list (a device, spec 9.2), ascending; in a plan without shared
// GPUs, one stage.
struct Device {
  std::vector<int> stages;
};

// One plan's chart, drawn part by part in document order (what is drawn later lies on top).
class Gantt {
 public:
  explicit Gantt(const PlanView& view)
      : view_(view),
        plan_(view.plan),
        v2_(is_v2_plan(view.plan)),
        shared_(shares_devices(view.plan)),
        group_of_(view.gpu_ids.size()),
        place_of_(view.gpu_ids.size(), {0, 0}),
        row_y_(view.gpu_ids.size(), 0),
        device_of_(view.gpu_ids.size(), 0),
        slot_(view.plan.stages.size(), 0) {
    devices();
    geo_ = geometry_for(rows_.size());
    pitch_ = geo_.row + geo_.band + 1;
    const double iteration = plan_.timeline.iteration_ms;
    scale_ = iteration > 0 ? kPlotWidth / iteration : 0;
    legend_entries();
    plot_top_ = kPlotTop + kLegendLine * legend_lines_;
    // Row positions: devices (in a plan without shared GPUs, stages) separated by a gap.
    double y = plot_top_ + geo_.gap / 2;
    for (const Device& device : devices_) {
      const double top = y;
      for (int g : plan_.stages[static_cast<std::size_t>(device.stages.front())].leaders()) {
        row_y_[static_cast<std::size_t>(g)] = y;
        y += pitch_;
      }
      bands_.emplace_back(top, y);
      y += geo_.gap;
    }
    plot_bottom_ = y - geo_.gap / 2;
    if (iteration > 0) {
      step_ = tick_step(iteration, kPlotWidth, 90);
      ticks_ = ticks_of(iteration, step_);
    } else {
      ticks_.push_back(0);
    }
  }

  std::string draw() && {
    header();
    legend();
    stage_bands();
    for (double t : ticks_) svg_.line(x_of(t), plot_top_, x_of(t), plot_bottom_, "#cfd4da", 0.6);
    gpu_rows();
    compute();
    allreduces();
    updates();
    transfers();
    axis();
    svg_.raw("</svg>\n");
    return std::move(svg_).str();
  }

 private:
  static constexpr double kPlotWidth = kWidth - kLeft - kRight;

  double x_of(double ms) const { return kLeft + ms * scale_; }

  // The devices (spec 9.2: stages with one GPU list; in a plan without shared GPUs, each stage),
  // in the order of their first stages, and one row per group of each (spec 8.2), named by its
  // leader; in a v1 plan one per GPU. O(S log S + N).
  void devices() {
    std::map<std::vector<int>, std::size_t> index;
    for (std::size_t s = 0; s < plan_.stages.size(); ++s) {
      const Stage& stage = plan_.stages[s];
      const auto [it, added] = index.emplace(stage.gpus, devices_.size());
      if (!added) {
        Device& device = devices_[it->second];
        slot_[s] = static_cast<int>(device.stages.size());
        device.stages.push_back(static_cast<int>(s));
        continue;
      }
      devices_.push_back({{static_cast<int>(s)}});
      for (int i = 0; i < stage.replicas(); ++i) {
        device_of_[static_cast<std::size_t>(stage.leader(i))] = devices_.size() - 1;
        rows_.push_back(stage.leader(i));
        group_of_[static_cast<std::size_t>(stage.leader(i))] = stage.group(i);
        place_of_[static_cast<std::size_t>(stage.leader(i))] = {static_cast<int>(s), i};
      }
    }
  }
  double row_top(int gpu) const { return row_y_[static_cast<std::size_t>(gpu)]; }

  // The document, its background, title and the plan's figures.
  void header() {
    const double height = plot_bottom_ + 48;
    svg_.raw("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coordinate(kWidth) +
             "\" height=\"" + coordinate(height) + "\" viewBox=\"0 0 " + coordinate(kWidth) + " " +
             coordinate(height) +
             "\" font-family=\"DejaVu Sans, Verdana, Arial, Helvetica, sans-serif\">\n");
    const std::string title = detail::plan_title(view_);
    const std::string figures = detail::iteration_text(view_);
    svg_.raw("<title>" + xml_escape(title + ": " + figures) + "</title>\n");
    svg_.rect(0, 0, kWidth, height, "#ffffff");
    svg_.text(14, 26, title, 16, "start", "#222222", "title", true);
    svg_.text(14, 47, figures, 13, "start", "#222222", "subtitle");
    const std::size_t used = rank_order(view_).size();
    svg_.text(14, 66,
              "planner " + plan_.planner + ", schedule " + plan_.schedule_policy + ", " +
                  std::to_string(view_.micro_batches) + " micro-batches, " +
                  std::to_string(plan_.stages.size()) + " stage" +
                  (plan_.stages.size() == 1 ? "" : "s") + " on " + std::to_string(used) + " of " +
                  std::to_string(view_.gpu_ids.size()) + " GPUs" +
                  (shared_ ? " (up to " + std::to_string(virtual_stages(plan_.stages)) +
                                 " stages per device)"
                           : std::string()) +
                  (plan_.schedule.split_backward ? ", split backward" : ""),
              11, "start", "#555555", "details");
  }

  // The legend's entries, one per kind of box the chart may hold, and their places: lines of
  // at most the chart's width (one line for every plan without a split backward or shared
  // GPUs). O(entries).
  void legend_entries() {
    legend_ = {{kForward, "forward"}};
    if (plan_.schedule.split_backward) {
      legend_.insert(legend_.end(), {{kBackwardInput, "input gradient (I)"},
                                     {kBackwardWeight, "weight gradient (W)"}});
    } else {
      legend_.emplace_back(kBackward, "backward");
    }
    legend_.insert(legend_.end(), {{kAllReduce, "AllReduce"},
                                   {kActivation, "activation send"},
                                   {kGradient, "gradient send"},
                                   {kIdle, "idle"}});
    if (v2_) {
      legend_.insert(legend_.end(), {{kUpdate, "optimizer step"},
                                     {kRecompute, "recomputation"},
                                     {kTensorParallel, "tensor-parallel all-reduce"}});
    }
    // The shades of the stages of a device, shown on the forward's colour.
    for (int k = 0; shared_ && k < virtual_stages(plan_.stages); ++k) {
      legend_.emplace_back(shade(kForward, k), "virtual stage " + std::to_string(k));
    }
    double x = 14;
    for (const auto& [colour, label] : legend_) {
      const double width = 30 + 7.0 * static_cast<double>(label.size());
      if (x > 14 && x + width - 14 > kWidth - 14) {
        x = 14;
        ++legend_lines_;
      }
      legend_places_.emplace_back(x, 78 + kLegendLine * legend_lines_);
      x += width;
    }
  }

  void legend() {
    for (std::size_t k = 0; k < legend_.size(); ++k) {
      const auto [x, y] = legend_places_[k];
      svg_.rect(x, y, 12, 12, legend_[k].first.c_str(), "legend");
      svg_.text(x + 17, y + 10.5, legend_[k].second, 11, "start", "#222222", "legend");
    }
  }

  // `layers 0-1`, or for a device `layers 0-1, 4-5`, shortened to fit the label column.
  std::string layers_text(const Device& device) const {
    auto range = [&](int s) {
      const Stage& stage = plan_.stages[static_cast<std::size_t>(s)];
      return stage.first_layer == stage.last_layer
                 ? std::to_string(stage.first_layer)
                 : std::to_string(stage.first_layer) + "-" + std::to_string(stage.last_layer);
    };
    if (device.stages.size() == 1) {
      const Stage& stage = plan_.stages[static_cast<std::size_t>(device.stages.front())];
      return (stage.first_layer == stage.last_layer ? "layer " : "layers ") +
             range(device.stages.front());
    }
    std::string out = "layers ";
    for (std::size_t k = 0; k < device.stages.size(); ++k) {
      if (k > 0) out += ", ";
      out += range(device.stages[k]);
    }
    return shorten(out, 24);
  }

  // Stage groups (devices): alternating backgrounds and labels that fit.
  void stage_bands() {
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      const Device& device = devices_[d];
      const auto s = static_cast<std::size_t>(device.stages.front());
      const auto [top, bottom] = bands_[d];
      svg_.rect(0, top - geo_.gap / 2, kWidth, bottom - top + geo_.gap,
                d % 2 == 0 ? "#f3f5f8" : "#ffffff", "stage");
      const double h = bottom - top;
      const Stage& stage = plan_.stages[s];
      const std::string layers = layers_text(device);
      // In a v2 plan: the stage's degrees and whether it recomputes (a device's stages have
      // the same degrees; `recompute` when one of them does).
      const bool recompute = std::any_of(device.stages.begin(), device.stages.end(), [&](int k) {
        return plan_.stages[static_cast<std::size_t>(k)].recompute;
      });
      const std::string degrees = std::to_string(stage.replicas()) + " x " +
                                  std::to_string(stage.tensor_parallel) + " GPUs" +
                                  (recompute ? ", recompute" : "");
      const std::string name = shorten(detail::stages_text(device.stages), 20);
      if (v2_ && h >= 40) {
        svg_.text(10, top + h / 2 - 8, name, 12, "start", "#222222", "stage-label", true);
        svg_.text(10, top + h / 2 + 5, layers, 10, "start", "#555555", "stage-label");
        svg_.text(10, top + h / 2 + 17, degrees, 10, "start", "#555555", "stage-label");
      } else if (h >= 28) {
        svg_.text(10, top + h / 2 - 2, name, 12, "start", "#222222", "stage-label", true);
        svg_.text(10, top + h / 2 + 11, layers, 10, "start", "#555555", "stage-label");
      } else if (h >= 12) {
        svg_.text(10, top + h / 2 + 4, name, std::min(11, static_cast<int>(h) - 1), "start",
                  "#222222", "stage-label", true);
      } else if (h >= 8) {
        svg_.text(10, top + h / 2 + 3, "s" + detail::stage_list(device.stages, ","), 8, "start",
                  "#222222", "stage-label", true);
      }
    }
  }

  // GPU rows: idle background and labels (every k-th row when rows are too thin for each).
  void gpu_rows() {
    const int label_every = std::max(1, static_cast<int>(std::ceil(9.0 / pitch_)));
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      const int g = rows_[r];
      const double top = row_top(g);
      svg_.rect(kLeft, top, kPlotWidth, geo_.row, kIdle, "idle");
      if (static_cast<int>(r) % label_every != 0) continue;
      const int size =
          label_every > 1 ? geo_.gpu_font : std::min(geo_.gpu_font, static_cast<int>(geo_.row));
      const std::vector<int>& members = group_of_[static_cast<std::size_t>(g)];
      std::string all;  // every GPU of a group, in the label's tooltip
      for (std::size_t k = 0; members.size() > 1 && k < members.size(); ++k) {
        if (k > 0) all += ", ";
        all += detail::gpu_id(view_, members[k]);
      }
      std::string label = shorten(group_label(view_, members), members.size() > 1 ? 30 : 24);
      if (shared_) {
        // Every stage of the device (spec 9.2): `n0/gpu0 (s0,2)`, and in full in the tooltip.
        const std::vector<int>& stages = device_stages(g);
        if (stages.size() > 1) {
          const std::string suffix = " (s" + detail::stage_list(stages, ",") + ")";
          label = shorten(group_label(view_, members), members.size() > 1 ? 22 : 16) + suffix;
          all = (all.empty() ? detail::gpu_id(view_, g) : all) + ": " + detail::stages_text(stages);
        }
      }
      svg_.text(kLeft - 8, top + geo_.row / 2 + size * 0.35, label, size, "end", "#222222",
                "gpu-label", false, all);
    }
  }

  // Compute tasks and their micro-batch labels.
  void compute() {
    for (const TimedCompute& e : plan_.timeline.compute) {
      const bool forward = e.task.op == Op::kForward;
      // A split backward recomputes and all-reduces input gradients in its `I`, not its `W`.
      const bool weight = e.task.op == Op::kBackwardWeight;
      const double top = row_top(e.gpu);
      const double x = x_of(e.start_ms);
      const double w = (e.end_ms - e.start_ms) * scale_;
      // A white outline separates neighbouring boxes where they are wide enough to keep colour.
      // The shares of a v2 task (known with the model and topology): recomputation and
      // tensor-parallel all-reduce, drawn side by side in a strip at the bottom of its box.
      double recompute_ms = 0, allreduce_ms = 0;
      if (v2_ && view_.group_figures) {
        const int i = place_of_[static_cast<std::size_t>(e.gpu)].second;
        const GroupFigures& f = (*view_.group_figures)[static_cast<std::size_t>(e.task.stage)]
                                                      [static_cast<std::size_t>(i)];
        recompute_ms = forward || weight ? 0 : f.recompute_ms;
        allreduce_ms = forward ? f.forward_allreduce_ms : (weight ? 0 : f.backward_allreduce_ms);
      }
      std::string shares;
      if (recompute_ms > 0) shares += ", recomputation " + format_ms(recompute_ms);
      if (allreduce_ms > 0) shares += ", tensor-parallel all-reduce " + format_ms(allreduce_ms);
      const auto [base, css_class] = kind_of(e.task.op);
      // The k-th stage of a shared device in the k-th shade (spec 9.2).
      const std::string fill =
          shared_ ? shade(base, slot_[static_cast<std::size_t>(e.task.stage)]) : base;
      svg_.rect(x, top, w, geo_.row, fill.c_str(), css_class,
                detail::short_name(e.task) + " on " + detail::gpu_id(view_, e.gpu) + ": " +
                    span(e.start_ms, e.end_ms) + shares,
                w >= 4);
      const double strip = geo_.row * 0.3;
      if (recompute_ms > 0) {
        svg_.rect(x, top + geo_.row - strip, recompute_ms * scale_, strip, kRecompute, "recompute");
      }
      if (allreduce_ms > 0) {
        svg_.rect(x + recompute_ms * scale_, top + geo_.row - strip, allreduce_ms * scale_, strip,
                  kTensorParallel, "tp");
      }
      if (geo_.task_font > 0) {
        const std::string label = std::to_string(e.task.micro_batch);
        const double needed = static_cast<double>(label.size()) * geo_.task_font * 0.62 + 4;
        if (w >= needed) {
          const bool dark = (shared_ || plan_.schedule.split_backward) && light(fill);
          svg_.text(x + w / 2, top + geo_.row / 2 + geo_.task_font * 0.36, label, geo_.task_font,
                    "middle", dark ? "#222222" : "#ffffff", "mb");
        }
      }
    }
  }

  // A compute task's colour and class: `fwd`, `bwd`, `bwd-input` or `bwd-weight`.
  static std::pair<const char*, const char*> kind_of(Op op) {
    switch (op) {
      case Op::kForward:
        return {kForward, "fwd"};
      case Op::kBackward:
        break;
      case Op::kBackwardInput:
        return {kBackwardInput, "bwd-input"};
      case Op::kBackwardWeight:
        return {kBackwardWeight, "bwd-weight"};
    }
    return {kBackward, "bwd"};
  }

  // The stages of the device whose row leader is `gpu`.
  const std::vector<int>& device_stages(int gpu) const {
    return devices_[device_of_[static_cast<std::size_t>(gpu)]].stages;
  }

  // AllReduces, in the rows of their GPUs (which compute nothing more for the stage).
  void allreduces() {
    for (const TimedAllReduce& e : plan_.timeline.allreduces) {
      for (int g : plan_.stages[static_cast<std::size_t>(e.stage)].leaders()) {
        const double x = x_of(e.start_ms);
        const double w = (e.end_ms - e.start_ms) * scale_;
        const double top = row_top(g);
        svg_.rect(x, top, w, geo_.row, kAllReduce, "ar",
                  "AllReduce of stage " + std::to_string(e.stage) + " (" + format_bytes(e.bytes) +
                      "): " + span(e.start_ms, e.end_ms));
        if (geo_.task_font > 0 && w >= 9 * geo_.task_font * 0.62 + 4) {
          svg_.text(x + w / 2, top + geo_.row / 2 + geo_.task_font * 0.36, "AllReduce",
                    geo_.task_font, "middle", "#ffffff", "ar-label");
        }
      }
    }
  }

  // Optimizer steps, in the rows of their groups.
  void updates() {
    for (const TimedUpdate& e : plan_.timeline.updates) {
      svg_.rect(x_of(e.start_ms), row_top(e.gpu), std::max((e.end_ms - e.start_ms) * scale_, 1.5),
                geo_.row, kUpdate, "update",
                "optimizer step of stage " + std::to_string(e.stage) + " on " +
                    group_label(view_, group_of_[static_cast<std::size_t>(e.gpu)]) + ": " +
                    span(e.start_ms, e.end_ms));
    }
  }

  // Transfers, in the band under the sending GPU: activations above, gradients below.
  void transfers() {
    for (const TimedTransfer& e : plan_.timeline.transfers) {
      const bool activation = e.task.kind == TransferKind::kActivation;
      const double top = row_top(e.from) + geo_.row + 0.5 + (activation ? 0 : geo_.band / 2);
      // At least 1.5 px: short transfers stay visible.
      const double w = std::max((e.end_ms - e.start_ms) * scale_, 1.5);
      svg_.rect(x_of(e.start_ms), top, w, geo_.band / 2, activation ? kActivation : kGradient,
                activation ? "act" : "grad",
                std::string(activation ? "activation" : "gradient") + " m" +
                    std::to_string(e.task.micro_batch) + " " + detail::gpu_id(view_, e.from) +
                    " -> " + detail::gpu_id(view_, e.to) + " (" + format_bytes(e.bytes) +
                    "): " + span(e.start_ms, e.end_ms));
    }
  }

  // The time axis: its line, ticks and labels.
  void axis() {
    svg_.line(kLeft, plot_bottom_, kLeft + kPlotWidth, plot_bottom_, "#555555", 1);
    for (double t : ticks_) {
      svg_.line(x_of(t), plot_bottom_, x_of(t), plot_bottom_ + 4, "#555555", 1);
      svg_.text(x_of(t), plot_bottom_ + 16, step_ > 0 ? tick_label(t, step_) : "0", 10, "middle",
                "#333333", "tick");
    }
    svg_.text(kLeft + kPlotWidth / 2, plot_bottom_ + 36, "time (ms)", 11, "middle", "#333333",
              "axis-title");
  }

  const PlanView& view_;
  const Plan& plan_;
  const bool v2_;
  const bool shared_;                             // some stages share GPUs
  std::vector<Device> devices_;                   // in the order of their first stages
  std::vector<int> rows_;                         // the leader of each row, top to bottom
  std::vector<std::vector<int>> group_of_;        // per leader: its group's GPUs
  std::vector<std::pair<int, int>> place_of_;     // per leader: stage, replica
  std::vector<double> row_y_;                     // per leader: its row's top
  std::vector<std::size_t> device_of_;            // per leader: its device
  std::vector<std::pair<double, double>> bands_;  // per device: top and bottom
  std::vector<int> slot_;                         // per stage: its place among its device's
  std::vector<std::pair<std::string, std::string>> legend_;  // colour and label
  std::vector<std::pair<double, double>> legend_places_;     // x and y of each entry
  int legend_lines_ = 0;                                     // lines beyond the first
  double plot_top_ = kPlotTop;
  Geometry geo_{};
  double pitch_ = 0, scale_ = 0, plot_bottom_ = 0, step_ = 0;
  std::vector<double> ticks_;
  Svg svg_;
};

}  // namespace

std::string svg_gantt(const PlanView& view) { return Gantt(view).draw(); }

}  // namespace pipeplan::report
