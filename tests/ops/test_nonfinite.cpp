// Non-finite values (NaN, +inf, -inf) in inputs and in upstream gradients propagate exactly as
// in PyTorch (issue #12), through every activation, every fused epilogue (linear, conv2d,
// batch norm + relu, scale_add_relu), max pooling and the softmax family, on the CPU and on
// CUDA (the simulator in SIM builds). Note [NaN through relu] in ops/elementwise_functors.h.
//
// Every expected value below is what PyTorch 1.13 prints for the torch call quoted above it
// (float32 inputs; printed with "%.9g"). Each case runs in f32 and f64: f32 is the packed
// AVX-512 GEMM path of linear and conv2d, f64 the Eigen one.
#include <cmath>
#include <functional>

#include "cuda/runtime.h"
#include "ember.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;

namespace {

constexpr double NaN = NAN, Inf = INFINITY;  // as PyTorch prints nan, inf
using Values = std::vector<double>;

std::vector<Device> devices() {
  std::vector<Device> out{Device::cpu()};
  if (cuda::is_available()) out.push_back(Device::cuda());
  return out;
}

// An op under test: inputs (leaves) -> outputs; the first output is the differentiable one,
// others (max pooling's indices) are only compared.
using Op = std::function<std::vector<Tensor>(const TensorList&)>;

struct Input {
  Values values;
  Shape shape;
};

// Outputs of `op` and the gradients of its inputs under the upstream gradient gy of outputs[0],
// all on the CPU as f64: [outputs..., d inputs[0], d inputs[1], ...].
std::vector<Tensor> run(const Op& op, const std::vector<Input>& inputs, const Input& gy, DType dtype, Device device) {
  TensorList leaves;
  for (const Input& in : inputs)
    leaves.push_back(tensor<double>(in.values, in.shape).to(dtype).to(device).requires_grad_());
  const std::vector<Tensor> outs = op(leaves);
  const Tensor g = tensor<double>(gy.values, gy.shape).to(dtype).to(device);
  // d/dy of sum(y * g) is exactly g, whatever y holds.
  sum(mul(outs[0], g)).backward();
  std::vector<Tensor> got;
  for (const Tensor& t : outs) got.push_back(t.cpu().to(DType::f64));
  for (const Tensor& l : leaves) got.push_back(l.grad().defined() ? l.grad().cpu().to(DType::f64) : Tensor{});
  return got;
}

// Runs the case on every device in f32 and f64 and compares every result with `expected`
// (same order as run's; an empty Values skips that result).
void check_case(const Op& op, const std::vector<Input>& inputs, const Input& gy, const std::vector<Values>& expected) {
  for (Device device : devices())
    for (DType dtype : {DType::f32, DType::f64}) {
      INFO(device << " " << dtype_name(dtype));
      const std::vector<Tensor> got = run(op, inputs, gy, dtype, device);
      REQUIRE(got.size() == expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        if (expected[i].empty()) continue;
        INFO("result " << i);
        REQUIRE(got[i].defined());
        REQUIRE(got[i].numel() == int64_t(expected[i].size()));
        // f32 inputs, PyTorch's f32 values to 9 digits: 1e-5 relative covers both dtypes.
        test::check_close(got[i], tensor<double>(expected[i], got[i].shape()), 1e-5, 1e-6);
      }
    }
}

Values tiled(const Values& v, int times) {
  Values out;
  for (int k = 0; k < times; ++k) out.insert(out.end(), v.begin(), v.end());
  return out;
}

Op unary(Tensor (*f)(const Tensor&)) {
  return [f](const TensorList& in) { return std::vector<Tensor>{f(in[0])}; };
}

// x = [nan, inf, -inf, 1, -1, 0], 7 times (42 elements: vector loops and their tails), under
// upstream gradients of ones, NaN and inf.
void check_unary(Tensor (*f)(const Tensor&), const Values& y, const Values& dx_one, const Values& dx_nan,
                 const Values& dx_inf) {
  const Values x = {NaN, Inf, -Inf, 1, -1, 0};
  const int kTimes = 7;
  const Input in{tiled(x, kTimes), {6 * kTimes}};
  const std::pair<double, const Values*> cases[] = {{1.0, &dx_one}, {NaN, &dx_nan}, {Inf, &dx_inf}};
  for (const auto& [g, dx] : cases) {
    INFO("upstream " << g);
    check_case(unary(f), {in}, {Values(6 * kTimes, g), {6 * kTimes}}, {tiled(y, kTimes), tiled(*dx, kTimes)});
  }
}

}  // namespace

