// bf16 and f16 tensors: conversions, native elementwise kernels and reductions that compute in
// f32 and round once, the f32 fallback of the other ops (Note [Reduced-precision fallback]),
// gradients into 16-bit leaves, random numbers, printing, and autocast
// (Note [Autocast policy]). "Equal" here means bit for bit: both sides round the same f32 value.
#include <cmath>
#include <sstream>

#include "ops/autocast.h"
#include "support/test_support.h"

using namespace ember;

namespace {

constexpr DType kLow[] = {DType::bf16, DType::f16};

std::vector<float> values(const Tensor& t) { return t.to(DType::f32).contiguous().to_vector<float>(); }

// What a kernel that computes in f32 and rounds once returns for f32 result `y_f32`.
std::vector<float> rounded(const Tensor& y_f32, DType low) { return values(y_f32.to(low)); }

void check_bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]))
      FAIL("element " << i << ": " << a[i] << " vs " << b[i]);
  }
}

Generator gen(1234);

}  // namespace

TEST_CASE("reduced precision: to() converts every dtype to and from bf16 / f16 like the scalar type", "[ops][f16]") {
  Tensor f = mul(randn({5, 7}, {}, &gen), 100.0);
  for (DType low : kLow) {
    INFO(dtype_name(low));
    const Tensor x = f.to(low);
    CHECK(x.dtype() == low);
    CHECK(x.nbytes() == 5 * 7 * 2);
    const std::vector<float> src = f.to_vector<float>(), got = values(x);
    for (size_t i = 0; i < src.size(); ++i)
      CHECK(got[i] == (low == DType::bf16 ? float(BFloat16(src[i])) : float(Half(src[i]))));
    // f64 and integers convert through float; back to f64 is exact; bool is "nonzero".
    check_bitwise(values(f.to(DType::f64).to(low)), got);
    CHECK(values(tensor<int64_t>({3, -300, 70000}).to(low)) ==
          std::vector<float>{3, -300, low == DType::bf16 ? 70144.0f : INFINITY});
    CHECK(x.to(DType::f64).to_vector<double>()[0] == double(got[0]));
    CHECK(tensor<float>({0.f, 0.25f}).to(low).to(DType::boolean).to_vector<bool>() == std::vector<bool>{false, true});
    // A transposed (non-contiguous) source.
    check_bitwise(values(f.t().to(low)), rounded(f.t().contiguous(), low));
  }
}

TEST_CASE("reduced precision: elementwise ops compute in f32 and round once", "[ops][f16]") {
  const Tensor a32 = randn({9, 33}, {}, &gen), b32 = add(abs(randn({33}, {}, &gen)), 0.5);
  for (DType low : kLow) {
    INFO(dtype_name(low));
    const Tensor a = a32.to(low), b = b32.to(low);
    const Tensor aw = a.to(DType::f32), bw = b.to(DType::f32);  // the exact inputs in f32
    check_bitwise(values(exp(a)), rounded(exp(aw), low));
    check_bitwise(values(tanh(a)), rounded(tanh(aw), low));
    check_bitwise(values(gelu(a)), rounded(gelu(aw), low));
    check_bitwise(values(relu(a)), rounded(relu(aw), low));
    check_bitwise(values(sqrt(b)), rounded(sqrt(bw), low));
    check_bitwise(values(add(a, b)), rounded(add(aw, bw), low));  // broadcast (33) over (9, 33)
    check_bitwise(values(div(a, b)), rounded(div(aw, bw), low));
    check_bitwise(values(mul(a, 3.0)), rounded(mul(aw, tensor<float>({3.0f}).to(low).to(DType::f32)), low));
    CHECK(lt(a, b).to_vector<bool>() == lt(aw, bw).to_vector<bool>());
    CHECK(exp(a).dtype() == low);
    // Mixing dtypes outside autocast stays an error that says what to do.
    CHECK_THROWS_WITH(add(a, a32), Catch::Matchers::Contains("expected tensors of one dtype"));
  }
}

