// EMBER_HOST_DEVICE marks a function that both backends compile: the CPU loops (host compiler)
// and the CUDA kernels (nvcc, or the host compiler against the SIMT simulator).
//
//   template <class T> EMBER_HOST_DEVICE T square(T x) { return x * x; }
//
// Note [host-device functions]: under nvcc the function is __host__ __device__ and inlined; in
// every other compilation (CPU code, SIM kernels) it is a plain inline function, so the same
// scalar code runs on the CPU, on the simulator and on a GPU. Such functions may use <cmath>
// (nvcc provides device overloads of std::exp, std::log1p, ...) but no exceptions, no
// allocation and no std:: containers.
#pragma once

#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define EMBER_HOST_DEVICE inline
#endif

// Full unrolling keeps a kernel's accumulators in registers (indexed by constants). `#pragma
// unroll` is nvcc's; the host compiler of the simulator would warn about it.
#if defined(__CUDACC__)
#define EMBER_UNROLL _Pragma("unroll")
#else
#define EMBER_UNROLL
#endif
