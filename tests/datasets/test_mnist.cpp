#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "datasets/mnist.h"
#include "idx_fixtures.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::test;

namespace {

// n images whose pixels are their index, labels i % 10; plain or gzip per file.
void write_split(const TempDir& dir, const std::string& prefix, uint32_t n, bool gzip_images, bool gzip_labels) {
  std::vector<uint8_t> pixels(size_t{n} * 28 * 28), labels(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::fill(pixels.begin() + i * 784, pixels.begin() + (i + 1) * 784, static_cast<uint8_t>(i));
    labels[i] = static_cast<uint8_t>(i % 10);
  }
  write_bytes(dir.file(prefix + "-images-idx3-ubyte" + (gzip_images ? ".gz" : "")), idx_bytes({n, 28, 28}, pixels), gzip_images);
  write_bytes(dir.file(prefix + "-labels-idx1-ubyte" + (gzip_labels ? ".gz" : "")), idx_bytes({n}, labels), gzip_labels);
}

}  // namespace

TEST_CASE("mnist: loads train and test splits, plain or gzip") {
  TempDir dir("mnist");
  write_split(dir, "train", 12, /*gzip_images=*/false, /*gzip_labels=*/true);
  write_split(dir, "t10k", 3, /*gzip_images=*/true, /*gzip_labels=*/false);
  const MnistSplit train = load_mnist_split(dir.path.string(), true);
  CHECK(train.images.dims == std::vector<int64_t>{12, 28, 28});
  CHECK(train.labels.dims == std::vector<int64_t>{12});
  CHECK(train.images.data[11 * 784 + 5] == 11);
  CHECK(train.labels.data == std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1});
  const MnistSplit test = load_mnist_split(dir.path.string(), false);
  CHECK(test.images.dims == std::vector<int64_t>{3, 28, 28});
  CHECK(test.labels.data == std::vector<uint8_t>{0, 1, 2});
}

TEST_CASE("mnist: missing files name the fetch command") {
  TempDir dir("mnist_missing");
  CHECK_THROWS_WITH(load_mnist_split(dir.path.string(), true),
                    Catch::Contains("has neither train-images-idx3-ubyte nor train-images-idx3-ubyte.gz") &&
                        Catch::Contains("`datasets/fetch_mnist.sh " + dir.path.string() + "`") && Catch::Contains("--fashion"));
  write_split(dir, "train", 2, false, false);
  std::filesystem::remove(dir.file("train-labels-idx1-ubyte"));
  CHECK_THROWS_WITH(load_mnist_split(dir.path.string(), true), Catch::Contains("neither train-labels-idx1-ubyte nor"));
  CHECK_THROWS_WITH(load_mnist_split(dir.path.string(), false), Catch::Contains("neither t10k-images-idx3-ubyte nor"));
}

TEST_CASE("mnist: inconsistent files are rejected") {
  TempDir dir("mnist_bad");
  const std::string d = dir.path.string();
  write_split(dir, "train", 4, false, false);
  write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({3}, {1, 2, 3}));
  CHECK_THROWS_WITH(load_mnist_split(d, true), Catch::Contains("holds 4 images but '") && Catch::Contains("holds 3 labels"));
  write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({4}, {1, 2, 10, 3}));
  CHECK_THROWS_WITH(load_mnist_split(d, true), Catch::Contains("label 10 at index 2 in '") && Catch::Contains("is outside 0..9"));
  write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({2, 2}, {1, 2, 3, 4}));
  CHECK_THROWS_WITH(load_mnist_split(d, true), Catch::Contains("expected labels of shape (N,)") && Catch::Contains("got (2, 2)"));
  write_bytes(dir.file("train-images-idx3-ubyte"), idx_bytes({1, 32, 32}, std::vector<uint8_t>(32 * 32)));
  CHECK_THROWS_WITH(load_mnist_split(d, true), Catch::Contains("expected images of shape (N, 28, 28)") && Catch::Contains("got (1, 32, 32)"));
}

// Runs against the real data when it has been fetched (datasets/fetch_mnist.sh); the known
// first labels of both data sets make it a check of the bytes, not just of the shapes.
TEST_CASE("mnist: real MNIST and Fashion-MNIST when present") {
  const std::string root = test::mnist_data_root();
  if (!std::filesystem::exists(root + "/mnist/train-labels-idx1-ubyte"))
    EMBER_SKIP("no MNIST under " << root << "/mnist (fetch with datasets/fetch_mnist.sh)");
  const MnistSplit train = load_mnist_split(root + "/mnist", true);
  CHECK(train.images.dims == std::vector<int64_t>{60000, 28, 28});
  CHECK(std::vector<uint8_t>(train.labels.data.begin(), train.labels.data.begin() + 10) ==
        std::vector<uint8_t>{5, 0, 4, 1, 9, 2, 1, 3, 1, 4});
  const MnistSplit test = load_mnist_split(root + "/mnist", false);
  CHECK(test.labels.dims == std::vector<int64_t>{10000});
  CHECK(std::vector<uint8_t>(test.labels.data.begin(), test.labels.data.begin() + 5) == std::vector<uint8_t>{7, 2, 1, 0, 4});
  if (std::filesystem::exists(root + "/fashion-mnist")) {
    const MnistSplit fashion = load_mnist_split(root + "/fashion-mnist", true);
    CHECK(fashion.images.dims == std::vector<int64_t>{60000, 28, 28});
    CHECK(std::vector<uint8_t>(fashion.labels.data.begin(), fashion.labels.data.begin() + 5) == std::vector<uint8_t>{9, 0, 0, 3, 0});
  }
}
