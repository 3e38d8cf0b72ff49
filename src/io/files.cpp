// Input reading and atomic output writing (temporary file in the same folder, then rename).

#include "pipeplan/io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "pipeplan/error.hpp"

namespace pipeplan::io {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

// Reads a whole stream, refusing more than kMaxInputBytes.
std::string read_stream(std::istream& in, const std::string& name) {
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxInputBytes) {
      throw InputError(name + ": larger than " + std::to_string(kMaxInputBytes >> 20) +
                       " MiB, refusing to read it");
    }
  }
  if (in.bad()) throw InputError(name + ": cannot read: " + errno_text(errno));
  return text;
}

// Writes all of `content` to `fd`; false on failure (errno set).
bool write_all(int fd, const std::string& content) {
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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read: " + errno_text(errno));
  return Source{path, read_stream(in, path)};
}

Source source_from_text(std::string name, std::string text) {
  return Source{std::move(name), std::move(text)};
}

void write_file_atomically(const std::string& path, const std::string& content) {
  auto fail = [&](int error) -> void {
    throw OutputError(path + ": cannot write: " + errno_text(error));
  };
  if (path.empty()) throw OutputError("cannot write: empty output path");

  // Resolve a symbolic link so that the rename replaces its target, not the link.
  std::filesystem::path target = path;
  std::error_code error;
  if (std::filesystem::is_symlink(target, error)) {
    auto resolved = std::filesystem::canonical(target, error);
    if (!error) target = resolved;
  }

  struct stat info {};
  bool exists = ::stat(target.c_str(), &info) == 0;
  if (exists && S_ISDIR(info.st_mode)) throw OutputError(path + ": cannot write: is a directory");
  if (exists && !S_ISREG(info.st_mode)) {
    // A device or a pipe: write directly, never rename over it.
    int fd = ::open(target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) fail(errno);
    bool ok = write_all(fd, content);
    int saved = errno;
    ::close(fd);
    if (!ok) fail(saved);
    return;
  }

  std::filesystem::path folder = target.parent_path();
  if (folder.empty()) folder = ".";
  std::string temp = (folder / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  int fd = ::mkstemp(temp.data());
  if (fd < 0) fail(errno);
  mode_t mode = 0;
  if (exists) {
    mode = info.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  bool ok = ::fchmod(fd, mode) == 0 && write_all(fd, content) && ::fsync(fd) == 0;
  int saved = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (ok && ::rename(temp.c_str(), target.c_str()) != 0) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    fail(saved);
  }
}

}  // namespace pipeplan::io
