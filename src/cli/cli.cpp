// Argument parsing, dispatch and the single place where errors become messages and exit codes.

#include "pipeplan/cli/cli.hpp"

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <limits>
#include <ostream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/files.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/schedule/policy.hpp"
#include "pipeplan/version.hpp"

namespace pipeplan::cli {

// By default glibc maps each block past its mmap threshold afresh, and gives the freed memory at
// the heap's top back to the system, so every new schedule or replay is faulted in page by page
// again: 11% of a 16,384-GPU spp run's CPU time. Kept instead: blocks up to 32 MiB
// (glibc's largest threshold) come from the heap, and freed memory stays for the next one
// (measured in docs/performance.md, "Clusters of any size").
void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

void Context::declare(std::vector<NamedPath> inputs, std::vector<NamedPath> outputs) {
  std::erase_if(inputs, [](const NamedPath& input) { return !input.path; });
  const NamedPath* standard_input = nullptr;
  for (const NamedPath& input : inputs) {
    if (*input.path != "-") continue;
    if (standard_input) {
      throw UsageError(standard_input->what + " and " + input.what +
                       " cannot both be - (standard input)");
    }
    standard_input = &input;
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const NamedPath& output = outputs[o];
    if (!output.path || *output.path == "-") continue;
    if (output.path->empty()) throw UsageError(output.what + ": an empty path names no file");
    for (const NamedPath& input : inputs) {
      if (*input.path != "-" && io::same_file(*output.path, *input.path)) {
        throw UsageError(*output.path + ": both " + input.what + " and " + output.what +
                         " name this file; an output cannot overwrite an input");
      }
    }
    for (std::size_t earlier = 0; earlier < o; ++earlier) {
      const NamedPath& other = outputs[earlier];
      if (other.path && *other.path != "-" && io::same_file(*output.path, *other.path)) {
        throw UsageError(*output.path + ": both " + other.what + " and " + output.what +
                         " name this file; give each output a file of its own");
      }
    }
  }
  inputs_ = std::move(inputs);
  outputs_ = std::move(outputs);
}

const NamedPath& Context::declared(const std::vector<NamedPath>& paths,
                                   const std::string& what) const {
  for (const NamedPath& path : paths) {
    if (path.what == what) return path;
  }
  throw InternalError("the command did not declare " + what);
}

io::Source Context::read(const std::string& what) const {
  const NamedPath& input = declared(inputs_, what);
  return io::read_source(*input.path, in);
}

void Context::emit(const std::string& what, std::string text) {
  hold(what, io::Output{{}, std::move(text), {}});
}

void Context::emit(const std::string& what, io::TextProducer produce) {
  hold(what, io::Output{{}, {}, std::move(produce)});
}

void Context::hold(const std::string& what, io::Output output) {
  const NamedPath& declared_output = declared(outputs_, what);
  if (!declared_output.path || *declared_output.path == "-") {
    if (standard_output_) throw InternalError("two outputs to standard output");
    standard_output_ = std::move(output);
    return;
  }
  output.path = *declared_output.path;
  files_.push_back(std::move(output));
}

void Context::commit() {
  std::vector<io::Output> files = std::move(files_);
  std::optional<io::Output> standard_output = std::move(standard_output_);
  files_.clear();
  standard_output_.reset();
  io::write_files_atomically(files, [&] {
    if (!standard_output) return;
    // Made whole before any of it is written: a run that fails puts nothing on standard output.
    if (standard_output->produce)
      standard_output->content = io::whole_text(standard_output->produce);
    out << standard_output->content;
    out.flush();
    if (!out) throw OutputError("cannot write standard output");
  });
}

CLI::Validator decimal_integer(std::int64_t min, std::int64_t max) {
  const auto check = [min, max](std::string& value) {
    std::int64_t parsed = 0;
    const char* end = value.data() + value.size();
    const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    auto [ptr, error] = std::from_chars(value.data(), end, parsed);
    if (!digits || error != std::errc() || ptr != end || parsed < min || parsed > max) {
      return "must be an integer " +
             (max == std::numeric_limits<std::int64_t>::max()
                  ? ">= " + std::to_string(min)
                  : "from " + std::to_string(min) + " to " + std::to_string(max)) +
             ", got " + io::quote_for_message(value);
    }
    value = std::to_string(parsed);  // CLI11 would read a leading 0 as octal
    return std::string();
  };
  return CLI::Validator(check, max == std::numeric_limits<std::int64_t>::max()
                                   ? "INTEGER>=" + std::to_string(min)
                                   : std::to_string(min) + ".." + std::to_string(max));
}

std::string output_path(const std::string& value) {
  return value.empty() ? std::string("an empty path names no file (use - for standard output)")
                       : std::string();
}

int micro_batch_count(const std::optional<int>& flag, const model::Model& model,
                      const std::string& model_path) {
  if (flag) return *flag;
  if (!model.micro_batches) {
    throw UsageError("no micro-batch count: pass --micro-batches or set \"micro_batches\" in " +
                     model_path);
  }
  if (*model.micro_batches > model::kMaxMicroBatches) {
    throw InputError(model_path, "/micro_batches",
                     "must be at most " + std::to_string(model::kMaxMicroBatches));
  }
  return static_cast<int>(*model.micro_batches);
}

std::string planners_help(bool compare_rows) {
  std::vector<std::pair<std::string, std::string>> lines;  // name, schedules
  for (const planners::PlannerRow& row : planners::planner_table()) {
    std::string policies;
    if (compare_rows) {
      for (schedule::Policy policy : row.compare_policies) {
        policies += (policies.empty() ? "" : ", ") + std::string(schedule::policy_name(policy));
      }
      if (policies.empty()) continue;
    } else {
      policies = schedule::policy_name(row.default_policy);
    }
    lines.emplace_back(row.name, policies);
  }
  std::size_t name_width = 0, policy_width = 0;
  for (const auto& [name, policies] : lines) {
    name_width = std::max(name_width, name.size());
    policy_width = std::max(policy_width, policies.size());
  }
  std::string out = compare_rows
                        ? "Rows (a planner under each of its schedules, then what it does):"
                        : "Planners (--planner; the default schedule, then what it does):";
  for (std::size_t x = 0; x < lines.size(); ++x) {
    const auto& [name, policies] = lines[x];
    out += "\n  ";
    out += name;
    out += std::string(name_width - name.size() + 2, ' ');
    out += policies;
    out += std::string(policy_width - policies.size() + 2, ' ');
    out += planners::find_planner(name).description;
  }
  if (compare_rows) {
    out +=
        "\n  Then each under every other schedule that orders its stages differently: list, 1f1b"
        "\n  and gpipe; zb-h1 when the backward splits; for planners that place several stages"
        "\n  per GPU, zb-v, and interleaved-1f1b and looped-bfs with --virtual-stages"
        ".";
  }
  return out + "\n";
}

std::string schedules_help() {
  std::size_t name_width = 0;
  for (const schedule::PolicyRow& row : schedule::policy_table()) {
    name_width = std::max(name_width, row.name.size());
  }
  std::string out = "Schedules (--schedule; what each does):";
  for (const schedule::PolicyRow& row : schedule::policy_table()) {
    out += "\n  ";
    out += row.name;
    out += std::string(name_width - row.name.size() + 2, ' ');
    out += row.description;
  }
  return out + "\n";
}

void Context::say(const std::string& line) const {
  if (quiet) return;
  // Every line printable: names from the inputs may hold any byte.
  std::size_t start = 0;
  for (std::size_t end; (end = line.find('\n', start)) != std::string::npos; start = end + 1) {
    err << io::printable_line(std::string_view(line).substr(start, end - start)) << '\n';
  }
  err << io::printable_line(std::string_view(line).substr(start)) << '\n';
}

namespace {

// One printable line, whatever the message holds (io::printable_line).
std::string one_line(const std::string& text) { return io::printable_line(text); }

// A word that names no command (`plna`, or `import tensorflow`): name it and suggest the nearest
// command, before CLI11 reads it as a stray argument ("A subcommand is required").
void check_command_words(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* level = &app;
  std::string path;  // the command words matched so far, `import `
  for (const std::string& arg : args) {
    if (!arg.empty() && arg[0] == '-') continue;  // a flag (--quiet, --help)
    const auto subcommands = level->get_subcommands([](const CLI::App*) { return true; });
    if (subcommands.empty()) return;  // the command's own arguments from here on
    std::vector<std::string> names;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : subcommands) {
      names.push_back(sub->get_name());
      if (sub->get_name() == arg) next = sub;
    }
    if (next == nullptr) {
      const std::string_view best =
          io::nearest(arg, std::vector<std::string_view>(names.begin(), names.end()));
      std::string message = "unknown command " + io::quote_for_message(path + arg);
      if (!best.empty()) {
        message += " (did you mean \"" + path + std::string(best) + "\"?)";
      } else {
        std::string list;
        for (const std::string& name : names) {
          if (!list.empty()) list += ", ";
          list += path;
          list += name;
        }
        message += "; the commands are " + list;
      }
      throw UsageError(message);
    }
    level = next;
    path += arg + " ";
  }
}

// Help and version text on `out`; a failed write is exit 5 like any other output.
int print_text(std::ostream& out, std::ostream& err, const std::string& text) {
  out << text;
  out.flush();
  if (out) return 0;
  err << "pipeplan: error: cannot write standard output\n";
  return static_cast<int>(ExitCode::kOutput);
}

}  // namespace

