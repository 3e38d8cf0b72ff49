// libFuzzer target: report::read_plan then simulate::check_plan on arbitrary bytes, against the
// fixed model and topology of tests/fuzz/fixtures (seeds: plans of every planner for them).
//
// Bugs: any failure but an input error (exit 3); an accepted plan that beats a lower bound, or
// that fails the check once written back as plan.json.

#include "fixtures.hpp"
#include "fuzz_support.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/report/plan_json.hpp"
#include "pipeplan/simulate/check.hpp"
#include "pipeplan/simulate/simulator.hpp"
#include "plan_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const fuzz::Fixtures& fixed = fuzz::fixtures();
  Plan plan;
  const bool valid = fuzz::expect_only({ExitCode::kInvalidInput}, [&] {
    const simulate::StatedPlan stated = report::read_plan(
        io::source_from_text("plan.json", fuzz::text_of(data, size)), fixed.topology);
    plan = simulate::check_plan(stated, fixed.model, fixed.topology);
  });
  if (!valid) return 0;
  fuzz::check_plan_invariants(plan, fixed.model, fixed.topology, "an accepted plan");
  return 0;
}
