// Every device kernel the op layer calls, as a DeviceKernel: the CPU implementation is bound in
// ops/kernels.cpp, the CUDA layer binds its own with set_cuda() when it initialises.
// The contracts are those of ops/cpu/kernels.h.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/cpu/conv_kernels.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/nn_kernels.h"
#include "ops/dispatch.h"

namespace ember {

extern DeviceKernel<void(UnaryOp, const Tensor&, const Tensor&)> unary_kernel;
extern DeviceKernel<void(BinaryOp, const Tensor&, const Tensor&, const Tensor&)> binary_kernel;
extern DeviceKernel<void(CompareOp, const Tensor&, const Tensor&, const Tensor&)> compare_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&)> where_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&)> copy_kernel;  // (src, dst)
extern DeviceKernel<void(const Tensor&, double)> fill_kernel;
extern DeviceKernel<void(const Tensor&, double, double)> arange_kernel;
extern DeviceKernel<void(const Tensor&, const Generator&, uint64_t, double, double)> uniform_kernel;
extern DeviceKernel<void(const Tensor&, const Generator&, uint64_t, double, double)> normal_kernel;
extern DeviceKernel<void(const Tensor&, const Generator&, uint64_t, int64_t, int64_t)> randint_kernel;
extern DeviceKernel<void(cpu::ReduceOp, const Tensor&, const Tensor&)> reduce_kernel;
extern DeviceKernel<void(bool, const Tensor&, const Tensor&, const Tensor&)> arg_reduce_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&)> bmm_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&)> index_select_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&)> index_add_kernel;
extern DeviceKernel<void(const Tensor&, int64_t, const Tensor&, const Tensor&)> gather_kernel;
extern DeviceKernel<void(const Tensor&, int64_t, const Tensor&, const Tensor&)> scatter_add_kernel;

// ---- neural-network kernels (contracts in ops/cpu/nn_kernels.h) ------------------------------
extern DeviceKernel<void(const Tensor&, double, double, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    batch_norm_stats_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Activation,
                         const Tensor&)>
    batch_norm_apply_kernel;
extern DeviceKernel<void(Activation, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, bool, const Tensor&, const Tensor&, const Tensor&)>
    batch_norm_backward_kernel;
extern DeviceKernel<void(const Tensor&, bool, const Tensor&)> softmax_forward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, bool, const Tensor&)> softmax_backward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, double, int64_t, const Tensor&, const Tensor&, const Tensor&)>
    cross_entropy_forward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, int64_t, const Tensor&)>
    cross_entropy_backward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&)> nll_loss_forward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, int64_t, const Tensor&)> nll_loss_backward_kernel;
extern DeviceKernel<void(const Tensor&, const Generator&, uint64_t, double, const Tensor&)> dropout_kernel;
// Convolution, pooling, linear: contracts in ops/cpu/conv_kernels.h.
extern DeviceKernel<void(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, Activation, const Tensor&)>
    conv2d_forward_kernel;
extern DeviceKernel<void(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&)> conv2d_input_grad_kernel;
extern DeviceKernel<void(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&)> conv2d_weight_grad_kernel;
extern DeviceKernel<void(Activation, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    bias_activation_backward_kernel;
extern DeviceKernel<void(const Pool2dGeometry&, const Tensor&, const Tensor&, const Tensor&)> max_pool2d_forward_kernel;
extern DeviceKernel<void(const Pool2dGeometry&, const Tensor&, const Tensor&, const Tensor&)> max_pool2d_backward_kernel;
extern DeviceKernel<void(const Pool2dGeometry&, bool, const Tensor&, const Tensor&)> avg_pool2d_forward_kernel;
extern DeviceKernel<void(const Pool2dGeometry&, bool, const Tensor&, const Tensor&)> avg_pool2d_backward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&)> adaptive_avg_pool2d_forward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&)> adaptive_avg_pool2d_backward_kernel;
extern DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, Activation, const Tensor&)> linear_forward_kernel;

// Optimizer steps: contracts in ops/cpu/kernels.h.
extern DeviceKernel<void(const SgdStep&, const Tensor&, const Tensor&, const Tensor&)> sgd_step_kernel;
extern DeviceKernel<void(const AdamStep&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    adam_step_kernel;

// Copies between two contiguous tensors of one dtype on different devices. Installed by the
// CUDA layer; null when there is only the CPU.
using CrossDeviceCopy = void (*)(const Tensor& src, const Tensor& dst);
void set_cross_device_copy(CrossDeviceCopy fn);
CrossDeviceCopy cross_device_copy();

}  // namespace ember
