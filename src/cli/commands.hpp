#pragma once
// Internal to the CLI layer: what every command gets, and how commands register.

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <spdlog/logger.h>
#include <string>

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"

namespace pipeplan::cli {

/// Streams and settings shared by all commands.
struct Context {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
  std::shared_ptr<spdlog::logger> log;
  bool quiet = false;

  /// Reads an input (`-` is `in`).
  io::Source read(const std::string& path) const { return io::read_source(path, in); }
  /// Writes `text` to `path` atomically, or to `out` when `path` is empty or `-`.
  void emit(const std::optional<std::string>& path, const std::string& text) const;
  /// A line of human summary on `err`, unless quiet.
  void say(const std::string& line) const;
};

/// What a parsed subcommand runs; returns the exit code.
using Action = std::function<int(Context&)>;

// Each registers its subcommand on `app`; when the subcommand is parsed it sets `action`.
void add_validate_command(CLI::App& app, Action& action);
void add_import_command(CLI::App& app, Action& action);
void add_plan_command(CLI::App& app, Action& action);
void add_simulate_command(CLI::App& app, Action& action);
void add_compare_command(CLI::App& app, Action& action);
void add_export_command(CLI::App& app, Action& action);
void add_model_command(CLI::App& app, Action& action);

/// Most micro-batches a plan may have: keeps the task count (4 S M) within int range and the
/// schedule within memory.
inline constexpr int kMaxMicroBatches = 1 << 20;

/// The micro-batch count: the `--micro-batches` flag, else the model's `micro_batches`
/// (checked against kMaxMicroBatches, an input error naming `model_path`), else a usage error.
int micro_batch_count(const std::optional<int>& flag, const model::Model& model, const std::string& model_path);

}  // namespace pipeplan::cli
