// for_each_index: every index once, its own exception kept in index order, a nested call runs
// on the calling thread alone, and the tests' backwards order.

#include "pipeplan/planners/parallel.hpp"

#include <gtest/gtest.h>

#include <exception>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace pipeplan::planners {
namespace {

TEST(ParallelTest, EveryIndexOnceAndEachFailureAtItsIndex) {
  constexpr std::size_t n = 200;
  std::vector<int> ran(n, 0);
  const auto failures = for_each_index(n, [&](std::size_t x) {
    ran[x] += 1;
    if (x % 7 == 3) throw std::runtime_error("index " + std::to_string(x));
  });
  ASSERT_EQ(failures.size(), n);
  for (std::size_t x = 0; x < n; ++x) {
    EXPECT_EQ(ran[x], 1) << x;
    ASSERT_EQ(failures[x] != nullptr, x % 7 == 3) << x;
    if (!failures[x]) continue;
    try {
      std::rethrow_exception(failures[x]);
    } catch (const std::runtime_error& error) {
      EXPECT_EQ(std::string(error.what()), "index " + std::to_string(x));
    }
  }
  EXPECT_TRUE(for_each_index(0, [](std::size_t) { FAIL(); }).empty());
}

TEST(ParallelTest, ANestedCallRunsOnTheCallingThread) {
  std::mutex mutex;
  std::vector<bool> alone;
  const auto failures = for_each_index(4, [&](std::size_t) {
    const std::thread::id outer = std::this_thread::get_id();
    std::set<std::thread::id> inner;
    std::mutex inner_mutex;
    (void)for_each_index(8, [&](std::size_t) {
      const std::lock_guard<std::mutex> lock(inner_mutex);
      inner.insert(std::this_thread::get_id());
    });
    const std::lock_guard<std::mutex> lock(mutex);
    alone.push_back(inner.size() == 1 && *inner.begin() == outer);
  });
  for (const auto& failure : failures) EXPECT_FALSE(failure);
  EXPECT_EQ(alone, std::vector<bool>(4, true));
  // Outside any body again the flag is down (restored on the calling thread, so a later call
  // may use threads), and up inside every body: checked directly, as thread scheduling is not
  // deterministic.
  EXPECT_FALSE(detail::in_parallel_body);
  std::vector<char> flagged(16, 0);
  (void)for_each_index(16, [&](std::size_t x) { flagged[x] = detail::in_parallel_body ? 1 : 0; });
  EXPECT_EQ(flagged, std::vector<char>(16, 1));
  EXPECT_FALSE(detail::in_parallel_body);
}

// detail::backwards_for_testing: on one thread (a nested call here) the indices run from the
// last down, each once, each failure at its own index; the flag changes nothing else.
TEST(ParallelTest, BackwardsForTestingRunsOneThreadFromTheLastIndexDown) {
  std::vector<std::size_t> order;
  std::vector<std::exception_ptr> failures;
  detail::backwards_for_testing = true;
  (void)for_each_index(1, [&](std::size_t) {
    failures = for_each_index(5, [&](std::size_t x) {
      order.push_back(x);
      if (x == 3) throw std::runtime_error("three");
    });
  });
  detail::backwards_for_testing = false;
  EXPECT_EQ(order, (std::vector<std::size_t>{4, 3, 2, 1, 0}));
  ASSERT_EQ(failures.size(), 5U);
  for (std::size_t x = 0; x < 5; ++x) EXPECT_EQ(failures[x] != nullptr, x == 3) << x;
  EXPECT_FALSE(detail::in_parallel_body);
}

}  // namespace
}  // namespace pipeplan::planners
