#include "apps/bench/bench_kernels_nn.h"

#include "apps/bench/device_timing.h"
#include "ember.h"

namespace ember {
namespace {

// Where the rows run and how their blocks are timed (see bench_kernels_nn()).
struct Target {
  Device device;
  bench::TimingOptions timing;
  double ms(const std::function<void()>& fn) const { return bench::median_ms(fn, timing); }
};

std::string dims_name(const Shape& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s.append(i ? "x" : "").append(std::to_string(shape[i]));
  return s;
}

// Times one backward pass of `out` (recorded from leaf x) with gradient g.
double backward_ms(const Target& on, const Tensor& x, const Tensor& out, const Tensor& g) {
  return on.ms([&] {
    x.zero_grad();
    out.backward(g, /*retain_graph=*/true);
  });
}

void bench_unary(const Target& on, std::vector<bench::KernelRow>& rows, const std::string& op, const Shape& shape,
                 const std::function<Tensor(const Tensor&)>& fn) {
  Generator gen(1);
  Tensor x = randn(shape, {}, &gen).to(on.device);
  {
    autograd::NoGradGuard no_grad;
    rows.push_back({op + "_fwd " + dims_name(shape), on.ms([&] { fn(x); })});
  }
  Tensor xr = x.detach().requires_grad_();
  Tensor y = fn(xr);
  rows.push_back({op + "_bwd " + dims_name(shape), backward_ms(on, xr, y, randn(shape, {}, &gen).to(on.device))});
}

void bench_cross_entropy(const Target& on, std::vector<bench::KernelRow>& rows, int64_t n, int64_t classes) {
  Generator gen(2);
  Tensor x = randn({n, classes}, {}, &gen).to(on.device);
  Tensor t = randint(0, classes, {n}, {.dtype = DType::i64}, &gen).to(on.device);
  const std::string dims = dims_name({n, classes});
  {
    autograd::NoGradGuard no_grad;
    rows.push_back({"cross_entropy_fwd " + dims, on.ms([&] { cross_entropy(x, t); })});
  }
  Tensor xr = x.detach().requires_grad_();
  Tensor loss = cross_entropy(xr, t);
  rows.push_back({"cross_entropy_bwd " + dims, backward_ms(on, xr, loss, ones({}).to(on.device))});
}

void bench_matmul(const Target& on, std::vector<bench::KernelRow>& rows, int64_t n) {
  Generator gen(3);
  Tensor a = randn({n, n}, {}, &gen).to(on.device), b = randn({n, n}, {}, &gen).to(on.device);
  autograd::NoGradGuard no_grad;
  rows.push_back({"matmul " + dims_name({n, n, n}), on.ms([&] { matmul(a, b); })});
}

}  // namespace

std::vector<bench::KernelRow> bench_kernels_nn(int threads, Device device) {
  if (threads > 0) set_num_threads(threads);
  const Target on{device, bench::timing_for(device)};
  std::vector<bench::KernelRow> rows;
  auto softmax1 = [](const Tensor& x) { return softmax(x, 1); };
  bench_unary(on, rows, "softmax", {8, 10}, softmax1);
  bench_unary(on, rows, "softmax", {8, 10, 28, 28}, softmax1);
  bench_cross_entropy(on, rows, 32, 10);
  bench_cross_entropy(on, rows, 256, 1000);
  bench_unary(on, rows, "relu", {1024, 1024}, [](const Tensor& x) { return relu(x); });
  bench_unary(on, rows, "sigmoid", {1024, 1024}, [](const Tensor& x) { return sigmoid(x); });
  bench_unary(on, rows, "tanh", {1024, 1024}, [](const Tensor& x) { return tanh(x); });
  bench_matmul(on, rows, 256);
  bench_matmul(on, rows, 1024);
  return rows;
}

}  // namespace ember
