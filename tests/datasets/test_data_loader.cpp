#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <set>
#include <thread>

#include "core/error.h"
#include "datasets/data_loader.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

// n samples: inputs (n, 2) f32 with row i = (i, -i), targets (n) i64 = i.
std::shared_ptr<TensorDataset> numbered(int64_t n) {
  Tensor x = Tensor::empty({n, 2}), y = Tensor::empty({n}, {.dtype = DType::i64});
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[2 * i] = float(i);
    x.data<float>()[2 * i + 1] = -float(i);
    y.data<int64_t>()[i] = i;
  }
  return std::make_shared<TensorDataset>(x, y);
}

// The target ids of one epoch, batch by batch, checking that inputs match targets.
std::vector<std::vector<int64_t>> epoch_ids(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& [x, y] : loader) {
    const std::vector<int64_t> ids = y.to_vector<int64_t>();
    const std::vector<float> xs = x.to_vector<float>();
    REQUIRE(x.shape() == Shape{int64_t(ids.size()), 2});
    for (size_t i = 0; i < ids.size(); ++i) {
      CHECK(xs[2 * i] == float(ids[i]));
      CHECK(xs[2 * i + 1] == -float(ids[i]));
    }
    out.push_back(ids);
  }
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

TEST_CASE("data_loader: every sample exactly once per epoch, with and without prefetch") {
  for (int prefetch : {0, 1, 3}) {
    DataLoader loader(numbered(23), {.batch_size = 5, .shuffle = true, .seed = 9, .prefetch = prefetch});
    CHECK(loader.size() == 5);
    const auto batches = epoch_ids(loader);
    REQUIRE(batches.size() == 5);
    CHECK(batches.back().size() == 3);  // the remainder
    std::vector<int64_t> ids = flat(batches);
    const std::vector<int64_t> shuffled = ids;
    std::sort(ids.begin(), ids.end());
    std::vector<int64_t> all(23);
    std::iota(all.begin(), all.end(), 0);
    CHECK(ids == all);
    CHECK(shuffled != all);
  }
}

TEST_CASE("data_loader: same seed same order, new order each epoch, sequential without shuffle") {
  DataLoader a(numbered(40), {.batch_size = 8, .seed = 3}), b(numbered(40), {.batch_size = 8, .seed = 3, .prefetch = 0});
  const auto a1 = flat(epoch_ids(a)), b1 = flat(epoch_ids(b));
  CHECK(a1 == b1);
  const auto a2 = flat(epoch_ids(a));
  CHECK(a2 != a1);
  CHECK(a.epoch() == 2);
  DataLoader other(numbered(40), {.batch_size = 8, .seed = 4});
  CHECK(flat(epoch_ids(other)) != a1);
  DataLoader seq(numbered(7), {.batch_size = 3, .shuffle = false});
  CHECK(epoch_ids(seq) == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}});
}

TEST_CASE("data_loader: drop_last drops the short batch") {
  DataLoader loader(numbered(23), {.batch_size = 5, .drop_last = true});
  CHECK(loader.size() == 4);
  const auto batches = epoch_ids(loader);
  CHECK(batches.size() == 4);
  for (const auto& b : batches) CHECK(b.size() == 5);
  DataLoader tiny(numbered(3), {.batch_size = 5, .drop_last = true});
  CHECK(tiny.size() == 0);
  CHECK(epoch_ids(tiny).empty());
}

TEST_CASE("data_loader: next() ends an epoch with nullopt, then starts the next") {
  DataLoader loader(numbered(4), {.batch_size = 2, .seed = 1});
  CHECK(loader.next().has_value());
  CHECK(loader.next().has_value());
  CHECK_FALSE(loader.next().has_value());
  CHECK(loader.epoch() == 1);
  CHECK(loader.next().has_value());
  CHECK(loader.epoch() == 2);
}

