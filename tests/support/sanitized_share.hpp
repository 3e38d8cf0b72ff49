#pragma once
// Whether this build runs under AddressSanitizer (the asan preset), in one place for the tests.
// Property tests over many seeded instances run all of them in the dev build and a share of them
// under the sanitizers, for CI's 90 minutes: there a test takes about twenty times as long, and
// three such suites were 62% of the sanitizer run's test time (docs/hacking.md, "Tests run two at
// once"). The instances kept are the dev run's own (the same seeded draws; the others are drawn and
// skipped), so the sanitizers run the code paths those instances reach, and the dev run checks the
// property on all of them.

namespace pipeplan::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// Whether instance `index` (from 0) runs: every one outside the sanitizers, every `stride`-th
/// (index 0, stride, 2 stride, ...) under them.
constexpr bool runs_instance(int index, int stride) { return !kSanitized || index % stride == 0; }

}  // namespace pipeplan::testing
