// BatchShardSampler: each rank's slice of every global batch, which together rebuild the
// one-process order; a class-balanced batch split across ranks; exact resume through the
// DataLoader; clear errors.
#include <catch2/catch.hpp>

#include <memory>
#include <set>

#include "core/error.h"
#include "datasets/batch_shard_sampler.h"
#include "datasets/class_balanced_sampler.h"
#include "datasets/data_loader.h"
#include "ops/ops.h"

using namespace ember;
using Catch::Matchers::Contains;
using Ids = std::vector<int64_t>;

namespace {

// The samples 0..n-1 in order (a deterministic inner sampler).
struct InOrder : Sampler {
  int64_t n;
  explicit InOrder(int64_t n) : n(n) {}
  int64_t length() const override { return n; }
  Ids draw_order(Generator&) const override {
    Ids ids(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = i;
    return ids;
  }
};

// 40 samples of 5 classes (label = id % 5).
std::vector<int64_t> labels40() {
  std::vector<int64_t> y(40);
  for (size_t i = 0; i < y.size(); ++i) y[i] = int64_t(i % 5);
  return y;
}

}  // namespace

TEST_CASE("BatchShardSampler gives rank r the r-th slice of every global batch") {
  auto inner = std::make_shared<InOrder>(12);
  Generator gen(0);
  BatchShardSampler r0(inner, {.rank = 0, .world_size = 2, .batch_size = 3});
  BatchShardSampler r1(inner, {.rank = 1, .world_size = 2, .batch_size = 3});
  CHECK(r0.length() == 6);
  CHECK(r0.draw_order(gen) == Ids{0, 1, 2, 6, 7, 8});
  CHECK(r1.draw_order(gen) == Ids{3, 4, 5, 9, 10, 11});
  BatchShardSampler alone(inner, {.rank = 0, .world_size = 1, .batch_size = 6});
  CHECK(alone.draw_order(gen) == inner->draw_order(gen));
}

TEST_CASE("BatchShardSampler: the ranks' slices of a class-balanced epoch rebuild the one-process batches") {
  const int world = 2;
  const int64_t per_rank = 6;  // global batches of 12: 4 classes x 3
  auto global = std::make_shared<ClassBalancedSampler>(labels40(), ClassBalancedOptions{.per_class = 3, .batch_size = 12});
  Generator g_one(7);
  const Ids one = global->draw_order(g_one);
  std::vector<Ids> ranks;
  for (int r = 0; r < world; ++r) {
    Generator g(7);  // every rank's loader has the same seed
    ranks.push_back(BatchShardSampler(global, {.rank = r, .world_size = world, .batch_size = per_rank}).draw_order(g));
  }
  for (size_t b = 0; b * 12 < one.size(); ++b) {
    Ids rebuilt(ranks[0].begin() + std::ptrdiff_t(b * 6), ranks[0].begin() + std::ptrdiff_t(b * 6 + 6));
    rebuilt.insert(rebuilt.end(), ranks[1].begin() + std::ptrdiff_t(b * 6), ranks[1].begin() + std::ptrdiff_t(b * 6 + 6));
    CHECK(rebuilt == Ids(one.begin() + std::ptrdiff_t(b * 12), one.begin() + std::ptrdiff_t(b * 12 + 12)));
    std::set<int64_t> classes;
    for (int64_t id : rebuilt) classes.insert(id % 5);
    CHECK(classes.size() == 4);
  }
}

TEST_CASE("BatchShardSampler: a DataLoader resumed from its state continues the same slices") {
  auto data = std::make_shared<TensorDataset>(arange(40.0).reshape({40, 1}), zeros({40}, {.dtype = DType::i64}));
  auto global = std::make_shared<ClassBalancedSampler>(labels40(), ClassBalancedOptions{.per_class = 2, .batch_size = 8});
  auto mine = std::make_shared<BatchShardSampler>(global, BatchShardOptions{.rank = 1, .world_size = 2, .batch_size = 4});
  DataLoader loader(data, {.batch_size = 4, .seed = 3, .sampler = mine});
  loader.next();
  const DataLoaderState saved = loader.state();
  const Tensor second = loader.next()->inputs;
  DataLoader resumed(data, {.batch_size = 4, .seed = 3, .sampler = mine});
  resumed.set_state(saved);
  CHECK(resumed.next()->inputs.to_vector<float>() == second.to_vector<float>());
}

TEST_CASE("BatchShardSampler refuses options it cannot honour, naming them") {
  auto inner = std::make_shared<InOrder>(12);
  CHECK_THROWS_WITH(BatchShardSampler(nullptr, {}), Contains("expected an inner sampler, got null"));
  CHECK_THROWS_WITH(BatchShardSampler(inner, {.rank = 0, .world_size = 0}), Contains("world_size must be >= 1, got 0"));
  CHECK_THROWS_WITH(BatchShardSampler(inner, {.rank = 2, .world_size = 2, .batch_size = 3}),
                    Contains("rank must be in [0, 2), got 2"));
  CHECK_THROWS_WITH(BatchShardSampler(inner, {.rank = 0, .world_size = 2, .batch_size = 0}),
                    Contains("batch_size must be >= 1, got 0"));
  CHECK_THROWS_WITH(BatchShardSampler(inner, {.rank = 0, .world_size = 2, .batch_size = 5}),
                    Contains("the inner sampler's 12 samples per epoch are not whole global batches of 2 x 5 = 10"));
}