TEST_CASE("data_loader: state() mid-epoch resumes the exact remaining batches") {
  for (int prefetch : {0, 2}) {
    DataLoader reference(numbered(30), {.batch_size = 4, .seed = 21, .prefetch = prefetch});
    epoch_ids(reference);  // epoch 1
    DataLoader original(numbered(30), {.batch_size = 4, .seed = 21, .prefetch = prefetch});
    epoch_ids(original);
    std::vector<std::vector<int64_t>> want;
    for (auto& [x, y] : reference) want.push_back(y.to_vector<int64_t>());  // epoch 2
    want.push_back({-1});
    for (auto& [x, y] : reference) want.push_back(y.to_vector<int64_t>());  // epoch 3

    std::vector<std::vector<int64_t>> got;
    for (int i = 0; i < 3; ++i) got.push_back(original.next()->targets.to_vector<int64_t>());
    const DataLoaderState saved = original.state();
    CHECK(saved.epoch == 2);
    CHECK(saved.batch == 3);
    // A fresh loader with another seed picks up from the saved state.
    DataLoader resumed(numbered(30), {.batch_size = 4, .seed = 999, .prefetch = prefetch});
    resumed.set_state(saved);
    for (auto& [x, y] : resumed) got.push_back(y.to_vector<int64_t>());
    got.push_back({-1});
    for (auto& [x, y] : resumed) got.push_back(y.to_vector<int64_t>());
    CHECK(got == want);
  }
}

TEST_CASE("data_loader: errors from the worker are rethrown by next(), bad arguments are named") {
  std::atomic<int> calls{0};
  DataLoader loader(numbered(10), {.batch_size = 2, .shuffle = false, .prefetch = 2, .transform = [&](Batch& b) {
                                     if (++calls == 3) throw Error("transform failed on batch 3", __FILE__, __LINE__);
                                   }});
  CHECK(loader.next().has_value());
  CHECK(loader.next().has_value());
  CHECK_THROWS_WITH(loader.next(), Contains("transform failed on batch 3"));
  // The loader stays usable: the batch is assembled again.
  CHECK(loader.next()->targets.to_vector<int64_t>() == std::vector<int64_t>{4, 5});

  CHECK_THROWS_WITH(DataLoader(numbered(3), {.batch_size = 0}), Contains("batch_size must be > 0, got 0"));
  DataLoader ok(numbered(8), {.batch_size = 4});
  CHECK_THROWS_WITH(ok.set_state({0, 0, 1, 3}), Contains("batch 3 of epoch 1 does not exist (2 batches per epoch)"));
  CHECK_THROWS_WITH(TensorDataset(Tensor::empty({3, 2}), Tensor::empty({2}, {.dtype = DType::i64})), Contains("samples"));
}

TEST_CASE("data_loader: destroying a loader mid-epoch stops its worker") {
  for (int i = 0; i < 20; ++i) {
    // Counts the batches the worker assembles; shared so it outlives the loader.
    auto assembled = std::make_shared<std::atomic<int>>(0);
    {
      DataLoader loader(numbered(100), {.batch_size = 2, .prefetch = 4, .transform = [assembled](Batch&) { ++*assembled; }});
      CHECK(loader.next().has_value());
    }  // the destructor joins a worker blocked on a full queue (a leak would crash or hang here)
    const int at_destruction = assembled->load();
    // The full queue held the worker back: it never assembled the 50-batch epoch.
    CHECK(at_destruction >= 1);
    CHECK(at_destruction < 50);
    // And it is gone: nothing assembles a batch after the destructor returned.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(assembled->load() == at_destruction);
  }
}

TEST_CASE("data_loader: random_permutation is a permutation and depends on the generator") {
  Generator g(5), h(5), k(6);
  std::vector<int64_t> p = random_permutation(1000, g);
  CHECK(p == random_permutation(1000, h));
  CHECK(p != random_permutation(1000, k));
  CHECK(g.offset() == 500);
  std::sort(p.begin(), p.end());
  CHECK(p.front() == 0);
  CHECK(p.back() == 999);
  CHECK(std::adjacent_find(p.begin(), p.end()) == p.end());
  CHECK(random_permutation(0, g).empty());
}

TEST_CASE("data_loader: a TensorDataset's batches are its rows, whatever the workers and prefetch") {
  // The rows in the permutation's order, bitwise: what the loader gathered before it read
  // datasets through get() (Note [Prefetch]).
  DataLoader reference(numbered(37), {.batch_size = 8, .seed = 4, .prefetch = 0});
  const auto expected = epoch_ids(reference);
  Generator gen(4);
  CHECK(flat(expected) == random_permutation(37, gen));
  for (int workers : {1, 3})
    for (int prefetch : {1, 4}) {
      DataLoader loader(numbered(37), {.batch_size = 8, .seed = 4, .prefetch = prefetch, .workers = workers});
      CHECK(epoch_ids(loader) == expected);
    }
}
