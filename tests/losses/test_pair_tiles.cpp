// What the CPU pair losses share beneath their formulas (ops/cpu/similarity_tiles.h,
// ops/cpu/self_similarity_passes.h, ops/cpu/class_members.h): the per-class member lists they
// visit positives through, the rounds of symmetric tiles, f32 tiles that start on the prepacked
// panels of E (Note [Prepacked rows]) agreeing with tiles that take the plain GEMM, over a batch
// of several tiles in both directions, and the same bits at any thread count; the class losses'
// blocks of whole rows (ops/cpu/whole_cross_rows.h) likewise.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "ember.h"
#include "metric_loss_testing.h"
#include "ops/cpu/class_members.h"
#include "ops/cpu/self_similarity_passes.h"
#include "ops/cpu/whole_cross_rows.h"

using namespace ember;
using namespace ember::metric_testing;

namespace {

std::vector<int64_t> to_vector(std::span<const int64_t> s) { return {s.begin(), s.end()}; }

// The streamed pair losses over one set of rows.
const std::vector<std::pair<const char*, LossFn>> kPairLosses = {
    {"ntxent", [](const Tensor& x, const Tensor& l) { return ntxent_loss(x, l); }},
    {"supcon", [](const Tensor& x, const Tensor& l) { return supcon_loss(x, l); }},
    {"contrastive", [](const Tensor& x, const Tensor& l) { return contrastive_loss(x, l); }},
    {"multisim", [](const Tensor& x, const Tensor& l) { return multi_similarity_loss(x, l); }},
    {"triplet", [](const Tensor& x, const Tensor& l) { return triplet_margin_loss(x, l); }},
};

// Labels of a batch of 300 (several tiles in both directions, none dividing it): 5 per class,
// spread over the tiles.
Tensor spread_labels() {
  std::vector<int64_t> labels(300);
  for (int64_t i = 0; i < 300; ++i) labels[size_t(i)] = (i * 7) % 60;
  return labels_of(labels);
}

}  // namespace

