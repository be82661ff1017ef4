// The CUDA kernels of ember's ops, with exactly the CPU kernels' signatures (ops/cpu/kernels.h)
// and contracts: the op layer calls them through the DeviceKernel stubs of ops/kernels.h, which
// cuda/kernels/register.cpp binds when the cuda device is first used. Tensor arguments live on
// the cuda device; every kernel is launched on the default stream and none synchronises with
// the host, except the index kernels (Note [index checks] in cuda/kernels/index.cu).
//
//   Tensor x = randn({4, 5}).to(Device::cuda());
//   Tensor y = exp(x);        // ops -> unary_kernel -> ember::cuda::unary -> unary kernel
//   Tensor s = y.sum({1});    // ember::cuda::reduce
//   std::cout << s.cpu();     // ember::cuda::copy_between_devices
#pragma once

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/cpu/kernels.h"
#include "ops/elementwise_functors.h"

namespace ember::cuda {

// ---- elementwise (kernels/elementwise.cu, kernels/transpose.cu) -----------------------------
void unary(UnaryOp op, const Tensor& x, const Tensor& out);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void copy(const Tensor& src, const Tensor& dst);  // a transposed src takes the tiled transpose
void fill(const Tensor& out, double value);

// ---- creation and random (kernels/fill.cu) ----------------------------------------------------
void arange(const Tensor& out, double start, double step);
void uniform(const Tensor& out, const Generator& gen, uint64_t first_block, double low, double high);
void normal(const Tensor& out, const Generator& gen, uint64_t first_block, double mean, double std);
void randint(const Tensor& out, const Generator& gen, uint64_t first_block, int64_t low, int64_t high);

// ---- reductions (kernels/reduce.cu) -------------------------------------------------------------
void reduce(cpu::ReduceOp op, const Tensor& x, const Tensor& out);
void arg_reduce(bool is_max, const Tensor& x, const Tensor& values, const Tensor& indices);

// ---- indexing (kernels/index.cu) ----------------------------------------------------------------
void index_select(const Tensor& x, const Tensor& index, const Tensor& out);
void index_add(const Tensor& out, const Tensor& index, const Tensor& src);
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

// ---- between devices (kernels/cross_device_copy.cpp) ---------------------------------------------
// src and dst contiguous, one dtype and shape, on different devices (cpu <-> cuda). A copy to
// the host waits for the device.
void copy_between_devices(const Tensor& src, const Tensor& dst);

// Binds every kernel above to its DeviceKernel stub (ops/kernels.h) and installs the
// cross-device copy. Called once by cuda::init().
void register_cuda_kernels();

}  // namespace ember::cuda
