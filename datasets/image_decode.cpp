#include "datasets/image_decode.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"

// Note [stb_image]: this is the one translation unit that compiles stb_image (Debian's
// libstb-dev header, not its prebuilt libstb, which enables every format). Only the PNG and
// JPEG decoders are built (a smaller attack surface for files from the internet), the symbols
// are static (no clash with another copy in the same program), and files are read by ember
// (STBI_NO_STDIO) so the size bound applies before stb sees a byte. STBI_MAX_DIMENSIONS is a
// second guard under ember's own check of the header. stb's failure reason is thread-local in
// this version (STBI_THREAD_LOCAL), so decoding on several loader workers is safe.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS 16384
#define STBI_FAILURE_USERMSG
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace ember {

namespace {

// stb's reason for the last failure on this thread.
const char* stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason != nullptr ? reason : "no reason given";
}

struct StbPixels {
  stbi_uc* data = nullptr;
  ~StbPixels() { stbi_image_free(data); }
};

}  // namespace

Tensor decode_image(std::span<const uint8_t> bytes, const std::string& what, const ImageLimits& limits) {
  EMBER_CHECK(!bytes.empty(), "decode_image: ", what, ": the file is empty (0 bytes)");
  EMBER_CHECK(bytes.size() <= size_t(std::numeric_limits<int>::max()), "decode_image: ", what, ": ", bytes.size(),
              " bytes is beyond what the decoder accepts");
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int length = int(bytes.size());
  int width = 0, height = 0, channels = 0;
  EMBER_CHECK(stbi_info_from_memory(data, length, &width, &height, &channels) == 1, "decode_image: ", what,
              ": not a readable PNG or JPEG (", stb_reason(), ")");
  EMBER_CHECK(width > 0 && height > 0 && width <= limits.max_side && height <= limits.max_side &&
                  int64_t(width) * height <= limits.max_pixels,
              "decode_image: ", what, ": its header says ", width, "x", height, " pixels; expected each side in 1..",
              limits.max_side, " and at most ", limits.max_pixels, " pixels");
  StbPixels pixels;
  int w = 0, h = 0;
  pixels.data = stbi_load_from_memory(data, length, &w, &h, &channels, 3);
  EMBER_CHECK(pixels.data != nullptr, "decode_image: ", what, ": corrupt image data (", stb_reason(), ")");
  EMBER_CHECK(w == width && h == height, "decode_image: ", what, ": decoded ", w, "x", h, " pixels but the header said ",
              width, "x", height);
  Tensor out = Tensor::empty({h, w, 3}, {.dtype = DType::u8});
  std::memcpy(out.raw_data(), pixels.data, out.nbytes());
  return out;
}

Tensor read_image_file(const std::string& path, const ImageLimits& limits) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  EMBER_CHECK(!ec && std::filesystem::exists(status), "read_image_file: ", path, ": no such file");
  EMBER_CHECK(std::filesystem::is_regular_file(status), "read_image_file: ", path, ": not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  EMBER_CHECK(!ec, "read_image_file: ", path, ": cannot read its size (", ec.message(), ")");
  EMBER_CHECK(int64_t(size) <= limits.max_file_bytes, "read_image_file: ", path, ": ", size,
              " bytes, more than the limit of ", limits.max_file_bytes);
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "read_image_file: ", path, ": cannot open it");
  Tensor bytes = Tensor::empty({int64_t(size)}, {.dtype = DType::u8});
  in.read(static_cast<char*>(bytes.raw_data()), std::streamsize(size));
  EMBER_CHECK(in.gcount() == std::streamsize(size), "read_image_file: ", path, ": read ", in.gcount(), " of ", size,
              " bytes");
  return decode_image({bytes.data<uint8_t>(), size_t(size)}, path, limits);
}

}  // namespace ember
