// The CUDA matmul kernels (ops/cuda/matmul.h) on the simulator against the CPU GEMM
// (ops/cpu/gemm.h), which takes the same operand contract, so both read the same host layouts.
// Sizes are small on purpose: the simulator runs one OS thread per CUDA thread.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ops/cuda/matmul.h"
#include "device_buffer.h"
#include "ops/cpu/gemm.h"
#include "ops/kernels.h"
#include "support/test_support.h"

using ember::testing::DeviceBuffer;
namespace cuda = ember::cuda;

namespace {

// One GEMM problem: c (batch, m, n) = a (batch, m, k) @ b (batch, k, n), each operand stored
// row-major or transposed with `pad` extra elements per stored row, and optionally one matrix
// broadcast over the batch (batch stride 0). `offset` shifts the data by that many elements,
// which breaks 16-byte alignment when it is not a multiple of 4.
struct Layout {
  bool transposed = false;
  int64_t pad = 0;
  bool broadcast = false;
  int64_t offset = 0;
};

struct Problem {
  std::string name;
  int64_t batch, m, n, k;
  Layout a, b;
};

// Host data of one operand (rows x cols per batch item) in its layout, with its GemmOperand
// fields relative to the start of the buffer.
template <class T>
struct HostOperand {
  std::vector<T> data;
  int64_t ld, batch_stride, offset;
  bool transposed;
};

// The buffer ends at the last element of the last matrix, and the padding and the offset
// prefix hold NaN: a kernel that reads past a row, or past the buffer, is caught (by the
// comparison, or by AddressSanitizer).
template <class T>
HostOperand<T> make_operand(int64_t batch, int64_t rows, int64_t cols, const Layout& layout, uint32_t seed) {
  const int64_t stored_rows = layout.transposed ? cols : rows, stored_cols = layout.transposed ? rows : cols;
  const int64_t ld = stored_cols + layout.pad, matrix = stored_rows * ld;
  const int64_t items = layout.broadcast ? 1 : batch;
  const int64_t size = stored_rows == 0 ? layout.offset + 1 : layout.offset + (items - 1) * matrix + matrix - layout.pad;
  HostOperand<T> op{std::vector<T>(size_t(size), std::numeric_limits<T>::quiet_NaN()), ld,
                    layout.broadcast ? 0 : matrix, layout.offset, layout.transposed};
  uint32_t state = seed;
  for (int64_t item = 0; item < items; ++item)
    for (int64_t r = 0; r < stored_rows; ++r)
      for (int64_t c = 0; c < stored_cols; ++c) {  // values in [-1, 1): a small LCG, the same everywhere
        state = state * 1664525u + 1013904223u;
        op.data[size_t(layout.offset + item * matrix + r * ld + c)] = T(int32_t(state >> 8) % 1000) / T(1000);
      }
  return op;
}

template <class T>
cuda::GemmOperand<T> on_device(const HostOperand<T>& host, const DeviceBuffer<T>& device) {
  return {device.get() + host.offset, host.ld, host.transposed, host.batch_stride};
}

template <class T>
std::vector<T> cpu_reference(const Problem& p, const HostOperand<T>& a, const HostOperand<T>& b) {
  std::vector<T> c(size_t(p.batch * p.m * p.n));
  for (int64_t i = 0; i < p.batch; ++i)
    ember::cpu::gemm<T>(a.transposed, b.transposed, p.m, p.n, p.k, T(1), a.data.data() + a.offset + i * a.batch_stride,
                        a.ld, b.data.data() + b.offset + i * b.batch_stride, b.ld, T(0), c.data() + i * p.m * p.n, p.n);
  return c;
}

enum class Kernel { tiled, blocked };

// Runs one kernel on p and compares every element of c with the CPU GEMM. c starts as NaN, so
// an element the kernel never writes fails the comparison.
template <class T>
void check_against_cpu(const Problem& p, Kernel kernel, double tolerance) {
  const HostOperand<T> a = make_operand<T>(p.batch, p.m, p.k, p.a, 11), b = make_operand<T>(p.batch, p.k, p.n, p.b, 29);
  DeviceBuffer<T> da(a.data), db(b.data);
  DeviceBuffer<T> dc(std::vector<T>(size_t(p.batch * p.m * p.n), std::numeric_limits<T>::quiet_NaN()));
  const cuda::GemmShape shape{p.batch, p.m, p.n, p.k};
  if constexpr (std::is_same_v<T, float>) {
    if (kernel == Kernel::blocked) cuda::sgemm_blocked(shape, on_device(a, da), on_device(b, db), dc.get());
    else cuda::matmul_tiled<T>(shape, on_device(a, da), on_device(b, db), dc.get());
  } else {
    cuda::matmul_tiled<T>(shape, on_device(a, da), on_device(b, db), dc.get());
  }
  const std::vector<T> got = dc.download(), expected = cpu_reference(p, a, b);
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(expected[i]));
    if (!(err <= worst)) {  // also catches NaN: an element never written
      worst = std::isnan(err) ? INFINITY : err;
      worst_at = i;
    }
  }
  INFO(p.name << (kernel == Kernel::blocked ? " (sgemm_blocked)" : " (matmul_tiled)") << ": worst |error| " << worst
              << " at " << worst_at);
  REQUIRE(worst <= tolerance);
}

