// `pipeplan topology cluster` and `pipeplan topology types`, in-process.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../support/cli_run.hpp"
#include "../support/temp_folder.hpp"

namespace pipeplan::cli {
namespace {

namespace fs = std::filesystem;
using pipeplan::testing::run_cli;

class TopologyCommandTest : public pipeplan::testing::TempFolderTest {
 protected:
  std::string path(const std::string& name) const { return (folder_ / name).string(); }
  static std::string contents(const std::string& file) { return read(file); }
};

TEST_F(TopologyCommandTest, ClusterWritesTheShorthandWithItsNetwork) {
  const std::string file = path("topo.json");
  auto result = run_cli({"topology", "cluster", "--type", "dgx-h100", "--nodes", "64", "-o", file});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "topology: 64 x dgx-h100 (512 H100-SXM) -> " + file + "\n");
  EXPECT_EQ(contents(file), R"({
  "schema": "pipeplan/topology/v1",
  "name": "64x dgx-h100",
  "nodes": [
    {
      "name": "node",
      "count": 64,
      "type": "dgx-h100"
    }
  ],
  "network": {
    "bandwidth": "46 GB/s",
    "latency": "10 us"
  }
}
)");
  // Standard output gets the same bytes without -o.
  auto again = run_cli({"topology", "cluster", "--type", "dgx-h100", "--nodes", "64", "-q"});
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(again.out, contents(file));
  EXPECT_EQ(again.err, "");
}

TEST_F(TopologyCommandTest, ClusterPlansAsTheSameClusterWrittenByHand) {
  const std::string model = path("model.json");
  auto made = run_cli({"model", "transformer", "--layers", "4", "--hidden", "256", "--heads", "4",
                       "--sequence", "128", "--vocab", "1000", "--gpu", "H100", "--micro-batches",
                       "8", "-q", "-o", model});
  ASSERT_EQ(made.code, 0) << made.err;
  const std::string topo = path("topo.json");
  ASSERT_EQ(
      run_cli({"topology", "cluster", "--type", "dgx-h100", "--nodes", "2", "-q", "-o", topo}).code,
      0);
  auto typed = run_cli({"plan", model, topo, "-q"});
  ASSERT_EQ(typed.code, 0) << typed.err;
  write("topo.json", R"({"schema": "pipeplan/topology/v1", "name": "2x dgx-h100",
    "nodes": [{"name": "node", "count": 2, "gpus": 8, "memory": "80 GiB", "speed": 1,
               "link": {"bandwidth": "369 GB/s", "latency": "3 us"}}],
    "network": {"bandwidth": "46 GB/s", "latency": "10 us"}})");
  auto by_hand = run_cli({"plan", model, topo, "-q"});
  ASSERT_EQ(by_hand.code, 0) << by_hand.err;
  EXPECT_EQ(typed.out, by_hand.out);
  EXPECT_FALSE(typed.out.empty());
}

TEST_F(TopologyCommandTest, TypesPrintsTheCatalogue) {
  auto table = run_cli({"topology", "types"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(table.err, "");
  EXPECT_EQ(table.out.rfind("node              gpus gpu        memory nvlink GB/s", 0), 0u)
      << table.out;
  EXPECT_NE(table.out.find("\ndgx-h100             8 H100-SXM   80 GiB 369 = 450 x 0.82         "
                           "   3 us 46 = 50 x 0.92           10 us\n"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("  dgx-h100: NVLink 4: 18 links, 900 GB/s bidirectional per GPU = 450 "
                           "GB/s per direction (https://docs.nvidia.com/dgx/"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("  0.82: https://github.com/NVIDIA/nccl-tests/issues/212"),
            std::string::npos);
  auto json = run_cli({"topology", "types", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  ASSERT_EQ(parsed.size(), 7u);
  EXPECT_EQ(parsed[2].at("name").get<std::string>(), "dgx-h100");
  EXPECT_EQ(parsed[2].at("gpus").get<int>(), 8);
  EXPECT_EQ(parsed[2].at("nvlink").at("achievable_gb_per_s").get<double>(), 369);
  EXPECT_EQ(parsed[2].at("nic").at("datasheet_gb_per_s").get<double>(), 50);
  EXPECT_EQ(parsed[2].at("nic").at("efficiency").get<double>(), 0.92);
}

TEST_F(TopologyCommandTest, BadOptionsExitTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"topology"},
           {"topology", "cluster"},
           {"topology", "cluster", "--type", "dgx-h300"},
           {"topology", "cluster", "--type", "H100-SXM"},
           {"topology", "cluster", "--type", "dgx-h100", "--nodes", "0"},
           {"topology", "cluster", "--type", "dgx-h100", "--nodes", "-1"},
           {"topology", "cluster", "--type", "dgx-h100", "--nodes", "1.5"},
           {"topology", "cluster", "--type", "dgx-h100", "-o", ""},
           {"topology", "types", "--csv"}}) {
    auto result = run_cli(args);
    EXPECT_EQ(result.code, 2) << args.back() << ": " << result.err;
    EXPECT_EQ(result.out, "") << args.back();
  }
  auto too_many = run_cli({"topology", "cluster", "--type", "dgx-h100", "--nodes", "16385"});
  EXPECT_EQ(too_many.code, 2);
  EXPECT_EQ(too_many.err,
            "pipeplan: error: --nodes: 16385 nodes of dgx-h100 make 131080 GPUs; pipeplan handles "
            "at most 131072\n");
}

}  // namespace
}  // namespace pipeplan::cli
