// batch_norm beyond the op table (tests/ops/test_op_table.cpp has its PyTorch values, gradients
// and gradchecks in training and evaluation, 2-D to 4-D, with and without affine, with fused
// activations): the running stats against PyTorch, training without running stats, the momentum
// convention, the backward op, and the errors a user can cause.
#include <limits>
#include <vector>

#include "support/test_support.h"

using namespace ember;
using ember::test::check_close;

namespace {

Tensor f64_randn(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::f64}, &g);
}

}  // namespace

// The training cases of the op table (which checks y and the gradients) update their running
// stats (mean 0.1, -0.2, 0.3; var 0.5, 1.5, 0.8; momentum 0.1) like PyTorch; make_fixtures.py
// stores PyTorch's updated stats as "<case>/running_mean" and "<case>/running_var".
TEST_CASE("batch_norm's running stats after a training step match PyTorch") {
  const test::Fixtures fx("ops_fixtures.safetensors");
  for (const std::string c : {"batch_norm_train", "batch_norm_train_4d", "batch_norm_train_noaffine"}) {
    INFO(c);
    const Tensor x = fx.get(c + "/in0");
    Tensor running_mean = tensor<float>({0.1f, -0.2f, 0.3f}), running_var = tensor<float>({0.5f, 1.5f, 0.8f});
    const Tensor w = fx.has(c + "/in1") ? fx.get(c + "/in1") : Tensor(), b = fx.has(c + "/in2") ? fx.get(c + "/in2") : Tensor();
    batch_norm(x, w, b, running_mean, running_var, true, 0.1, 1e-5);
    // f32 storage, double accumulation.
    check_close(running_mean, fx.get(c + "/running_mean"), 2e-5, 2e-5);
    check_close(running_var, fx.get(c + "/running_var"), 2e-5, 2e-5);
  }
}

TEST_CASE("batch_norm trains without running stats and normalises each channel") {
  Tensor x = add(mul(f64_randn({64, 3, 2, 2}, 5), 4.0), 10.0);
  Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), /*training=*/true);
  check_close(mean(y, {0, 2, 3}), zeros({3}, {.dtype = DType::f64}), 1e-12, 1e-12);
  check_close(var(y, {0, 2, 3}, /*correction=*/0), ones({3}, {.dtype = DType::f64}), 1e-4, 1e-4);  // eps 1e-5
}

TEST_CASE("batch_norm reads non-contiguous input") {
  Tensor x = f64_randn({3, 6, 4}, 9).transpose(0, 2);  // (4, 6, 3), channels strided
  Tensor w = f64_randn({6}, 10), b = f64_randn({6}, 11);
  check_close(batch_norm(x, w, b, Tensor(), Tensor(), true), batch_norm(x.contiguous(), w, b, Tensor(), Tensor(), true), 1e-14, 1e-14);
}

TEST_CASE("batch_norm's running-stat update follows PyTorch's momentum convention") {
  // One channel holding {1, 3}: batch mean 2, biased var 1, unbiased var 2.
  Tensor x = tensor<double>({1, 3}, {2, 1});
  Tensor rm = tensor<double>({10}), rv = tensor<double>({4});
  batch_norm(x, Tensor(), Tensor(), rm, rv, true, /*momentum=*/0.25);
  REQUIRE(rm.item() == Approx(0.75 * 10 + 0.25 * 2));
  REQUIRE(rv.item() == Approx(0.75 * 4 + 0.25 * 2));
  // Evaluation leaves them alone.
  batch_norm(x, Tensor(), Tensor(), rm, rv, false);
  REQUIRE(rm.item() == Approx(8.0));
}

// The statistics sum blocks of adjacent channels image by image (Note [Statistics in memory
// order] in ops/cpu/norm.cpp): at batch 16, 150 channels of 4 x 5 are tasks of 102 channels (so
// the threads split them), each blocks of at most 64; runs of 20 values are one block of 16 and
// a tail, and channel 7 sits far from zero (Note [Two-pass statistics]). With momentum 1 the
// running stats are the batch's mean and unbiased variance.
TEST_CASE("batch_norm's statistics across channel blocks match f64 in f32 and bf16 at 1, 2 and 3 threads") {
  const Shape shape{16, 150, 4, 5};
  Tensor x64 = f64_randn(shape, 31);
  Tensor far = x64.select(1, 7);
  far.copy_(add(far, 1e4));
  const int before = num_threads();
  for (DType dtype : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    const Tensor x = x64.to(dtype), exact = x.to(DType::f64);
    const Tensor want_mean = mean(exact, {0, 2, 3}), want_var = var(exact, {0, 2, 3}, /*correction=*/1);
    std::vector<Tensor> means;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      Tensor rm = zeros({150}), rv = zeros({150});
      batch_norm(x, Tensor(), Tensor(), rm, rv, true, /*momentum=*/1.0);
      check_close(rm.to(DType::f64), want_mean, 1e-6, 1e-6);
      check_close(rv.to(DType::f64), want_var, 1e-5, 1e-5);
      means.push_back(cat({rm, rv}, 0));
    }
    set_num_threads(before);
    CHECK(max(abs(sub(means[0], means[1]))).item() == 0.0);
    CHECK(max(abs(sub(means[0], means[2]))).item() == 0.0);
  }
}

