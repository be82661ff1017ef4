// The shared parts of the bf16/f16 GEMM ops on CUDA (gemm_reduced.h; Note [Reduced-precision
// GEMMs on CUDA] there).
#include "ops/cuda/gemm_reduced.h"

#include <atomic>

#include "core/error.h"
#include "core/float16.h"
#include "cuda/launch.h"
#include "ops/cuda/gemm_tensor_core.h"
#include "ops/kernels.h"

namespace ember::cuda::reduced {
namespace {

constexpr unsigned kThreads = 256;
std::atomic<bool> g_tensor_cores_enabled{true};

// c f32 (total) -> out (total) T = act(c + bias); T is BFloat16 or Half, the bias's type too.
template <class T>
__global__ void store_rounded_kernel(const float* __restrict__ c, int64_t total, const T* __restrict__ bias,
                                     int64_t bias_inner, int64_t bias_period, Activation act, T* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    float v = c[i];
    if (bias) v += float(bias[i / bias_inner % bias_period]);
    out[i] = T(apply_activation(act, v));
  }
}

// c (images, elements) f32 -> acc (elements) f32, summed over the images in order.
__global__ void accumulate_images_kernel(const float* __restrict__ c, int64_t images, int64_t elements, bool first,
                                         float* __restrict__ acc) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < elements;
       e += int64_t(blockDim.x) * gridDim.x) {
    float sum = first ? 0.0f : acc[e];
    for (int64_t i = 0; i < images; ++i) sum += c[i * elements + e];
    acc[e] = sum;
  }
}

}  // namespace

bool tensor_cores_usable() {
  if (!g_tensor_cores_enabled.load()) return false;
#if defined(EMBER_CUDA_REAL)
  int device = 0, major = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;  // gemm_tensor_core's own requirement (bf16/f16 mma.sync)
#else
  return true;
#endif
}

void set_tensor_cores_enabled(bool enabled) { g_tensor_cores_enabled.store(enabled); }

const uint16_t* bits(const Tensor& t) { return mutable_bits(t); }

uint16_t* mutable_bits(const Tensor& t) {
  if (!t.defined()) return nullptr;
  EMBER_CHECK(is_reduced_float(t.dtype()), "reduced-precision GEMM: expected a bf16 or f16 tensor, got ",
              dtype_name(t.dtype()));
  return static_cast<uint16_t*>(t.raw_data());
}

Tensor f32_workspace(int64_t numel, const Tensor& like) {
  return Tensor::empty({numel}, {.dtype = DType::f32, .device = like.device()});
}

Tensor widened_copy(const Tensor& t) {
  if (!t.defined()) return t;
  const Tensor out = Tensor::empty(t.shape(), {.dtype = DType::f32, .device = t.device()});
  copy_kernel(t.device(), t, out);
  return out;
}

void store_copy(const Tensor& src32, const Tensor& dst) { copy_kernel(dst.device(), src32, dst); }

void grouped_gemm(DType element, int64_t images, int64_t groups, int64_t m, int64_t n, int64_t k,
                  const GroupedOperand& a, const GroupedOperand& b, float* c, Stream stream) {
  if (groups == 1) {  // one launch over the images
    GemmOperand<uint16_t> as = a.op, bs = b.op;
    as.batch_stride = a.image_stride, bs.batch_stride = b.image_stride;
    gemm_tensor_core(element, {images, m, n, k}, as, bs, c, stream);
    return;
  }
  // Groups differ in both operands' offsets, images in b's (and a's): one launch per image,
  // batched over its groups, which writes c's (groups, m, n) block of that image.
  for (int64_t i = 0; i < images; ++i) {
    GemmOperand<uint16_t> as = a.op, bs = b.op;
    as.data += i * a.image_stride, bs.data += i * b.image_stride;
    gemm_tensor_core(element, {groups, m, n, k}, as, bs, c + i * groups * m * n, stream);
  }
}

void store_rounded(DType element, const float* c, int64_t total, const BiasLayout& bias, Activation act,
                   uint16_t* out, Stream stream) {
  if (total == 0) return;
  auto run = [&]<class T>() {
    launch<store_rounded_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, c, total,
                                    reinterpret_cast<const T*>(bias.data), bias.inner, bias.period, act,
                                    reinterpret_cast<T*>(out));
  };
  if (element == DType::bf16) run.template operator()<BFloat16>();
  else if (element == DType::f16) run.template operator()<Half>();
  else EMBER_FAIL("store_rounded: expected bf16 or f16, got ", dtype_name(element));
}

void accumulate_images(const float* c, int64_t images, int64_t elements, bool first, float* acc, Stream stream) {
  if (elements == 0) return;
  launch<accumulate_images_kernel>(blocks_for(elements, kThreads), kThreads, 0, stream, c, images, elements, first,
                                   acc);
}

}  // namespace ember::cuda::reduced