// x = torch.tensor([nan, inf, -inf, 1., -1., 0.], requires_grad=True); f(x).backward(g) with g
// all ones, all nan, all inf.
TEST_CASE("relu keeps NaN and its backward passes the gradient where the output is NaN", "[nonfinite]") {
  check_unary(relu, {NaN, Inf, 0, 1, 0, 0}, {1, 1, 0, 1, 0, 0}, {NaN, NaN, 0, NaN, 0, 0}, {Inf, Inf, 0, Inf, 0, 0});
}

TEST_CASE("sigmoid tanh gelu and softplus at NaN and +-inf and under NaN and inf gradients", "[nonfinite]") {
  SECTION("sigmoid") {
    check_unary(sigmoid, {NaN, 1, 0, 0.731058598, 0.268941432, 0.5}, {NaN, 0, 0, 0.196611926, 0.196611941, 0.25},
                Values(6, NaN), {NaN, NaN, NaN, Inf, Inf, Inf});
  }
  SECTION("tanh") {
    check_unary(tanh, {NaN, 1, -1, 0.761594176, -0.761594176, 0}, {NaN, 0, 0, 0.419974297, 0.419974297, 1},
                Values(6, NaN), {NaN, NaN, NaN, Inf, Inf, Inf});
  }
  SECTION("gelu") {  // F.gelu: -inf * Phi(-inf) = -inf * 0 is NaN in PyTorch too
    check_unary(gelu, {NaN, Inf, NaN, 0.841344714, -0.158655286, 0}, {NaN, NaN, NaN, 1.08331537, -0.0833154321, 0.5},
                Values(6, NaN), {NaN, NaN, NaN, Inf, -Inf, Inf});
  }
  SECTION("softplus") {
    check_unary(softplus, {NaN, Inf, 0, 1.31326163, 0.313261688, 0.693147182}, {NaN, 1, 0, 0.731058598, 0.268941432, 0.5},
                Values(6, NaN), {NaN, Inf, NaN, Inf, Inf, Inf});
  }
}

TEST_CASE("the activate() epilogue rules keep NaN like the ops", "[nonfinite]") {
  const Op op = [](const TensorList& in) { return std::vector<Tensor>{activate(in[0], Activation::relu)}; };
  check_case(op, {{{NaN, Inf, -Inf, 1, -1, 0}, {6}}}, {{1, 1, 1, 1, 1, 1}, {6}},
             {{NaN, Inf, 0, 1, 0, 0}, {1, 1, 0, 1, 0, 0}});
}

// y = x.clamp(-0.5, 0.5) on [nan, inf, -inf, 1, -1, 0]. Only the values: clamp's gradient at NaN
// belongs to the gradient rules of max/min/clamp (tested with them).
TEST_CASE("clamp keeps NaN and clamps the infinities", "[nonfinite]") {
  const Op op = [](const TensorList& in) { return std::vector<Tensor>{clamp(in[0], -0.5, 0.5)}; };
  check_case(op, {{{NaN, Inf, -Inf, 1, -1, 0}, {6}}}, {{1, 1, 1, 1, 1, 1}, {6}},
             {{NaN, 0.5, -0.5, 0.5, -0.5, 0}, {}});
}

