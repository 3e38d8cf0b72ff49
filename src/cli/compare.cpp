// `pipeplan compare MODEL TOPO [--micro-batches M] [--format table|json|csv] [--no-timing]
// [-o FILE]`: every planner of the planner table under each policy its row lists (spp under
// list, 1f1b and gpipe, each baseline under its default), scored by the same execution model,
// one row each.

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/format.hpp"
#include "pipeplan/report/summary.hpp"

namespace pipeplan::cli {
namespace {

struct CompareOptions {
  std::string model;
  std::string topology;
  std::optional<std::string> output;
  std::optional<int> micro_batches;
  std::string format = "table";
  bool no_timing = false;
};

// One planner run: its plan, or why it has none.
struct Row {
  std::string planner;
  schedule::Policy policy = schedule::Policy::kList;
  bool baseline = true;  // speed-ups are against the fastest baseline row
  std::optional<Plan> plan;
  std::string error;  // the InfeasibleError's message when there is no plan
  double planning_ms = 0;
};

// The used GPU closest to its capacity (largest peak / capacity; ties: the first in topology
// order). When no used GPU has a capacity, the one with the largest peak.
struct PeakMemory {
  int gpu = -1;
  double peak_bytes = 0;
  std::optional<double> capacity_bytes;
  [[nodiscard]] std::optional<double> fraction() const {
    if (!capacity_bytes || *capacity_bytes <= 0) return std::nullopt;
    return peak_bytes / *capacity_bytes;
  }
};

PeakMemory peak_memory(const Plan& plan, const topology::Topology& topology) {
  PeakMemory best;
  for (int g = 0; g < topology.size(); ++g) {
    const GpuUsage& usage = plan.timeline.gpus[static_cast<std::size_t>(g)];
    if (!usage.stage) continue;
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

// `0-12x2 13-47x1`: layer ranges and replica counts.
std::string stages_text(const Plan& plan) {
  std::string out;
  for (const Stage& stage : plan.stages) {
    out += (out.empty() ? "" : " ") + std::to_string(stage.first_layer) + "-" +
           std::to_string(stage.last_layer) + "x" + std::to_string(stage.gpus.size());
  }
  return out;
}

// The figures every format prints, derived once.
struct Figures {
  std::optional<double> speedup;          // best baseline / this row
  std::optional<double> partition_ratio;  // iteration / partition_ms
  std::optional<double> any_plan_ratio;   // iteration / any_plan_ms
  PeakMemory memory;
};

Figures figures(const Row& row, std::optional<double> best_baseline_ms,
                const topology::Topology& topology) {
  Figures f;
  if (!row.plan) return f;
  const double iteration = row.plan->timeline.iteration_ms;
  const Bounds& bounds = row.plan->bounds;
  if (best_baseline_ms) f.speedup = report::bound_ratio(*best_baseline_ms, iteration);
  f.partition_ratio = report::bound_ratio(iteration, bounds.partition_ms);
  f.any_plan_ratio = report::bound_ratio(iteration, bounds.any_plan_ms);
  f.memory = peak_memory(*row.plan, topology);
  return f;
}

nlohmann::ordered_json number_or_null(std::optional<double> value) {
  return value ? io::json_number(*value) : nlohmann::ordered_json();
}

std::string render_json(const std::vector<Row>& rows, const std::vector<Figures>& all, bool timing,
                        const topology::Topology& topology) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (std::size_t x = 0; x < rows.size(); ++x) {
    const Row& row = rows[x];
    const Figures& f = all[x];
    nlohmann::ordered_json item;
    item["planner"] = row.planner;
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

// A CSV field: quoted (with doubled quotes) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Numbers in their shortest round-tripping form, as in JSON; empty for none.
std::string csv_number(std::optional<double> value) {
  return value ? io::json_number(*value).dump() : std::string();
}

std::string render_csv(const std::vector<Row>& rows, const std::vector<Figures>& all, bool timing) {
  std::string out =
      "planner,policy,stages,iteration_ms,speedup,partition_ratio,any_plan_ratio,peak_memory_bytes,"
      "memory_bytes,memory_fraction";
  out += timing ? ",planning_ms,status,error\n" : ",status,error\n";
  for (std::size_t x = 0; x < rows.size(); ++x) {
    const Row& row = rows[x];
    const Figures& f = all[x];
    std::vector<std::string> fields{row.planner, std::string(schedule::policy_name(row.policy))};
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

// `value` with `decimals` decimals: ratios line up in a column.
std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string render_table(const std::vector<Row>& rows, const std::vector<Figures>& all,
                         bool timing) {
  // Columns: header, right-aligned?; the last (status) is never padded.
  std::vector<std::pair<std::string, bool>> columns{
      {"planner", false}, {"policy", false},      {"stages", false},     {"iteration", true},
      {"speed-up", true}, {"vs partition", true}, {"vs any-plan", true}, {"peak memory", false}};
  if (timing) columns.emplace_back("planning", true);
  columns.emplace_back("status", false);
  std::vector<std::vector<std::string>> cells;
  for (std::size_t x = 0; x < rows.size(); ++x) {
    const Row& row = rows[x];
    const Figures& f = all[x];
    std::vector<std::string> line{row.planner, std::string(schedule::policy_name(row.policy))};
    auto ratio = [](std::optional<double> value, const char* suffix) {
      return value ? fixed(*value, 2) + suffix : std::string("-");
    };
    if (row.plan) {
      line.push_back(stages_text(*row.plan));
      line.push_back(report::format_ms(row.plan->timeline.iteration_ms));
      line.push_back(ratio(f.speedup, "x"));
      line.push_back(ratio(f.partition_ratio, ""));
      line.push_back(ratio(f.any_plan_ratio, ""));
      std::string memory = report::format_bytes(f.memory.peak_bytes) + " / ";
      memory += f.memory.capacity_bytes ? report::format_bytes(*f.memory.capacity_bytes)
                                        : std::string("unlimited");
      if (auto fraction = f.memory.fraction()) memory += " (" + fixed(100 * *fraction, 1) + "%)";
      line.push_back(memory);
    } else {
      line.insert(line.end(), 6, "-");
    }
    if (timing) line.push_back(report::format_ms(row.planning_ms));
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
  for (const auto& column : columns) header.push_back(column.first);
  std::string out = render(header);
  for (const auto& line : cells) out += render(line);
  return out;
}

int run_compare(const CompareOptions& options, Context& context) {
  context.declare({{"MODEL", options.model}, {"TOPO", options.topology}}, {{"-o", options.output}});
  model::Model model = model::read_model(context.read("MODEL"));
  topology::Topology topology = topology::read_topology(context.read("TOPO"), model.profile_device);
  const int micro_batches = micro_batch_count(options.micro_batches, model, options.model);

  // Every planner of the table under each of the policies its row lists for compare.
  std::vector<Row> rows;
  for (const planners::PlannerRow& planner : planners::planner_table()) {
    for (schedule::Policy policy : planner.compare_policies) {
      rows.push_back(Row{std::string(planner.name), policy, planner.baseline, std::nullopt, {}, 0});
    }
  }
  const planners::Request request{model, topology, micro_batches};
  for (Row& row : rows) {
    const auto started = std::chrono::steady_clock::now();
    try {
      row.plan = planners::make_plan(row.planner, request, row.policy);
    } catch (const InfeasibleError& error) {
      row.error = error.what();
    }
    row.planning_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    context.log->debug("{} ({}): {}", row.planner, schedule::policy_name(row.policy),
                       row.plan ? report::format_ms(row.plan->timeline.iteration_ms) : row.error);
  }

  std::optional<double> best_baseline_ms;
  const Row* best_baseline = nullptr;
  const Row* best = nullptr;
  for (const Row& row : rows) {
    if (!row.plan) continue;
    const double iteration = row.plan->timeline.iteration_ms;
    if (!best || iteration < best->plan->timeline.iteration_ms) best = &row;
    if (row.baseline && (!best_baseline || iteration < *best_baseline_ms)) {
      best_baseline = &row;
      best_baseline_ms = iteration;
    }
  }
  std::vector<Figures> all;
  for (const Row& row : rows) all.push_back(figures(row, best_baseline_ms, topology));

  const bool timing = !options.no_timing;
  std::string text;
  if (options.format == "json") {
    text = render_json(rows, all, timing, topology);
  } else if (options.format == "csv") {
    text = render_csv(rows, all, timing);
  } else {
    text = render_table(rows, all, timing);
  }
  // Without any plan the run fails (exit 4): the rows still explain why on standard output,
  // but an output file is left as it was, like every failed run leaves its output.
  const bool to_file = options.output && *options.output != "-";
  if (best || !to_file) {
    context.emit("-o", text);
    context.commit();
  }

  if (!best) {
    throw InfeasibleError("no planner found a plan that fits; " + rows.front().planner + ": " +
                          rows.front().error);
  }
  std::string summary = "fastest: " + best->planner + " (" +
                        std::string(schedule::policy_name(best->policy)) + ") " +
                        report::format_ms(best->plan->timeline.iteration_ms);
  if (best_baseline) {
    summary += "; best baseline: " + best_baseline->planner + " (" +
               std::string(schedule::policy_name(best_baseline->policy)) + ") " +
               report::format_ms(*best_baseline_ms);
  }
  context.say(summary);
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Run every planner on MODEL and TOPO and compare their plans under the same execution model");
  sub->add_option("MODEL", options->model, "Model profile (model.json, - for standard input)")
      ->required();
  sub->add_option("TOPO", options->topology, "Cluster topology (topo.json)")->required();
  sub->add_option("-o,--output", options->output,
                  "Write the comparison here instead of standard output")
      ->check(output_path, "FILE");
  sub->add_option("-m,--micro-batches", options->micro_batches,
                  "Micro-batches per iteration (overrides the model's)")
      ->transform(decimal_integer(1, kMaxMicroBatches));
  sub->add_option("-f,--format", options->format, "Output format: table (default), json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  sub->footer([] { return planners_help(true); });
  sub->add_flag(
      "--no-timing", options->no_timing,
      "Leave out the planning-time column, so that the output is byte-for-byte reproducible");
  sub->callback([options, &action] {
    action = [options](Context& context) { return run_compare(*options, context); };
  });
}

}  // namespace pipeplan::cli
