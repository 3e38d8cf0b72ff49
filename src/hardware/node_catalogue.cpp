// The node catalogue: GPUs per node and the achievable NVLink and NIC figures of common
// training nodes, each a datasheet line rate times a measured efficiency. O(entries) lookups.

#include "pipeplan/hardware/node_catalogue.hpp"

#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "pipeplan/hardware/gpu_catalogue.hpp"

namespace pipeplan::hardware {
namespace {

// NCCL's maintainer on H100 (nccl-tests issue 212): the NVLink line rate is 450 GB/s per
// direction and, with NCCL's protocol overhead (about 20%), its effective bandwidth 370 GB/s,
// the busbw of a ring AllReduce or of the other collectives: 370 / 450 = 0.82. The same packet
// protocol runs on every NVLink generation, so the share is used for all of them.
constexpr double kNvlinkEfficiency = 0.82;
constexpr const char* kNvlinkEfficiencySource =
    "https://github.com/NVIDIA/nccl-tests/issues/212 (NCCL maintainer: 370 of 450 GB/s on H100 "
    "NVLink after protocol overhead; busbw of all_reduce_perf with NCCL_ALGO=RING)";

// NCCL's maintainers on InfiniBand NDR (nccl-tests issue 290): 46 to 48 GB/s per 400 Gb/s NIC
// (50 GB/s line rate) in all_reduce_perf's busbw across nodes; the low end, 46 / 50 = 0.92.
constexpr double kNicEfficiency = 0.92;
constexpr const char* kNicEfficiencySource =
    "https://github.com/NVIDIA/nccl-tests/issues/290 (NCCL maintainer: 46-48 GB/s busbw per "
    "400 Gb/s NDR NIC across nodes; the low end, 46 of 50 GB/s)";

// No datasheet states a message latency; these are the order of nccl-tests' small-message
// times (a few microseconds over NVLink, about ten across a switched network). Measure them
// (docs/topology.md) where the plan depends on them.
constexpr double kNvlinkLatencyUs = 3;
constexpr double kNicLatencyUs = 10;
constexpr const char* kLatencySource =
    "assumed: the order of nccl-tests sendrecv_perf small-message times (docs/topology.md "
    "says how to measure)";

LinkFigures nvlink(double datasheet_gb_per_s, std::string datasheet, std::string source) {
  return {.datasheet_gb_per_s = datasheet_gb_per_s,
          .datasheet = std::move(datasheet),
          .datasheet_source = std::move(source),
          .efficiency = kNvlinkEfficiency,
          .efficiency_source = kNvlinkEfficiencySource,
          .latency_us = kNvlinkLatencyUs,
          .latency_source = kLatencySource};
}

LinkFigures nic(double datasheet_gb_per_s, std::string datasheet, std::string source) {
  return {.datasheet_gb_per_s = datasheet_gb_per_s,
          .datasheet = std::move(datasheet),
          .datasheet_source = std::move(source),
          .efficiency = kNicEfficiency,
          .efficiency_source = kNicEfficiencySource,
          .latency_us = kNicLatencyUs,
          .latency_source = kLatencySource};
}

NodeType node(std::string name, std::string description, int gpus, const char* gpu_type,
              LinkFigures intra, LinkFigures inter) {
  const GpuType* gpu = find_gpu(gpu_type);
  return {.name = std::move(name),
          .description = std::move(description),
          .gpus = gpus,
          .gpu_type = gpu_type,
          .memory_bytes = gpu != nullptr ? gpu->memory_bytes : 0,  // a test checks the type
          .nvlink = std::move(intra),
          .nic = std::move(inter)};
}

std::vector<NodeType> make_catalogue() {
  const std::string a100_nvlink =
      "NVLink 3: 12 links, 600 GB/s bidirectional per GPU = 300 GB/s per direction";
  const std::string hopper_nvlink =
      "NVLink 4: 18 links, 900 GB/s bidirectional per GPU = 450 GB/s per direction";
  const std::string cx7_per_gpu = "8x ConnectX-7 400 Gb/s, one per GPU = 50 GB/s";
  const std::string dgx_a100_source =
      "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
      "nvidia-dgx-a100-datasheet.pdf";
  const std::string dgx_h100_source =
      "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html";
  return {
      node("dgx-a100-40gb", "DGX A100 320GB: 8x A100-40GB, HDR InfiniBand", 8, "A100-40GB",
           nvlink(300, a100_nvlink, dgx_a100_source),
           nic(25, "8x ConnectX-6 HDR 200 Gb/s, one per GPU = 25 GB/s", dgx_a100_source)),
      node("dgx-a100-80gb", "DGX A100 640GB: 8x A100-80GB, HDR InfiniBand", 8, "A100-80GB",
           nvlink(300, a100_nvlink, dgx_a100_source),
           nic(25, "8x ConnectX-6 HDR 200 Gb/s, one per GPU = 25 GB/s", dgx_a100_source)),
      node("dgx-h100", "DGX H100: 8x H100-SXM, NDR InfiniBand", 8, "H100-SXM",
           nvlink(450, hopper_nvlink, dgx_h100_source), nic(50, cx7_per_gpu, dgx_h100_source)),
      node("dgx-h200", "DGX H200: 8x H200, NDR InfiniBand", 8, "H200",
           nvlink(450, hopper_nvlink, "https://www.nvidia.com/en-us/data-center/dgx-h200/"),
           nic(50, cx7_per_gpu, "https://www.nvidia.com/en-us/data-center/dgx-h200/")),
      node("dgx-b200", "DGX B200: 8x B200, NDR InfiniBand", 8, "B200",
           nvlink(900,
                  "NVLink 5: 18 links, 1.8 TB/s bidirectional per GPU = 900 GB/s per "
                  "direction",
                  "https://www.nvidia.com/en-us/data-center/dgx-b200/"),
           nic(50, cx7_per_gpu, "https://www.nvidia.com/en-us/data-center/dgx-b200/")),
      node("hgx-h100-pcie-nic", "HGX H100 8-GPU server whose NICs are PCIe cards, one per two GPUs",
           8, "H100-SXM",
           nvlink(450, hopper_nvlink, "https://www.nvidia.com/en-us/data-center/hgx/"),
           nic(25,
               "4x ConnectX-7 400 Gb/s PCIe cards, each shared by two GPUs behind a PCIe "
               "switch = 25 GB/s per GPU (an assumed build: give \"network\" for yours)",
               "https://www.nvidia.com/en-us/networking/infiniband-adapters/")),
      node("gh200-x4", "4-way GH200 node (HPE Cray EX254n, as in CSCS Alps), Slingshot 11", 4,
           "GH200",
           nvlink(150,
                  "NVLink 4 all-to-all: 6 links per pair of GPUs = 150 GB/s per direction "
                  "between two GPUs",
                  "https://docs.cscs.ch/alps/hardware/"),
           nic(25,
               "4x Slingshot 11 200 Gb/s, one per GPU = 25 GB/s (efficiency measured on "
               "InfiniBand, assumed here)",
               "https://docs.cscs.ch/alps/hardware/")),
  };
}

std::string lower(std::string_view text) {
  std::string out;
  for (char c : text) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

double LinkFigures::achievable_gb_per_s() const {
  return std::round(datasheet_gb_per_s * efficiency * 10) / 10;
}

double LinkFigures::achievable_bytes_per_s() const { return achievable_gb_per_s() * 1e9; }

double LinkFigures::latency_s() const { return latency_us * 1e-6; }

const std::vector<NodeType>& node_catalogue() {
  static const std::vector<NodeType> kCatalogue = make_catalogue();
  return kCatalogue;
}

const NodeType* find_node_type(std::string_view name) {
  const std::string wanted = lower(name);
  for (const NodeType& type : node_catalogue()) {
    if (type.name == wanted) return &type;
  }
  return nullptr;
}

std::string node_catalogue_names() {
  std::string out;
  for (const NodeType& type : node_catalogue()) {
    if (!out.empty()) out += ", ";
    out += type.name;
  }
  return out;
}

}  // namespace pipeplan::hardware
