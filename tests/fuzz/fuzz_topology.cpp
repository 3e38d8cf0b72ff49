// libFuzzer target: topology::read_topology on arbitrary bytes.
//
// Bugs: any failure but an input error (exit 3); an accepted topology whose pair costs are not
// finite, positive and symmetric. Inputs that ask for more than a few hundred GPUs are skipped
// (each costs O(N^2) and the reader's own limit, kMaxGpus, is tested elsewhere).

#include <cmath>

#include "fuzz_support.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/topology/topology.hpp"
#include "topology_size.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const io::Source source = io::source_from_text("topo.json", fuzz::text_of(data, size));
  if (fuzz::requested_gpus(source) > 256) return 0;
  topology::Topology topology;
  const bool read = fuzz::expect_only({ExitCode::kInvalidInput},
                                      [&] { topology = topology::read_topology(source); });
  if (!read) return 0;
  const int n = topology.size();
  if (n < 1 || n > topology::kMaxGpus) fuzz::bug("GPU count out of range");
  for (int g = 0; g < n; ++g) {
    const topology::Gpu& gpu = topology.gpu(g);
    if (!(gpu.speed > 0) || !std::isfinite(gpu.speed)) fuzz::bug("speed not finite and > 0");
    if (gpu.memory_bytes && (!(*gpu.memory_bytes >= 0) || !std::isfinite(*gpu.memory_bytes))) {
      fuzz::bug("memory not finite and >= 0");
    }
    if (topology.index_of(gpu.id) != g) fuzz::bug("index_of disagrees with the GPU list");
  }
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) {
      const topology::PairCost a = topology.pair(u, v);
      const topology::PairCost b = topology.pair(v, u);
      if (!(a.bandwidth_bytes_per_s > 0) || !std::isfinite(a.bandwidth_bytes_per_s)) {
        fuzz::bug("pair bandwidth not finite and > 0");
      }
      if (!(a.latency_ms >= 0) || !std::isfinite(a.latency_ms))
        fuzz::bug("pair latency not finite and >= 0");
      if (a.hops < 1) fuzz::bug("pair without a path");
      if (a.bandwidth_bytes_per_s != b.bandwidth_bytes_per_s || a.latency_ms != b.latency_ms ||
          a.hops != b.hops) {
        fuzz::bug("pair costs are not symmetric");
      }
    }
  }
  return 0;
}