// x = [[1, nan, 2], [inf, 1, -1], [1, 2, 3]], w = [[1, .5, -1], [-1, 2, .5], [.5, -1, 1], [2, 1, 1]],
// b = [.1, -.2, .3, -5]; torch.relu(F.linear(x, w, b)).backward(
//     [[1, 2, nan, 1], [1, 1, 1, 1], [1, inf, 1, -1]])
TEST_CASE("linear's fused relu keeps NaN rows and passes their gradient", "[nonfinite]") {
  const Op op = [](const TensorList& in) { return std::vector<Tensor>{linear(in[0], in[1], in[2], Activation::relu)}; };
  check_case(op,
             {{{1, NaN, 2, Inf, 1, -1, 1, 2, 3}, {3, 3}},
              {{1, .5, -1, -1, 2, .5, .5, -1, 1, 2, 1, 1}, {4, 3}},
              {{.1, -.2, .3, -5}, {4}}},
             {{1, 2, NaN, 1, 1, 1, 1, 1, 1, Inf, 1, -1}, {3, 4}},
             {{NaN, NaN, NaN, NaN, Inf, 0, Inf, Inf, 0, 4.30000019, 1.79999995, 2},
              {NaN, NaN, NaN, 3.5, 0.5, 1, -Inf, Inf, Inf},
              {Inf, NaN, 1, NaN, NaN, Inf, NaN, NaN, NaN, Inf, NaN, -2},
              {2, Inf, NaN, 1}});
}

// x (1, 1, 4, 4) = [nan, 1, 2, 0, 1, -1, 3, 1, 2, 0, -2, 1, 1, 1, 1, inf],
// w (2, 1, 2, 2) = [1, -1, .5, 2, -1, -1, 1, .25], b = [.5, -1];
// y = torch.relu(F.conv2d(x, w, b)); y.backward(torch.ones_like(y))
TEST_CASE("conv2d's fused relu keeps NaN windows and passes their gradient", "[nonfinite]") {
  const Op op = [](const TensorList& in) {
    return std::vector<Tensor>{conv2d(in[0], in[1], in[2], 1, 0, 1, 1, Activation::relu)};
  };
  check_case(op,
             {{{NaN, 1, 2, 0, 1, -1, 3, 1, 2, 0, -2, 1, 1, 1, 1, Inf}, {1, 1, 4, 4}},
              {{1, -1, .5, 2, -1, -1, 1, .25}, {2, 1, 2, 2}},
              {{.5, -1}, {2}}},
             {Values(18, 1.0), {1, 2, 3, 3}},
             {{NaN, 5, 6, 3.5, 0, 3.5, 5, 5, Inf, NaN, 0, 0.25, 1, 0, 0, 0, 2.25, Inf},
              {0, -1, -1, -2, 1.5, 0.75, 4.5, 1.25, 2.5, 1.25, -1.5, 0, 0.5, 3.5, 3.75, 2.25},
              {NaN, 2, 6, Inf, NaN, -1, 8, Inf},
              {8, 5}});
}

