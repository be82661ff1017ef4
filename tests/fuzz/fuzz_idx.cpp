// Fuzz target for the IDX parser (datasets/idx.h, parse_idx: an uncompressed header and
// payload): any bytes either parse to dims whose product is the payload size or throw
// ember::Error. Another exception, a crash, a leak or a sanitizer report is a finding.
// Built as a corpus replay test and a libFuzzer binary (Note [Fuzzing] in CMakeLists.txt).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "datasets/idx.h"
#include "idx_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ember::fuzz::require_consistent(ember::parse_idx(std::vector<uint8_t>(data, data + size), "fuzz input"), "fuzz_idx");
  } catch (const ember::Error&) {
    // The contract: malformed input is an ember::Error.
  }
  return 0;
}