TEST_CASE("ClassMembers lists each label's indices in ascending order, and a tile's columns of them",
          "[losses][pairs]") {
  const std::vector<int64_t> y = {7, -3, 7, 2, -3, 7, 9, 2};  // unsorted, negative, a singleton
  const cpu::ClassMembers members(y.data(), int64_t(y.size()));
  CHECK(to_vector(members.of(0)) == std::vector<int64_t>{0, 2, 5});
  CHECK(to_vector(members.of(5)) == std::vector<int64_t>{0, 2, 5});
  CHECK(to_vector(members.of(1)) == std::vector<int64_t>{1, 4});
  CHECK(to_vector(members.of(3)) == std::vector<int64_t>{3, 7});
  CHECK(to_vector(members.of(6)) == std::vector<int64_t>{6});
  CHECK(to_vector(members.in_columns(0, 1, 5)) == std::vector<int64_t>{2});     // [1, 5)
  CHECK(to_vector(members.in_columns(2, 0, 2)) == std::vector<int64_t>{0});     // c1 excluded
  CHECK(to_vector(members.in_columns(5, 5, 8)) == std::vector<int64_t>{5});     // c0 included
  CHECK(to_vector(members.in_columns(6, 0, 6)).empty());                       // before its only member
  CHECK(to_vector(members.in_columns(3, 4, 4)).empty());                       // an empty range

  const std::vector<int64_t> one_class(5, 4);
  const cpu::ClassMembers all(one_class.data(), 5);
  CHECK(to_vector(all.of(3)) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(to_vector(all.in_columns(3, 1, 3)) == std::vector<int64_t>{1, 2});
  const cpu::ClassMembers none(nullptr, 0);  // an empty batch builds
}

TEST_CASE("f32 pair losses: tiles on the packed panels agree with tiles on the plain GEMM and with one tile",
          "[losses][pairs]") {
  TilesGuard guard;
  const Tensor y = spread_labels();  // several 48-column panels too
  const int64_t B = y.size(0);
  Generator gen(21);
  const Tensor emb = randn({B, 16}, {}, &gen);
  for (const auto& [name, fn] : kPairLosses) {
    INFO(name);
    set_pair_tiles({.rows = B, .cols = B});
    const LossAndGrad whole = loss_and_grad(fn, emb, y);
    for (const PairTiles tiles : {PairTiles{64, 48}, PairTiles{40, 96}, PairTiles{64, 50}, PairTiles{37, 101}}) {
      INFO("tiles " << tiles.rows << " x " << tiles.cols);
      set_pair_tiles(tiles);
      const LossAndGrad streamed = loss_and_grad(fn, emb, y);
      test::check_close(streamed.loss, whole.loss, 1e-5, 1e-6);
      test::check_close(streamed.grad, whole.grad, 1e-4, 1e-6);
    }
  }
}

TEST_CASE("BlockRounds pairs every two blocks exactly once, and no block twice in a round", "[losses][pairs]") {
  for (int64_t blocks = 0; blocks <= 9; ++blocks) {
    INFO(blocks << " blocks");
    const cpu::BlockRounds rounds(blocks);
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int64_t r = 0; r < rounds.rounds(); ++r) {
      std::set<int64_t> in_round;
      for (int64_t k = 0; k < rounds.pairs_per_round(); ++k) {
        const auto [I, J] = rounds.pair(r, k);
        if (I < 0) continue;  // the bye of an odd count
        REQUIRE((0 <= I && I < J && J < blocks));
        CHECK(seen.insert({I, J}).second);
        CHECK(in_round.insert(I).second);
        CHECK(in_round.insert(J).second);
      }
      CHECK(int64_t(in_round.size()) >= blocks - 1);  // everyone plays but the bye
    }
    CHECK(int64_t(seen.size()) == blocks * (blocks - 1) / 2);
  }
}

// Note [Symmetric tile rounds]: a row's tiles fold in an order fixed by B and the tile size,
// whichever thread computes them. 7 blocks of 40 rows and a short one: a bye in every round.
TEST_CASE("CPU pair losses give the same bits at 1, 2 and 3 threads", "[losses][pairs]") {
  TilesGuard guard;
  set_pair_tiles({.rows = 40, .cols = 96});
  const int before = num_threads();
  const Tensor y = spread_labels();
  const int64_t B = y.size(0);
  for (const DType dtype : {DType::f32, DType::f64}) {
    Generator gen(5);
    const Tensor emb = randn({B, 24}, {.dtype = dtype}, &gen);
    for (const auto& [name, fn] : kPairLosses) {
      INFO(name << " in " << dtype_name(dtype));
      std::vector<LossAndGrad> results;
      for (const int threads : {1, 2, 3}) {
        set_num_threads(threads);
        results.push_back(loss_and_grad(fn, emb, y));
      }
      set_num_threads(before);
      for (size_t t = 1; t < results.size(); ++t) {
        CHECK(results[t].loss.item() == results[0].loss.item());
        CHECK(max(abs(sub(results[t].grad, results[0].grad))).item() == 0.0);
      }
    }
  }
  set_num_threads(before);
}

// A tile that throws (say, an allocation over the allocator's budget) must not leave the tiles
// waiting for its blocks spinning: the pass stops and the error reaches the caller.
TEST_CASE("a symmetric-tile pass whose tile throws stops and rethrows at any thread count", "[losses][pairs]") {
  const int before = num_threads();
  for (const int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    set_num_threads(threads);
    for (const int64_t bad_row : {0, 40, 120}) {  // a diagonal tile, an early pair, a late one
      int64_t visited = 0;
      std::mutex lock;
      CHECK_THROWS_WITH(cpu::for_each_symmetric_tile<float>(
                            300, 40, DType::f32,
                            [&](int64_t r0, int64_t, int64_t c0, int64_t, cpu::TileBuffers<float>&) {
                              {
                                std::lock_guard<std::mutex> guard(lock);
                                ++visited;
                              }
                              // long enough that every thread of the pool is running tiles
                              std::this_thread::sleep_for(std::chrono::microseconds(300));
                              if (r0 == bad_row && c0 == 120) throw std::runtime_error("tile failed");
                            }),
                        "tile failed");
      CHECK(visited < 36);  // 8 blocks: 36 tiles, not all of them run
    }
  }
  set_num_threads(before);
}

