// Fuzz target for the JSON parser (core/json.h): any bytes either parse or throw ember::Error,
// and what parses survives the writer: dump(), compact and indented, parses back to an equal
// value. Another exception, a crash, a leak, a sanitizer report or a value that does not
// round-trip is a finding. Built as a corpus replay test and a libFuzzer binary (Note
// [Fuzzing] in CMakeLists.txt).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "core/json.h"

namespace {

void require_round_trip(const ember::Json& value, int indent) {
  const ember::Json back = ember::Json::parse(value.dump(indent), "fuzz round trip");
  if (!(back == value)) {
    std::fprintf(stderr, "fuzz_json: dump(%d) does not parse back to the same value\n", indent);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ember::Json value;
  try {
    // A small depth limit keeps deep-nesting inputs cheap; the limit itself is exercised.
    value = ember::Json::parse({reinterpret_cast<const char*>(data), size}, "fuzz input", 64);
  } catch (const ember::Error&) {
    return 0;  // the contract: malformed input is an ember::Error
  }
  // Whatever parsed must be writable and read back identically (no Error is allowed here).
  require_round_trip(value, -1);
  require_round_trip(value, 2);
  return 0;
}
