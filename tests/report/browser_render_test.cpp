// A real browser renders the HTML report: headless Chromium takes a screenshot of the report
// for the README's example (BERT-48 on two 8-GPU nodes, `pipeplan plan
// examples/models/bert-48.json examples/topologies/two-node-nvlink-ib.json --report
// report.html`), and the PNG must have the requested size and show the chart (pixels in the
// forward and backward colours, and many distinct colours). Skipped without /usr/bin/chromium.
// The report and the screenshot stay in <build>/test-artefacts/; the screenshot is
// docs/report.png, which the README shows (docs/hacking.md says how to refresh it).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "../support/png.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/export.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::report {
namespace {

namespace fs = std::filesystem;

constexpr const char* kChromium = "/usr/bin/chromium";
constexpr int kWidth = 1280;
constexpr int kHeight = 900;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string shell_quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// Pixels within 12 of `rgb` on every channel.
std::size_t pixels_near(const testing::Image& image, int r, int g, int b) {
  std::size_t n = 0;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      if (std::abs(image.at(x, y, 0) - r) <= 12 && std::abs(image.at(x, y, 1) - g) <= 12 &&
          std::abs(image.at(x, y, 2) - b) <= 12) {
        ++n;
      }
    }
  }
  return n;
}

TEST(BrowserRenderTest, ChromiumDrawsTheHtmlReport) {
  if (!fs::exists(kChromium)) {
    GTEST_SKIP() << kChromium << " not found: install Debian's chromium to render the HTML report";
  }
  const fs::path examples = fs::path(PIPEPLAN_SOURCE_DIR) / "examples";
  const model::Model model = model::read_model(
      io::source_from_text("bert-48.json", slurp(examples / "models/bert-48.json")));
  const topology::Topology topology = topology::read_topology(io::source_from_text(
      "two-node-nvlink-ib.json", slurp(examples / "topologies/two-node-nvlink-ib.json")));
  const Plan plan =
      planners::make_plan("spp", {model, topology, static_cast<int>(*model.micro_batches)});

  const fs::path artefacts = fs::path(PIPEPLAN_BUILD_DIR) / "test-artefacts";
  fs::create_directories(artefacts);
  const fs::path html = artefacts / "report.html";
  const fs::path png = artefacts / "report.png";
  std::ofstream(html, std::ios::binary)
      << export_plan(make_view(plan, model, topology), ExportFormat::kHtml);
  fs::remove(png);
  const fs::path profile =
      fs::temp_directory_path() / ("pipeplan-chromium-" + std::to_string(::getpid()));
  fs::remove_all(profile);
  const std::string command = std::string("timeout 180 ") + kChromium +
                              " --headless --no-sandbox --disable-gpu --disable-quic "
                              "--no-first-run --disable-background-networking"
                              " --disable-component-update --disable-sync --user-data-dir=" +
                              shell_quoted(profile) + " --screenshot=" + shell_quoted(png) +
                              " --window-size=" + std::to_string(kWidth) + "," +
                              std::to_string(kHeight) + " " +
                              shell_quoted("file://" + fs::absolute(html).string()) + " > " +
                              shell_quoted(artefacts / "chromium.log") + " 2>&1";
  const int status = std::system(command.c_str());
  fs::remove_all(profile);
  ASSERT_EQ(status, 0) << command << "\n" << slurp(artefacts / "chromium.log");
  ASSERT_TRUE(fs::exists(png)) << slurp(artefacts / "chromium.log");

  const std::string bytes = slurp(png);
  const auto [width, height] = testing::png_size(bytes);
  EXPECT_EQ(width, kWidth);
  EXPECT_EQ(height, kHeight);
  const testing::Image image = testing::decode_png(bytes);
  ASSERT_GE(image.channels, 3);
  // The chart is drawn: thousands of pixels in the forward (#4c78a8) and backward (#f58518)
  // colours, and the page is far from uniform (text, tables, bars, legend).
  EXPECT_GT(pixels_near(image, 0x4c, 0x78, 0xa8), 5000u);
  EXPECT_GT(pixels_near(image, 0xf5, 0x85, 0x18), 5000u);
  std::set<std::uint32_t> colours;
  std::size_t white = 0;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      const std::uint32_t rgb = (static_cast<std::uint32_t>(image.at(x, y, 0)) << 16) |
                                (static_cast<std::uint32_t>(image.at(x, y, 1)) << 8) |
                                image.at(x, y, 2);
      colours.insert(rgb);
      white += rgb == 0xFFFFFF ? 1 : 0;
    }
  }
  EXPECT_GT(colours.size(), 100u);
  EXPECT_LT(white, static_cast<std::size_t>(kWidth) * kHeight * 9 / 10);
}

}  // namespace
}  // namespace pipeplan::report
