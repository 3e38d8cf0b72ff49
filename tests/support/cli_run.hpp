#pragma once
// Runs the command line in-process (cli::run) with a given standard input, for the CLI tests.

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

}  // namespace pipeplan::testing
