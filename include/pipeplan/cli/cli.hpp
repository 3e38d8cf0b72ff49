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

}  // namespace pipeplan::cli
