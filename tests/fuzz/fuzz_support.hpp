#pragma once
// Shared by the libFuzzer targets: what counts as a bug, and small helpers.
//
// A fuzz target feeds arbitrary bytes to one reader (or to the whole planning pipeline). The
// only acceptable failure is a `pipeplan::Error` whose exit code the target allows (an input
// error for a reader; also "no feasible plan" for the planner). Anything else (another
// exception, a broken invariant, a sanitizer report, a time-out or running out of memory) is a
// bug: the target aborts so that libFuzzer saves the input.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>

#include "pipeplan/error.hpp"

namespace pipeplan::fuzz {

/// Reports a bug found by a fuzz target and aborts, so that libFuzzer keeps the input.
[[noreturn]] inline void bug(const std::string& what) {
  std::fprintf(stderr, "pipeplan fuzz: BUG: %s\n", what.c_str());
  std::abort();
}

/// The fuzz input as text.
inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Runs `body`; returns normally when it succeeds or throws a `pipeplan::Error` with one of
/// the `allowed` exit codes, and aborts on anything else (another code, another exception).
template <typename Body>
bool expect_only(std::initializer_list<ExitCode> allowed, Body&& body) {
  try {
    body();
    return true;
  } catch (const Error& error) {
    for (ExitCode code : allowed) {
      if (error.code() == code) return false;
    }
    bug(std::string("unexpected exit code ") + std::to_string(static_cast<int>(error.code())) +
        ": " + error.what());
  } catch (const std::exception& error) {
    bug(std::string("unexpected exception: ") + error.what());
  }
}

}  // namespace pipeplan::fuzz
