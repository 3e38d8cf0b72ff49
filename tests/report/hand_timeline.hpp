#pragma once
// The order a replay lists a timeline in, for the hand-made views of the report tests
// (hand_view.hpp, hand_view_v3.hpp, v3_view.hpp): computations by start, then GPU; transfers by
// start; both stable.

#include <algorithm>

#include "pipeplan/plan.hpp"

namespace pipeplan::testing {

inline void sort_timeline(Timeline& timeline) {
  std::stable_sort(timeline.compute.begin(), timeline.compute.end(),
                   [](const TimedCompute& a, const TimedCompute& b) {
                     return a.start_ms != b.start_ms ? a.start_ms < b.start_ms : a.gpu < b.gpu;
                   });
  std::stable_sort(
      timeline.transfers.begin(), timeline.transfers.end(),
      [](const TimedTransfer& a, const TimedTransfer& b) { return a.start_ms < b.start_ms; });
}

}  // namespace pipeplan::testing