// Layouts: row-major (default), transposed, padded rows, broadcast batch, misaligned data.
const Layout kRow{}, kTrans{.transposed = true}, kRowPadded{.pad = 3}, kTransPadded{.transposed = true, .pad = 5},
    kBroadcast{.broadcast = true}, kMisaligned{.offset = 1};

const std::vector<Problem> kProblems = {
    {"1x1x1", 1, 1, 1, 1, kRow, kRow},
    {"17x33x9", 1, 17, 33, 9, kRow, kRow},
    {"9x17x33, A transposed", 1, 9, 17, 33, kTrans, kRow},
    {"13x10x21, B transposed", 1, 13, 10, 21, kRow, kTrans},
    {"11x19x7, both transposed and padded", 1, 11, 19, 7, kTransPadded, kTransPadded},
    {"batch 3, A broadcast", 3, 20, 36, 12, kBroadcast, kRowPadded},
    {"batch 2, B broadcast and transposed", 2, 7, 12, 40, kRow, {.transposed = true, .broadcast = true}},
    {"misaligned A, padded B", 2, 6, 20, 16, kMisaligned, kRowPadded},
    {"k = 0 writes zeros", 2, 5, 6, 0, kRow, kRow},
};

// f32 sums of up to ~130 products of values in [-1, 1): rounding stays well below 1e-4.
constexpr double kF32Tolerance = 1e-4;

}  // namespace

TEST_CASE("matmul_tiled<float> matches the CPU GEMM on partial tiles, odd shapes and layouts") {
  for (const Problem& p : kProblems) check_against_cpu<float>(p, Kernel::tiled, kF32Tolerance);
}

TEST_CASE("matmul_tiled<double> matches the CPU GEMM") {
  for (const Problem& p : kProblems) check_against_cpu<double>(p, Kernel::tiled, 1e-12);
}

TEST_CASE("sgemm_blocked matches the CPU GEMM on partial tiles, odd shapes and layouts") {
  for (const Problem& p : kProblems) check_against_cpu<float>(p, Kernel::blocked, kF32Tolerance);
}

TEST_CASE("both kernels handle 130x129x65: several 128-blocks, every edge partial") {
  const Problem p{"130x129x65", 1, 130, 129, 65, kRow, kRow};
  check_against_cpu<float>(p, Kernel::blocked, kF32Tolerance);
  check_against_cpu<float>(p, Kernel::tiled, kF32Tolerance);
  check_against_cpu<float>({"130x129x65, both transposed", 1, 130, 129, 65, kTrans, kTrans}, Kernel::blocked,
                           kF32Tolerance);
}

TEST_CASE("sgemm_blocked takes the float4 paths on aligned layouts, with partial chunks at the edges") {
  // ld and batch strides are multiples of 4, so loads and stores are vectorised; k = 20 and
  // m = 70 end in partial 8-steps and partial chunks; n = 132 spills 4 columns into a 2nd block.
  check_against_cpu<float>({"aligned 70x132x20", 1, 70, 132, 20, kRow, kRow}, Kernel::blocked, kF32Tolerance);
  check_against_cpu<float>({"aligned, transposed, batch 2", 2, 68, 36, 20, kTrans, kTrans}, Kernel::blocked,
                           kF32Tolerance);
  // Padded to ld % 4 == 0 with k = 18 and m = 70: the last chunk along a row is partial, and a
  // float4 there would read the NaN padding (or, on the last row, past the buffer).
  check_against_cpu<float>({"aligned, padded, partial chunks", 1, 70, 36, 18, {.pad = 2},
                            {.transposed = true, .pad = 2}},
                           Kernel::blocked, kF32Tolerance);
  check_against_cpu<float>({"aligned, padded, A transposed", 1, 70, 66, 18, {.transposed = true, .pad = 2},
                            {.pad = 2}},
                           Kernel::blocked, kF32Tolerance);
}

TEST_CASE("empty problems launch nothing and sizes over the kernels' limits are refused") {
  const cuda::GemmOperand<float> none{};
  cuda::sgemm_blocked({0, 4, 4, 4}, none, none, nullptr);  // batch 0: nothing to do
  cuda::matmul_tiled<float>({2, 0, 4, 4}, none, none, nullptr);
  REQUIRE_THROWS_WITH(cuda::sgemm_blocked({1, int64_t(1) << 32, 4, 4}, none, none, nullptr),
                      Catch::Contains("sgemm_blocked: expected m, n, k <= 2147483647"));
  REQUIRE_THROWS_WITH(cuda::matmul_tiled<float>({1, 4, 16 * 65535 + 1, 4}, none, none, nullptr),
                      Catch::Contains("matmul_tiled: expected n <= 1048560"));
}

// ---- through the op layer: matmul on cuda tensors -------------------------------------------

