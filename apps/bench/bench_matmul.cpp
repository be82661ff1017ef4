#include "apps/bench/bench_matmul.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "apps/bench/timing.h"
#include "ember.h"

#if defined(EMBER_CUDA_REAL) || defined(EMBER_CUDA_SIM)
#include "ops/cuda/gemm_tensor_core.h"
#include "ops/cuda/matmul.h"
#include "cuda/runtime.h"
#include "ops/cpu/gemm.h"
#endif
#if defined(EMBER_CUDA_REAL)
#include <cublas_v2.h>
#endif

namespace ember::bench {

#if defined(EMBER_CUDA_REAL) || defined(EMBER_CUDA_SIM)
namespace {

// float -> bfloat16 bits, round to nearest even (the values here are finite).
uint16_t to_bf16_bits(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// An (n, n) matrix in device memory, T = float or uint16_t (bf16 bits), with the host values it
// was made from (as floats, after rounding to T).
template <class T>
class DeviceSquare {
 public:
  DeviceSquare(int64_t n, uint32_t seed) : n_(n), host_(size_t(n * n)) {
    std::vector<T> stored(host_.size());
    uint32_t state = seed;
    for (size_t i = 0; i < host_.size(); ++i) {  // values in [-1, 1)
      state = state * 1664525u + 1013904223u;
      const float v = float(int32_t(state >> 8) % 1000) / 1000.0f;
      if constexpr (std::is_same_v<T, float>) {
        stored[i] = host_[i] = v;
      } else {
        stored[i] = to_bf16_bits(v);
        host_[i] = std::bit_cast<float>(uint32_t(stored[i]) << 16);
      }
    }
    device_ = static_cast<T*>(cuda::malloc_device(bytes()));
    cuda::memcpy(device_, stored.data(), bytes(), cuda::CopyKind::host_to_device);
  }
  DeviceSquare(const DeviceSquare&) = delete;
  DeviceSquare& operator=(const DeviceSquare&) = delete;
  ~DeviceSquare() { cuda::free_device(device_); }

  T* get() const { return device_; }
  const std::vector<float>& host() const { return host_; }
  std::vector<float> download() const requires std::is_same_v<T, float> {
    std::vector<float> out(host_.size());
    cuda::memcpy(out.data(), device_, bytes(), cuda::CopyKind::device_to_host);
    return out;
  }
  cuda::GemmOperand<T> operand() const { return {device_, n_, false, 0}; }

 private:
  size_t bytes() const { return host_.size() * sizeof(T); }
  int64_t n_;
  std::vector<float> host_;
  T* device_ = nullptr;
};

// A kernel computing c (f32) = a @ b with a and b of type T (f32, or bf16 bits).
template <class T>
struct Candidate {
  std::string name;
  std::function<void(int64_t n, const DeviceSquare<T>& a, const DeviceSquare<T>& b, DeviceSquare<float>& c)> run;
};

std::vector<Candidate<float>> ember_kernels() {
  return {{"matmul_tiled", [](int64_t n, const DeviceSquare<float>& a, const DeviceSquare<float>& b,
                              DeviceSquare<float>& c) {
             cuda::matmul_tiled<float>({1, n, n, n}, a.operand(), b.operand(), c.get());
           }},
          {"sgemm_blocked", [](int64_t n, const DeviceSquare<float>& a, const DeviceSquare<float>& b,
                               DeviceSquare<float>& c) {
             cuda::sgemm_blocked({1, n, n, n}, a.operand(), b.operand(), c.get());
           }}};
}

std::vector<Candidate<uint16_t>> ember_bf16_kernels() {
  return {{"tensor_core", [](int64_t n, const DeviceSquare<uint16_t>& a, const DeviceSquare<uint16_t>& b,
                             DeviceSquare<float>& c) {
    cuda::gemm_tensor_core(DType::bf16, {1, n, n, n}, a.operand(), b.operand(), c.get());
  }}};
}

float max_abs_difference(const std::vector<float>& x, const std::vector<float>& y) {
  float worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return std::isnan(worst) ? INFINITY : worst;
}

#if defined(EMBER_CUDA_SIM)
// Both kernels on the simulator against the CPU GEMM, at sizes it runs in seconds.
int sim_smoke(std::ostream& out) {
  out << "ember bench matmul --sim: the kernels on the SIMT simulator against the CPU GEMM\n"
         "(a correctness smoke: simulator timings say nothing about a GPU)\n\n";
  Table table({"size", "kernel", "max |error|", "result"}, {6, 14, 12, 6});
  out << table.header() << "\n";
  int status = 0;
  const auto check = [&]<class T>(const std::vector<Candidate<T>>& kernels, int64_t n) {
    const DeviceSquare<T> a(n, 1), b(n, 2);
    std::vector<float> expected(size_t(n * n));  // on the inputs as rounded to T
    cpu::gemm<float>(false, false, n, n, n, 1.0f, a.host().data(), n, b.host().data(), n, 0.0f, expected.data(), n);
    for (const Candidate<T>& k : kernels) {
      DeviceSquare<float> c(n, 3);
      k.run(n, a, b, c);
      const float error = max_abs_difference(c.download(), expected);
      const bool ok = error <= 1e-3f;  // f32 sums of <= 130 products of values in [-1, 1)
      if (!ok) status = 1;
      out << table.row({std::to_string(n), k.name, fixed(error, 7), ok ? "ok" : "FAIL"}) << "\n";
    }
  };
  for (int64_t n : {16, 33, 130}) {
    check(ember_kernels(), n);
    check(ember_bf16_kernels(), n);
  }
  return status;
}
#endif

#if defined(EMBER_CUDA_REAL)
// Milliseconds per call: warm-up, then the median over 7 blocks of CUDA-event time / calls,
// synchronising once per block.
double device_median_ms(const std::function<void()>& fn) {
  for (int i = 0; i < 2; ++i) fn();
  cuda::Event start, stop;
  start.record();
  fn();
  stop.record();
  stop.synchronize();
  const int iters = std::clamp(int(20.0 / std::max(double(stop.elapsed_ms_since(start)), 1e-3)), 1, 1000);
  std::vector<double> per_call;
  for (int block = 0; block < 7; ++block) {
    start.record();
    for (int i = 0; i < iters; ++i) fn();
    stop.record();
    stop.synchronize();
    per_call.push_back(double(stop.elapsed_ms_since(start)) / iters);
  }
  std::nth_element(per_call.begin(), per_call.begin() + 3, per_call.end());
  return per_call[3];
}

void check_cublas(cublasStatus_t status, const char* call) {
  EMBER_CHECK(status == CUBLAS_STATUS_SUCCESS, "bench matmul: ", call, " failed with cuBLAS status ", int(status));
}

// cuBLAS is column-major: row-major c = a b is column-major c^T = b^T a^T, i.e. sgemm(b, a).
Candidate<float> cublas_candidate(cublasHandle_t handle) {
  return {"cuBLAS", [handle](int64_t n, const DeviceSquare<float>& a, const DeviceSquare<float>& b,
                             DeviceSquare<float>& c) {
            const float one = 1.0f, zero = 0.0f;
            const int ni = int(n);
            check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, b.get(), ni, a.get(), ni,
                                     &zero, c.get(), ni),
                         "cublasSgemm");
          }};
}

// The bf16 reference: cublasGemmEx with bf16 inputs, f32 output and f32 compute (tensor cores).
Candidate<uint16_t> cublas_bf16_candidate(cublasHandle_t handle) {
  return {"cuBLAS bf16", [handle](int64_t n, const DeviceSquare<uint16_t>& a, const DeviceSquare<uint16_t>& b,
                                  DeviceSquare<float>& c) {
            const float one = 1.0f, zero = 0.0f;
            const int ni = int(n);
            check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, b.get(), CUDA_R_16BF, ni,
                                      a.get(), CUDA_R_16BF, ni, &zero, c.get(), CUDA_R_32F, ni, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT),
                         "cublasGemmEx");
          }};
}

