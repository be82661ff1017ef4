// DistributedSampler: PyTorch's shards (padding, drop_last), the same permutation on every
// rank, a new one each epoch, exact resume, and clear errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <memory>

#include "core/error.h"
#include "datasets/data_loader.h"
#include "datasets/distributed_sampler.h"
#include "ops/ops.h"

using namespace ember;
using Catch::Matchers::Contains;
using Ids = std::vector<int64_t>;

namespace {

Ids shard(int64_t n, int rank, int world, bool drop_last, bool shuffle = false, uint64_t seed = 0) {
  DistributedSampler s(n, {.rank = rank, .world_size = world, .shuffle = shuffle, .drop_last = drop_last});
  Generator gen(seed);
  Ids ids = s.draw_order(gen);
  CHECK(int64_t(ids.size()) == s.length());
  return ids;
}

// Every sample id of one epoch of `loader`, in order (inputs hold the sample's index).
Ids epoch_ids(DataLoader& loader) {
  Ids ids;
  while (auto batch = loader.next())
    for (float v : batch->inputs.to_vector<float>()) ids.push_back(int64_t(v));
  return ids;
}

std::shared_ptr<TensorDataset> indexed(int64_t n) {
  return std::make_shared<TensorDataset>(arange(double(n)).reshape({n, 1}), zeros({n}, {.dtype = DType::i64}));
}

}  // namespace

TEST_CASE("DistributedSampler gives PyTorch's shards without shuffling") {
  // torch.utils.data.DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False):
  // padded to [0..9, 0, 1], rank r takes positions r, r+4, r+8.
  CHECK(shard(10, 0, 4, false) == Ids{0, 4, 8});
  CHECK(shard(10, 1, 4, false) == Ids{1, 5, 9});
  CHECK(shard(10, 2, 4, false) == Ids{2, 6, 0});
  CHECK(shard(10, 3, 4, false) == Ids{3, 7, 1});
  // drop_last=True: cut to 8.
  CHECK(shard(10, 0, 4, true) == Ids{0, 4});
  CHECK(shard(10, 3, 4, true) == Ids{3, 7});
  // More ranks than samples: the list repeats ([0, 1, 0, 1, 0]).
  CHECK(shard(2, 2, 5, false) == Ids{0});
  CHECK(shard(2, 3, 5, false) == Ids{1});
}

TEST_CASE("DistributedSampler shards one permutation: disjoint, covering, per epoch") {
  const int64_t n = 12;
  Ids all;
  for (int r = 0; r < 3; ++r) {
    Ids s = shard(n, r, 3, false, /*shuffle=*/true, /*seed=*/7);
    all.insert(all.end(), s.begin(), s.end());
  }
  Ids sorted = all;
  std::sort(sorted.begin(), sorted.end());
  Ids expected(n);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(sorted == expected);  // disjoint and covering
  CHECK(shard(n, 0, 3, false, true, 7) != shard(n, 0, 3, false, false));  // shuffled

  // Through DataLoaders with the same seed: rank 0 and rank 1 see disjoint halves each epoch,
  // and the second epoch is a different permutation.
  auto data = indexed(n);
  auto loader_for = [&](int rank) {
    return std::make_unique<DataLoader>(data, DataLoaderOptions{
        .batch_size = 4, .seed = 3, .prefetch = 0,
        .sampler = std::make_shared<DistributedSampler>(n, DistributedSamplerOptions{.rank = rank, .world_size = 2})});
  };
  auto l0 = loader_for(0), l1 = loader_for(1);
  Ids e1_r0 = epoch_ids(*l0), e1_r1 = epoch_ids(*l1);
  Ids e2_r0 = epoch_ids(*l0), e2_r1 = epoch_ids(*l1);
  REQUIRE(e1_r0.size() == 6);
  REQUIRE(e1_r1.size() == 6);
  Ids union1 = e1_r0;
  union1.insert(union1.end(), e1_r1.begin(), e1_r1.end());
  std::sort(union1.begin(), union1.end());
  CHECK(union1 == expected);
  CHECK(e2_r0 != e1_r0);
}

TEST_CASE("DistributedSampler resumes mid-epoch with its loader") {
  const int64_t n = 20;
  auto data = indexed(n);
  DataLoaderOptions options{.batch_size = 3, .seed = 5, .prefetch = 0,
                            .sampler = std::make_shared<DistributedSampler>(n, DistributedSamplerOptions{.rank = 1, .world_size = 2})};
  DataLoader first(data, options);
  epoch_ids(first);   // epoch 1
  first.next();        // one batch of epoch 2
  DataLoaderState saved = first.state();
  Ids rest = epoch_ids(first);
  DataLoader resumed(data, options);
  resumed.set_state(saved);
  CHECK(epoch_ids(resumed) == rest);
}

TEST_CASE("DistributedSampler rejects impossible options, naming them") {
  CHECK_THROWS_WITH(DistributedSampler(10, {.rank = 2, .world_size = 2}), Contains("rank must be in [0, 2), got 2"));
  CHECK_THROWS_WITH(DistributedSampler(10, {.rank = 0, .world_size = 0}), Contains("world_size must be at least 1, got 0"));
  CHECK_THROWS_WITH(DistributedSampler(0, {}), Contains("at least one sample, got 0"));
  CHECK_THROWS_WITH(DistributedSampler(3, {.rank = 0, .world_size = 4, .drop_last = true}),
                    Contains("drop_last with 3 samples leaves nothing for 4 ranks"));
}
