#pragma once
/// \file
/// Reading inputs (files or standard input) and writing outputs atomically.

#include <istream>
#include <string>

namespace pipeplan::io {

/// Largest input accepted, in bytes (256 MiB); a larger file is an input error, not an
/// allocation. Real inputs are far smaller: a plan at the planners' task limit is about
/// 45 MiB, a model of a million layers about 100 MiB.
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 28;

/// The text of one input together with the name used for it in messages.
struct Source {
  std::string name;  ///< The path as given, or `<stdin>` for `-`.
  std::string text;  ///< The whole content.
};

/// Reads `path` whole; `-` reads `standard_input`. Throws `InputError` (exit 3) when the path
/// cannot be read, is a directory, or is larger than `kMaxInputBytes`.
Source read_source(const std::string& path, std::istream& standard_input);

/// Makes a `Source` from text already in memory (tests, generated inputs).
Source source_from_text(std::string name, std::string text);

/// Writes `content` to `path` completely or not at all: a regular file (or a new one) is
/// written to a temporary file in the same folder and renamed over the target; a path that
/// exists and is not a regular file (`/dev/null`, a pipe) is written directly. Throws
/// `OutputError` (exit 5) on failure, leaving an existing file untouched.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace pipeplan::io
