// report/catalogue: `pipeplan model gpus`'s table and JSON, on a hand-made catalogue and on the
// real one.

#include "pipeplan/report/catalogue.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace pipeplan::report {
namespace {

hardware::GpuType sample() {
  hardware::GpuType gpu;
  gpu.name = "X1";
  gpu.aliases = {"x one", "xone"};
  gpu.memory_bytes = 80.0 * 1024 * 1024 * 1024;
  gpu.memory_bandwidth_bytes_per_s = 2.039e12;
  gpu.fp32_tflops = 19.5;
  gpu.tf32_tflops = 156;
  gpu.bf16_tflops = 312;
  gpu.fp16_tflops = 312;
  gpu.fp8_tflops = 0;
  gpu.source = "https://example.com/x1";
  return gpu;
}

TEST(GpuCatalogueReportTest, TableAlignsOneLinePerGpu) {
  EXPECT_EQ(gpu_catalogue_table({sample()}),
            "gpu            memory    bandwidth     fp32     tf32     bf16     fp16      fp8  bf16 "
            "meas  fp8 meas\n"
            "X1             80 GiB   2.039 TB/s     19.5    156.0    312.0    312.0        -       "
            "   -         -\n"
            "Dense peak TFLOP/s per number format (- where unsupported); meas: the largest matrix "
            "multiply measured (- where none is published), which caps model transformer's GEMMs; "
            "sources: model gpus --json.\n");
  hardware::GpuType measured = sample();
  measured.measured_bf16_matmul_tflops = 271.2;
  measured.measured_matmul_source = "https://example.com/mamf";
  const std::string table = gpu_catalogue_table({measured});
  const std::size_t second = table.find('\n') + 1;
  EXPECT_EQ(table.substr(second, table.find('\n', second) + 1 - second),
            "X1             80 GiB   2.039 TB/s     19.5    156.0    312.0    312.0        -      "
            "271.2         -\n");
}

TEST(GpuCatalogueReportTest, TableOfTheCatalogueHasEveryGpu) {
  const auto& catalogue = hardware::gpu_catalogue();
  std::istringstream table(gpu_catalogue_table(catalogue));
  std::vector<std::string> lines;
  for (std::string line; std::getline(table, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), catalogue.size() + 2);
  for (std::size_t x = 0; x < catalogue.size(); ++x) {
    EXPECT_EQ(lines[x + 1].substr(0, catalogue[x].name.size() + 1), catalogue[x].name + " ");
    EXPECT_EQ(lines[x + 1].size(), lines[0].size()) << lines[x + 1];
  }
}

TEST(GpuCatalogueReportTest, JsonKeepsEveryFieldInOrder) {
  const std::string text = gpu_catalogue_json({sample()});
  ASSERT_TRUE(text.ends_with("]\n"));
  const auto parsed = nlohmann::ordered_json::parse(text);
  ASSERT_EQ(parsed.size(), 1u);
  std::vector<std::string> keys;
  for (const auto& [key, value] : parsed[0].items()) keys.push_back(key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"name", "aliases", "memory_bytes",
                                      "memory_bandwidth_bytes_per_s", "dense_tflops", "source"}));
  EXPECT_EQ(parsed[0]["aliases"], nlohmann::ordered_json::array({"x one", "xone"}));
  EXPECT_EQ(parsed[0]["memory_bytes"].get<double>(), sample().memory_bytes);
  EXPECT_EQ(parsed[0]["dense_tflops"].dump(),
            R"({"fp32":19.5,"tf32":156,"bf16":312,"fp16":312,"fp8":0})");
  EXPECT_EQ(parsed[0]["source"], "https://example.com/x1");
  // A measured GPU adds its measurements and their source.
  hardware::GpuType measured = sample();
  measured.measured_bf16_matmul_tflops = 271.2;
  measured.measured_matmul_source = "https://example.com/mamf";
  const auto with = nlohmann::ordered_json::parse(gpu_catalogue_json({measured}));
  EXPECT_EQ(with[0]["measured_matmul_tflops"].dump(), R"({"bf16":271.2,"fp8":0})");
  EXPECT_EQ(with[0]["measured_matmul_source"], "https://example.com/mamf");
  EXPECT_EQ(with[0]["matmul_ceiling"].dump(),
            nlohmann::ordered_json({{"bf16", 271.2 / 312}, {"fp16", 271.2 / 312}}).dump());
  EXPECT_EQ(nlohmann::ordered_json::parse(gpu_catalogue_json(hardware::gpu_catalogue())).size(),
            hardware::gpu_catalogue().size());
}

}  // namespace
}  // namespace pipeplan::report
