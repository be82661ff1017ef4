// Fuzz target for the safetensors reader (core/safetensors.h, parse_safetensors: the reader
// read_safetensors shares its header checks with): any bytes either load or throw
// ember::Error, and what loads is consistent and survives the writer: each tensor holds
// numel x dtype-size bytes, and serialize_safetensors of the result loads back equal.
// Another exception, a crash, a leak, a sanitizer report or a broken invariant is a finding.
// The libFuzzer binary also links safetensors_mutator.cpp (Note [Safetensors mutator]).
// Built as a corpus replay test and a libFuzzer binary (Note [Fuzzing] in CMakeLists.txt).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/safetensors.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", what);
  std::abort();
}

bool same(const ember::SafetensorsFile& a, const ember::SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const ember::SafetensorsTensor &x = a.tensors[i], &y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.bytes != y.bytes) return false;
  }
  return true;
}

void require_consistent(const ember::SafetensorsFile& file) {
  std::vector<ember::SafetensorsEntry> entries;
  for (const ember::SafetensorsTensor& t : file.tensors) {
    // An empty tensor has no bytes whatever its other dims (core/shape.h's numel_of; the
    // first finding, corpus/safetensors/regression_empty_with_huge_dim.safetensors, was this
    // check forgetting it); otherwise the byte count must not overflow.
    const bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
    uint64_t bytes = empty ? 0 : ember::dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0) finding("loaded a negative dim");
      if (!empty && __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) finding("loaded a shape whose size overflows");
    }
    if (bytes != t.bytes.size()) finding("loaded a tensor whose byte count is not numel x dtype size");
    entries.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
  }
  // The writer must accept everything the reader accepts (no Error allowed here).
  const std::vector<uint8_t> again = ember::serialize_safetensors(entries, file.metadata);
  if (!same(file, ember::parse_safetensors(again.data(), again.size(), "fuzz round trip")))
    finding("serialize_safetensors of a loaded file loads back different");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ember::SafetensorsFile file;
  try {
    file = ember::parse_safetensors(data, size, "fuzz input");
  } catch (const ember::Error&) {
    return 0;  // the contract: malformed input is an ember::Error
  }
  require_consistent(file);
  return 0;
}
