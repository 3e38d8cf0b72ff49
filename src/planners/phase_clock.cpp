#include "pipeplan/planners/phase_clock.hpp"

#include <algorithm>
#include <ctime>
#include <utility>

namespace pipeplan::planners {

void PhaseClock::add(const std::string& phase, double ms) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto found = std::find_if(totals_.begin(), totals_.end(),
                            [&](const Total& total) { return total.phase == phase; });
  if (found == totals_.end()) found = totals_.insert(totals_.end(), Total{phase, 0, 0});
  found->ms += ms;
  ++found->runs;
}

std::vector<PhaseClock::Total> PhaseClock::totals() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return totals_;
}

namespace {

// The calling thread's CPU time, ms (POSIX's per-thread clock).
double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

}  // namespace

PhaseTimer::PhaseTimer(PhaseClock* clock, std::string phase)
    : clock_(clock), phase_(std::move(phase)), started_ms_(thread_cpu_ms()) {}

double PhaseTimer::elapsed_ms() const { return thread_cpu_ms() - started_ms_; }

void PhaseTimer::stop() {
  if (clock_ != nullptr) clock_->add(phase_, elapsed_ms());
  clock_ = nullptr;
}

// A timing that cannot be recorded (no memory for a new phase's name) is dropped: the
// planning it measures goes on.
PhaseTimer::~PhaseTimer() {
  if (clock_ == nullptr) return;
  try {
    clock_->add(phase_, elapsed_ms());
  } catch (...) {  // NOLINT(bugprone-empty-catch)
  }
}

}  // namespace pipeplan::planners
