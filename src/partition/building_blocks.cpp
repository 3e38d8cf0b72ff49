// Shared building blocks of the partition searches (prefix sums, run statistics); see
// building_blocks.hpp. Complexity: O(L) for the sums, O(1) per GPU added to a run.

#include "pipeplan/partition/building_blocks.hpp"

namespace pipeplan::partition {

LayerSums::LayerSums(const model::Model& model) {
  const std::size_t n = model.layers.size();
  forward.assign(n + 1, 0);
  backward.assign(n + 1, 0);
  work.assign(n + 1, 0);
  parameters.assign(n + 1, 0);
  stash.assign(n + 1, 0);
  for (std::size_t l = 0; l < n; ++l) {
    const auto& layer = model.layers[l];
    forward[l + 1] = forward[l] + layer.forward_ms;
    backward[l + 1] = backward[l] + layer.backward_ms;
    work[l + 1] = work[l] + layer.forward_ms + layer.backward_ms;
    parameters[l + 1] = parameters[l] + layer.parameter_bytes;
    stash[l + 1] = stash[l] + layer.stash_bytes;
  }
  if (model::has_backward_working_bytes(model)) {
    std::vector<double> working(n);
    for (std::size_t l = 0; l < n; ++l) {
      working[l] = model::backward_transient_bytes_at(model.layers[l], 1, false);
    }
    working_max = range_max_table(std::move(working));
  }
}

double LayerSums::largest_working(int i, int j) const {
  return working_max.empty() ? 0 : range_max(working_max, i, j);
}

std::vector<std::vector<double>> range_max_table(std::vector<double> values) {
  const std::size_t n = values.size();
  std::vector<std::vector<double>> table{std::move(values)};
  for (std::size_t width = 1; 2 * width <= n; width *= 2) {
    const std::vector<double>& previous = table.back();
    std::vector<double> next(n - 2 * width + 1);
    for (std::size_t l = 0; l < next.size(); ++l)
      next[l] = std::max(previous[l], previous[l + width]);
    table.push_back(std::move(next));
  }
  return table;
}

double range_max(const std::vector<std::vector<double>>& table, int i, int j) {
  const auto width = static_cast<std::size_t>(j - i);
  std::size_t k = 0;
  while ((std::size_t{2} << k) <= width) ++k;
  const auto& row = table[k];
  return std::max(row[static_cast<std::size_t>(i)],
                  row[static_cast<std::size_t>(j) - (std::size_t{1} << k)]);
}

void RunStats::add(const topology::Topology& topology, int gpu) {
  const auto& added = topology.gpu(gpu);
  ++replicas;
  speeds.push_back(added.speed);
  fastest = std::max(fastest, added.speed);
  slowest = std::min(slowest, added.speed);
  if (added.memory_bytes)
    capacity = std::min(capacity.value_or(*added.memory_bytes), *added.memory_bytes);
  if (replicas == 1) {
    first_gpu = gpu;
  } else {
    chain_bandwidth = std::min(chain_bandwidth, topology.bandwidth_bytes_per_s(last_gpu, gpu));
    chain_latency_ms = std::max(chain_latency_ms, topology.latency_ms(last_gpu, gpu));
    ring_bandwidth = std::min(chain_bandwidth, topology.bandwidth_bytes_per_s(gpu, first_gpu));
    ring_latency_ms = std::max(chain_latency_ms, topology.latency_ms(gpu, first_gpu));
  }
  last_gpu = gpu;
}

RunStats RunStats::of(const topology::Topology& topology, const std::vector<int>& gpus) {
  RunStats run;
  for (int gpu : gpus) run.add(topology, gpu);
  return run;
}

}  // namespace pipeplan::partition