// The backward sums blocks of channels too (Note [Channel at a time] in ops/cpu/norm.cpp): 150
// channels of 4 x 5 at batch 16 take the block path in tasks the threads split; 130 channels of
// a 2-D input (S = 1) at batch 600, and 2 channels (fewer than 3 threads), the row path.
TEST_CASE("batch_norm_backward across channel blocks matches f64 and gives the same bits at 1, 2 and 3 threads") {
  for (const Shape& shape : {Shape{16, 150, 4, 5}, Shape{600, 130}, Shape{64, 2, 4, 5}}) {
    INFO(shape.size() << "-D");
    const int64_t C = shape[1];
    const Tensor x = f64_randn(shape, 41).to(DType::f32), g = f64_randn(shape, 42).to(DType::f32);
    const Tensor w = f64_randn({C}, 43).to(DType::f32);
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < int64_t(shape.size()); ++d) dims.push_back(d);
    const Tensor m = mean(x, dims), invstd = rsqrt(add(var(x, dims, 0), 1e-5));
    auto f64 = [](const Tensor& t) { return t.to(DType::f64); };
    // The backward from its formula, in f64 ops that do not share the kernel:
    // dx = w invstd (g - mean(g) - xhat mean(g xhat)), dweight = sum(g xhat), dbias = sum(g).
    Shape channel_shape(shape.size(), 1);
    channel_shape[1] = C;
    auto per_channel = [&](const Tensor& v) { return f64(v).reshape(channel_shape); };
    const Tensor g64 = f64(g), xhat = mul(sub(f64(x), per_channel(m)), per_channel(invstd));
    const Tensor dx = mul(mul(per_channel(w), per_channel(invstd)),
                          sub(sub(g64, mean(g64, dims, true)), mul(xhat, mean(mul(g64, xhat), dims, true))));
    const BatchNormGrads want{dx, sum(mul(g64, xhat), dims), sum(g64, dims)};
    const int before = num_threads();
    std::vector<BatchNormGrads> got;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      got.push_back(batch_norm_backward(g, x, w, m, invstd, true, true, true, true, Activation::none, Tensor()));
    }
    set_num_threads(before);
    check_close(f64(got[0].dx), want.dx, 1e-5, 1e-5);
    check_close(f64(got[0].dweight), want.dweight, 1e-5, 1e-4);
    check_close(f64(got[0].dbias), want.dbias, 1e-5, 1e-4);
    for (size_t t : {1, 2}) {
      CHECK(max(abs(sub(got[0].dx, got[t].dx))).item() == 0.0);
      CHECK(max(abs(sub(got[0].dweight, got[t].dweight))).item() == 0.0);
    }
  }
}

TEST_CASE("batch_norm_backward is one op giving dx, dweight and dbias") {
  Tensor x = f64_randn({4, 2, 3}, 6), g = f64_randn({4, 2, 3}, 7), w = f64_randn({2}, 8);
  Tensor xr = x.detach().requires_grad_(), wr = w.detach().requires_grad_(), br = zeros({2}, {.dtype = DType::f64}).requires_grad_();
  Tensor y = batch_norm(xr, wr, br, Tensor(), Tensor(), true);
  sum(mul(y, g)).backward();
  Tensor m = mean(x, {0, 2});
  Tensor invstd = rsqrt(add(var(x, {0, 2}, 0), 1e-5));
  BatchNormGrads d = batch_norm_backward(g, x, w, m, invstd, true);
  check_close(d.dx, xr.grad(), 1e-12, 1e-12);
  check_close(d.dweight, wr.grad(), 1e-12, 1e-12);
  check_close(d.dbias, br.grad(), 1e-12, 1e-12);
  BatchNormGrads only_dx = batch_norm_backward(g, x, w, m, invstd, true, true, false, false);
  REQUIRE(only_dx.dx.defined());
  REQUIRE_FALSE(only_dx.dweight.defined());
  REQUIRE_FALSE(only_dx.dbias.defined());
}

// Note [Centred dx] (ops/cpu/norm.cpp): a channel offset by 1e4 keeps dx to f32 rounding of its
// own size; the expanded form g * k - x * a + b lost ~1e-3 there to cancellation.
TEST_CASE("batch_norm_backward in f32 keeps its precision on a channel far from zero") {
  Tensor x = add(f64_randn({64, 2, 3}, 12), tensor<double>({1e4, 0.0}, {1, 2, 1}));
  const Tensor g = f64_randn({64, 2, 3}, 13), w = f64_randn({2}, 14);
  const Tensor m = mean(x, {0, 2}), invstd = rsqrt(add(var(x, {0, 2}, 0), 1e-5));
  // The f32 inputs, and the f64 backward of exactly those values as the reference.
  const Tensor x32 = x.to(DType::f32), g32 = g.to(DType::f32), w32 = w.to(DType::f32);
  const Tensor m32 = m.to(DType::f32), invstd32 = invstd.to(DType::f32);
  const BatchNormGrads want = batch_norm_backward(g32.to(DType::f64), x32.to(DType::f64), w32.to(DType::f64),
                                                  m32.to(DType::f64), invstd32.to(DType::f64), true);
  const BatchNormGrads got = batch_norm_backward(g32, x32, w32, m32, invstd32, true);
  check_close(got.dx.to(DType::f64), want.dx, 1e-5, 1e-5);
}

