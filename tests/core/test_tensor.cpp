// Tensor basics: views, copies, conversion, printing, empty and 0-d tensors, parallel_for and
// the Philox random numbers.
#include <atomic>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "support/test_support.h"

using namespace ember;
using Catch::Contains;

namespace {

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// Restores the thread count a test changed.
struct ThreadCountGuard {
  int saved = num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

}  // namespace

TEST_CASE("tensor: views share storage with their base", "[tensor]") {
  Tensor x = arange(12.0).reshape({3, 4});
  Tensor t = x.transpose(0, 1), row = x.select(0, 1), every_other = x.slice(1, 0, 4, 2);
  for (const Tensor& v : {t, row, every_other, x.reshape({12}), x.narrow(0, 1, 2), x.unsqueeze(0)})
    CHECK(v.shares_storage(x));
  CHECK(row.offset() == 4);
  CHECK(every_other.strides() == Strides{4, 2});
  CHECK(t.strides() == Strides{1, 4});
  CHECK_FALSE(t.is_contiguous());
  CHECK(zeros({3, 0}).is_contiguous());  // an empty tensor is contiguous whatever its strides
  CHECK(zeros({3, 0}).transpose(0, 1).is_contiguous());
  row.fill_(-1.0);  // a write through a view is seen by the base
  CHECK(x.to_vector<float>() == std::vector<float>{0, 1, 2, 3, -1, -1, -1, -1, 8, 9, 10, 11});
  every_other.fill_(7.0);
  CHECK(x.select(0, 2).to_vector<float>() == std::vector<float>{7, 9, 7, 11});
  CHECK(t.select(0, 1).to_vector<float>() == std::vector<float>{1, -1, 9});  // column 1 kept its values
  CHECK(x.version() == 2);  // each in-place write bumps the shared version
}

TEST_CASE("tensor: contiguous() and clone()", "[tensor]") {
  Tensor x = arange(6.0).reshape({2, 3});
  Tensor same = x.contiguous();
  CHECK(same.raw_data() == x.raw_data());  // already contiguous: no copy
  Tensor t = x.t();
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage(x));
  CHECK(c.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor k = x.clone();
  CHECK_FALSE(k.shares_storage(x));
  CHECK(k.to_vector<float>() == x.to_vector<float>());
  k.fill_(0.0);
  CHECK(x.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  // A strided slice with an offset clones to a compact tensor.
  Tensor s = arange(10.0).slice(0, 1, 10, 3).clone();
  CHECK(s.to_vector<float>() == std::vector<float>{1, 4, 7});
  CHECK(s.offset() == 0);
}

TEST_CASE("tensor: contiguous() of a transposed matrix, in tiles, equals element by element", "[tensor]") {
  // Note [Blocked transpose copy]: shapes around the 32 x 32 tile, a source row stride wider than
  // the matrix (a column slice), element sizes 2, 4 and 8.
  for (const DType dtype : {DType::f32, DType::f64, DType::i64, DType::bf16})
    for (const auto& [rows, cols, extra] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {32, 32, 0}, {33, 70, 0}, {128, 1024, 0}, {31, 95, 5}, {200, 40, 3}}) {
      INFO(dtype_name(dtype) << " " << rows << " x " << cols << " + " << extra);
      const Tensor wide = arange(double(cols * (rows + extra))).reshape({cols, rows + extra}).to(dtype);
      const Tensor view = wide.slice(1, 0, rows).t();  // (rows, cols), strides (1, rows + extra)
      const Tensor got = view.contiguous();
      REQUIRE(got.is_contiguous());
      std::vector<double> want;
      const Tensor wide64 = wide.to(DType::f64);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) want.push_back(wide64.data<double>()[j * (rows + extra) + i]);
      CHECK(got.to(DType::f64).to_vector<double>() == want);
    }
}

