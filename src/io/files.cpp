// Input reading and atomic output writing (temporary file in the same folder, then rename).

#include "pipeplan/io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>

#include "pipeplan/error.hpp"

namespace pipeplan::io {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

[[noreturn]] void refuse_size(const std::string& name) {
  throw InputError(name + ": larger than " + std::to_string(kMaxInputBytes >> 30) +
                   " GiB, refusing to read it");
}

// Reads a whole stream, refusing more than kMaxInputBytes (before holding them).
std::string read_stream(std::istream& in, const std::string& name) {
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    const auto count = static_cast<std::size_t>(in.gcount());
    if (text.size() + count > kMaxInputBytes) refuse_size(name);
    text.append(buffer, count);
  }
  if (in.bad()) throw InputError(name + ": cannot read: " + errno_text(errno));
  return text;
}

// Writes all of `content` to `fd`; false on failure (errno set).
bool write_all(int fd, std::string_view content) {
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
  return true;
}

}  // namespace

Source read_source(const std::string& path, std::istream& standard_input) {
  if (path == "-") return Source{"<stdin>", read_stream(standard_input, "<stdin>")};
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw InputError(path + ": cannot read: is a directory");
  }
  // A regular file's size is known: a larger one is refused without reading it.
  if (std::filesystem::is_regular_file(path, error)) {
    const std::uintmax_t size = std::filesystem::file_size(path, error);
    if (!error && size > kMaxInputBytes) refuse_size(path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read: " + errno_text(errno));
  return Source{path, read_stream(in, path)};
}

Source source_from_text(std::string name, std::string text) {
  return Source{std::move(name), std::move(text)};
}

namespace {

// One output on its way: a temporary file to rename over `target`, or a special file written
// directly.
struct Pending {
  const Output* output;
  std::filesystem::path target;  // the path with a final symbolic link resolved
  bool direct = false;           // exists and is not a regular file: written in place
  std::string temp;              // the temporary file, while it exists
};

[[noreturn]] void fail_write(const std::string& path, int error) {
  throw OutputError(path + ": cannot write: " + errno_text(error));
}

// Resolves a symbolic link (so that the rename replaces its target, not the link) and refuses
// a directory.
Pending prepare(const Output& output) {
  if (output.path.empty()) throw OutputError("cannot write: empty output path");
  Pending pending{&output, output.path, false, {}};
  std::error_code error;
  if (std::filesystem::is_symlink(pending.target, error)) {
    auto resolved = std::filesystem::canonical(pending.target, error);
    if (!error) pending.target = resolved;
  }
  struct stat info {};
  if (::stat(pending.target.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) throw OutputError(output.path + ": cannot write: is a directory");
    pending.direct = !S_ISREG(info.st_mode);
  }
  return pending;
}

// Longest file name in `folder` (NAME_MAX, 255 on Linux file systems).
std::size_t name_max(const std::filesystem::path& folder) {
  const long limit = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  return limit > 0 ? static_cast<std::size_t>(limit) : 255;
}

// Writes the pieces it is handed to a file on a thread of its own, one piece while the next is
// made: two buffers, swapped (no copy). Stops its thread when destroyed. Where no thread can be
// started, each piece is written as it is taken.
class BackgroundWriter {
 public:
  explicit BackgroundWriter(int fd) : fd_(fd) {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error&) {
      // No thread: `take` writes in place.
    }
  }
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;
  BackgroundWriter(BackgroundWriter&&) = delete;
  BackgroundWriter& operator=(BackgroundWriter&&) = delete;
  ~BackgroundWriter() { stop(); }

  // Takes `piece` once the piece before is written; leaves `piece` empty.
  void take(std::string& piece) {
    if (!thread_.joinable()) {
      if (error_ == 0 && !write_all(fd_, piece)) error_ = errno;
      piece.clear();
      return;
    }
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !full_; });
    std::swap(piece, writing_);
    piece.clear();
    full_ = true;
    changed_.notify_all();
  }
  // Waits for the last piece and stops; false when a write failed (errno set).
  bool finish() {
    stop();
    errno = error_;
    return error_ == 0;
  }

 private:
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return !full_; });
      done_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return full_ || done_; });
      if (!full_) return;  // done, nothing left
      lock.unlock();
      // After a failure the rest is not written (the file is removed), only taken.
      const bool ok = error_ == 0 && write_all(fd_, writing_);
      const int saved = errno;
      lock.lock();
      if (!ok && error_ == 0) error_ = saved;
      writing_.clear();
      full_ = false;
      changed_.notify_all();
    }
  }

  int fd_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string writing_;  // the piece being written, while full_
  bool full_ = false;
  bool done_ = false;
  int error_ = 0;       // the first write's errno, set by the writing thread only
  std::thread thread_;  // started once the members above exist
};