TEST_CASE("batch_norm errors name the problem") {
  Tensor rm = zeros({3}), rv = ones({3});
  REQUIRE_THROWS_WITH(batch_norm(ones({1, 3}), Tensor(), Tensor(), rm, rv, true),
                      Catch::Contains("expected more than 1 value per channel when training, got input size (1, 3)"));
  REQUIRE_THROWS_WITH(batch_norm(ones({1, 3, 1, 1}), Tensor(), Tensor(), rm, rv, true),
                      Catch::Contains("more than 1 value per channel"));
  REQUIRE_NOTHROW(batch_norm(ones({1, 3}), Tensor(), Tensor(), rm, rv, false));  // eval is fine
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), ones({4}), Tensor(), rm, rv, true),
                      Catch::Contains("weight of shape (3,)") && Catch::Contains("got (4,)"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false),
                      Catch::Contains("needs running_mean and running_var"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4}), Tensor(), Tensor(), rm, rv, true), Catch::Contains("(N, C)"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), Tensor(), Tensor(), rm, Tensor(), true), Catch::Contains("neither"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), Tensor(), Tensor(), zeros({3}, {.requires_grad = true}), rv, true),
                      Catch::Contains("must not require grad"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}, {.dtype = DType::i64}), Tensor(), Tensor(), rm, rv, true),
                      Catch::Contains("floating"));
}

// Note [Channel at a time] and Note [Batch-norm backward in registers] (ops/cpu/norm.cpp): f32
// runs of at least 16 values take the per-channel path, in AVX-512 blocks with a scalar tail
// (S = 35 here: two blocks and 3 values), and layers with fewer channels than threads the
// two-pass form (2 channels: 3 threads). Against the f64 backward of the same f32 values, without
// activation and with relu (a NaN in y keeps its gradient, as relu_backward_masked does), in
// training and evaluation, dweight and dbias without dx too, and the same bits at 1, 2 and 3
// threads.
TEST_CASE("batch_norm_backward's f32 paths match f64 and give the same bits at 1, 2 and 3 threads") {
  const Shape shape{3, 2, 5, 7};
  const Tensor x = f64_randn(shape, 21).to(DType::f32), g = f64_randn(shape, 22).to(DType::f32);
  const Tensor w = f64_randn({2}, 23).to(DType::f32);
  const Tensor m = mean(x, {0, 2, 3}), invstd = rsqrt(add(var(x, {0, 2, 3}, 0), 1e-5));
  const Tensor y = relu(f64_randn(shape, 24)).to(DType::f32).contiguous();
  y.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  y.data<float>()[40] = std::numeric_limits<float>::quiet_NaN();
  auto f64 = [](const Tensor& t) { return t.to(DType::f64); };
  const int before = num_threads();
  for (Activation act : {Activation::none, Activation::relu}) {
    for (bool training : {true, false}) {
      INFO((act == Activation::relu ? "relu" : "no activation") << (training ? ", training" : ", evaluation"));
      const Tensor out = act == Activation::relu ? y : Tensor();
      const BatchNormGrads want = batch_norm_backward(f64(g), f64(x), f64(w), f64(m), f64(invstd), training, true,
                                                      true, true, act, out.defined() ? f64(out) : Tensor());
      std::vector<BatchNormGrads> got;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        got.push_back(batch_norm_backward(g, x, w, m, invstd, training, true, true, true, act, out));
        const BatchNormGrads sums = batch_norm_backward(g, x, w, m, invstd, training, false, true, true, act, out);
        CHECK_FALSE(sums.dx.defined());
        CHECK(max(abs(sub(sums.dweight, got.back().dweight))).item() == 0.0);
        CHECK(max(abs(sub(sums.dbias, got.back().dbias))).item() == 0.0);
      }
      set_num_threads(before);
      check_close(f64(got[0].dx), want.dx, 1e-5, 1e-5);
      check_close(f64(got[0].dweight), want.dweight, 1e-5, 1e-4);
      check_close(f64(got[0].dbias), want.dbias, 1e-5, 1e-4);
      for (size_t t : {1, 2}) {
        INFO(t + 1 << " threads");
        CHECK(max(abs(sub(got[0].dx, got[t].dx))).item() == 0.0);
        CHECK(max(abs(sub(got[0].dweight, got[t].dweight))).item() == 0.0);
      }
    }
  }
}