TEST_CASE("tensor: to(dtype) converts like static_cast", "[tensor]") {
  Tensor x = tensor<float>({2.7f, -2.7f, 0.0f, 1.0f});
  CHECK(x.to(DType::f32).raw_data() == x.raw_data());  // same dtype: the tensor itself
  CHECK(x.to(DType::i64).to_vector<int64_t>() == std::vector<int64_t>{2, -2, 0, 1});
  CHECK(x.to(DType::boolean).to_vector<bool>() == std::vector<bool>{true, true, false, true});
  CHECK(x.to(DType::f64).to_vector<double>()[0] == Approx(2.7).epsilon(1e-7));
  CHECK(tensor<int64_t>({1, 0}).to(DType::boolean).to(DType::f32).to_vector<float>() == std::vector<float>{1, 0});
  Tensor nc = arange(6.0).reshape({2, 3}).t().to(DType::i32);  // non-contiguous source
  CHECK(nc.to_vector<int32_t>() == std::vector<int32_t>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("tensor: item() reads one element of any dtype", "[tensor]") {
  CHECK(full({}, 3.5).item() == 3.5);
  CHECK(full({1, 1, 1}, -2.0, {.dtype = DType::f64}).item() == -2.0);
  CHECK(tensor<int64_t>({int64_t(1) << 40}).item() == double(int64_t(1) << 40));
  CHECK(arange(6.0).select(0, 4).item() == 4.0);  // a view with an offset
  CHECK(ones({1}, {.dtype = DType::boolean}).item() == 1.0);
}

TEST_CASE("tensor: printing", "[tensor][print]") {
  SECTION("a small f32 matrix") {
    CHECK(printed(tensor<float>({1, 2.5f, -3, 4}, {2, 2})) ==
          "tensor(shape=(2, 2), dtype=f32, device=cpu)\n[[1.0000, 2.5000],\n [-3.0000, 4.0000]]");
  }
  SECTION("bool, int, 0-d, requires_grad and non-finite values") {
    CHECK(printed(tensor<int64_t>({1, -2, 3})) == "tensor(shape=(3,), dtype=i64, device=cpu)\n[1, -2, 3]");
    CHECK(printed(gt(tensor<float>({1, -1}), 0.0)) == "tensor(shape=(2,), dtype=bool, device=cpu)\n[true, false]");
    CHECK(printed(full({}, 0.5)) == "tensor(shape=(), dtype=f32, device=cpu)\n0.5000");
    CHECK(printed(ones({1}).requires_grad_()) == "tensor(shape=(1,), dtype=f32, device=cpu, requires_grad)\n[1.0000]");
    const double inf = std::numeric_limits<double>::infinity();
    CHECK_THAT(printed(tensor<double>({std::nan(""), inf, -inf})), Contains("[nan, inf, -inf]"));
    CHECK_THAT(printed(tensor<float>({1e-5f, 2e-5f})), Contains("1.0000e-05"));
    CHECK(printed(Tensor()) == "tensor(undefined)");
  }
  SECTION("more than 1000 elements are abbreviated with ...") {
    const std::string s = printed(arange(2000.0));
    CHECK_THAT(s, Contains("[0.0000, 1.0000, 2.0000, ..., 1997.0000, 1998.0000, 1999.0000]"));
    CHECK(s.size() < 200);
    const std::string m = printed(arange(1200.0).reshape({40, 30}));
    CHECK_THAT(m, Contains("[0.0000, 1.0000, 2.0000, ..., 27.0000, 28.0000, 29.0000],\n [30.0000"));
    CHECK_THAT(m, Contains("...,\n"));
    CHECK(std::count(m.begin(), m.end(), '\n') == 7);  // after the header, 3 rows, "...," and 2 rows
    // Exactly 1000 elements are printed in full.
    CHECK(printed(arange(1000.0)).find("...") == std::string::npos);
  }
  SECTION("empty and non-contiguous") {
    CHECK(printed(zeros({0})) == "tensor(shape=(0,), dtype=f32, device=cpu)\n[]");
    CHECK(printed(arange(4.0, {.dtype = DType::i32}).reshape({2, 2}).t()) ==
          "tensor(shape=(2, 2), dtype=i32, device=cpu)\n[[0, 2],\n [1, 3]]");
  }
}

TEST_CASE("tensor: empty tensors (numel 0) go through ops", "[tensor][empty]") {
  Tensor e = zeros({0, 3});
  CHECK(e.numel() == 0);
  CHECK(add(e, ones({3})).shape() == Shape{0, 3});
  CHECK(exp(e).shape() == Shape{0, 3});
  CHECK(e.reshape({3, 0}).shape() == Shape{3, 0});
  CHECK(e.t().contiguous().shape() == Shape{3, 0});
  CHECK(sum(e).item() == 0.0);
  CHECK(sum(e, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(sum(e, {1}).shape() == Shape{0});
  CHECK(std::isnan(mean(e).item()));
  CHECK(matmul(e, ones({3, 2})).shape() == Shape{0, 2});
  CHECK(matmul(ones({2, 0}), ones({0, 3})).to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(cat({ones({2, 3}), e}, 0).shape() == Shape{2, 3});
  CHECK(index_select(ones({2, 3}), 1, tensor<int64_t>(std::vector<int64_t>{})).shape() == Shape{2, 0});
  CHECK(split(e, 2, 0).empty());
  // Gradients flow through empty tensors (and are empty).
  Tensor x = zeros({0, 3}).requires_grad_();
  Tensor y = sum(mul(exp(x), 2.0));
  y.backward();
  CHECK(x.grad().shape() == Shape{0, 3});
}

TEST_CASE("tensor: 0-d tensors", "[tensor][scalar]") {
  Tensor s = full({}, 2.0);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.shape().empty());
  CHECK(add(s, arange(3.0)).to_vector<float>() == std::vector<float>{2, 3, 4});
  CHECK(sum(s).item() == 2.0);
  CHECK(sum(s, {0}).item() == 2.0);
  CHECK(mean(s, {0}).item() == 2.0);
  CHECK(s.reshape({1, 1}).shape() == Shape{1, 1});
  CHECK(s.unsqueeze(0).shape() == Shape{1});
  CHECK(ones({1}).squeeze().dim() == 0);
  CHECK(matmul(arange(3.0), arange(3.0)).dim() == 0);
  Tensor x = full({}, 3.0, {.requires_grad = true});
  mul(x, x).backward();
  CHECK(x.grad().dim() == 0);
  CHECK(x.grad().item() == 6.0);
}

TEST_CASE("parallel_for: every index exactly once with 1 and 2 threads", "[parallel]") {
  ThreadCountGuard restore;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    CHECK(num_threads() == threads);
    const int64_t n = 1000003;
    std::vector<uint8_t> seen(size_t(n), 0);
    std::atomic<int64_t> total{0};
    std::atomic<int> chunks{0};
    parallel_for(0, n, 1000, [&](int64_t b, int64_t e) {
      int64_t local = 0;
      for (int64_t i = b; i < e; ++i) {
        local += i;
        seen[size_t(i)]++;
      }
      total += local;
      ++chunks;
    });
    INFO(threads << " threads");
    CHECK(total.load() == n * (n - 1) / 2);
    CHECK(std::all_of(seen.begin(), seen.end(), [](uint8_t c) { return c == 1; }));
    if (threads == 1) CHECK(chunks.load() == 1);  // no pool: one call
    else CHECK(chunks.load() > 1);
    // Ranges at or below the grain, and empty ranges, run inline or not at all.
    int calls = 0;
    parallel_for(5, 5, 1, [&](int64_t, int64_t) { ++calls; });
    parallel_for(0, 10, 100, [&](int64_t b, int64_t e) { calls += int(e - b == 10); });
    CHECK(calls == 1);
  }
}

TEST_CASE("parallel_for: an exception in a chunk reaches the caller, and the pool survives", "[parallel]") {
  ThreadCountGuard restore;
  set_num_threads(2);
  REQUIRE_THROWS_WITH(parallel_for(0, 100000, 10,
                                   [](int64_t b, int64_t e) {
                                     if (b <= 77777 && 77777 < e) EMBER_FAIL("chunk failed at ", 77777);
                                   }),
                      "chunk failed at 77777");
  std::atomic<int64_t> total{0};
  parallel_for(0, 100000, 10, [&](int64_t b, int64_t e) { total += e - b; });
  CHECK(total.load() == 100000);
  // Nested loops run inline on the calling thread.
  std::atomic<int64_t> inner{0};
  parallel_for(0, 4, 1, [&](int64_t b, int64_t e) {
    CHECK(in_parallel_region());
    for (int64_t i = b; i < e; ++i) parallel_for(0, 1000, 1, [&](int64_t b2, int64_t e2) { inner += e2 - b2; });
  });
  CHECK(inner.load() == 4000);
  CHECK_FALSE(in_parallel_region());
  REQUIRE_THROWS_WITH(set_num_threads(0), Contains("set_num_threads: expected a count in [1, 1024], got 0"));
}

TEST_CASE("rng: Philox4x32-10 known answers (Random123)", "[rng]") {
  CHECK(Philox4x32::block({0, 0, 0, 0}, {0, 0}) ==
        std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(Philox4x32::block({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  // A generator's block i is Philox at counter (i lo, i hi, 0, 0) with the seed as key.
  Generator g(0);
  CHECK(g.block(0) == std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
}

TEST_CASE("rng: same seed, same numbers, and draws advance the offset", "[rng]") {
  Generator g1(42), g2(42), g3(43);
  Tensor a = rand({100}, {}, &g1), b = rand({100}, {}, &g2), c = rand({100}, {}, &g3);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(a.to_vector<float>() != c.to_vector<float>());
  CHECK(g1.offset() == 25);  // 4 f32 values per Philox block
  CHECK(rand({100}, {}, &g1).to_vector<float>() != a.to_vector<float>());
  manual_seed(7);
  Tensor d = randn({10});
  manual_seed(7);
  CHECK(randn({10}).to_vector<float>() == d.to_vector<float>());
  // Shapes do not matter, only the sequence of values.
  Generator g4(5), g5(5);
  CHECK(randn({2, 3}, {}, &g4).reshape({6}).to_vector<float>() == randn({6}, {}, &g5).to_vector<float>());
}

TEST_CASE("rng: rand is in 0 <= x < 1, randn has mean 0 and std 1", "[rng]") {
  Generator g(2024);
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    Tensor u = rand({100000}, {.dtype = dtype}, &g);
    CHECK(min(u).item() >= 0.0);
    CHECK(max(u).item() < 1.0);
    CHECK(mean(u).item() == Approx(0.5).margin(0.005));
    Tensor n = randn({100000}, {.dtype = dtype}, &g);
    CHECK(mean(n).item() == Approx(0.0).margin(0.015));
    CHECK(stddev(n).item() == Approx(1.0).margin(0.015));
    Tensor m = normal({100000}, 3.0, 0.5, {.dtype = dtype}, &g);
    CHECK(mean(m).item() == Approx(3.0).margin(0.01));
    CHECK(stddev(m).item() == Approx(0.5).margin(0.01));
    Tensor w = uniform({1000}, -2.0, -1.0, {.dtype = dtype}, &g);
    CHECK(min(w).item() >= -2.0);
    CHECK(max(w).item() < -1.0);
  }
}

TEST_CASE("rng: randint stays in low <= x < high and hits every value", "[rng]") {
  Generator g(9);
  Tensor r = randint(-3, 4, {5001}, {.dtype = DType::i64}, &g);
  const auto v = r.to_vector<int64_t>();
  CHECK(*std::min_element(v.begin(), v.end()) == -3);
  CHECK(*std::max_element(v.begin(), v.end()) == 3);
  const auto v32 = randint(0, 2, {100}, {.dtype = DType::i32}, &g).to_vector<int32_t>();
  CHECK(std::set<int32_t>(v32.begin(), v32.end()) == std::set<int32_t>{0, 1});
}

TEST_CASE("rng: randperm is a permutation", "[rng]") {
  Generator g(11);
  for (int64_t n : {0, 1, 7, 1000}) {
    std::vector<int64_t> p = randperm(n, {.dtype = DType::i64}, &g).to_vector<int64_t>();
    REQUIRE(int64_t(p.size()) == n);
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expected(static_cast<size_t>(n), 0);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(sorted == expected);
    if (n == 1000) CHECK(p != expected);  // actually shuffled
  }
  Generator a(3), b(3);
  CHECK(randperm(50, {.dtype = DType::i64}, &a).to_vector<int64_t>() ==
        randperm(50, {.dtype = DType::i64}, &b).to_vector<int64_t>());
}
