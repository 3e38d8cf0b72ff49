// Shorthand nodes that name a node-catalogue type (issue 33 item 3).

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "pipeplan/error.hpp"
#include "pipeplan/hardware/gpu_catalogue.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/topology/topology.hpp"

namespace pipeplan::topology {
namespace {

Topology read(const std::string& text, const std::optional<std::string>& device = "H100-SXM") {
  return read_topology(io::source_from_text("topo.json", text), device);
}

std::string read_error(const std::string& text) {
  try {
    read(text);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(TopologyNodeTypeTest, ATypedNodeSuppliesGpusMemoryLinkAndNetwork) {
  const Topology topo = read(R"({"nodes": [{"name": "dgx", "count": 2, "type": "dgx-h100"}]})");
  ASSERT_EQ(topo.size(), 16);
  EXPECT_EQ(topo.node_count(), 2);
  EXPECT_EQ(topo.gpu(0).id, "dgx0/gpu0");
  EXPECT_EQ(topo.gpu(15).id, "dgx1/gpu7");
  EXPECT_EQ(topo.gpu(0).memory_bytes, hardware::find_gpu("H100-SXM")->memory_bytes);
  EXPECT_EQ(topo.gpu(0).speed, 1.0);  // the model was profiled on the same GPU
  EXPECT_EQ(topo.bandwidth_bytes_per_s(0, 7), 369e9);
  EXPECT_EQ(topo.latency_ms(0, 7), 3 * 1e-6 * 1e3);
  EXPECT_EQ(topo.bandwidth_bytes_per_s(0, 8), 46e9);
  EXPECT_EQ(topo.latency_ms(0, 8), 10 * 1e-6 * 1e3);
  // Speeds relate the node's GPU to the profiled one, as a GPU `type` does.
  EXPECT_DOUBLE_EQ(
      read(R"({"nodes": [{"name": "n", "type": "dgx-a100-80gb"}]})", "H100").gpu(0).speed,
      312 / 989.4);
}

TEST(TopologyNodeTypeTest, ReadsAsTheSameFileWrittenByHand) {
  const Topology typed = read(R"({"nodes": [{"name": "n", "count": 3, "type": "DGX-H200"}]})");
  const Topology by_hand = read(R"({"nodes": [{"name": "n", "count": 3, "gpus": 8,
    "type": "H200", "link": {"bandwidth": "369 GB/s", "latency": "3 us"}}],
    "network": {"bandwidth": "46 GB/s", "latency": "10 us"}})");
  ASSERT_EQ(typed.size(), by_hand.size());
  for (int u = 0; u < typed.size(); ++u) {
    EXPECT_EQ(typed.gpu(u).id, by_hand.gpu(u).id);
    EXPECT_EQ(typed.gpu(u).memory_bytes, by_hand.gpu(u).memory_bytes);
    EXPECT_EQ(typed.gpu(u).speed, by_hand.gpu(u).speed);
    for (int v = u + 1; v < typed.size(); ++v) {
      EXPECT_EQ(typed.bandwidth_bytes_per_s(u, v), by_hand.bandwidth_bytes_per_s(u, v));
      EXPECT_EQ(typed.latency_ms(u, v), by_hand.latency_ms(u, v));
    }
  }
}

TEST(TopologyNodeTypeTest, FieldsInTheFileOverrideTheCatalogue) {
  const Topology topo = read(R"({"nodes": [{"name": "n", "count": 2, "type": "dgx-h100",
    "gpus": 4, "memory": "40 GiB", "speed": 0.5,
    "link": {"bandwidth": "100 GB/s", "latency": "1 us"}}],
    "network": {"bandwidth": "25 GB/s", "latency": "5 us"}})");
  ASSERT_EQ(topo.size(), 8);
  EXPECT_EQ(topo.gpu(0).memory_bytes, 40.0 * (1 << 30));
  EXPECT_EQ(topo.gpu(0).speed, 0.5);
  EXPECT_EQ(topo.bandwidth_bytes_per_s(0, 1), 100e9);
  EXPECT_EQ(topo.bandwidth_bytes_per_s(0, 4), 25e9);
  EXPECT_EQ(topo.latency_ms(0, 4), 5 * 1e-6 * 1e3);
}

TEST(TopologyNodeTypeTest, MixedTypesTakeTheSlowestNics) {
  const Topology topo = read(R"({"nodes": [{"name": "h", "type": "dgx-h100"},
    {"name": "a", "type": "dgx-a100-80gb"}]})");
  ASSERT_EQ(topo.size(), 16);
  EXPECT_EQ(topo.bandwidth_bytes_per_s(0, 8), 23e9);  // HDR, not NDR
  EXPECT_EQ(topo.bandwidth_bytes_per_s(8, 9), 246e9);
  EXPECT_EQ(topo.gpu(8).memory_bytes, hardware::find_gpu("A100-80GB")->memory_bytes);
}

TEST(TopologyNodeTypeTest, GpuTypesReadAsBefore) {
  // A GPU type still names the GPUs only: no link or network comes with it.
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "n", "count": 2, "gpus": 2, "type": "H100"}]})"),
            "topo.json: topology is not connected: no path between \"n0/gpu0\" and \"n0/gpu1\" "
            "(add a link, a node link or a network)");
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "n", "type": "H100"}]})"),
            "topo.json: /nodes/0: missing required key \"gpus\"");
}

TEST(TopologyNodeTypeTest, UnknownTypeListsBothCatalogues) {
  EXPECT_EQ(read_error(R"({"nodes": [{"name": "n", "type": "dgx-h300"}]})"),
            "topo.json: /nodes/0/type: unknown type \"dgx-h300\": neither a GPU type (known: "
            "V100-32GB, A100-40GB, A100-80GB, H100-SXM, H200, GH200, B200, MI300X) nor a node "
            "type (known: dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200, dgx-b200, "
            "hgx-h100-pcie-nic, gh200-x4)");
}

TEST(TopologyNodeTypeTest, SpeedNeedsAProfiledDeviceAsForGpuTypes) {
  try {
    read(R"({"nodes": [{"name": "n", "type": "dgx-h100"}]})", std::nullopt);
    FAIL() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "topo.json: /nodes/0/type: cannot default \"speed\": the model has no "
                 "profile.device to relate H100-SXM to; give \"speed\"");
  }
}

}  // namespace
}  // namespace pipeplan::topology
