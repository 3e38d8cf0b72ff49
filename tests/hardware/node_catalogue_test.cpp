#include "pipeplan/hardware/node_catalogue.hpp"

#include <gtest/gtest.h>

#include "pipeplan/hardware/gpu_catalogue.hpp"

namespace pipeplan::hardware {
namespace {

void expect_figures(const LinkFigures& figures, const std::string& what) {
  EXPECT_GT(figures.datasheet_gb_per_s, 0) << what;
  EXPECT_GT(figures.efficiency, 0) << what;
  EXPECT_LE(figures.efficiency, 1) << what;
  EXPECT_GT(figures.achievable_gb_per_s(), 0) << what;
  EXPECT_LE(figures.achievable_gb_per_s(), figures.datasheet_gb_per_s) << what;
  EXPECT_EQ(figures.achievable_bytes_per_s(), figures.achievable_gb_per_s() * 1e9) << what;
  EXPECT_GT(figures.latency_us, 0) << what;
  EXPECT_FALSE(figures.datasheet.empty()) << what;
  EXPECT_EQ(figures.datasheet_source.rfind("https://", 0), 0u) << what;
  EXPECT_EQ(figures.efficiency_source.rfind("https://", 0), 0u) << what;
  EXPECT_FALSE(figures.latency_source.empty()) << what;
}

TEST(NodeCatalogueTest, HoldsTheIssuesNodesWithCatalogueGpus) {
  for (const char* name : {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "dgx-h200", "dgx-b200",
                           "hgx-h100-pcie-nic", "gh200-x4"}) {
    const NodeType* type = find_node_type(name);
    ASSERT_NE(type, nullptr) << name;
    EXPECT_EQ(type->name, name);
  }
  EXPECT_EQ(node_catalogue().size(), 7u);
  for (const NodeType& type : node_catalogue()) {
    const GpuType* gpu = find_gpu(type.gpu_type);
    ASSERT_NE(gpu, nullptr) << type.name;
    EXPECT_EQ(gpu->name, type.gpu_type) << type.name;  // the catalogue name, not an alias
    EXPECT_EQ(type.memory_bytes, gpu->memory_bytes) << type.name;
    EXPECT_GT(type.gpus, 0) << type.name;
    EXPECT_FALSE(type.description.empty()) << type.name;
    expect_figures(type.nvlink, type.name + " nvlink");
    expect_figures(type.nic, type.name + " nic");
    // A node type must never be read as a GPU type: the GPU catalogue is looked up first.
    EXPECT_EQ(find_gpu(type.name), nullptr) << type.name;
  }
}

TEST(NodeCatalogueTest, AchievableIsDatasheetTimesEfficiency) {
  const NodeType& h100 = *find_node_type("dgx-h100");
  EXPECT_EQ(h100.gpus, 8);
  EXPECT_EQ(h100.gpu_type, "H100-SXM");
  EXPECT_EQ(h100.nvlink.datasheet_gb_per_s, 450);  // 900 GB/s bidirectional
  EXPECT_EQ(h100.nvlink.achievable_gb_per_s(), 369);
  EXPECT_EQ(h100.nvlink.achievable_bytes_per_s(), 369e9);
  EXPECT_EQ(h100.nic.datasheet_gb_per_s, 50);  // 400 Gb/s ConnectX-7 per GPU
  EXPECT_EQ(h100.nic.achievable_gb_per_s(), 46);
  EXPECT_EQ(h100.nic.latency_s(), 10 * 1e-6);
  EXPECT_EQ(find_node_type("dgx-a100-80gb")->nvlink.achievable_gb_per_s(), 246);
  EXPECT_EQ(find_node_type("dgx-a100-40gb")->nic.achievable_gb_per_s(), 23);
  EXPECT_EQ(find_node_type("dgx-b200")->nvlink.achievable_gb_per_s(), 738);
  EXPECT_EQ(find_node_type("hgx-h100-pcie-nic")->nic.achievable_gb_per_s(), 23);
  const NodeType& gh200 = *find_node_type("gh200-x4");
  EXPECT_EQ(gh200.gpus, 4);
  EXPECT_EQ(gh200.nvlink.achievable_gb_per_s(), 123);
}

TEST(NodeCatalogueTest, FindsNamesWithoutRegardToCase) {
  EXPECT_EQ(find_node_type("DGX-H100")->name, "dgx-h100");
  EXPECT_EQ(find_node_type("dgx h100"), nullptr);
  EXPECT_EQ(find_node_type("H100-SXM"), nullptr);
  EXPECT_EQ(find_node_type(""), nullptr);
  EXPECT_EQ(node_catalogue_names(),
            "dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200, dgx-b200, hgx-h100-pcie-nic, "
            "gh200-x4");
}

}  // namespace
}  // namespace pipeplan::hardware