// One table block per size: the reference's row, then each kernel's, all measured in this run.
template <class T>
void time_rows(std::ostream& out, const Table& table, int64_t n, const Candidate<T>& reference_kernel,
               const std::vector<Candidate<T>>& kernels) {
  const DeviceSquare<T> a(n, 1), b(n, 2);
  DeviceSquare<float> reference(n, 3), c(n, 4);
  const double flops = 2.0 * double(n) * double(n) * double(n);
  const double reference_ms = device_median_ms([&] { reference_kernel.run(n, a, b, reference); });
  const std::vector<float> expected = reference.download();
  out << table.row({std::to_string(n), reference_kernel.name, fixed(reference_ms, 3),
                    fixed(flops / (reference_ms * 1e6), 0), "100.0%", "-"})
      << "\n";
  for (const Candidate<T>& k : kernels) {
    const double ms = device_median_ms([&] { k.run(n, a, b, c); });
    out << table.row({std::to_string(n), k.name, fixed(ms, 3), fixed(flops / (ms * 1e6), 0),
                      fixed(100.0 * reference_ms / ms, 1) + "%", fixed(max_abs_difference(c.download(), expected), 5)})
        << "\n";
  }
}

int gpu_table(std::ostream& out) {
  const cuda::DeviceProperties props = cuda::device_properties();
  out << "ember bench matmul on " << props.name << ": square f32 c = a b; CUDA-event time, median of 7 blocks\n"
      << "after warm-up; cuBLAS SGEMM (FP32 math, no TF32) measured in the same run\n\n";
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  Table table({"size", "kernel", "ms", "GFLOP/s", "% of cuBLAS", "max |c - cuBLAS|"}, {6, 14, 9, 10, 11, 16});
  out << table.header() << "\n";
  for (int64_t n : {512, 1024, 2048, 4096}) time_rows(out, table, n, cublas_candidate(handle), ember_kernels());
  out << "\nbf16 a and b, f32 c (f32 accumulation): ember's tensor-core GEMM against cublasGemmEx (bf16 in, "
         "CUBLAS_COMPUTE_32F)\n\n"
      << table.header() << "\n";
  for (int64_t n : {512, 1024, 2048, 4096})
    time_rows(out, table, n, cublas_bf16_candidate(handle), ember_bf16_kernels());
  cublasDestroy(handle);
  return 0;
}
#endif

}  // namespace
#endif

int bench_matmul(std::ostream& out, const BenchMatmulOptions& options) {
#if defined(EMBER_CUDA_SIM)
  if (options.sim) return sim_smoke(out);
  out << "ember bench matmul: no GPU available (this build runs CUDA kernels on the SIMT simulator);\n"
         "`ember bench matmul --sim` runs the kernels there as a correctness smoke\n";
  return 0;
#elif defined(EMBER_CUDA_REAL)
  if (options.sim) {
    out << "ember bench matmul --sim: the simulator is not part of this build (configure with -DEMBER_CUDA=SIM)\n";
    return 1;
  }
  if (!cuda::init()) {
    out << "ember bench matmul: no GPU available (no CUDA device visible to this process)\n";
    return 0;
  }
  return gpu_table(out);
#else
  out << "ember bench matmul: no GPU available (this build has no CUDA backend)"
      << (options.sim ? "; --sim needs a build with -DEMBER_CUDA=SIM" : "") << "\n";
  return options.sim ? 1 : 0;
#endif
}

}  // namespace ember::bench
