// Shared by the profiler's test programs (ember-simcc --profile): find a kernel's statistics
// in ember::sim::profile::kernels() and compare counters exactly, printing PASS or FAIL per
// check; main() returns failures() != 0.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/sim/executor.h"
#include "cuda/sim/profile.h"

namespace profile_check {

using ember::sim::profile::KernelProfile;
using ember::sim::profile::Kind;
using ember::sim::profile::MemorySite;

inline int& failures() {
  static int n = 0;
  return n;
}

inline void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures();
}

inline void expect_eq(uint64_t got, uint64_t want, const std::string& what) {
  expect(got == want, what + ": expected " + std::to_string(want) + ", got " + std::to_string(got));
}

// The profiler records kernels run as fibers only (Note [profile model] in cuda/sim/profile.cpp):
// under OS threads (a ThreadSanitizer build, EMBER_SIM_EXECUTION=threads) a test is skipped.
inline bool skipped_without_fibers() {
  if (ember::sim::execution() == ember::sim::Execution::fibers) return false;
  std::printf("EMBER_TEST_SKIPPED: the profiler records kernels run as fibers only, and this run uses OS threads\n");
  return true;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The kernel named `name`; a failed check (and an empty profile) when it is missing.
inline KernelProfile kernel(const std::vector<KernelProfile>& all, const std::string& name) {
  for (const KernelProfile& k : all)
    if (k.name == name) return k;
  expect(false, "a profile for kernel " + name);
  return {};
}

// The kernel's only memory site of `kind`, which must lie in `file`; a failed check when there
// is none or more than one (an access counted in the wrong space would show here).
inline MemorySite site(const KernelProfile& k, Kind kind, const std::string& file) {
  std::vector<MemorySite> found;
  for (const MemorySite& m : k.memory)
    if (m.kind == kind) found.push_back(m);
  const std::string what = k.name + ": one " + std::string(ember::sim::profile::kind_name(kind)) + " site";
  expect_eq(found.size(), 1, what);
  if (found.size() != 1) return {};
  expect(ends_with(found[0].file, file) && found[0].line > 0,
         what + " in " + file + " (got " + found[0].file + ":" + std::to_string(found[0].line) + ")");
  return found[0];
}

}  // namespace profile_check