namespace {

using ember::Device;
using ember::DType;
using ember::Tensor;

Tensor upload(const Tensor& cpu) {
  ember::cuda::init();
  Tensor c = cpu.contiguous();
  Tensor d = Tensor::empty(c.shape(), {.dtype = c.dtype(), .device = Device::cuda()});
  cuda::memcpy(d.raw_data(), c.raw_data(), c.nbytes(), cuda::CopyKind::host_to_device);
  return d;
}

Tensor download(const Tensor& device) {
  REQUIRE(device.is_contiguous());
  Tensor h = Tensor::empty(device.shape(), {.dtype = device.dtype()});
  cuda::memcpy(h.raw_data(), device.raw_data(), device.nbytes(), cuda::CopyKind::device_to_host);
  return h;
}

}  // namespace

TEST_CASE("matmul on cuda tensors dispatches to the CUDA kernels and reads transposed views in place") {
  ember::Generator gen(7);
  for (const auto& [m, n, k] : {std::tuple{5, 7, 3}, std::tuple{70, 66, 9}}) {  // tiled, then blocked
    INFO("m " << m << ", n " << n << ", k " << k);
    Tensor a = ember::randn({2, m, k}, {}, &gen), bt = ember::randn({n, k}, {}, &gen);
    Tensor expected = ember::matmul(a, bt.t());
    Tensor got = download(ember::matmul(upload(a), upload(bt).t()));  // b: a transposed view, broadcast
    REQUIRE_THAT(got, ember::test::all_close(expected, 1e-5, 1e-5));
  }
}

TEST_CASE("matmul on cuda: f64 backward agrees with central differences of the cuda forward") {
  // L = sum(matmul(a, b) * w). The analytic gradients come from ember's autograd on cuda (the
  // backward runs bmm on transposed views); the numeric ones perturb one element at a time.
  ember::Generator gen(3);
  const Tensor a_cpu = ember::randn({2, 3, 4}, {.dtype = DType::f64}, &gen);
  const Tensor b_cpu = ember::randn({2, 4, 2}, {.dtype = DType::f64}, &gen);
  const Tensor w_cpu = ember::randn({2, 3, 2}, {.dtype = DType::f64}, &gen);
  const std::vector<double> w = w_cpu.to_vector<double>();
  auto loss = [&](const Tensor& a, const Tensor& b) {
    const std::vector<double> c = download(ember::matmul(upload(a), upload(b))).to_vector<double>();
    double l = 0;
    for (size_t i = 0; i < c.size(); ++i) l += c[i] * w[i];
    return l;
  };

  Tensor a = upload(a_cpu).requires_grad_(), b = upload(b_cpu).requires_grad_();
  ember::matmul(a, b).backward(upload(w_cpu));
  const std::vector<Tensor> inputs = {a_cpu, b_cpu};
  const std::vector<Tensor> grads = {download(a.grad()), download(b.grad())};
  const double eps = 1e-6;
  for (size_t input = 0; input < 2; ++input) {
    const std::vector<double> analytic = grads[input].to_vector<double>();
    for (int64_t e = 0; e < inputs[input].numel(); ++e) {
      Tensor plus = inputs[input].clone(), minus = inputs[input].clone();
      plus.data<double>()[e] += eps;
      minus.data<double>()[e] -= eps;
      const double numeric = input == 0 ? (loss(plus, b_cpu) - loss(minus, b_cpu)) / (2 * eps)
                                        : (loss(a_cpu, plus) - loss(a_cpu, minus)) / (2 * eps);
      INFO("input " << input << " element " << e << ": analytic " << analytic[size_t(e)] << ", numeric " << numeric);
      REQUIRE(std::fabs(analytic[size_t(e)] - numeric) <= 1e-6 + 1e-6 * std::fabs(numeric));
    }
  }
}

TEST_CASE("gradcheck of matmul on cuda (needs the other CUDA kernels: copies, fill, reductions)") {
  if (!ember::cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  ember::Generator gen(5);
  Tensor a = ember::randn({3, 4}, {.dtype = DType::f64}, &gen).to(Device::cuda());
  Tensor b = ember::randn({2, 4, 2}, {.dtype = DType::f64}, &gen).to(Device::cuda());
  ember::test::require_gradcheck([](const ember::autograd::TensorList& in) { return ember::matmul(in[0], in[1]); }, {a, b});
  ember::test::require_gradcheck([](const ember::autograd::TensorList& in) { return ember::matmul(in[0], in[1].t()); },
                                 {a, ember::randn({5, 4}, {.dtype = DType::f64}, &gen).to(Device::cuda())});
}

TEST_CASE("cuda::bmm refuses dtypes without a kernel, naming the op and the dtype") {
  // matmul itself admits only floating dtypes (f32, f64 and, on tensor cores, bf16/f16); the
  // kernel's own check is reached directly.
  const Tensor a = upload(ember::ones({1, 2, 2}).to(DType::i64));
  REQUIRE_THROWS_WITH(cuda::bmm(a, a, a), Catch::Contains("matmul (cuda): expected f32, f64, bf16 or f16") &&
                                               Catch::Contains("got i64"));
}
