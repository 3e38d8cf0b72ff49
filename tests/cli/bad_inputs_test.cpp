// The bad-input corpus, tests/data/bad/<case>/ (format in tests/data/bad/README.md): every
// case runs `pipeplan --quiet <args>` in-process from inside its folder and must end with its
// exact exit code and one-line message, print nothing else, and leave its output folder as it
// was.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "pipeplan/cli/cli.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;

const fs::path& corpus_folder() {
  static const fs::path folder = fs::path(PIPEPLAN_SOURCE_DIR) / "tests" / "data" / "bad";
  return folder;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every occurrence of `from` in `text` replaced by `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The lines of `text`, without their line ends; a final line end ends the last line.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The files under `folder` (relative paths) with their contents; empty for a missing folder.
std::map<std::string, std::string> snapshot(const fs::path& folder) {
  std::map<std::string, std::string> files;
  if (!fs::is_directory(folder)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    const std::string name = fs::relative(entry.path(), folder).string();
    files[name] = entry.is_regular_file() ? read_file(entry.path()) : std::string("<folder>");
  }
  return files;
}

// Runs from inside `folder` and goes back to where it was, also when a test fails.
class WorkingFolder {
 public:
  explicit WorkingFolder(const fs::path& folder) : previous_(fs::current_path()) {
    fs::current_path(folder);
  }
  ~WorkingFolder() { fs::current_path(previous_); }
  WorkingFolder(const WorkingFolder&) = delete;
  WorkingFolder& operator=(const WorkingFolder&) = delete;

 private:
  fs::path previous_;
};

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(corpus_folder())) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The command a case runs: the first argument that is not an option.
std::string command_of(const std::string& name) {
  for (const std::string& arg : lines_of(read_file(corpus_folder() / name / "args"))) {
    if (!arg.empty() && arg[0] != '-') return arg;
  }
  return "";
}

class BadInputTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    folder_ = corpus_folder() / GetParam();
    tmp_ = fs::temp_directory_path() /
           ("pipeplan-bad-" + std::to_string(::getpid()) + "-" + GetParam());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    if (fs::is_directory(folder_ / "tmp")) {
      fs::copy(folder_ / "tmp", tmp_, fs::copy_options::recursive);
    }
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // `text` with the placeholder {tmp} replaced by this case's output folder.
  [[nodiscard]] std::string expand(const std::string& text) const {
    return replace_all(text, "{tmp}", tmp_.string());
  }

  fs::path folder_;
  fs::path tmp_;
};

TEST_P(BadInputTest, FailsWithItsExactMessage) {
  ASSERT_TRUE(fs::is_regular_file(folder_ / "args")) << folder_;
  ASSERT_TRUE(fs::is_regular_file(folder_ / "expected.txt")) << folder_;
  std::vector<std::string> args{"--quiet"};
  for (const std::string& arg : lines_of(read_file(folder_ / "args"))) args.push_back(expand(arg));
  const std::vector<std::string> expected = lines_of(read_file(folder_ / "expected.txt"));
  ASSERT_EQ(expected.size(), 2u) << "expected.txt holds the exit code and the message line";
  const int expected_code = std::stoi(expected[0]);
  const std::string expected_err = expand(expected[1]) + "\n";
  const std::string expected_out =
      fs::exists(folder_ / "stdout.txt") ? expand(read_file(folder_ / "stdout.txt")) : "";
  const auto tmp_before = snapshot(tmp_);

  std::istringstream in(fs::exists(folder_ / "stdin") ? read_file(folder_ / "stdin") : "");
  std::ostringstream out, err;
  int code = 0;
  {
    const WorkingFolder inside(folder_);
    code = run(args, in, out, err);
  }
  EXPECT_EQ(code, expected_code);
  EXPECT_EQ(err.str(), expected_err);
  EXPECT_EQ(out.str(), expected_out);
  EXPECT_NE(code, 0) << "every case of the corpus must fail";
  // A failed run writes no output file, leaves no temporary file and changes no existing file.
  EXPECT_EQ(snapshot(tmp_), tmp_before);
}

// gtest names allow letters, digits and underscores only.
std::string test_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string name = param.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInputTest, ::testing::ValuesIn(case_names()), test_name);

TEST(BadInputCorpusTest, CoversEveryCommandWithItsOwnMessages) {
  const std::vector<std::string> names = case_names();
  EXPECT_GE(names.size(), 60u);
  std::map<std::string, int> per_command;
  std::set<std::pair<std::string, std::string>> outcomes;
  for (const std::string& name : names) {
    const std::string command = command_of(name);
    ++per_command[command];
    const bool fresh =
        outcomes.emplace(command, read_file(corpus_folder() / name / "expected.txt")).second;
    EXPECT_TRUE(fresh) << name << ": another " << command << " case has the same outcome";
  }
  for (const char* command : {"validate", "plan", "simulate", "import", "compare"}) {
    EXPECT_GE(per_command[command], 5) << command;
  }
}

// One structural checker (simulate::check_structure) serves every reader of a plan: every
// corrupted plan of the corpus that `export` refuses when it reads the plan alone is refused
// with the same line when the model and topology are given too. The one allowed difference:
// an unknown GPU id names the list it was looked up in.
TEST(BadInputCorpusTest, APlanIsRefusedAlikeWithAndWithoutItsInputs) {
  int compared = 0;
  for (const std::string& name : case_names()) {
    const fs::path folder = corpus_folder() / name;
    if (!fs::exists(folder / "plan.json") || !fs::exists(folder / "model.json") ||
        !fs::exists(folder / "topo.json")) {
      continue;
    }
    const WorkingFolder here(folder);
    std::istringstream in;
    std::ostringstream out, alone, checked;
    const int alone_code =
        run({"--quiet", "export", "plan.json", "--format", "svg"}, in, out, alone);
    if (alone_code == 0) continue;
    const int checked_code = run({"--quiet", "export", "plan.json", "--format", "svg", "--model",
                                  "model.json", "--topology", "topo.json"},
                                 in, out, checked);
    EXPECT_EQ(checked_code, alone_code) << name;
    EXPECT_EQ(replace_all(checked.str(), "(not in the topology)", "(not in /gpus)"), alone.str())
        << name;
    ++compared;
  }
  EXPECT_GE(compared, 15);
}

}  // namespace
}  // namespace pipeplan::cli
