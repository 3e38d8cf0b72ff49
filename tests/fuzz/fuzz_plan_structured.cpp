// libFuzzer target: every planner on small models and clusters built from the fuzz input's
// bytes (not parsed from text), so that nearly every input reaches the planners. Layers,
// GPUs, links and the micro-batch count are drawn from small menus of values that mix the
// common with the extreme (zero times and sizes, unlimited or tight memory, links from
// 1 MB/s to 100 GB/s, missing links that force multi-hop paths).
//
// Bugs: any failure but "no feasible plan" (exit 4); any plan that simulate::check_plan
// refuses, also after a round trip through plan.json, that beats a lower bound, or that
// differs when made a second time.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/schedule/policy.hpp"
#include "pipeplan/topology/topology.hpp"
#include "plan_invariants.hpp"

namespace pipeplan::fuzz {
namespace {

// Reads the input byte by byte; zeros once it is used up.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t next() { return at_ < size_ ? data_[at_++] : 0; }
  // An element of `menu`.
  template <typename T>
  T pick(const std::vector<T>& menu) {
    return menu[next() % menu.size()];
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

model::Model make_model(Bytes& bytes) {
  static const std::vector<double> kTimes{0, 0.5, 1, 2, 3, 10, 100, 1e-6};
  static const std::vector<double> kSizes{0, 1e3, 1e6, 1e8, 1e9, 3e9};
  model::Model model;
  model.name = "fuzzed";
  model.parameter_memory_factor = bytes.pick<double>({4, 0, 1, 2});
  const int layers = 1 + bytes.next() % 8;
  for (int l = 0; l < layers; ++l) {
    model::Layer layer;
    // Appended, not `"l" + std::to_string(l)`: GCC 12 at -O3 warns -Wrestrict on a literal plus
    // a temporary string (a false positive, GCC bug 105329; Build.NoRestrictWarningAtO3).
    layer.name = "l";
    layer.name += std::to_string(l);
    layer.forward_ms = bytes.pick(kTimes);
    layer.backward_ms = bytes.pick(kTimes);
    layer.activation_bytes = bytes.pick(kSizes);
    layer.parameter_bytes = bytes.pick(kSizes);
    layer.stash_bytes = bytes.next() % 2 ? layer.activation_bytes : bytes.pick(kSizes);
    model.layers.push_back(layer);
  }
  return model;
}

topology::Topology make_topology(Bytes& bytes) {
  static const std::vector<double> kBandwidths{1e9, 1e10, 1e11, 1e6, 1e8, 2.5e10};
  static const std::vector<double> kLatencies{0, 1e-3, 0.01, 1};
  const int n = 1 + bytes.next() % 6;
  std::vector<topology::Gpu> gpus;
  for (int g = 0; g < n; ++g) {
    topology::Gpu gpu;
    gpu.id = "g";
    gpu.id += std::to_string(g);  // not `"g" + std::to_string(g)`: see make_model
    gpu.node = gpu.id;
    gpu.speed = bytes.pick<double>({1, 0.5, 2, 0.25, 1e-3});
    const double memory = bytes.pick<double>({0, 16e9, 4e9, 1e9, 1e8, 24e9});
    if (memory > 0) gpu.memory_bytes = memory;
    gpus.push_back(gpu);
  }
  std::vector<topology::Link> links;
  for (int u = 0; u < n; ++u) {
    for (int v = u + 1; v < n; ++v) {
      if (bytes.next() % 4 == 0) continue;  // no direct link: a path, or disconnected
      links.push_back({u, v, bytes.pick(kBandwidths), bytes.pick(kLatencies)});
    }
  }
  return topology::Topology::build("fuzzed", gpus, links, "fuzzed");
}

}  // namespace
}  // namespace pipeplan::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  fuzz::Bytes bytes(data, size);
  const model::Model model = fuzz::make_model(bytes);
  topology::Topology topology;
  // A disconnected cluster is an input error; nothing else may fail while building it.
  if (!fuzz::expect_only({ExitCode::kInvalidInput},
                         [&] { topology = fuzz::make_topology(bytes); })) {
    return 0;
  }
  const int micro_batches = 1 + bytes.next() % 12;
  const std::string planner =
      planners::planner_names()[bytes.next() % planners::planner_names().size()];
  const schedule::Policy policy = bytes.pick<schedule::Policy>(
      {schedule::Policy::kList, schedule::Policy::kOneFOneB, schedule::Policy::kGpipe});
  const std::string what =
      "the " + planner + " plan under " + std::string(schedule::policy_name(policy));
  Plan plan;
  planners::Request request{model, topology, micro_batches};
  if (planner == "megatron") {
    // Megatron plans one configuration: no tensor parallelism (the fuzzed layers have none), a
    // depth P up to the GPUs and the layers, and as many copies as fit, D = floor(N / P).
    const int limit = std::min(topology.size(), static_cast<int>(model.layers.size()));
    const int depth = 1 + static_cast<int>(bytes.next() % static_cast<unsigned>(limit));
    request.tensor_parallel = {1};
    request.pipeline_parallel = depth;
    request.data_parallel = topology.size() / depth;
  }
  // A configuration the frameworks cannot run (D not dividing M) is refused before planning,
  // and only such a one (issue 34).
  if (const auto refused = planners::refusal(planner, request)) {
    if (!fuzz::expect_only({ExitCode::kUsage},
                           [&] { plan = planners::make_plan(planner, request, policy); })) {
      return 0;
    }
    fuzz::bug(what + " was planned though " + *refused);
  }
  if (!fuzz::expect_only({ExitCode::kInfeasible},
                         [&] { plan = planners::make_plan(planner, request, policy); })) {
    return 0;
  }
  // Under `list` spp keeps a fixed policy's order when it is strictly faster on the chosen
  // stages, and names that policy (docs/decisions.md, "spp's list is never slower").
  const bool own_choice = planner == "spp" && policy == schedule::Policy::kList &&
                          schedule::parse_policy(plan.schedule_policy).has_value();
  if (plan.planner != planner ||
      (plan.schedule_policy != schedule::policy_name(policy) && !own_choice)) {
    fuzz::bug(what + " names another planner or policy: " + plan.planner + " under " +
              plan.schedule_policy);
  }
  fuzz::check_plan_invariants(plan, model, topology, what);
  // Spec section 4: the same inputs and options give byte-identical output.
  const Plan again = planners::make_plan(planner, request, policy);
  if (io::dump_json(report::plan_to_json(plan, model, topology)) !=
      io::dump_json(report::plan_to_json(again, model, topology))) {
    fuzz::bug(what + " differs when made twice");
  }
  return 0;
}