// w = [1, 2], b = [.5, -.5], g = [1, 2, 3, 4, -1, 2, nan, 1] (shape (2, 2, 2));
// y = torch.relu(F.batch_norm(x, rm, rv, w, b, training)); y.backward(g)
TEST_CASE("batch norm's fused relu keeps NaN in training and in evaluation", "[nonfinite]") {
  const Input w{{1, 2}, {2}}, b{{.5, -.5}, {2}}, g{{1, 2, 3, 4, -1, 2, NaN, 1}, {2, 2, 2}};
  SECTION("training: a NaN poisons its channel's statistics") {
    // x = [1, nan, -1, 2, 3, 0, 1, -3], rm = rv = None, training=True
    const Op op = [](const TensorList& in) {
      return std::vector<Tensor>{batch_norm(in[0], in[1], in[2], {}, {}, true, 0.1, 1e-5, Activation::relu)};
    };
    check_case(op, {{{1, NaN, -1, 2, 3, 0, 1, -3}, {2, 2, 2}}, w, b}, g,
               {{NaN, NaN, 0, 1.84339714, NaN, NaN, 0.801887333, 0}, Values(8, NaN), {NaN, NaN}, {4, NaN}});
  }
  SECTION("evaluation: only the non-finite elements") {
    // x = [1, nan, -1, 2, inf, 0, -inf, -3], rm = [.5, -1], rv = [4, .25], training=False
    const Op op = [](const TensorList& in) {
      const Tensor rm = tensor<double>({.5, -1}).to(in[0].dtype()).to(in[0].device());
      const Tensor rv = tensor<double>({4, .25}).to(in[0].dtype()).to(in[0].device());
      return std::vector<Tensor>{batch_norm(in[0], in[1], in[2], rm, rv, false, 0.1, 1e-5, Activation::relu)};
    };
    check_case(op, {{{1, NaN, -1, 2, Inf, 0, -Inf, -3}, {2, 2, 2}}, w, b}, g,
               {{0.749999702, NaN, 0, 11.4997597, Inf, 0.250000298, 0, 0},
                {0.499999374, 0.999998748, 0, 15.9996796, -0.499999374, 0.999998748, 0, 0},
                {NaN, NaN},
                {4, 4}});
  }
}

// x = [nan, inf, -inf, 1, 1, -1, 2, 0] (1, 2, 2, 2), s = [[2, -1]], r = [0, -1, 1, -5, nan, 0, 1, 1];
// y = torch.relu(x * s.view(1, 2, 1, 1) + r); y.backward([1, 2, 3, 4, nan, inf, 1, nan])
TEST_CASE("scale_add_relu keeps NaN and passes the gradient where its output is NaN", "[nonfinite]") {
  const Op op = [](const TensorList& in) { return std::vector<Tensor>{scale_add_relu(in[0], in[1], in[2])}; };
  check_case(op,
             {{{NaN, Inf, -Inf, 1, 1, -1, 2, 0}, {1, 2, 2, 2}},
              {{2, -1}, {1, 2}},
              {{0, -1, 1, -5, NaN, 0, 1, 1}, {1, 2, 2, 2}}},
             {{1, 2, 3, 4, NaN, Inf, 1, NaN}, {1, 2, 2, 2}},
             {{NaN, Inf, 0, 0, NaN, 1, 0, 1}, {2, 4, 0, 0, NaN, -Inf, 0, NaN}, {NaN, NaN}, {1, 2, 0, 0, NaN, Inf, 0, NaN}});
}

// y, i = F.max_pool2d(x, kernel, stride, padding, return_indices=True); y.backward(g)
TEST_CASE("max_pool2d: a NaN in a window wins and its index points to it", "[nonfinite]") {
  auto pool = [](IntPair kernel, IntPair stride, IntPair padding) -> Op {
    return [=](const TensorList& in) {
      ValuesIndices r = max_pool2d_with_indices(in[0], kernel, stride, padding);
      return std::vector<Tensor>{r.values, r.indices};
    };
  };
  SECTION("2x2 stride 2 (the fast path)") {
    // x = [1, nan, 3, 4, 5, 6, nan, 8, -inf, -inf, inf, 1, -inf, -inf, nan, 2] (1, 1, 4, 4), g = [1, 2, 3, 4]
    check_case(pool(2, 2, 0), {{{1, NaN, 3, 4, 5, 6, NaN, 8, -Inf, -Inf, Inf, 1, -Inf, -Inf, NaN, 2}, {1, 1, 4, 4}}},
               {{1, 2, 3, 4}, {1, 1, 2, 2}},
               {{NaN, NaN, -Inf, NaN}, {1, 6, 8, 14}, {0, 1, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0, 0, 4, 0}});
  }
  SECTION("3x3 stride 1 padding 1: the last NaN of the window wins") {
    // x = [1, nan, 3, 5, nan, 7, -inf, -inf, -inf] (1, 1, 3, 3), g = ones
    check_case(pool(3, 1, 1), {{{1, NaN, 3, 5, NaN, 7, -Inf, -Inf, -Inf}, {1, 1, 3, 3}}}, {Values(9, 1.0), {1, 1, 3, 3}},
               {Values(9, NaN), Values(9, 4), {0, 0, 0, 0, 9, 0, 0, 0, 0}});
  }
  SECTION("a window of -inf keeps its first index and of two +inf the first") {
    // x = [-inf, -inf, -inf, -inf, 1, inf, inf, 2] (1, 2, 2, 2), g = ones
    check_case(pool(2, 2, 0), {{{-Inf, -Inf, -Inf, -Inf, 1, Inf, Inf, 2}, {1, 2, 2, 2}}}, {{1, 1}, {1, 2, 1, 1}},
               {{-Inf, Inf}, {0, 1}, {1, 0, 0, 0, 0, 1, 0, 0}});
  }
}

