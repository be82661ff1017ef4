// Fixtures of the train apps' tests (train_fixtures.h).
#include "train_fixtures.h"

#include <catch2/catch.hpp>

#include "datasets/png_write.h"
#include "ops/ops.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace ember::test {

// root/<train|val>/c<k>/<i>.png, `per_class` images per class and split, a little noise.
void write_bar_folders(const test::TempDir& dir, int per_class) {
  uint32_t noise = 12345;
  for (const char* split : {"train", "val"}) {
    for (int64_t k = 0; k < kBarClasses; ++k) {
      const std::filesystem::path folder = dir.path / split / ("c" + std::to_string(k));
      std::filesystem::create_directories(folder);
      for (int i = 0; i < per_class; ++i) {
        std::vector<uint8_t> pixels(16 * 16 * 3);
        for (int64_t y = 0; y < 16; ++y)
          for (int64_t x = 0; x < 16; ++x)
            for (int64_t c = 0; c < 3; ++c) {
              noise = noise * 1664525u + 1013904223u;
              const bool bar = y == 2 * k + 2 || y == 2 * k + 3;
              pixels[size_t((y * 16 + x) * 3 + c)] = uint8_t((bar ? 200 : 20) + (noise >> 27));
            }
        write_png((folder / (std::to_string(i) + ".png")).string(), tensor(pixels, {16, 16, 3}));
      }
    }
  }
}

void write_synthetic_mnist(const TempDir& dir, uint32_t n_train, uint32_t n_test) {
  auto split = [&](const std::string& prefix, uint32_t n, uint32_t seed) {
    std::vector<uint8_t> images(size_t(n) * 784), labels(n);
    uint32_t state = seed;
    auto noise = [&] { state = state * 1664525u + 1013904223u; return uint8_t((state >> 24) % 40); };
    for (uint32_t i = 0; i < n; ++i) {
      labels[i] = uint8_t(i % 10);
      for (uint32_t p = 0; p < 784; ++p) images[size_t(i) * 784 + p] = noise();
      for (uint32_t col = 4; col < 24; ++col) images[size_t(i) * 784 + (2 * labels[i] + 4) * 28 + col] = 250;
    }
    write_bytes(dir.file(prefix + "-images-idx3-ubyte"), idx_bytes({n, 28, 28}, images));
    write_bytes(dir.file(prefix + "-labels-idx1-ubyte"), idx_bytes({n}, labels));
  };
  split("train", n_train, 1);
  split("t10k", n_test, 2);
}

void check_bitwise_equal(const StateDict& a, const StateDict& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    const Tensor& u = b.at(name);
    REQUIRE(u.shape() == t.shape());
    CHECK(std::memcmp(t.contiguous().raw_data(), u.contiguous().raw_data(), t.nbytes()) == 0);
  }
}

}  // namespace ember::test
