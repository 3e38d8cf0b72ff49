#pragma once
/// \file
/// The command-line layer: the only place that parses arguments, catches errors, prints the
/// one-line error message and chooses the exit code (spec sections 6 and 7).

#include <iosfwd>
#include <string>
#include <vector>

namespace pipeplan::cli {

/// Runs pipeplan with `args` (argv without the program name). `in` is what `-` reads, JSON
/// goes to `out`, summaries, logs and errors to `err`. Returns the process exit code.
int run(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
        std::ostream& err);

/// Sets the C library's allocator to keep the memory the process frees (glibc only; elsewhere
/// nothing): a search makes and drops many large vectors, which by default are mapped and
/// faulted in afresh each time. For a process that plans and exits: the entry point and the
/// benchmarks call it first.
void keep_freed_memory();

}  // namespace pipeplan::cli
