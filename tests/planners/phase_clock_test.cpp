// planners::PhaseClock and PhaseTimer: what the summary's `ordering ..., DP ..., scheduling ...
// summed over threads` adds up.

#include "pipeplan/planners/phase_clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace pipeplan::planners {
namespace {

TEST(PhaseClockTest, SumsEachPhaseInTheOrderItWasFirstTimed) {
  PhaseClock clock;
  EXPECT_TRUE(clock.totals().empty());
  clock.add("DP", 2);
  clock.add("scheduling", 0.5);
  clock.add("DP", 3);
  const auto totals = clock.totals();
  ASSERT_EQ(totals.size(), 2U);
  EXPECT_EQ(totals[0].phase, "DP");
  EXPECT_DOUBLE_EQ(totals[0].ms, 5);
  EXPECT_EQ(totals[0].runs, 2);
  EXPECT_EQ(totals[1].phase, "scheduling");
  EXPECT_DOUBLE_EQ(totals[1].ms, 0.5);
  EXPECT_EQ(totals[1].runs, 1);
}

// spp's candidate orders time their phases on parallel threads: no run is lost.
TEST(PhaseClockTest, CountsEveryRunFromEveryThread) {
  PhaseClock clock;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&clock] {
      for (int i = 0; i < 1000; ++i) clock.add(i % 2 == 0 ? "DP" : "scheduling", 1);
    });
  }
  for (auto& thread : threads) thread.join();
  const auto totals = clock.totals();
  ASSERT_EQ(totals.size(), 2U);
  EXPECT_EQ(totals[0].runs + totals[1].runs, 4000);
  EXPECT_DOUBLE_EQ(totals[0].ms + totals[1].ms, 4000);
  EXPECT_EQ(totals[0].runs, 2000);
}

// A busy loop long enough for the thread's CPU clock to advance.
double spin() {
  volatile double sink = 0;
  for (int i = 0; i < 5'000'000; ++i) sink = sink + 1e-9 * i;
  return sink;
}

TEST(PhaseClockTest, ATimerAddsItsThreadsCpuTimeOnceWhenItsScopeEnds) {
  PhaseClock clock;
  {
    const PhaseTimer timer(&clock, "ordering");
    spin();
    EXPECT_GT(timer.elapsed_ms(), 0);
    EXPECT_TRUE(clock.totals().empty());
  }
  ASSERT_EQ(clock.totals().size(), 1U);
  EXPECT_GT(clock.totals()[0].ms, 0);
  {
    PhaseTimer timer(&clock, "ordering");
    spin();
    timer.stop();
    EXPECT_EQ(clock.totals()[0].runs, 2);
  }
  EXPECT_EQ(clock.totals()[0].runs, 2);  // stopped: the scope's end adds nothing more
  // Time spent asleep is not CPU time.
  {
    const PhaseTimer timer(&clock, "waiting");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_LT(timer.elapsed_ms(), 100);
  }
}

TEST(PhaseClockTest, ATimerWithoutAClockOnlyMeasures) {
  const PhaseTimer timer(nullptr, "DP");
  spin();
  EXPECT_GT(timer.elapsed_ms(), 0);
}

}  // namespace
}  // namespace pipeplan::planners
