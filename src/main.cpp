// pipeplan's entry point: everything happens in cli::run.

#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "pipeplan/cli/cli.hpp"

int main(int argc, char** argv) {
  pipeplan::cli::keep_freed_memory();
  // A closed standard output must end in a write error (exit 5), not death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  return pipeplan::cli::run(args, std::cin, std::cout, std::cerr);
}
