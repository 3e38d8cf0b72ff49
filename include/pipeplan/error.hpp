#pragma once
/// \file
/// The error types of pipeplan. Every failure that reaches a user is a `pipeplan::Error`
/// carrying the exit code of spec section 7; the CLI layer is the only place that catches
/// them and turns them into one line on standard error.

#include <stdexcept>
#include <string>

namespace pipeplan {

/// Process exit codes (spec section 7).
enum class ExitCode : int {
  kSuccess = 0,       ///< Everything worked.
  kInternal = 1,      ///< A bug: an internal invariant broke.
  kUsage = 2,         ///< Bad command line.
  kInvalidInput = 3,  ///< An input file is unreadable, malformed or violates the spec.
  kInfeasible = 4,    ///< No feasible plan (for example, nothing fits in GPU memory).
  kOutput = 5,        ///< An output could not be written.
  kCheckDiffers = 6,  ///< `plan --check` found a different plan.
};

/// Root of every pipeplan error. `what()` is the message without the `pipeplan: error: `
/// prefix; the CLI adds it.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  /// The exit code this error maps to.
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

/// The command line is wrong (exit 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::kUsage, message) {}
};

/// An input is unreadable or invalid (exit 3). The message names the file and, inside JSON,
/// the JSON pointer: `model.json: /layers/3/forward_ms: must be ...`.
class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(ExitCode::kInvalidInput, message) {}
  /// Builds `file: pointer: message` (the pointer part is left out when empty).
  InputError(const std::string& file, const std::string& pointer, const std::string& message)
      : Error(ExitCode::kInvalidInput, compose(file, pointer, message)) {}

  /// `file: pointer: message`, or `file: message` for an empty pointer.
  static std::string compose(const std::string& file, const std::string& pointer,
                             const std::string& message) {
    std::string out = file + ": ";
    if (!pointer.empty()) out += pointer + ": ";
    return out + message;
  }
};

/// No feasible plan exists for these inputs (exit 4).
class InfeasibleError : public Error {
 public:
  explicit InfeasibleError(const std::string& message) : Error(ExitCode::kInfeasible, message) {}
};

/// An output could not be written (exit 5).
class OutputError : public Error {
 public:
  explicit OutputError(const std::string& message) : Error(ExitCode::kOutput, message) {}
};

/// A broken internal invariant: a bug in pipeplan (exit 1).
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message)
      : Error(ExitCode::kInternal, "internal error: " + message) {}
};

}  // namespace pipeplan
