// Argument parsing, dispatch and the single place where errors become messages and exit codes.

#include "pipeplan/cli/cli.hpp"

#include <spdlog/sinks/ostream_sink.h>

#include <iostream>
#include <ostream>

#include "commands.hpp"
#include "pipeplan/error.hpp"
#include "pipeplan/io/files.hpp"
#include "pipeplan/version.hpp"

namespace pipeplan::cli {

void Context::emit(const std::optional<std::string>& path, const std::string& text) const {
  if (!path || path->empty() || *path == "-") {
    out << text;
    out.flush();
    if (!out) throw OutputError("cannot write standard output");
    return;
  }
  io::write_file_atomically(*path, text);
}

int micro_batch_count(const std::optional<int>& flag, const model::Model& model, const std::string& model_path) {
  if (flag) return *flag;
  if (!model.micro_batches) {
    throw UsageError("no micro-batch count: pass --micro-batches or set \"micro_batches\" in " + model_path);
  }
  if (*model.micro_batches > kMaxMicroBatches) {
    throw InputError(model_path, "/micro_batches", "must be at most " + std::to_string(kMaxMicroBatches));
  }
  return static_cast<int>(*model.micro_batches);
}

void Context::say(const std::string& line) const {
  if (!quiet) err << line << '\n';
}

namespace {

// One line, whatever the message holds.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
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

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    const CLI::App* target = &app;
    for (const CLI::App* sub = target; sub != nullptr;) {
      target = sub;
      auto parsed = sub->get_subcommands();
      sub = parsed.empty() ? nullptr : parsed.front();
    }
    out << target->help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& version) {
    out << version.what() << '\n';
    return 0;
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
    return action(context);
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
