#pragma once
// Internal to the CLI layer: what every command gets, and how commands register.

#include <spdlog/logger.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/io/files.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"

namespace pipeplan::cli {

/// An input or output path of a command together with the name it has on the command line
/// (`MODEL`, `--check`, `-o`); absent when the option was not given.
struct NamedPath {
  std::string what;
  std::optional<std::string> path;
};

/// Streams and settings shared by all commands, and the one place where a command's inputs
/// are read and its outputs written. A command first declares its paths (`declare`), which
/// checks the rules that need no file content, before any work; it then reads its inputs by
/// name and hands over its outputs, which `commit` writes all or none.
class Context {
 public:
  Context(std::istream& input, std::ostream& output, std::ostream& errors,
          std::shared_ptr<spdlog::logger> logger, bool quiet_flag)
      : in(input), out(output), err(errors), log(std::move(logger)), quiet(quiet_flag) {}

  std::istream& in;
  std::ostream& out;
  std::ostream& err;
  std::shared_ptr<spdlog::logger> log;
  bool quiet = false;

  /// Declares the command's inputs and outputs. Throws `UsageError` (exit 2) when two inputs
  /// are `-` (standard input can be read once), an output path is empty, or two outputs, or an
  /// output and an input, name the same file (io::same_file). An output that is absent or `-`
  /// is standard output.
  void declare(std::vector<NamedPath> inputs, std::vector<NamedPath> outputs);
  /// Reads the declared input `what` (`-` is `in`).
  io::Source read(const std::string& what) const;
  /// Holds `text` for the declared output `what` until `commit`.
  void emit(const std::string& what, std::string text);
  /// Holds `produce` for the declared output `what`: its text is made during `commit`, as a
  /// file's is written (io::Output::produce), for a text too large to hold twice; standard
  /// output's is made whole first. What `produce` refers to must live until `commit`.
  void emit(const std::string& what, io::TextProducer produce);
  /// Writes what `emit` holds: every file to a temporary file, then standard output, then
  /// the renames (io::write_files_atomically). A command commits before it prints its
  /// summary; `cli::run` commits what is left after a command returns. Throws `OutputError`.
  void commit();
  /// A line of human summary on `err`, unless quiet; every line printable.
  void say(const std::string& line) const;

 private:
  const NamedPath& declared(const std::vector<NamedPath>& paths, const std::string& what) const;
  void hold(const std::string& what, io::Output output);

  std::vector<NamedPath> inputs_;
  std::vector<NamedPath> outputs_;
  std::vector<io::Output> files_;
  std::optional<io::Output> standard_output_;  // its path unused
};

/// A CLI11 transform accepting exactly the decimal integers `min` .. `max` (no sign, no `0x`,
/// `0b`, exponent or fraction, which CLI11's own conversion would accept, read as octal or
/// clamp); it rewrites the value without leading zeros.
CLI::Validator decimal_integer(std::int64_t min, std::int64_t max);

/// A CLI11 validator for an output path: a file or `-`, never empty.
std::string output_path(const std::string& value);

/// The planning options of spec 8.4 shared by `plan` and `compare`, as given.
struct PlanningOptions {
  std::optional<std::string> tensor_parallel;      ///< `--tensor-parallel LIST`.
  std::optional<std::string> context_parallel;     ///< `--context-parallel LIST` (spec 10.4).
  std::optional<std::string> recompute;            ///< `--recompute never|always|auto`.
  bool shard_optimizer = false;                    ///< `--shard-optimizer`.
  std::optional<std::string> optimizer;            ///< `--optimizer replicated|sharded|auto`.
  std::optional<std::string> sequence_parallel;    ///< `--sequence-parallel on|off|auto`.
  std::optional<std::string> selective_recompute;  ///< `--selective-recompute on|off|auto`.
  std::optional<int> pipeline_parallel;            ///< `--pipeline-parallel P` (megatron).
  std::optional<int> data_parallel;                ///< `--data-parallel D` (megatron).
  std::optional<int> first_stage_layers;           ///< `--first-stage-layers N` (megatron).
  std::optional<int> last_stage_layers;            ///< `--last-stage-layers N` (megatron).
  bool account_for_embedding = false;              ///< `--account-for-embedding` (megatron).
  bool account_for_loss = false;                   ///< `--account-for-loss` (megatron).
  bool uniform = false;                            ///< `--uniform`.
  std::optional<std::string> split_backward;       ///< `--split-backward never|auto` (spec 9.5).
  std::optional<int> virtual_stages;               ///< `--virtual-stages V` (spec 9.5).
};

/// Adds the planning options to a command.
void add_planning_options(CLI::App& command, PlanningOptions& options);

/// A `UsageError` naming the first planning option given that `planner` does not take (its
/// planner table row's `options`) and the planners that take it. O(options x planners).
void check_planner_options(const PlanningOptions& options, std::string_view planner);

/// Puts the given options into `request`; a `UsageError` for a malformed degree list. What they
/// leave open of the optimizer, sequence parallelism and selective recomputation is left to the
/// planners that choose settings (`Request::choose_settings`; spp).
void apply_planning_options(const PlanningOptions& options, planners::Request& request);

/// The planners of `planners::planner_table()` for a command's help, one line each: for `plan`
/// each planner's default schedule, for `compare` (`compare_rows`) the schedules it runs each
/// under (`compare_policies`), leaving out the planners without any (megatron, which compare
/// runs only in its `compare_variants`); then what the planner does.
std::string planners_help(bool compare_rows);

/// The policies of `schedule::policy_table()` for `plan`'s help, one line each: the
/// `--schedule` name, then what it does.
std::string schedules_help();

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
void add_topology_command(CLI::App& app, Action& action);

/// The micro-batch count: the `--micro-batches` flag, else the model's `micro_batches`
/// (checked against model::kMaxMicroBatches, an input error naming `model_path`), else a usage
/// error.
int micro_batch_count(const std::optional<int>& flag, const model::Model& model,
                      const std::string& model_path);

}  // namespace pipeplan::cli
