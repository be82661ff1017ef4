#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "datasets/data_loader.h"
#include "datasets/tensor_dataset.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

TEST_CASE("tensor_dataset: MnistDataset normalises pixels and widens labels") {
  MnistSplit split;
  split.images.dims = {2, 28, 28};
  split.images.data.assign(2 * 784, 0);
  split.images.data[5] = 255;
  split.images.data[784] = 51;
  split.labels.dims = {2};
  split.labels.data = {7, 3};
  const MnistDataset data(split);
  CHECK(data.size() == 2);
  CHECK(data.inputs().shape() == Shape{2, 1, 28, 28});
  CHECK(data.targets().dtype() == DType::i64);
  CHECK(data.targets().to_vector<int64_t>() == std::vector<int64_t>{7, 3});
  const std::vector<float> px = data.inputs().to_vector<float>();
  CHECK(px[0] == Approx((0.0 - 0.1307) / 0.3081));
  CHECK(px[5] == Approx((1.0 - 0.1307) / 0.3081));
  CHECK(px[784] == Approx((0.2 - 0.1307) / 0.3081));

  const MnistDataset raw(split, {.mean = 0.0, .std = 1.0});
  CHECK(raw.inputs().to_vector<float>()[5] == 1.0f);

  split.labels.dims = {3};
  CHECK_THROWS_WITH(MnistDataset(split), Contains("expected labels (2,), got (3,)"));
  split.labels.dims = {2};
  split.images.dims = {2, 28, 27};
  CHECK_THROWS_WITH(MnistDataset(split), Contains("expected images (N, 28, 28), got (2, 28, 27)"));
}

TEST_CASE("tensor_dataset: TensorDataset checks its tensors") {
  CHECK_THROWS_WITH(TensorDataset(Tensor::empty({3, 2}), Tensor::empty({2}, {.dtype = DType::i64})),
                    Contains("inputs have 3 samples but targets have 2"));
  Tensor x = Tensor::empty({2, 3});
  CHECK_THROWS_WITH(TensorDataset(Tensor::view_of(x, {3, 2}, {1, 3}, 0), Tensor::empty({3})),
                    Contains("must be contiguous"));
}

TEST_CASE("tensor_dataset: the real MNIST training split, when present") {
  const std::string dir = test::mnist_data_root() + "/mnist";
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte") &&
      !std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    EMBER_SKIP("MNIST not found in " << dir << " (fetch it with datasets/fetch_mnist.sh)");
  auto train = std::make_shared<MnistDataset>(dir, true);
  REQUIRE(train->size() == 60000);
  // The normalisation constants are the training set's own statistics.
  const std::vector<float> px = train->inputs().to_vector<float>();
  double sum = 0, sq = 0;
  for (float v : px) {
    sum += v;
    sq += double(v) * v;
  }
  const double mean = sum / double(px.size()), var = sq / double(px.size()) - mean * mean;
  CHECK(std::abs(mean) < 1e-3);
  CHECK(std::sqrt(var) == Approx(1.0).epsilon(1e-3));
  DataLoader loader(train, {.batch_size = 256, .seed = 0});
  CHECK(loader.size() == 235);
  int64_t seen = 0;
  for (auto& [x, y] : loader) seen += x.size(0);
  CHECK(seen == 60000);
}
