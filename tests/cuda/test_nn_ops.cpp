// CUDA batch norm, softmax, cross-entropy / NLL and dropout kernels against the CPU kernels on
// the same inputs (SIMT simulator; small shapes). f32 tolerances: rtol 1e-5 / atol 1e-6 for
// per-element math, 1e-4 where long sums are reduced in another order.
#include "nn_test_support.h"
#include "support/test_support.h"

using namespace ember;
using test::all_close;
using test::to_cpu;
using test::to_cuda;

TEST_CASE("cuda batch_norm stats, running stats, apply and backward match the CPU") {
  for (const Shape& shape : {Shape{6, 3, 1}, Shape{2, 4, 9}}) {
    INFO("x " << shape_str(shape));
    Generator gen(2);
    Tensor x = randn(shape, {}, &gen);
    for (int64_t n = 0; n < shape[0]; ++n)  // channel 1 far from zero (Note [Two-pass statistics])
      for (int64_t s = 0; s < shape[2]; ++s) x.data<float>()[(n * shape[1] + 1) * shape[2] + s] += 1e4f;
    const int64_t C = shape[1];
    const Tensor weight = randn({C}, {}, &gen), bias = randn({C}, {}, &gen), grad = randn(shape, {}, &gen);
    Tensor rm = randn({C}, {}, &gen), rv = rand({C}, {}, &gen);
    Tensor rmd = to_cuda(rm), rvd = to_cuda(rv);
    const Tensor xd = to_cuda(x);

    Tensor mean = empty({C}), invstd = empty({C}), meand = test::empty_cuda({C}), invstdd = test::empty_cuda({C});
    batch_norm_stats_kernel(Device::cpu(), x, 1e-5, 0.1, mean, invstd, rm, rv);
    batch_norm_stats_kernel(Device::cuda(), xd, 1e-5, 0.1, meand, invstdd, rmd, rvd);
    CHECK_THAT(to_cpu(meand), all_close(mean, 1e-6, 1e-6));
    CHECK_THAT(to_cpu(invstdd), all_close(invstd, 1e-5, 1e-6));
    CHECK_THAT(to_cpu(rmd), all_close(rm, 1e-6, 1e-6));
    CHECK_THAT(to_cpu(rvd), all_close(rv, 1e-5, 1e-6));

    // Plain, and with each fused activation (applied on output, folded into the backward).
    for (Activation act : {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh}) {
      INFO("activation " << activation_name(act));
      Tensor y = empty(shape), yd = test::empty_cuda(shape);
      batch_norm_apply_kernel(Device::cpu(), x, mean, invstd, weight, bias, act, y);
      batch_norm_apply_kernel(Device::cuda(), xd, to_cuda(mean), to_cuda(invstd), to_cuda(weight), to_cuda(bias), act,
                              yd);
      CHECK_THAT(to_cpu(yd), all_close(y, 1e-4, 1e-4));
      const Tensor out = act == Activation::none ? Tensor() : y;

      for (bool training : {true, false}) {
        INFO("training " << training);
        Tensor dx = empty(shape), dw = empty({C}), db = empty({C});
        Tensor dxd = test::empty_cuda(shape), dwd = test::empty_cuda({C}), dbd = test::empty_cuda({C});
        batch_norm_backward_kernel(Device::cpu(), act, grad, out, x, mean, invstd, weight, training, dx, dw, db);
        batch_norm_backward_kernel(Device::cuda(), act, to_cuda(grad), out.defined() ? to_cuda(out) : Tensor(), xd,
                                   to_cuda(mean), to_cuda(invstd), to_cuda(weight), training, dxd, dwd, dbd);
        CHECK_THAT(to_cpu(dxd), all_close(dx, 1e-4, 1e-4));
        CHECK_THAT(to_cpu(dwd), all_close(dw, 1e-4, 1e-4));
        CHECK_THAT(to_cpu(dbd), all_close(db, 1e-5, 1e-5));
      }
    }
  }
}

