// The CUDA kernel language for the host compiler: qualifiers, dim3, the thread-index built-ins
// and the math/bit intrinsics kernels use. Part of the SIMT simulator; kernels never include
// it directly but through "cuda/launch.h" (see cuda/README.md).
//
//   __global__ void scale(int n, float a, float* x) {
//     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
//       x[i] = a * x[i];
//   }
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "cuda/sim/vector_types.h"  // float4, int4, ... (uint3 and dim3 are below)

// ---- qualifiers ------------------------------------------------------------------------------
// Note [static __shared__]: the simulator runs the blocks of a launch one after another (and
// launches one at a time), so a block's static shared memory can be a function-local `static`:
// every CUDA thread of the block (an OS thread each) sees the same object, as on a GPU.
// Consequences: shared memory is not reset between blocks, and `__shared__` must only appear
// inside functions (as CUDA requires anyway).
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __constant__
#define __managed__
// Note [__forceinline__]: a hint here. GCC refuses to compile an always_inline function it cannot
// inline, e.g. one passed to cg::reduce as its operator when optimising at -O1 (llm.c's
// softmax_forward.cu), where nvcc inlines or calls it as it sees fit.
#define __forceinline__ inline
#define __align__(n) alignas(n)
#define __launch_bounds__(...)
#define __CUDA_ARCH_SIM__ 1  // never __CUDA_ARCH__: host and "device" code are the same here

// ---- vector types and the thread-index built-ins --------------------------------------------
struct uint3 {
  unsigned int x = 0, y = 0, z = 0;
};

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};

inline constexpr uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return {x, y, z}; }

// Set by the simulator for each CUDA thread before it runs a block.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

// ---- memory ----------------------------------------------------------------------------------
template <class T>
inline T __ldg(const T* p) { return *p; }
// Cache-hinted loads and stores (streaming, global-only, ...): the hint only matters to a GPU's
// caches; here each is a plain access.
template <class T>
inline T __ldcg(const T* p) { return *p; }
template <class T>
inline T __ldca(const T* p) { return *p; }
template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline T __ldlu(const T* p) { return *p; }
template <class T>
inline T __ldcv(const T* p) { return *p; }
template <class T>
inline void __stcg(T* p, T v) { *p = v; }
template <class T>
inline void __stcs(T* p, T v) { *p = v; }
template <class T>
inline void __stwb(T* p, T v) { *p = v; }
template <class T>
inline void __stwt(T* p, T v) { *p = v; }

// Ends the kernel with an error, as a GPU's trap instruction does (there the launch fails with
// cudaErrorLaunchFailure); here the launch fails naming the thread.
[[noreturn]] inline void __trap() {
  throw std::runtime_error("__trap() called: the kernel aborted (a GPU reports cudaErrorLaunchFailure)");
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- math intrinsics not in <cmath> (the rest, expf/logf/fmaxf/..., come from there) -------
using std::max;
using std::min;
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanhf(float x) { return std::tanh(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int __float2int_rn(float x) { return int(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return int(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned int x) { return std::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }

// ---- bit intrinsics --------------------------------------------------------------------------
inline int __popc(unsigned int x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned int>(x)); }
inline int __clzll(long long x) { return std::countl_zero(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
  unsigned int r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