namespace {

// Rows: [nan, 1, 2], [inf, 1, 2], [-inf, 1, 2], [inf, inf, 1], [-inf, -inf, -inf], [inf, -inf, 0],
// [1, 2, 3]; upstream [1, 0, 0] on each but the last, [nan, 0, 0] on it.
const Values kRows = {NaN, 1, 2, Inf, 1, 2, -Inf, 1, 2, Inf, Inf, 1, -Inf, -Inf, -Inf, Inf, -Inf, 0, 1, 2, 3};
const Values kRowGrads = {1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, NaN, 0, 0};

// The same case over dim 1 of (7, 3) (unit-stride rows) and over dim 0 of its (3, 7) transpose
// (the kernels' strided-slices path), the expected values transposed back.
void check_softmax_family(Tensor (*f)(const Tensor&, int64_t), const Values& y, const Values& dx) {
  SECTION("over the last dim") {
    const Op op = [f](const TensorList& in) { return std::vector<Tensor>{f(in[0], 1)}; };
    check_case(op, {{kRows, {7, 3}}}, {kRowGrads, {7, 3}}, {y, dx});
  }
  SECTION("over the first dim") {
    auto t = [](const Values& v) {
      Values out(v.size());
      for (size_t r = 0; r < 7; ++r)
        for (size_t c = 0; c < 3; ++c) out[c * 7 + r] = v[r * 3 + c];
      return out;
    };
    const Op op = [f](const TensorList& in) { return std::vector<Tensor>{f(in[0], 0)}; };
    check_case(op, {{t(kRows), {3, 7}}}, {t(kRowGrads), {3, 7}}, {t(y), t(dx)});
  }
}

}  // namespace

// x = torch.tensor(rows, requires_grad=True); torch.softmax(x, 1).backward(grads)
TEST_CASE("softmax: a NaN or +inf in a row or a row of -inf makes the row NaN while -inf alone is 0", "[nonfinite]") {
  Values y(21, NaN), dx(21, NaN);
  const Values y_row2 = {0, 0.268941432, 0.731058598}, y_row6 = {0.0900305733, 0.244728476, 0.665240943};
  std::copy(y_row2.begin(), y_row2.end(), y.begin() + 6);
  std::copy(y_row6.begin(), y_row6.end(), y.begin() + 18);
  std::fill(dx.begin() + 6, dx.begin() + 9, 0.0);
  check_softmax_family(softmax, y, dx);
}

// x = torch.tensor(rows, requires_grad=True); torch.log_softmax(x, 1).backward(grads)
TEST_CASE("log_softmax: NaN rows as softmax's and -inf where the logit is -inf", "[nonfinite]") {
  Values y(21, NaN), dx(21, NaN);
  const Values y_row2 = {-Inf, -1.31326163, -0.313261658}, y_row6 = {-2.40760589, -1.40760589, -0.407605946};
  const Values dx_row2 = {1, -0.268941432, -0.731058598};
  std::copy(y_row2.begin(), y_row2.end(), y.begin() + 6);
  std::copy(y_row6.begin(), y_row6.end(), y.begin() + 18);
  std::copy(dx_row2.begin(), dx_row2.end(), dx.begin() + 6);
  check_softmax_family(log_softmax, y, dx);
}