TEST_CASE("cuda softmax and log_softmax forward and backward match the CPU on every row mapping") {
  // (outer, n, inner): warp per row, block per long row (n > 1024), thread per row (inner > 1).
  for (const Shape& shape : {Shape{5, 10, 1}, Shape{2, 1500, 1}, Shape{2, 6, 7}}) {
    for (bool log : {false, true}) {
      INFO("shape " << shape_str(shape) << " log " << log);
      Generator gen(9);
      Tensor x = randn(shape, {}, &gen) * 4.0f;
      x.data<float>()[3] = 1e4f;  // a huge logit stays finite
      x.data<float>()[4] = -INFINITY;
      const Tensor grad = randn(shape, {}, &gen);
      Tensor y = empty(shape), yd = test::empty_cuda(shape);
      softmax_forward_kernel(Device::cpu(), x, log, y);
      softmax_forward_kernel(Device::cuda(), to_cuda(x), log, yd);
      const Tensor y_got = to_cpu(yd);
      CHECK_THAT(y_got, all_close(y, 1e-5, 1e-6));
      CHECK(std::isfinite(y_got.data<float>()[3]));
      Tensor dx = empty(shape), dxd = test::empty_cuda(shape);
      softmax_backward_kernel(Device::cpu(), grad, y, log, dx);
      softmax_backward_kernel(Device::cuda(), to_cuda(grad), yd, log, dxd);
      CHECK_THAT(to_cpu(dxd), all_close(dx, 1e-4, 1e-5));
    }
  }
}

namespace {

// Targets for (N, S) rows over C classes, with every third row ignored (-100).
Tensor targets(int64_t N, int64_t S, int64_t C) {
  std::vector<int64_t> t(size_t(N * S));
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 3 == 1 ? -100 : int64_t((i * 7 + 2) % size_t(C));
  return tensor(t, {N, S});
}

}  // namespace

TEST_CASE("cuda cross_entropy forward (losses, f64 lse, totals) and backward match the CPU") {
  for (const Shape& shape : {Shape{7, 5, 1}, Shape{3, 4, 5}, Shape{2, 1100, 1}}) {
    for (double smoothing : {0.0, 0.1}) {
      INFO("logits " << shape_str(shape) << " smoothing " << smoothing);
      const int64_t N = shape[0], C = shape[1], S = shape[2];
      Generator gen(4);
      Tensor logits = randn(shape, {}, &gen) * 3.0f;
      logits.data<float>()[0] = 1e4f;
      logits.data<float>()[C * S] = -1e4f;
      const Tensor target = targets(N, S, C);
      Tensor losses = empty({N, S}), lse = empty({N, S}, {.dtype = DType::f64}), totals = empty({3});
      Tensor lossesd = test::empty_cuda({N, S}), lsed = test::empty_cuda({N, S}, DType::f64),
             totalsd = test::empty_cuda({3});
      const Tensor logitsd = to_cuda(logits), targetd = to_cuda(target);
      cross_entropy_forward_kernel(Device::cpu(), logits, target, smoothing, -100, losses, lse, totals);
      cross_entropy_forward_kernel(Device::cuda(), logitsd, targetd, smoothing, -100, lossesd, lsed, totalsd);
      CHECK_THAT(to_cpu(lossesd), all_close(losses, 1e-5, 1e-5));
      CHECK_THAT(to_cpu(lsed), all_close(lse, 0, 1e-6));
      CHECK_THAT(to_cpu(totalsd), all_close(totals, 1e-5, 1e-5));
      int64_t counted = 0;
      for (int64_t t : target.to_vector<int64_t>()) counted += t != -100;
      CHECK(to_cpu(totalsd).data<float>()[1] == float(counted));

      // The gradient of a mean: one broadcast scalar (strides 0), and a strided (N, S) view.
      const Tensor scalar_grad = Tensor::view_of(full({1}, 0.25), {N, S}, {0, 0}, 0);
      const Tensor wide = randn({N, 2 * S}, {}, &gen);
      const Tensor strided_grad = Tensor::view_of(wide, {N, S}, {2 * S, 2}, 1);
      const Tensor wided = to_cuda(wide);
      const Tensor grads_d[] = {Tensor::view_of(to_cuda(full({1}, 0.25)), {N, S}, {0, 0}, 0),
                                Tensor::view_of(wided, {N, S}, {2 * S, 2}, 1)};
      const Tensor grads[] = {scalar_grad, strided_grad};
      for (int k = 0; k < 2; ++k) {
        Tensor d = empty(shape), dd = test::empty_cuda(shape);
        cross_entropy_backward_kernel(Device::cpu(), grads[k], logits, target, lse, smoothing, -100, d);
        cross_entropy_backward_kernel(Device::cuda(), grads_d[k], logitsd, targetd, lsed, smoothing, -100, dd);
        CHECK_THAT(to_cpu(dd), all_close(d, 1e-5, 1e-6));
      }
    }
  }
}

