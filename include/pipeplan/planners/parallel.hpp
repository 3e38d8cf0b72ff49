#pragma once
/// \file
/// Independent evaluations on parallel threads, read in order: the planners' searches compare
/// whole plans, each independent of the others, and their results must not depend on the
/// thread count.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace pipeplan::planners {

/// Most threads `for_each_index` starts: a plan can hold a few hundred MB at 16,384 GPUs
/// (docs/performance.md) and spp's search starts threads of its own.
inline constexpr unsigned kMaxParallelThreads = 4;

namespace detail {
/// Whether this thread runs a `for_each_index` body (there, another runs on this thread alone).
inline thread_local bool in_parallel_body = false;
/// Tests only: a `for_each_index` running on this thread alone takes its indices from the last
/// down, the order no thread interleaving reaches with certainty, so that a test can check that
/// a caller's result does not depend on the order its indices are evaluated in.
inline thread_local bool backwards_for_testing = false;
}  // namespace detail

/// body(x) for every x below n, on up to kMaxParallelThreads threads (the hardware's), each x
/// writing only its own results, so what the caller reads does not depend on the threads or
/// their interleaving. Inside another `for_each_index`'s body, on the calling thread alone:
/// the cores are busy already, and nesting would multiply the plans held at once. Returns each
/// index's exception (null where none), for the caller to rethrow in index order.
template <class Body>
std::vector<std::exception_ptr> for_each_index(std::size_t n, const Body& body) {
  std::vector<std::exception_ptr> failures(n);
  auto run = [&](std::size_t x) {
    try {
      body(x);
    } catch (...) {
      failures[x] = std::current_exception();
    }
  };
  const std::size_t threads =
      detail::in_parallel_body
          ? 1
          : std::min<std::size_t>(
                {n, std::max(1U, std::thread::hardware_concurrency()), kMaxParallelThreads});
  const bool backwards = threads == 1 && detail::backwards_for_testing;
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    const bool outer = detail::in_parallel_body;
    detail::in_parallel_body = true;
    if (backwards) {
      for (std::size_t x = n; x-- > 0;) run(x);
    } else {
      for (std::size_t x = next++; x < n; x = next++) run(x);
    }
    detail::in_parallel_body = outer;
  };
  std::vector<std::thread> workers;
  for (std::size_t w = 1; w < threads; ++w) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  return failures;
}

}  // namespace pipeplan::planners
