// What the docs quote of the README's example (BERT-48 on two 8-GPU nodes) is what pipeplan
// prints for it today: docs/formats.md quotes the SVG's figures line. A plan that changes makes
// this test fail until the quote (and docs/report.png, docs/hacking.md) follows.

#include <gtest/gtest.h>

#include <string>

#include "../support/cli_run.hpp"
#include "../support/examples.hpp"
#include "../support/temp_folder.hpp"

namespace pipeplan::cli {
namespace {

using pipeplan::testing::run_cli;
using pipeplan::testing::source_dir;

class DocsQuotesTest : public pipeplan::testing::TempFolderTest {};

// `text` with every run of whitespace (line breaks and indentation of the Markdown source) made
// one space.
std::string one_line(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return out;
}

TEST_F(DocsQuotesTest, FormatsQuotesTheSvgFiguresOfTheReadmeExample) {
  const std::string plan = (folder_ / "bert-48.plan.json").string();
  const auto planned = run_cli(
      {"plan", (source_dir() / "examples/models/bert-48.json").string(),
       (source_dir() / "examples/topologies/two-node-nvlink-ib.json").string(), "-q", "-o", plan});
  ASSERT_EQ(planned.code, 0) << planned.err;
  const auto exported = run_cli({"export", plan, "--format", "svg"});
  ASSERT_EQ(exported.code, 0) << exported.err;

  const std::size_t start = exported.out.find(">iteration ");
  ASSERT_NE(start, std::string::npos) << exported.out;
  const std::string figures =
      exported.out.substr(start + 1, exported.out.find('<', start) - start - 1);
  const std::string quote = "(`" + figures + "` for the README's BERT-48 example)";
  EXPECT_NE(one_line(read(source_dir() / "docs/formats.md")).find(quote), std::string::npos)
      << "docs/formats.md's svg section should quote " << quote;
}

}  // namespace
}  // namespace pipeplan::cli