int run(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
        std::ostream& err) {
  CLI::App app{"pipeplan: pipeline-parallel training planner", "pipeplan"};
  app.set_version_flag("--version", std::string("pipeplan ") + kVersion);
  app.require_subcommand(1);
  app.fallthrough();  // --quiet and --verbose also work after the subcommand
  bool quiet = false;
  bool verbose = false;
  app.add_flag("-q,--quiet", quiet, "Print nothing on standard error but errors");
  app.add_flag("-v,--verbose", verbose, "Print debug logs on standard error");
  app.footer(
      "Exit codes: 0 success, 1 internal error, 2 usage, 3 invalid input, 4 no feasible plan,\n"
      "5 cannot write output, 6 --check found a different plan.");

  Action action;
  add_plan_command(app, action);
  add_simulate_command(app, action);
  add_validate_command(app, action);
  add_import_command(app, action);
  add_compare_command(app, action);
  add_export_command(app, action);
  add_model_command(app, action);
  add_topology_command(app, action);

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    check_command_words(app, args);
  } catch (const UsageError& error) {
    err << "pipeplan: error: " << one_line(error.what()) << " (see pipeplan --help)\n";
    return static_cast<int>(ExitCode::kUsage);
  }
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    const CLI::App* target = &app;
    for (const CLI::App* sub = target; sub != nullptr;) {
      target = sub;
      auto parsed = sub->get_subcommands();
      sub = parsed.empty() ? nullptr : parsed.front();
    }
    return print_text(out, err, target->help());
  } catch (const CLI::CallForAllHelp&) {
    return print_text(out, err, app.help("", CLI::AppFormatMode::All));
  } catch (const CLI::CallForVersion& version) {
    return print_text(out, err, std::string(version.what()) + '\n');
  } catch (const CLI::ParseError& error) {
    err << "pipeplan: error: " << one_line(error.what()) << " (see pipeplan --help)\n";
    return static_cast<int>(ExitCode::kUsage);
  }

  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(err);
  auto logger = std::make_shared<spdlog::logger>("pipeplan", sink);
  logger->set_pattern("pipeplan: %l: %v");
  logger->set_level(verbose ? spdlog::level::debug
                            : (quiet ? spdlog::level::err : spdlog::level::warn));
  Context context{in, out, err, logger, quiet};
  try {
    if (!action) throw UsageError("no command given (see pipeplan --help)");
    const int code = action(context);
    context.commit();
    return code;
  } catch (const Error& error) {
    err << "pipeplan: error: " << one_line(error.what()) << '\n';
    return static_cast<int>(error.code());
  } catch (const std::bad_alloc&) {
    err << "pipeplan: error: out of memory\n";
    return static_cast<int>(ExitCode::kInternal);
  } catch (const std::exception& error) {
    err << "pipeplan: error: internal error: " << one_line(error.what()) << '\n';
    return static_cast<int>(ExitCode::kInternal);
  }
}

}  // namespace pipeplan::cli
