#include "datasets/png_write.h"

#include <fstream>

#include "core/error.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#define STBI_WRITE_NO_STDIO
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace ember {

std::vector<uint8_t> encode_png(const Tensor& image) {
  EMBER_CHECK(image.defined() && image.is_cpu() && image.dtype() == DType::u8 && (image.dim() == 2 || image.dim() == 3),
              "encode_png: expected a CPU u8 image (H, W) or (H, W, C), got ",
              image.defined() ? shape_str(image.shape()) : std::string("an undefined tensor"));
  const int64_t h = image.size(0), w = image.size(1), c = image.dim() == 3 ? image.size(2) : 1;
  EMBER_CHECK(h > 0 && w > 0 && h <= 65535 && w <= 65535 && c >= 1 && c <= 4, "encode_png: cannot encode a ", h, "x", w,
              " image with ", c, " channels (sides 1..65535, channels 1..4)");
  const Tensor pixels = image.contiguous();
  std::vector<uint8_t> out;
  auto append = [](void* context, void* data, int size) {
    auto* bytes = static_cast<std::vector<uint8_t>*>(context);
    bytes->insert(bytes->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  EMBER_CHECK(stbi_write_png_to_func(append, &out, int(w), int(h), int(c), pixels.raw_data(), int(w * c)) != 0,
              "encode_png: the encoder failed for a ", h, "x", w, "x", c, " image");
  return out;
}

void write_png(const std::string& path, const Tensor& image) {
  const std::vector<uint8_t> bytes = encode_png(image);
  std::ofstream out(path, std::ios::binary);
  EMBER_CHECK(out.good(), "write_png: cannot create ", path);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  out.close();
  EMBER_CHECK(out.good(), "write_png: writing ", path, " failed");
}

}  // namespace ember
