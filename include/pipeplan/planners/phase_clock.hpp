#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace pipeplan::planners {

/// The CPU time one planning spends in each of its phases (`ordering`, `DP`, `scheduling`),
/// summed over everything the planner tries to make its plan: every candidate order, schedule,
/// setting, context-parallel degree and micro-batch size, chosen or not, on whichever thread it
/// ran (the summary's `ordering 1 ms (3 runs), DP 2 ms (6 runs), scheduling 3 ms (90 runs) summed
/// over threads`).
/// Thread-safe; phases keep the order in which they were first timed.
class PhaseClock {
 public:
  /// One phase's total: its CPU time and how many times it ran (DP runs, schedules made).
  struct Total {
    std::string phase;
    double ms = 0;
    long runs = 0;
  };

  /// Adds one run of `ms` to `phase`. O(phases).
  void add(const std::string& phase, double ms);
  /// Each phase's total so far, in the order the phases were first timed.
  std::vector<Total> totals() const;

 private:
  mutable std::mutex mutex_;
  std::vector<Total> totals_;
};

/// Adds the CPU time its thread spends from its construction to its destruction to `phase` of
/// `clock` (nothing where `clock` is null), however the scope ends. The timed work runs on the
/// timer's thread (no timed phase starts threads of its own).
class PhaseTimer {
 public:
  PhaseTimer(PhaseClock* clock, std::string phase);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  /// The thread's CPU time since construction, ms.
  double elapsed_ms() const;
  /// Adds the time so far now; the destructor then adds nothing.
  void stop();

 private:
  PhaseClock* clock_;
  std::string phase_;
  double started_ms_;
};

}  // namespace pipeplan::planners
