// ClassBalancedSampler: MPerClassSampler's balanced batches, drawn deterministically from the
// DataLoader's generator, resumable mid-epoch, with clear errors for impossible options.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <set>

#include "core/error.h"
#include "datasets/class_balanced_sampler.h"
#include "datasets/data_loader.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

// n samples with label i % classes, except that class `classes - 1` has only `small` members
// (samples of that class beyond the first `small` get label 0). Inputs: (n, 1) with row i = i.
struct Labelled {
  std::vector<int64_t> labels;
  std::shared_ptr<TensorDataset> data;
};
Labelled labelled(int64_t n, int64_t classes, int64_t small) {
  Labelled l;
  Tensor x = Tensor::empty({n, 1}), y = Tensor::empty({n}, {.dtype = DType::i64});
  int64_t small_seen = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t label = i % classes;
    if (label == classes - 1 && small_seen++ >= small) label = 0;
    l.labels.push_back(label);
    x.data<float>()[i] = float(i);
    y.data<int64_t>()[i] = label;
  }
  l.data = std::make_shared<TensorDataset>(x, y);
  return l;
}

// The sample ids of every batch of one epoch.
std::vector<std::vector<int64_t>> epoch_ids(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  while (auto batch = loader.next()) {
    std::vector<int64_t> ids;
    for (float v : batch->inputs.to_vector<float>()) ids.push_back(int64_t(v));
    out.push_back(ids);
  }
  return out;
}

DataLoaderOptions balanced(const Labelled& l, int64_t per_class, int64_t batch, uint64_t seed, int prefetch = 2) {
  DataLoaderOptions o;
  o.batch_size = batch;
  o.seed = seed;
  o.prefetch = prefetch;
  o.sampler = std::make_shared<ClassBalancedSampler>(l.labels, ClassBalancedOptions{.per_class = per_class,
                                                                                    .batch_size = batch});
  return o;
}

}  // namespace

TEST_CASE("class-balanced sampler: every batch is per_class samples of batch / per_class distinct classes") {
  const Labelled l = labelled(600, 10, 60);
  DataLoader loader(l.data, balanced(l, 4, 32, 3));
  const auto batches = epoch_ids(loader);
  REQUIRE(batches.size() == 600 / 32);  // an epoch: the dataset size rounded down to batches
  std::map<int64_t, int64_t> class_use;
  for (const auto& ids : batches) {
    REQUIRE(ids.size() == 32);
    for (size_t k = 0; k < 8; ++k) {
      std::set<int64_t> distinct;
      for (size_t j = 0; j < 4; ++j) {
        const int64_t id = ids[4 * k + j];
        CHECK(l.labels[size_t(id)] == l.labels[size_t(ids[4 * k])]);  // a block of 4 shares its class
        distinct.insert(id);
      }
      CHECK(distinct.size() == 4);  // without replacement
      ++class_use[l.labels[size_t(ids[4 * k])]];
    }
    std::set<int64_t> classes;
    for (size_t k = 0; k < 8; ++k) classes.insert(l.labels[size_t(ids[4 * k])]);
    CHECK(classes.size() == 8);
  }
  CHECK(class_use.size() == 10);  // every class is drawn at some point
}

TEST_CASE("class-balanced sampler: a class smaller than per_class is sampled with replacement") {
  const Labelled l = labelled(200, 4, 2);  // class 3 has two members
  DataLoader loader(l.data, balanced(l, 5, 20, 1, 0));
  bool saw_small = false;
  for (const auto& ids : epoch_ids(loader))
    for (size_t k = 0; k < 4; ++k)
      if (l.labels[size_t(ids[5 * k])] == 3) {
        saw_small = true;
        for (size_t j = 0; j < 5; ++j) CHECK(l.labels[size_t(ids[5 * k + j])] == 3);
      }
  CHECK(saw_small);
}

TEST_CASE("class-balanced sampler: deterministic from the seed, different across seeds and epochs") {
  const Labelled l = labelled(300, 10, 30);
  DataLoader a(l.data, balanced(l, 3, 15, 9)), b(l.data, balanced(l, 3, 15, 9, 0)), c(l.data, balanced(l, 3, 15, 10));
  const auto a1 = epoch_ids(a), b1 = epoch_ids(b), c1 = epoch_ids(c);
  CHECK(a1 == b1);  // prefetching or not
  CHECK(a1 != c1);
  CHECK(epoch_ids(a) != a1);  // the next epoch draws anew
}

TEST_CASE("class-balanced sampler: a loader restored mid-epoch continues with the same batches") {
  const Labelled l = labelled(300, 10, 30);
  DataLoader full(l.data, balanced(l, 3, 15, 4));
  epoch_ids(full);
  const auto epoch2 = epoch_ids(full);

  DataLoader first(l.data, balanced(l, 3, 15, 4));
  epoch_ids(first);
  for (int i = 0; i < 7; ++i) first.next();
  const DataLoaderState saved = first.state();
  DataLoader resumed(l.data, balanced(l, 3, 15, 4));
  resumed.set_state(saved);
  const auto rest = epoch_ids(resumed);
  REQUIRE(rest.size() == epoch2.size() - 7);
  CHECK(std::equal(rest.begin(), rest.end(), epoch2.begin() + 7));
}

TEST_CASE("class-balanced sampler: impossible options name the option, the expectation and the value") {
  const std::vector<int64_t> labels = {0, 1, 2, 0, 1, 2, 0, 1, 2};
  auto make = [&](int64_t m, int64_t b, int64_t length = 0) {
    return ClassBalancedSampler(labels, {.per_class = m, .batch_size = b, .length = length});
  };
  CHECK_THROWS_WITH(make(0, 4), Contains("per_class must be at least 1, got 0"));
  CHECK_THROWS_WITH(make(2, 5), Contains("batch_size must be a positive multiple of per_class (2), got 5"));
  CHECK_THROWS_WITH(make(2, 8), Contains("only 3 classes"));
  CHECK_THROWS_WITH(make(1, 3, -1), Contains("length must be >= 0"));
  CHECK_THROWS_WITH(make(3, 9, 5), Contains("holds no batch of 9"));
  CHECK(make(3, 9).length() == 9);
  CHECK(make(1, 2, 7).length() == 6);
  CHECK_THROWS_WITH(ClassBalancedSampler(Tensor::empty({3}), {.per_class = 1, .batch_size = 1}),
                    Contains("(N) i64 CPU tensor"));
}
