#pragma once
// The repository's shipped examples, for tests that run over every one of them.

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "pipeplan/io/files.hpp"

namespace pipeplan::testing {

/// The source tree (examples/, tests/data/ ...).
inline std::filesystem::path source_dir() { return std::filesystem::path(PIPEPLAN_SOURCE_DIR); }

/// A file as an input source named after its file name.
inline io::Source load(const std::filesystem::path& path) {
  std::ifstream in(path);
  return io::source_from_text(path.filename().string(), {std::istreambuf_iterator<char>(in), {}});
}

/// The names (without `.json`) of the JSON files in `folder` of the source tree, sorted.
inline std::vector<std::string> stems(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / folder)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// A GoogleTest parameter name for an example's stem: every character that is not a letter or
/// digit becomes `_` (`two-node-nvlink-ib` -> `two_node_nvlink_ib`).
struct StemName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    std::string name = info.param;
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
  }
};

}  // namespace pipeplan::testing
