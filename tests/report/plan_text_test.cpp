// The plan's text made in pieces (report::write_plan_json, what `pipeplan plan` writes as it
// makes it): the same bytes as the DOM's dump and as plan_json_text, in pieces of about 4 MiB.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../support/builders.hpp"
#include "pipeplan/io/json.hpp"
#include "pipeplan/planners/planner.hpp"
#include "pipeplan/report/plan_json.hpp"

namespace pipeplan::report {
namespace {

TEST(PlanTextTest, PiecesMakeTheSameBytesAsTheWholeText) {
  constexpr std::size_t kPiece = std::size_t{4} << 20;
  // 8 stages, 1,024 micro-batches: about 30,000 schedule entries, several pieces.
  const model::Model model = testing::make_model(std::vector<testing::L>(8, {1, 2, 1e6, 1e6}));
  const topology::Topology topology = testing::uniform_topology(8, 1e9, 0.01);
  for (const int micro_batches : {4, 1024}) {
    SCOPED_TRACE(std::to_string(micro_batches) + " micro-batches");
    const Plan plan = planners::make_plan(
        "uniform", planners::Request{model, topology, micro_batches}, schedule::Policy::kOneFOneB);
    std::vector<std::size_t> sizes;
    std::string joined;
    write_plan_json(plan, model, topology, [&](std::string& piece) {
      sizes.push_back(piece.size());
      joined += piece;
      piece.clear();
    });
    const std::string whole = io::dump_json(plan_to_json(plan, model, topology));
    EXPECT_EQ(joined, whole);
    EXPECT_EQ(plan_json_text(plan, model, topology), whole);
    ASSERT_FALSE(sizes.empty());
    EXPECT_GT(sizes.back(), 0U);
    for (std::size_t p = 0; p + 1 < sizes.size(); ++p) {
      EXPECT_GE(sizes[p], kPiece);
      EXPECT_LT(sizes[p], kPiece + 1024);  // a piece ends after the element that filled it
    }
    if (micro_batches == 1024) {
      EXPECT_GE(sizes.size(), 2U);
    }
  }
}

}  // namespace
}  // namespace pipeplan::report