// Note [Waves without barriers]: the waves are fixed by the rows and the block size, and dB takes
// them in order, whichever thread runs them; 4 threads keep two waves in flight. Blocks of 2
// rows: 7 waves for ArcFace's 26 embeddings, 5 for ProxyAnchor's 17 proxies.
TEST_CASE("CPU class losses in blocks of whole rows give the same bits at 1 to 4 threads", "[losses][pairs]") {
  TilesGuard guard;
  set_pair_tiles({.rows = 2, .cols = 5});
  const int before = num_threads();
  std::vector<int64_t> labels(26);
  for (int64_t i = 0; i < 26; ++i) labels[size_t(i)] = (i * 5) % 17;
  const Tensor y = labels_of(labels);
  for (const DType dtype : {DType::f32, DType::f64}) {
    Generator gen(7);
    const Tensor emb = randn({26, 12}, {.dtype = dtype}, &gen), weights = randn({17, 12}, {.dtype = dtype}, &gen);
    const std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>> losses[] = {
        {"arcface", [&](const Tensor& x, const Tensor& w) { return arcface_loss(x, y, w.t()); }},
        {"proxyanchor", [&](const Tensor& x, const Tensor& w) { return proxy_anchor_loss(x, y, w); }},
    };
    for (const auto& [name, fn] : losses) {
      INFO(name << " in " << dtype_name(dtype));
      std::vector<Tensor> results;  // loss, d emb, d weights per thread count
      for (const int threads : {1, 2, 3, 4}) {
        set_num_threads(threads);
        Tensor x = emb.detach().requires_grad_(), w = weights.detach().requires_grad_();
        const Tensor loss = fn(x, w);
        loss.backward();
        results.insert(results.end(), {loss, x.grad(), w.grad()});
      }
      set_num_threads(before);
      for (size_t r = 3; r < results.size(); ++r)
        CHECK(max(abs(sub(results[r], results[r % 3]))).item() == 0.0);
    }
  }
  set_num_threads(before);
}

// A block that throws must not leave the items waiting for it spinning, nor let them run on
// rows it left half written: the pass stops and the error reaches the caller.
TEST_CASE("a whole-row pass whose block throws stops and rethrows at any thread count", "[losses][pairs]") {
  const int before = num_threads();
  const int64_t M = 40, N = 8, D = 3;
  std::vector<float> A(size_t(M * D), 0.5f), B(size_t(N * D), 0.25f), dA(size_t(M * D)), dB(size_t(N * D));
  for (const int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    set_num_threads(threads);
    for (const int64_t bad_row : {0, 9, 33}) {  // the first wave, a middle one, the last
      std::atomic<int64_t> rows_weighed{0};
      CHECK_THROWS_WITH(cpu::whole_row_pass<float>(
                            {.rows = 2, .cols = 8}, DType::f32, A.data(), M,
                            cpu::CrossOperand<const float>::as_rows(B.data(), D), N, D, dA.data(),
                            cpu::CrossOperand<float>::as_rows(dB.data(), D),
                            [&](int64_t i, float*, float*, bool) {
                              ++rows_weighed;
                              std::this_thread::sleep_for(std::chrono::microseconds(200));
                              if (i == bad_row) throw std::runtime_error("block failed");
                            }),
                        "block failed");
      CHECK(rows_weighed.load() < M);
    }
  }
  set_num_threads(before);
}