// Writes `output`'s content to `fd`: the whole string, or what its producer makes, written on
// a second thread as it is made. False on a write failure (errno set); what the producer throws
// propagates (the writing thread stopped first).
bool write_content(int fd, const Output& output) {
  if (!output.produce) return write_all(fd, output.content);
  BackgroundWriter writer(fd);
  output.produce([&](std::string& piece) { writer.take(piece); });
  return writer.finish();
}

// `write_content`, closing `fd` before what the producer throws propagates.
bool write_content_or_close(int fd, const Output& output) {
  try {
    return write_content(fd, output);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

// Writes `pending`'s content to a new temporary file next to its target (with the target's
// permissions when it exists, else those a new file gets); sets `pending.temp`.
void write_temporary(Pending& pending) {
  std::filesystem::path folder = pending.target.parent_path();
  if (folder.empty()) folder = ".";
  // `.name.tmp.XXXXXX` when it fits the file system's name length, else a short name.
  // Appended piece by piece: `"." + std::string&&` draws a false -Wrestrict from GCC 12 at -O3
  // (GCC bug 105329).
  std::string name = ".";
  name += pending.target.filename().string();
  name += ".tmp.XXXXXX";
  if (name.size() > name_max(folder)) name = ".pipeplan.tmp.XXXXXX";
  std::string temp = (folder / name).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) fail_write(pending.output->path, errno);
  pending.temp = temp;
  struct stat info {};
  mode_t mode = 0;
  if (::stat(pending.target.c_str(), &info) == 0) {
    mode = info.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  bool ok =
      ::fchmod(fd, mode) == 0 && write_content_or_close(fd, *pending.output) && ::fsync(fd) == 0;
  int saved = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok) fail_write(pending.output->path, saved);
}

// Writes a device or pipe in place: it cannot be replaced, only written.
void write_direct(const Pending& pending) {
  const int fd = ::open(pending.target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) fail_write(pending.output->path, errno);
  const bool ok = write_content_or_close(fd, *pending.output);
  const int saved = errno;
  ::close(fd);
  if (!ok) fail_write(pending.output->path, saved);
}

}  // namespace

void write_files_atomically(const std::vector<Output>& outputs,
                            const std::function<void()>& before_renames) {
  std::vector<Pending> pending;
  pending.reserve(outputs.size());
  // Removes the temporary files not yet renamed, on every way out.
  struct Cleanup {
    std::vector<Pending>& pending;
    ~Cleanup() {
      for (const Pending& p : pending) {
        if (!p.temp.empty()) ::unlink(p.temp.c_str());
      }
    }
  } cleanup{pending};

  for (const Output& output : outputs) pending.push_back(prepare(output));
  for (Pending& p : pending) {
    if (!p.direct) write_temporary(p);
  }
  if (before_renames) before_renames();
  for (const Pending& p : pending) {
    if (p.direct) write_direct(p);
  }
  for (Pending& p : pending) {
    if (p.temp.empty()) continue;
    if (::rename(p.temp.c_str(), p.target.c_str()) != 0) fail_write(p.output->path, errno);
    p.temp.clear();
  }
}

std::string whole_text(const TextProducer& produce, std::size_t reserve) {
  std::string text;
  text.reserve(reserve);
  produce([&](std::string& piece) {
    text += piece;
    piece.clear();
  });
  return text;
}

void write_file_atomically(const std::string& path, const std::string& content) {
  write_files_atomically({Output{path, content, {}}});
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat info_a {
  }, info_b{};
  const bool exists_a = ::stat(a.c_str(), &info_a) == 0;
  const bool exists_b = ::stat(b.c_str(), &info_b) == 0;
  if ((exists_a && !S_ISREG(info_a.st_mode)) || (exists_b && !S_ISREG(info_b.st_mode))) {
    return false;
  }
  if (exists_a && exists_b) return info_a.st_dev == info_b.st_dev && info_a.st_ino == info_b.st_ino;
  if (exists_a != exists_b) return false;
  std::error_code error_a, error_b;
  const auto canonical_a = std::filesystem::weakly_canonical(a, error_a);
  const auto canonical_b = std::filesystem::weakly_canonical(b, error_b);
  if (error_a || error_b) return a == b;
  return canonical_a == canonical_b;
}

}  // namespace pipeplan::io
