#include "image_fixtures.h"

#include <algorithm>

#include <fstream>

#include "core/error.h"

namespace ember::test {

Tensor u8_image(int64_t height, int64_t width, int64_t channels, const std::vector<uint8_t>& values) {
  EMBER_CHECK(int64_t(values.size()) == height * width * channels, "u8_image: ", values.size(), " values for ",
              height, "x", width, "x", channels);
  Tensor out = Tensor::empty({height, width, channels}, {.dtype = DType::u8});
  std::copy(values.begin(), values.end(), out.data<uint8_t>());
  return out;
}

Tensor patterned_image(int64_t height, int64_t width, int seed) {
  std::vector<uint8_t> values;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t v : {seed + 3 * y + 5 * x, 2 * y + x, 255 - seed - x}) values.push_back(uint8_t(((v % 256) + 256) % 256));
  return u8_image(height, width, 3, values);
}

std::vector<float> values_of(const Tensor& image) { return image.to(DType::f32).contiguous().to_vector<float>(); }

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  EMBER_CHECK(out.good(), "write_file: cannot write ", path);
}

}  // namespace ember::test
