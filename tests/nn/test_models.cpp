// Ready-made models (nn/models.h): output shapes, and the embedding net sharing mnist_cnn's trunk.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "nn/models.h"
#include "ops/ops.h"

using namespace ember;

TEST_CASE("mnist_embedding_net: (N, 1, 28, 28) -> (N, dim), mnist_cnn's trunk with a new head") {
  for (int64_t dim : {2, 64, 128}) {
    INFO("dim " << dim);
    Generator gen(3);
    auto net = mnist_embedding_net(dim, &gen);
    const Tensor emb = (*net)(randn({5, 1, 28, 28}));
    CHECK(emb.shape() == Shape{5, dim});
    // Same layers and parameters as mnist_cnn except the last Linear's output size.
    Generator gen2(3);
    auto cnn = mnist_cnn(&gen2);
    const auto a = net->named_parameters(), b = cnn->named_parameters();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i + 2 < a.size(); ++i) {
      CHECK(a[i].first == b[i].first);
      CHECK(a[i].second.shape() == b[i].second.shape());
    }
    CHECK(a.back().second.shape() == Shape{dim});           // the head's bias
    CHECK(a[a.size() - 2].second.shape() == Shape{dim, 128});  // the head's weight
  }
  CHECK(mnist_cnn()->operator()(zeros({2, 1, 28, 28})).shape() == Shape{2, 10});
  CHECK_THROWS_WITH(mnist_embedding_net(0), Catch::Contains("embedding size must be at least 1, got 0"));
}
