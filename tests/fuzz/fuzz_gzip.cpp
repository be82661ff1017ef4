// Fuzz target for the bounded gzip inflation in front of the IDX parser (datasets/idx.h,
// parse_idx_file: what read_idx does with a file's bytes): any bytes either give a consistent
// IDX array or throw ember::Error, and never inflate beyond Note [Bounded inflate]'s bound.
// Another exception, a crash, a leak, an out-of-memory or a sanitizer report is a finding.
// Seeds are gzip files, so mutations land in the deflate stream, the gzip header and trailer.
// Built as a corpus replay test and a libFuzzer binary (Note [Fuzzing] in CMakeLists.txt).
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "datasets/idx.h"
#include "idx_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ember::fuzz::require_consistent(ember::parse_idx_file(std::vector<uint8_t>(data, data + size), "fuzz input"), "fuzz_gzip");
  } catch (const ember::Error&) {
    // The contract: malformed input is an ember::Error.
  }
  return 0;
}
