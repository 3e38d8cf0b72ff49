// `pipeplan compare`'s scoring and its three renderings (table, JSON, CSV). Every function is
// linear in the rows and the size of their plans' stages (plus O(N) per row for peak memory).

#include "pipeplan/report/compare.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "pipeplan/error.hpp"
#include "pipeplan/io/format.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/summary.hpp"
#include "pipeplan/schedule/policy.hpp"

namespace pipeplan::report {

PeakMemory peak_memory(const Plan& plan, const topology::Topology& topology) {
  PeakMemory best;
  for (int g = 0; g < topology.size(); ++g) {
    const GpuUsage& usage = plan.timeline.gpus[static_cast<std::size_t>(g)];
    if (usage.stages.empty()) continue;
    PeakMemory here{g, usage.peak_memory_bytes, topology.gpu(g).memory_bytes};
    if (best.gpu < 0) {
      best = here;
      continue;
    }
    const auto a = here.fraction(), b = best.fraction();
    if (a && (!b || *a > *b)) best = here;
    if (!a && !b && here.peak_bytes > best.peak_bytes) best = here;
  }
  return best;
}

std::string stages_text(const Plan& plan) {
  std::string out;
  // Appended piece by piece: `" " + std::string&&` draws a false -Wrestrict from GCC 12 at -O3
  // (GCC bug 105329).
  for (const Stage& stage : plan.stages) {
    if (!out.empty()) out += ' ';
    out += std::to_string(stage.first_layer);
    out += '-';
    out += std::to_string(stage.last_layer);
    out += 'x';
    out += std::to_string(stage.replicas());
    // Spec 8: the degree and recomputation where they are not the v1 ones (`0-21x2t4r`).
    if (stage.tensor_parallel > 1) {
      out += 't';
      out += std::to_string(stage.tensor_parallel);
    }
    if (stage.context_parallel > 1) {  // spec 10.2 (`0-21x2t4c2`)
      out += 'c';
      out += std::to_string(stage.context_parallel);
    }
    if (stage.recompute) out += 'r';
  }
  return out;
}

std::vector<CompareRow> compare_planners(const planners::Request& request,
                                         const std::function<void(const CompareRow&)>& done) {
  // Every row of the planner table: its plain runs, then its variants (planners::PlannerRow).
  std::vector<std::pair<CompareRow, planners::Request>> runs;
  for (const planners::PlannerRow& planner : planners::planner_table()) {
    // `--virtual-stages V` is for the planners that place several stages per device; the others
    // are compared as they plan, one stage per GPU.
    planners::Request own = request;
    if (!planner.shares_devices) own.virtual_stages.reset();
    // Likewise `--context-parallel` for the planners that take it (spec 10.4).
    if (std::find(planner.options.begin(), planner.options.end(), "--context-parallel") ==
        planner.options.end()) {
      own.context_parallel.clear();
    }
    for (const schedule::Policy policy : planners::compare_policies_for(planner, own)) {
      // zb-v runs its own two stages per device (spec 9.5); `--virtual-stages` is the others'.
      planners::Request run = own;
      if (schedule::policy_row(policy).device_stages == schedule::DeviceStages::kTwo) {
        run.virtual_stages.reset();
      }
      runs.emplace_back(
          CompareRow{std::string(planner.name), {}, policy, planner.baseline, std::nullopt, {}, 0},
          std::move(run));
    }
    for (planners::CompareVariant& variant : planners::compare_variants(planner, own)) {
      runs.emplace_back(CompareRow{std::string(planner.name),
                                   std::move(variant.label),
                                   planners::default_policy_for(planner.name, variant.request),
                                   planner.baseline,
                                   std::nullopt,
                                   {},
                                   0},
                        std::move(variant.request));
    }
  }
  std::vector<CompareRow> rows;
  for (auto& [row, run] : runs) {
    const auto started = std::chrono::steady_clock::now();
    try {
      // A configuration the frameworks cannot run is a row without a plan, not a usage error
      // of the whole comparison (`compare --uniform` with data-parallel, say).
      if (auto refused = planners::refusal(row.planner, run)) throw InfeasibleError(*refused);
      row.plan = planners::make_plan(row.planner, run, row.policy);
    } catch (const InfeasibleError& error) {
      row.error = error.what();
    }
    row.planning_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    done(row);
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

CompareFigures figures(const CompareRow& row, std::optional<double> best_baseline_ms,
                       const topology::Topology& topology) {
  CompareFigures f;
  if (!row.plan) return f;
  const double iteration = row.plan->timeline.iteration_ms;
  const Bounds& bounds = row.plan->bounds;
  if (best_baseline_ms) f.speedup = bound_ratio(*best_baseline_ms, iteration);
  f.partition_ratio = bound_ratio(iteration, bounds.partition_ms);
  f.any_plan_ratio = bound_ratio(iteration, bounds.any_plan_ms);
  f.memory = peak_memory(*row.plan, topology);
  return f;
}

nlohmann::ordered_json number_or_null(std::optional<double> value) {
  return value ? io::json_number(*value) : nlohmann::ordered_json();
}

}  // namespace

Comparison score_comparison(std::vector<CompareRow> rows, const topology::Topology& topology) {
  Comparison comparison;
  for (std::size_t x = 0; x < rows.size(); ++x) {
    if (!rows[x].plan) continue;
    const double iteration = rows[x].plan->timeline.iteration_ms;
    if (!comparison.fastest || iteration < rows[*comparison.fastest].plan->timeline.iteration_ms) {
      comparison.fastest = x;
    }
    if (rows[x].baseline &&
        (!comparison.fastest_baseline ||
         iteration < rows[*comparison.fastest_baseline].plan->timeline.iteration_ms)) {
      comparison.fastest_baseline = x;
    }
  }
  std::optional<double> best_baseline_ms;
  if (comparison.fastest_baseline) {
    best_baseline_ms = rows[*comparison.fastest_baseline].plan->timeline.iteration_ms;
  }
  for (const CompareRow& row : rows) {
    comparison.figures.push_back(figures(row, best_baseline_ms, topology));
  }
  comparison.rows = std::move(rows);
  return comparison;
}

std::string comparison_json(const Comparison& comparison, bool timing,
                            const topology::Topology& topology) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (std::size_t x = 0; x < comparison.rows.size(); ++x) {
    const CompareRow& row = comparison.rows[x];
    const CompareFigures& f = comparison.figures[x];
    nlohmann::ordered_json item;
    item["planner"] = row.planner;
    if (!row.options.empty()) item["options"] = row.options;
    item["policy"] = std::string(schedule::policy_name(row.policy));
    item["feasible"] = row.plan.has_value();
    if (row.plan) {
      nlohmann::ordered_json stages = nlohmann::ordered_json::array();
      for (const Stage& stage : row.plan->stages) {
        nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
        for (int g : stage.gpus) gpus.push_back(topology.gpu(g).id);
        stages.push_back(
            {{"first_layer", stage.first_layer}, {"last_layer", stage.last_layer}, {"gpus", gpus}});
      }
      item["stages"] = stages;
      item["iteration_ms"] = io::json_number(row.plan->timeline.iteration_ms);
      item["speedup"] = number_or_null(f.speedup);
      item["bounds"] = {{"any_plan_ms", io::json_number(row.plan->bounds.any_plan_ms)},
                        {"partition_ms", io::json_number(row.plan->bounds.partition_ms)}};
      item["partition_ratio"] = number_or_null(f.partition_ratio);
      item["any_plan_ratio"] = number_or_null(f.any_plan_ratio);
      item["peak_memory"] = {{"gpu", topology.gpu(f.memory.gpu).id},
                             {"peak_memory_bytes", io::json_number(f.memory.peak_bytes)},
                             {"memory_bytes", number_or_null(f.memory.capacity_bytes)},
                             {"fraction", number_or_null(f.memory.fraction())}};
    } else {
      for (const char* key : {"stages", "iteration_ms", "speedup", "bounds", "partition_ratio",
                              "any_plan_ratio", "peak_memory"}) {
        item[key] = nullptr;
      }
    }
    if (timing) item["planning_ms"] = io::json_number(row.planning_ms);
    item["error"] = row.plan ? nlohmann::ordered_json() : nlohmann::ordered_json(row.error);
    out.push_back(std::move(item));
  }
  return io::dump_json(out);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

// Numbers in their shortest round-tripping form, as in JSON; empty for none.
std::string csv_number(std::optional<double> value) {
  return value ? io::json_number(*value).dump() : std::string();
}

// `value` with `decimals` decimals: ratios line up in a column.
std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

}  // namespace

std::string comparison_csv(const Comparison& comparison, bool timing) {
  std::string out =
      "planner,policy,stages,iteration_ms,speedup,partition_ratio,any_plan_ratio,peak_memory_bytes,"
      "memory_bytes,memory_fraction";
  out += timing ? ",planning_ms,status,error\n" : ",status,error\n";
  for (std::size_t x = 0; x < comparison.rows.size(); ++x) {
    const CompareRow& row = comparison.rows[x];
    const CompareFigures& f = comparison.figures[x];
    std::vector<std::string> fields{row.label(), std::string(schedule::policy_name(row.policy))};
    if (row.plan) {
      fields.push_back(stages_text(*row.plan));
      fields.push_back(csv_number(row.plan->timeline.iteration_ms));
      fields.push_back(csv_number(f.speedup));
      fields.push_back(csv_number(f.partition_ratio));
      fields.push_back(csv_number(f.any_plan_ratio));
      fields.push_back(csv_number(f.memory.peak_bytes));
      fields.push_back(csv_number(f.memory.capacity_bytes));
      fields.push_back(csv_number(f.memory.fraction()));
    } else {
      fields.insert(fields.end(), 8, std::string());
    }
    if (timing) fields.push_back(csv_number(row.planning_ms));
    fields.emplace_back(row.plan ? "feasible" : "infeasible");
    fields.push_back(row.plan ? std::string() : row.error);
    std::string line;
    // Appended piece by piece: `"," + std::string&&` draws a false -Wrestrict from GCC 12 at
    // -O3 (GCC bug 105329).
    for (const auto& field : fields) {
      if (!line.empty()) line += ',';
      line += csv_field(field);
    }
    out += line + "\n";
  }
  return out;
}

std::string comparison_table(const Comparison& comparison, bool timing) {
  // Columns: header, right-aligned?; the last (status) is never padded.
  std::vector<std::pair<std::string, bool>> columns{
      {"planner", false}, {"policy", false},      {"stages", false},     {"iteration", true},
      {"speed-up", true}, {"vs partition", true}, {"vs any-plan", true}, {"peak memory", false}};
  if (timing) columns.emplace_back("planning", true);
  columns.emplace_back("status", false);
  std::vector<std::vector<std::string>> cells;
  for (std::size_t x = 0; x < comparison.rows.size(); ++x) {
    const CompareRow& row = comparison.rows[x];
    const CompareFigures& f = comparison.figures[x];
    std::vector<std::string> line{row.label(), std::string(schedule::policy_name(row.policy))};
    auto ratio = [](std::optional<double> value, const char* suffix) {
      return value ? fixed(*value, 2) + suffix : std::string("-");
    };
    if (row.plan) {
      line.push_back(stages_text(*row.plan));
      line.push_back(io::format_ms(row.plan->timeline.iteration_ms));
      line.push_back(ratio(f.speedup, "x"));
      line.push_back(ratio(f.partition_ratio, ""));
      line.push_back(ratio(f.any_plan_ratio, ""));
      std::string memory = io::format_bytes(f.memory.peak_bytes) + " / ";
      memory += f.memory.capacity_bytes ? io::format_bytes(*f.memory.capacity_bytes)
                                        : std::string("unlimited");
      if (auto fraction = f.memory.fraction()) memory += " (" + fixed(100 * *fraction, 1) + "%)";
      line.push_back(memory);
    } else {
      line.insert(line.end(), 6, "-");
    }
    if (timing) line.push_back(io::format_ms(row.planning_ms));
    line.push_back(row.plan ? "feasible" : "infeasible: " + row.error);
    cells.push_back(std::move(line));
  }
  std::vector<std::size_t> width(columns.size(), 0);
  for (std::size_t c = 0; c < columns.size(); ++c) {
    width[c] = columns[c].first.size();
    for (const auto& line : cells) width[c] = std::max(width[c], line[c].size());
  }
  auto render = [&](const std::vector<std::string>& line) {
    std::string out;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::size_t pad = width[c] - line[c].size();
      if (c + 1 == columns.size()) {
        out += line[c];
      } else if (columns[c].second) {
        out += std::string(pad, ' ') + line[c] + "  ";
      } else {
        out += line[c] + std::string(pad, ' ') + "  ";
      }
    }
    return out + "\n";
  };
  std::vector<std::string> header;
  header.reserve(columns.size());
  for (const auto& column : columns) header.push_back(column.first);
  std::string out = render(header);
  for (const auto& line : cells) out += render(line);
  return out;
}

const std::vector<std::string>& comparison_format_names() {
  static const std::vector<std::string> kNames{"table", "json", "csv"};
  return kNames;
}

std::string comparison_text(const Comparison& comparison, std::string_view format, bool timing,
                            const topology::Topology& topology) {
  if (format == "table") return comparison_table(comparison, timing);
  if (format == "json") return comparison_json(comparison, timing, topology);
  if (format == "csv") return comparison_csv(comparison, timing);
  throw UsageError("unknown comparison format \"" + std::string(format) + "\"");
}

std::optional<std::string> comparison_summary(const Comparison& comparison) {
  if (!comparison.fastest) return std::nullopt;
  auto run = [&](std::size_t x) {
    const CompareRow& row = comparison.rows[x];
    return row.label() + " (" + std::string(schedule::policy_name(row.policy)) + ") " +
           io::format_ms(row.plan->timeline.iteration_ms);
  };
  std::string summary = "fastest: " + run(*comparison.fastest);
  if (comparison.fastest_baseline)
    summary += "; best baseline: " + run(*comparison.fastest_baseline);
  return summary;
}

}  // namespace pipeplan::report
