// libFuzzer target: planning end to end. The input is a model.json and a topo.json separated
// by the first NUL byte. Small inputs (at most 12 layers, 8 GPUs, 16 micro-batches; others are
// skipped) are planned with spp under each schedule policy, and every plan is checked with
// simulate::check_plan, also after a round trip through plan.json.
//
// Bugs: any failure but an input error (exit 3) while reading or "no feasible plan" (exit 4)
// while planning; any plan that the checker refuses or that beats a lower bound.

#include <cstring>

#include "fuzz_support.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/model/model.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/topology/topology.hpp"
#include "plan_invariants.hpp"
#include "topology_size.hpp"

namespace {

constexpr std::size_t kMaxLayers = 12;
constexpr int kMaxGpus = 8;
constexpr std::int64_t kMaxMicroBatches = 16;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const auto* separator = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  if (separator == nullptr) return 0;
  const auto model_size = static_cast<std::size_t>(separator - data);
  const io::Source model_source =
      io::source_from_text("model.json", fuzz::text_of(data, model_size));
  const io::Source topology_source =
      io::source_from_text("topo.json", fuzz::text_of(separator + 1, size - model_size - 1));
  if (fuzz::requested_gpus(topology_source) > kMaxGpus) return 0;

  model::Model model;
  topology::Topology topology;
  const bool read = fuzz::expect_only({ExitCode::kInvalidInput}, [&] {
    model = model::read_model(model_source);
    topology = topology::read_topology(topology_source);
  });
  if (!read || model.layers.size() > kMaxLayers || topology.size() > kMaxGpus) return 0;
  const std::int64_t micro_batches = model.micro_batches.value_or(4);
  if (micro_batches > kMaxMicroBatches) return 0;

  const planners::Request request{model, topology, static_cast<int>(micro_batches)};
  for (schedule::Policy policy :
       {schedule::Policy::kList, schedule::Policy::kOneFOneB, schedule::Policy::kGpipe}) {
    const std::string what = "the spp plan under " + std::string(schedule::policy_name(policy));
    Plan plan;
    const bool planned = fuzz::expect_only(
        {ExitCode::kInfeasible}, [&] { plan = planners::make_plan("spp", request, policy); });
    if (!planned) continue;
    if (plan.stages.empty()) fuzz::bug(what + " has no stages");
    fuzz::check_plan_invariants(plan, model, topology, what);
  }
  return 0;
}
