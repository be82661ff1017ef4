// Fuzz target for image decoding (datasets/image_decode.h): any bytes either decode to an
// image within the limits or throw ember::Error. Another exception, a crash, a leak or a
// sanitizer report is a finding.
//
// Built two ways (tests/fuzz/CMakeLists.txt): in every build, with replay_main.cpp, as a CTest
// test that feeds each file of corpus/image_decode/ once; with -DEMBER_FUZZ=ON and clang, as a
// libFuzzer binary:  build-fuzz/tests/fuzz/fuzz_image_decode -max_total_time=60 corpus-copy/
#include <cstdint>
#include <cstdlib>
#include <cstdio>

#include "core/error.h"
#include "datasets/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Smaller than the defaults: a mutated header may claim any size up to the limits, and stb then
  // decodes (and fills) that many pixels; 1 Mi pixels keeps an input to milliseconds, so the
  // fuzzer spends its time on parsing paths rather than on filling large images.
  const ember::ImageLimits limits{.max_side = 2048, .max_pixels = int64_t(1) << 20, .max_file_bytes = 1 << 24};
  try {
    const ember::Tensor image = ember::decode_image({data, size}, "fuzz input", limits);
    const bool bounded = image.dim() == 3 && image.size(2) == 3 && image.size(0) >= 1 && image.size(1) >= 1 &&
                         image.size(0) <= limits.max_side && image.size(1) <= limits.max_side &&
                         image.size(0) * image.size(1) <= limits.max_pixels && image.dtype() == ember::DType::u8;
    if (!bounded) {
      std::fprintf(stderr, "fuzz_image_decode: decoded an image outside the limits\n");
      std::abort();
    }
  } catch (const ember::Error&) {
    // The contract: malformed input is an ember::Error.
  }
  return 0;
}