TEST_CASE("reduced precision: 16-bit loops convert every bit pattern as the scalar conversions do", "[ops][f16]") {
  // Every bit pattern, in a row the loops take in blocks of 16 (Note [f16 loops in blocks]); the
  // expected bits come from core/float16.h one element at a time.
  const int64_t n = 65536 + 7;  // a tail after the blocks
  for (DType low : kLow) {
    INFO(dtype_name(low));
    const bool half = low == DType::f16;
    auto bits = [half](const Tensor& t, int64_t i) -> uint16_t& {
      return half ? t.data<Half>()[i].bits : t.data<BFloat16>()[i].bits;
    };
    auto widen = [half](uint16_t b) { return half ? half_bits_to_float(b) : bfloat16_bits_to_float(b); };
    auto narrow = [half](float v) { return half ? float_to_half_bits(v) : float_to_bfloat16_bits(v); };
    Tensor h = Tensor::empty({n}, {.dtype = low});
    for (int64_t i = 0; i < n; ++i) bits(h, i) = uint16_t(i);
    const std::vector<float> widened = h.to(DType::f32).to_vector<float>();
    const Tensor negated = neg(h), halved = mul(h, 0.5), narrowed = h.to(DType::f32).to(low);
    int mismatches = 0;
    auto expect = [&](const char* what, int64_t i, uint32_t got, uint32_t want) {
      if (got != want && ++mismatches <= 5)
        FAIL_CHECK(what << " of bits " << (i & 0xFFFF) << ": " << got << " vs " << want);
    };
    for (int64_t i = 0; i < n; ++i) {
      const float x = widen(uint16_t(i));
      expect("to(f32)", i, std::bit_cast<uint32_t>(widened[size_t(i)]), std::bit_cast<uint32_t>(x));
      expect("to(f32).to(low)", i, bits(narrowed, i), narrow(x));
      expect("neg", i, bits(negated, i), narrow(-x));
      expect("mul by 0.5", i, bits(halved, i), narrow(x * 0.5f));
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("reduced precision: copies within a 16-bit dtype keep every bit, NaN payloads included", "[ops][f16]") {
  // Signalling and quiet NaNs with payloads of both signs, beside ordinary values; the copies
  // within a dtype move bits (converting through float would quiet or canonicalise the NaNs).
  const uint16_t half_nans[] = {0x7C01, 0x7E05, 0xFC01, 0xFE7F}, bf16_nans[] = {0x7F81, 0x7FC5, 0xFF81, 0xFFFF};
  for (DType low : kLow) {
    INFO(dtype_name(low));
    const int64_t rows = 4, cols = 40;
    const Tensor x = Tensor::empty({rows, cols}, {.dtype = low});
    auto bits = [low](const Tensor& t, int64_t i) -> uint16_t& {
      return low == DType::f16 ? t.data<Half>()[i].bits : t.data<BFloat16>()[i].bits;
    };
    for (int64_t i = 0; i < rows * cols; ++i)
      bits(x, i) = i % 3 == 0 ? (low == DType::f16 ? half_nans : bf16_nans)[i % 4] : uint16_t(0x3C00 + i);
    const Tensor cloned = x.clone(), transposed = x.t().contiguous();  // unit-stride, then strided
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        CHECK(bits(cloned, r * cols + c) == bits(x, r * cols + c));
        CHECK(bits(transposed, c * rows + r) == bits(x, r * cols + c));
      }
  }
}

TEST_CASE("reduced precision: mean rounds once, where sum then a divide would round twice", "[ops][f16]") {
  // bf16 2.171875 - 8.875 + 1.0390625 = -5.6640625, / 3 = -1.8880208: -1.890625 in bf16, but the
  // sum rounded first (-5.65625) gives -1.8828125 (PyTorch 1.13's CPU mean; PyTorch 2 sums and
  // divides in f32, then rounds to bf16). Over a dim, keepdim, and on a strided view too.
  const Tensor x = tensor<float>({2.171875f, -8.875f, 1.0390625f}).to(DType::bf16);
  CHECK(values(mean(x))[0] == -1.890625f);
  const Tensor rows = stack({x, neg(x)}).to(DType::bf16);  // (2, 3)
  CHECK(values(mean(rows, {1})) == std::vector<float>{-1.890625f, 1.890625f});
  CHECK(values(mean(rows.t(), {0}, true)) == std::vector<float>{-1.890625f, 1.890625f});
  CHECK(mean(rows, {1}, true).shape() == Shape{2, 1});
  for (DType low : kLow) {  // any rows: the f32 mean rounded once
    INFO(dtype_name(low));
    const Tensor m = randn({7, 3, 5}, {}, &gen).to(low), mw = m.to(DType::f32);
    check_bitwise(values(mean(m, {1})), rounded(mean(mw.to(DType::f64), {1}).to(DType::f32), low));
    check_bitwise(values(mean(m, {0, 2})), rounded(mean(mw.to(DType::f64), {0, 2}).to(DType::f32), low));
  }
  CHECK_THROWS_WITH(mean(tensor<int64_t>({1, 2})), Catch::Matchers::Contains("mean: expected a floating tensor"));
  CHECK(mean(ones({49}, {.dtype = DType::f64})).item() == 1.0);  // divided: 49 * (1 / 49) is not 1
}

TEST_CASE("reduced precision: reductions accumulate in f32 or better", "[ops][f16]") {
  for (DType low : kLow) {
    INFO(dtype_name(low));
    // 4096 x 0.1: a 16-bit running sum would stall (at 32 in bf16, where 0.1 is under half an ulp).
    const Tensor x = full({4096}, 0.1, {.dtype = low});
    const float tenth = values(x)[0];
    CHECK(sum(x).dtype() == low);
    CHECK(values(sum(x))[0] == values(tensor<float>({4096 * tenth}).to(low))[0]);
    CHECK(values(mean(x))[0] == tenth);
    const Tensor m32 = randn({6, 50}, {}, &gen), m = m32.to(low), mw = m.to(DType::f32);
    check_bitwise(values(sum(m, {1})), rounded(sum(mw, {1}), low));
    check_bitwise(values(sum(m, {0})), rounded(sum(mw, {0}), low));
    check_bitwise(values(amax(m, {1})), values(amax(mw, {1})));
    CHECK(argmax(m, 1).to_vector<int64_t>() == argmax(mw, 1).to_vector<int64_t>());
    check_bitwise(values(var(m, {1})), rounded(var(mw, {1}), low));
    check_bitwise(values(logsumexp(m, {1})), rounded(logsumexp(mw, {1}), low));
  }
}

TEST_CASE("reduced precision: softmax, pooling, normalisation and losses run in f32 and round once",
          "[ops][f16]") {
  const Tensor x32 = randn({4, 3, 6, 6}, {}, &gen), logits32 = randn({8, 5}, {}, &gen);
  const Tensor target = tensor<int64_t>({0, 1, 2, 3, 4, 0, 1, 2});
  for (DType low : kLow) {
    INFO(dtype_name(low));
    const Tensor x = x32.to(low), xw = x.to(DType::f32), logits = logits32.to(low), lw = logits.to(DType::f32);
    check_bitwise(values(softmax(logits, 1)), rounded(softmax(lw, 1), low));
    check_bitwise(values(log_softmax(logits, 1)), rounded(log_softmax(lw, 1), low));
    check_bitwise(values(max_pool2d(x, 2)), values(max_pool2d(xw, 2)));
    check_bitwise(values(avg_pool2d(x, 3)), rounded(avg_pool2d(xw, 3), low));
    const Tensor loss = cross_entropy(logits, target);
    CHECK(loss.dtype() == low);
    check_bitwise(values(loss), rounded(cross_entropy(lw, target), low));
    // batch_norm with f32 running statistics: they stay f32 and are updated.
    Tensor rm = zeros({3}), rv = ones({3});
    Tensor rm_ref = zeros({3}), rv_ref = ones({3});
    const Tensor y = batch_norm(x, {}, {}, rm, rv, true, 0.1, 1e-5);
    const Tensor y_ref = batch_norm(xw, {}, {}, rm_ref, rv_ref, true, 0.1, 1e-5);
    CHECK(y.dtype() == low);
    check_bitwise(values(y), rounded(y_ref, low));
    check_bitwise(rm.to_vector<float>(), rm_ref.to_vector<float>());
    check_bitwise(rv.to_vector<float>(), rv_ref.to_vector<float>());
    // 16-bit running statistics receive the (rounded) update too.
    Tensor rm16 = zeros({3}, {.dtype = low}), rv16 = ones({3}, {.dtype = low});
    (void)batch_norm(x, {}, {}, rm16, rv16, true, 0.1, 1e-5);
    check_bitwise(values(rm16), rounded(rm_ref, low));
  }
}

TEST_CASE("reduced precision: batch_norm on 16-bit activations with f32 parameters equals the widened computation, "
          "forward and backward, relu fused, under autocast too",
          "[ops][f16]") {
  // Note [16-bit batch norm]: the CPU kernels read bf16/f16 and round y and dx once; the f32
  // parameters get f32 gradients. 7 x 5 planes: runs of 35, two blocks of 16 and a tail. No
  // activation and relu are bitwise; sigmoid's backward reads the rounded y (see the Note), so
  // it is compared within that rounding.
  const Tensor x32 = randn({3, 4, 7, 5}, {}, &gen), g32 = randn({3, 4, 7, 5}, {}, &gen);
  const Tensor w0 = add(mul(randn({4}, {}, &gen), 0.2), 1.0), b0 = mul(randn({4}, {}, &gen), 0.1);
  for (DType low : kLow) {
    for (Activation act : {Activation::relu, Activation::none, Activation::sigmoid})
    for (bool training : {true, false}) {
      INFO(dtype_name(low) << (training ? " training" : " evaluation") << " activation " << int(act));
      Tensor x = x32.to(low).requires_grad_(true), xw = x32.to(low).to(DType::f32).requires_grad_(true);
      Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
      Tensor ww = w0.clone().requires_grad_(true), bw = b0.clone().requires_grad_(true);
      Tensor rm = mul(ones({4}), 0.1), rv = mul(ones({4}), 2.0), rm_ref = rm.clone(), rv_ref = rv.clone();
      const Tensor g = g32.to(low);
      Tensor y;
      {
        AutocastGuard autocast(low);  // batch_norm keeps 16-bit activations on the CPU (Note [Autocast policy])
        y = batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5, act);
      }
      const Tensor y_ref = batch_norm(xw, ww, bw, rm_ref, rv_ref, training, 0.1, 1e-5, act);
      CHECK(y.dtype() == low);
      check_bitwise(values(y), rounded(y_ref, low));
      check_bitwise(rm.to_vector<float>(), rm_ref.to_vector<float>());
      check_bitwise(rv.to_vector<float>(), rv_ref.to_vector<float>());
      sum(mul(y, g)).backward();
      sum(mul(y_ref, g.to(DType::f32))).backward();
      CHECK(x.grad().dtype() == low);
      CHECK(w.grad().dtype() == DType::f32);
      if (act == Activation::sigmoid) {
        // sigmoid' = y (1 - y) from the 16-bit y: relative to the gradient's scale, within a few
        // units of the 16-bit rounding.
        const double tol = low == DType::bf16 ? 0.05 : 0.01;
        CHECK_THAT(x.grad().to(DType::f32), test::all_close(xw.grad(), tol, tol));
        CHECK_THAT(w.grad(), test::all_close(ww.grad(), tol, tol));
        continue;
      }
      check_bitwise(values(x.grad()), rounded(xw.grad(), low));
      check_bitwise(w.grad().to_vector<float>(), ww.grad().to_vector<float>());
      check_bitwise(b.grad().to_vector<float>(), bw.grad().to_vector<float>());
    }
  }
  // A 16-bit input with parameters of a third dtype is an error that names the parameter.
  CHECK_THROWS_WITH(batch_norm(x32.to(DType::bf16), w0.to(DType::f64), {}, {}, {}, true, 0.1, 1e-5),
                    Catch::Matchers::Contains("batch_norm") && Catch::Matchers::Contains("weight") &&
                        Catch::Matchers::Contains("f64"));
}

TEST_CASE("reduced precision: the SE tail scale_add_relu on 16-bit tensors equals the widened computation, "
          "forward and backward",
          "[ops][f16]") {
  // Native on the CPU: loaded into f32, each output rounded once; dscale summed in f32 lanes as
  // the f32 kernel sums. 5 x 7 planes: a block of 16 and a tail.
  const Tensor x32 = randn({2, 3, 5, 7}, {}, &gen), r32 = randn({2, 3, 5, 7}, {}, &gen);
  const Tensor s32 = randn({2, 3}, {}, &gen), g32 = randn({2, 3, 5, 7}, {}, &gen);
  for (DType low : kLow) {
    INFO(dtype_name(low));
    Tensor x = x32.to(low).requires_grad_(true), r = r32.to(low).requires_grad_(true);
    Tensor s = s32.to(low).requires_grad_(true);
    Tensor xw = x32.to(low).to(DType::f32).requires_grad_(true), rw = r32.to(low).to(DType::f32).requires_grad_(true);
    Tensor sw = s32.to(low).to(DType::f32).requires_grad_(true);
    const Tensor y = scale_add_relu(x, s, r), y_ref = scale_add_relu(xw, sw, rw);
    CHECK(y.dtype() == low);
    check_bitwise(values(y), rounded(y_ref, low));
    const Tensor g = g32.to(low);
    sum(mul(y, g)).backward();
    sum(mul(y_ref, g.to(DType::f32))).backward();
    check_bitwise(values(x.grad()), rounded(xw.grad(), low));
    check_bitwise(values(r.grad()), rounded(rw.grad(), low));
    check_bitwise(values(s.grad()), rounded(sw.grad(), low));
    // Mixed dtypes (an f32 scale) are widened, as before the native kernels, on every device.
    const Tensor mixed = scale_add_relu(x.detach(), s32, r.detach());
    CHECK(mixed.dtype() == low);
    check_bitwise(values(mixed), rounded(scale_add_relu(xw.detach(), s32, rw.detach()), low));
  }
  // Planes of five whole blocks (bf16 runs them in registers: Note [bf16 SE tail in registers]),
  // a NaN, and outputs below zero that relu clamps to +0.
  Tensor xn = randn({2, 3, 4, 20}, {}, &gen);
  xn.narrow(0, 1, 1).narrow(1, 2, 1).narrow(2, 3, 1).narrow(3, 5, 1).fill_(std::nan(""));
  const Tensor rn = randn(xn.shape(), {}, &gen), sn = randn({2, 3}, {}, &gen);
  for (DType low : kLow) {
    INFO(dtype_name(low) << ", planes of 80");
    const Tensor x = xn.to(low), r = rn.to(low), s = sn.to(low);
    check_bitwise(values(scale_add_relu(x, s, r)),
                  rounded(scale_add_relu(x.to(DType::f32), s.to(DType::f32), r.to(DType::f32)), low));
  }
}

TEST_CASE("reduced precision: GEMM ops take bf16 / f16 operands and accumulate in f32", "[ops][f16]") {
  const Tensor a32 = randn({7, 40}, {}, &gen), b32 = randn({40, 5}, {}, &gen);
  const Tensor x32 = randn({2, 3, 8, 8}, {}, &gen), w32 = randn({4, 3, 3, 3}, {}, &gen);
  for (DType low : kLow) {
    INFO(dtype_name(low));
    const Tensor a = a32.to(low), b = b32.to(low), x = x32.to(low), w = w32.to(low);
    // f32 reference on the rounded operands; the products are exact in f32 and the sums differ only
    // in order, so the rounded results agree except where a sum lands next to a rounding tie.
    const Tensor mm = matmul(a, b), mm_ref = matmul(a.to(DType::f32), b.to(DType::f32));
    CHECK(mm.dtype() == low);
    test::check_close(mm.to(DType::f32), mm_ref.to(low).to(DType::f32), low == DType::bf16 ? 8e-3 : 1e-3, 1e-3);
    const Tensor y = linear(a, b.t().contiguous());
    test::check_close(y.to(DType::f32), mm_ref.to(low).to(DType::f32), low == DType::bf16 ? 8e-3 : 1e-3, 1e-3);
    const Tensor c = conv2d(x, w, {}, 1, 1);
    CHECK(c.dtype() == low);
    test::check_close(c.to(DType::f32), conv2d(x.to(DType::f32), w.to(DType::f32), {}, 1, 1).to(low).to(DType::f32),
                      low == DType::bf16 ? 8e-3 : 1e-3, 1e-3);
  }
}

TEST_CASE("reduced precision: gradients reach 16-bit leaves in their dtype", "[ops][f16]") {
  const Tensor logits32 = randn({6, 4}, {}, &gen);
  const Tensor target = tensor<int64_t>({0, 1, 2, 3, 0, 1});
  for (DType low : kLow) {
    INFO(dtype_name(low));
    Tensor x = logits32.to(low).requires_grad_(true);
    Tensor xw = x.detach().to(DType::f32).requires_grad_(true);
    cross_entropy(relu(x), target).backward();
    cross_entropy(relu(xw), target).backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().dtype() == low);
    // The loss's rounding passes the gradient 1 through unchanged, so the bf16 gradient is the
    // rounded f32 one.
    check_bitwise(values(x.grad()), rounded(xw.grad(), low));
  }
}