// x = [[1, 2, 3]]; torch.softmax(x, 1).backward([[inf, 0, 0]]) (and log_softmax): inf - inf = NaN
TEST_CASE("softmax and log_softmax under an infinite upstream gradient", "[nonfinite]") {
  const Input x{{1, 2, 3}, {1, 3}}, g{{Inf, 0, 0}, {1, 3}};
  check_case([](const TensorList& in) { return std::vector<Tensor>{softmax(in[0], 1)}; }, {x}, g,
             {{0.0900305733, 0.244728476, 0.665240943}, {NaN, -Inf, -Inf}});
  check_case([](const TensorList& in) { return std::vector<Tensor>{log_softmax(in[0], 1)}; }, {x}, g,
             {{-2.40760589, -1.40760589, -0.407605946}, {NaN, -Inf, -Inf}});
}

// Rows longer than one warp's share (the CPU's vector lanes, CUDA's block-per-row kernel):
// x = torch.zeros(3, 2000); x[0, 1234] = nan; x[1, 1999] = inf; x[2, 7] = -inf
// torch.softmax(x, 1): rows 0 and 1 all nan; row 2: 0 at 7, 1 / 1999 elsewhere.
TEST_CASE("softmax over long rows: one NaN or +inf anywhere makes the row NaN", "[nonfinite]") {
  const int64_t n = 2000;
  Values x(3 * n, 0.0), y(3 * n, NaN);
  x[1234] = NaN, x[n + 1999] = Inf, x[2 * n + 7] = -Inf;
  std::fill(y.begin() + 2 * n, y.end(), 1.0 / 1999);
  y[2 * n + 7] = 0;
  const Op op = [](const TensorList& in) { return std::vector<Tensor>{softmax(in[0], 1)}; };
  check_case(op, {{x, {3, n}}}, {Values(3 * n, 0.0), {3, n}}, {y, {}});
}

TEST_CASE("cross_entropy with non-finite logits and upstream gradients", "[nonfinite]") {
  SECTION("NaN, +inf and all -inf rows are NaN") {
    // l = F.cross_entropy(torch.tensor(rows), target=[1] * 7, reduction='none'); l.backward([1] * 6 + [nan])
    const Op op = [](const TensorList& in) {
      const Tensor t = tensor<int64_t>({1, 1, 1, 1, 1, 1, 1}).to(in[0].device());
      return std::vector<Tensor>{cross_entropy(in[0], t, Reduction::none)};
    };
    Values dx(21, NaN);
    const Values dx_row2 = {0, -0.731058598, 0.731058598};
    std::copy(dx_row2.begin(), dx_row2.end(), dx.begin() + 6);
    check_case(op, {{kRows, {7, 3}}}, {{1, 1, 1, 1, 1, 1, NaN}, {7}},
               {{NaN, NaN, 1.31326163, NaN, NaN, NaN, 1.40760589}, dx});
  }
  SECTION("a target at -inf costs inf and inf upstream gives NaN at the target") {
    // l = F.cross_entropy([[-inf, 1, 2], [1, 2, 3], [1, 2, 3]], [0, 1, 2], reduction='none');
    // l.backward([1, inf, -inf])
    const Op op = [](const TensorList& in) {
      const Tensor t = tensor<int64_t>({0, 1, 2}).to(in[0].device());
      return std::vector<Tensor>{cross_entropy(in[0], t, Reduction::none)};
    };
    check_case(op, {{{-Inf, 1, 2, 1, 2, 3, 1, 2, 3}, {3, 3}}}, {{1, Inf, -Inf}, {3}},
               {{Inf, 1.40760589, 0.407605946}, {-1, 0.268941432, 0.731058598, Inf, NaN, Inf, -Inf, -Inf, NaN}});
  }
}