TEST_CASE("cuda nll_loss forward and backward match the CPU") {
  const int64_t N = 4, C = 6, S = 3;
  Generator gen(8);
  const Tensor lp = randn({N, C, S}, {}, &gen), target = targets(N, S, C), grad = randn({N, S}, {}, &gen);
  Tensor losses = empty({N, S}), totals = empty({3}), lossesd = test::empty_cuda({N, S}), totalsd = test::empty_cuda({3});
  nll_loss_forward_kernel(Device::cpu(), lp, target, -100, losses, totals);
  nll_loss_forward_kernel(Device::cuda(), to_cuda(lp), to_cuda(target), -100, lossesd, totalsd);
  CHECK_THAT(to_cpu(lossesd), all_close(losses, 1e-6, 1e-6));
  CHECK_THAT(to_cpu(totalsd), all_close(totals, 1e-5, 1e-6));
  Tensor d = empty({N, C, S}), dd = test::empty_cuda({N, C, S});
  nll_loss_backward_kernel(Device::cpu(), grad, target, -100, d);
  nll_loss_backward_kernel(Device::cuda(), to_cuda(grad), to_cuda(target), -100, dd);
  CHECK_THAT(to_cpu(dd), all_close(d, 0, 0));
}

TEST_CASE("cuda cross_entropy and nll_loss report an out-of-range target by its value") {
  const Tensor logits = to_cuda(randn({3, 4, 1})), target = to_cuda(tensor(std::vector<int64_t>{1, 7, -3}, {3, 1}));
  Tensor losses = test::empty_cuda({3, 1}), lse = test::empty_cuda({3, 1}, DType::f64), totals = test::empty_cuda({3});
  REQUIRE_THROWS_WITH(
      cross_entropy_forward_kernel(Device::cuda(), logits, target, 0.0, -100, losses, lse, totals),
      Catch::Contains("cross_entropy: target 7 is out of range for 4 classes"));
  REQUIRE_THROWS_WITH(nll_loss_forward_kernel(Device::cuda(), logits, target, -100, losses, totals),
                      Catch::Contains("nll_loss: target 7 is out of range for 4 classes"));
  // ignore_index may lie outside [0, C): not an error.
  const Tensor ignored = to_cuda(tensor(std::vector<int64_t>{1, -3, 2}, {3, 1}));
  REQUIRE_NOTHROW(nll_loss_forward_kernel(Device::cuda(), logits, ignored, -3, losses, totals));
  CHECK(to_cpu(totals).data<float>()[1] == 2.0f);
}

TEST_CASE("cuda dropout draws the CPU's mask for one seed and block offset") {
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    const Generator gen(1234);
    const int64_t n = 1001;  // not a multiple of 4
    const Tensor x = randn({n}, {.dtype = dtype});
    Tensor y = empty({n}, {.dtype = dtype}), yd = test::empty_cuda({n}, dtype);
    dropout_kernel(Device::cpu(), x, gen, 17, 0.4, y);
    dropout_kernel(Device::cuda(), to_cuda(x), gen, 17, 0.4, yd);
    CHECK_THAT(to_cpu(yd), all_close(y, 0, 0));
  }
}
