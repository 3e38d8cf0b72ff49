#pragma once
// Runs the command line in-process (cli::run) with a given standard input, for the CLI tests.

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/cli/cli.hpp"

namespace pipeplan::testing {

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

inline CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  const int code = cli::run(args, in, out, err);
  return CliResult{code, out.str(), err.str()};
}

/// Runs `command` in a shell and returns its exit status and standard output.
inline CliResult run_shell(const std::string& command) {
  CliResult result{-1, "", ""};
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    result.out.append(buffer, n);
  result.code = ::pclose(pipe);
  return result;
}

}  // namespace pipeplan::testing