TEST_CASE("reduced precision: random numbers are the f32 draws rounded", "[ops][f16]") {
  for (DType low : kLow) {
    Generator g1(99), g2(99);
    check_bitwise(values(randn({100}, {.dtype = low}, &g1)), rounded(randn({100}, {}, &g2), low));
    check_bitwise(values(rand({100}, {.dtype = low}, &g1)), rounded(rand({100}, {}, &g2), low));
  }
}

TEST_CASE("reduced precision: printing names the dtype and shows the stored values", "[ops][f16]") {
  std::ostringstream os;
  os << tensor<float>({1.0f / 3.0f, 2.0f}).to(DType::bf16);
  CHECK_THAT(os.str(), Catch::Matchers::Contains("dtype=bf16"));
  CHECK_THAT(os.str(), Catch::Matchers::Contains("0.3340"));  // 0.333984375, not f32's 0.3333
}

TEST_CASE("autocast: GEMMs in low precision, losses in f32, f32 gradients for f32 parameters", "[ops][autocast]") {
  const Tensor x = randn({8, 12}, {}, &gen), target = tensor<int64_t>({0, 1, 2, 0, 1, 2, 0, 1});
  Tensor w = mul(randn({3, 12}, {}, &gen), 0.3).requires_grad_(true);
  Tensor b = zeros({3}).requires_grad_(true);
  CHECK_THROWS_WITH(AutocastGuard(DType::i64), Catch::Matchers::Contains("expected bf16, f16 (on) or f32 (off)"));
  for (DType low : kLow) {
    INFO(dtype_name(low));
    w.zero_grad();
    b.zero_grad();
    Tensor loss, logits;
    {
      AutocastGuard autocast(low);
      CHECK(autocast_dtype() == low);
      logits = linear(x, w, b);
      loss = cross_entropy(logits, target);
      // Binary arithmetic promotes a 16-bit operand beside an f32 one.
      CHECK(add(logits, zeros({8, 3})).dtype() == DType::f32);
      {
        AutocastGuard off(DType::f32);
        CHECK(!autocast_dtype());
        CHECK(linear(x, w, b).dtype() == DType::f32);
      }
      CHECK(autocast_dtype() == low);
    }
    CHECK(!autocast_dtype());
    CHECK(logits.dtype() == low);
    CHECK(loss.dtype() == DType::f32);
    // The same computation written out: operands rounded, GEMM in f32, logits rounded, loss in f32.
    const Tensor ref_logits = linear(x.to(low), w.detach().to(low), b.detach().to(low));
    check_bitwise(values(logits), values(ref_logits));
    CHECK(loss.item() == cross_entropy(ref_logits.to(DType::f32), target).item());
    loss.backward();
    CHECK(w.grad().dtype() == DType::f32);
    CHECK(b.grad().dtype() == DType::f32);
    // The gradient was computed in low precision, then widened: every element is representable.
    check_bitwise(w.grad().to_vector<float>(), values(w.grad().to(low)));
  }
}
