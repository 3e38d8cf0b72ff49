#pragma once
/// \file
/// Reading inputs (files or standard input) and writing outputs atomically.

#include <cstddef>
#include <functional>
#include <istream>
#include <string>
#include <vector>

namespace pipeplan::io {

/// Largest input accepted, in bytes (1 GiB); a larger file is an input error, not an
/// allocation. Real inputs are smaller: a plan at the planners' task limit
/// (`planners::kMaxPlanTasks`) is about 480 MiB, a model of a million layers about 100 MiB.
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

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

/// Takes a piece of a text, in order, and leaves the string empty (it may hand back another
/// buffer, whose capacity the next piece can reuse).
using TextSink = std::function<void(std::string& piece)>;

/// Makes a text by handing it to a sink piece by piece; may throw (nothing is then written).
using TextProducer = std::function<void(const TextSink& sink)>;

/// The whole text `produce` makes, in one string with `reserve` bytes reserved first. O(size).
std::string whole_text(const TextProducer& produce, std::size_t reserve = 0);

/// One output of a command: where it goes and what it holds.
struct Output {
  std::string path;     ///< A file path (never empty).
  std::string content;  ///< The whole content, when `produce` is empty.
  /// The content made as it is written, for a text too large to hold twice: a file's pieces
  /// are written by a second thread while the next is made (the kernel's copy of a plan of
  /// hundreds of MB takes as long as making its text).
  TextProducer produce;
};

/// Writes several outputs all or none: every regular file (or new one) is written to a
/// temporary file in its folder first; then `before_renames` runs (it writes standard output)
/// and the paths that exist and are not regular files (`/dev/null`, a pipe) are written
/// directly; only then are the temporary files renamed over their targets. A failure before
/// the renames (a missing folder, a full disk, `/dev/full`, a closed standard output) removes
/// every temporary file and leaves every existing file untouched; it throws `OutputError`
/// (exit 5), or whatever `before_renames` throws. A temporary name never exceeds the file
/// system's name length: a long target gets a short random name in its folder.
void write_files_atomically(const std::vector<Output>& outputs,
                            const std::function<void()>& before_renames = {});

/// Whether two paths name the same file: the same existing file (also through links), or the
/// same location once `.`, `..` and symbolic links are resolved. Paths that exist and are not
/// regular files (`/dev/null`, pipes) are never the same as anything: writing twice to them
/// harms nothing.
bool same_file(const std::string& a, const std::string& b);

}  // namespace pipeplan::io
