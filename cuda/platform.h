// The CUDA kernel language in both build modes: nvcc's own (REAL) or the SIMT simulator's
// (SIM), plus the few ember helpers a kernel needs in either. Kernels include "cuda/launch.h",
// which includes this.
//
//   __global__ void transpose_kernel(int n, const float* x, float* y) {
//     EMBER_DYNAMIC_SHARED(float, tile);   // instead of `extern __shared__ float tile[];`
//     ...
//   }
#pragma once

#if defined(EMBER_CUDA_REAL)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#elif defined(EMBER_CUDA_SIM)
#include "cuda/sim/sim.h"
#else
#error "cuda/platform.h needs a CUDA backend: build with EMBER_CUDA=AUTO/ON (nvcc) or SIM"
#endif

// EMBER_DYNAMIC_SHARED(T, name) declares `T* name`, the block's dynamic shared memory (the
// launch's shared_bytes). Note [dynamic shared memory]: `extern __shared__ T name[]` cannot be
// written for the host compiler, and nvcc rejects two kernels of one file declaring it with
// different types; a byte array cast to T* works for both.
#if defined(EMBER_CUDA_REAL)
#define EMBER_DYNAMIC_SHARED(T, name)                                   \
  extern __shared__ __align__(16) unsigned char ember_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(ember_dynamic_shared_)
#else
#define EMBER_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::ember::sim::dynamic_shared_memory())
#endif

// Device helpers exist where kernels are compiled: nvcc, or any compiler in SIM mode (the host
// compiler also includes this file for the runtime API, in cuda/runtime.cpp).
#if defined(__CUDACC__) || defined(EMBER_CUDA_SIM)
namespace ember::cuda {

// A relaxed atomic load (a plain read on a GPU; an atomic one here, so ThreadSanitizer does not
// call it a race with concurrent atomics).
__device__ __forceinline__ int load_relaxed(const int* address) {
#if defined(EMBER_CUDA_REAL)
  return *reinterpret_cast<const volatile int*>(address);
#else
  return std::atomic_ref<int>(*const_cast<int*>(address)).load(std::memory_order_relaxed);
#endif
}

// atomicMax for float, which CUDA lacks: a compare-and-swap loop on the bits. NaN is ignored.
__device__ __forceinline__ float atomic_max(float* address, float value) {
  int* bits = reinterpret_cast<int*>(address);
  int old = load_relaxed(bits);
  while (__int_as_float(old) < value) {
    const int seen = atomicCAS(bits, old, __float_as_int(value));
    if (seen == old) break;
    old = seen;
  }
  return __int_as_float(old);
}

}  // namespace ember::cuda
#endif
