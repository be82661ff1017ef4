#include "ops/kernels.h"

#include <atomic>

namespace ember {

DeviceKernel<void(UnaryOp, const Tensor&, const Tensor&)> unary_kernel("unary", &cpu::unary);
DeviceKernel<void(BinaryOp, const Tensor&, const Tensor&, const Tensor&)> binary_kernel("binary", &cpu::binary);
DeviceKernel<void(CompareOp, const Tensor&, const Tensor&, const Tensor&)> compare_kernel("compare", &cpu::compare);
DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&)> where_kernel("where", &cpu::where);
DeviceKernel<void(const Tensor&, const Tensor&)> copy_kernel("copy", &cpu::copy);
DeviceKernel<void(const Tensor&, double)> fill_kernel("fill", &cpu::fill);
DeviceKernel<void(const Tensor&, double, double)> arange_kernel("arange", &cpu::arange);
DeviceKernel<void(const Tensor&, const Generator&, uint64_t, double, double)> uniform_kernel("rand", &cpu::uniform);
DeviceKernel<void(const Tensor&, const Generator&, uint64_t, double, double)> normal_kernel("randn", &cpu::normal);
DeviceKernel<void(const Tensor&, const Generator&, uint64_t, int64_t, int64_t)> randint_kernel("randint", &cpu::randint);
DeviceKernel<void(cpu::ReduceOp, const Tensor&, const Tensor&)> reduce_kernel("reduce", &cpu::reduce);
DeviceKernel<void(bool, const Tensor&, const Tensor&, const Tensor&)> arg_reduce_kernel("arg_reduce", &cpu::arg_reduce);
DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&)> bmm_kernel("matmul", &cpu::bmm);
DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&)> index_select_kernel("index_select", &cpu::index_select);
DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&)> index_add_kernel("index_add", &cpu::index_add);
DeviceKernel<void(const Tensor&, int64_t, const Tensor&, const Tensor&)> gather_kernel("gather", &cpu::gather);
DeviceKernel<void(const Tensor&, int64_t, const Tensor&, const Tensor&)> scatter_add_kernel("scatter_add", &cpu::scatter_add);

DeviceKernel<void(const Tensor&, double, double, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    batch_norm_stats_kernel("batch_norm", &cpu::batch_norm_stats);
DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Activation, const Tensor&)>
    batch_norm_apply_kernel("batch_norm", &cpu::batch_norm_apply);
DeviceKernel<void(Activation, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                  bool, const Tensor&, const Tensor&, const Tensor&)>
    batch_norm_backward_kernel("batch_norm_backward", &cpu::batch_norm_backward);
DeviceKernel<void(const Tensor&, bool, const Tensor&)> softmax_forward_kernel("softmax", &cpu::softmax_forward);
DeviceKernel<void(const Tensor&, const Tensor&, bool, const Tensor&)> softmax_backward_kernel("softmax_backward",
                                                                                            &cpu::softmax_backward);
DeviceKernel<void(const Tensor&, const Tensor&, double, int64_t, const Tensor&, const Tensor&, const Tensor&)>
    cross_entropy_forward_kernel("cross_entropy", &cpu::cross_entropy_forward);
DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, int64_t, const Tensor&)>
    cross_entropy_backward_kernel("cross_entropy_backward", &cpu::cross_entropy_backward);
DeviceKernel<void(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&)> nll_loss_forward_kernel(
    "nll_loss", &cpu::nll_loss_forward);
DeviceKernel<void(const Tensor&, const Tensor&, int64_t, const Tensor&)> nll_loss_backward_kernel(
    "nll_loss_backward", &cpu::nll_loss_backward);
DeviceKernel<void(const Tensor&, const Generator&, uint64_t, double, const Tensor&)> dropout_kernel("dropout",
                                                                                                   &cpu::dropout);
DeviceKernel<void(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, Activation, const Tensor&)>
    conv2d_forward_kernel("conv2d", &cpu::conv2d_forward);
DeviceKernel<void(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&)>
    conv2d_input_grad_kernel("conv2d_input_grad", &cpu::conv2d_input_grad);
DeviceKernel<void(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&)>
    conv2d_weight_grad_kernel("conv2d_weight_grad", &cpu::conv2d_weight_grad);
DeviceKernel<void(Activation, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    bias_activation_backward_kernel("bias_activation_backward", &cpu::bias_activation_backward);
DeviceKernel<void(const Pool2dGeometry&, const Tensor&, const Tensor&, const Tensor&)>
    max_pool2d_forward_kernel("max_pool2d", &cpu::max_pool2d_forward);
DeviceKernel<void(const Pool2dGeometry&, const Tensor&, const Tensor&, const Tensor&)>
    max_pool2d_backward_kernel("max_pool2d_backward", &cpu::max_pool2d_backward);
DeviceKernel<void(const Pool2dGeometry&, bool, const Tensor&, const Tensor&)>
    avg_pool2d_forward_kernel("avg_pool2d", &cpu::avg_pool2d_forward);
DeviceKernel<void(const Pool2dGeometry&, bool, const Tensor&, const Tensor&)>
    avg_pool2d_backward_kernel("avg_pool2d_backward", &cpu::avg_pool2d_backward);
DeviceKernel<void(const Tensor&, const Tensor&)> adaptive_avg_pool2d_forward_kernel("adaptive_avg_pool2d",
                                                                                     &cpu::adaptive_avg_pool2d_forward);
DeviceKernel<void(const Tensor&, const Tensor&)> adaptive_avg_pool2d_backward_kernel(
    "adaptive_avg_pool2d_backward", &cpu::adaptive_avg_pool2d_backward);
DeviceKernel<void(const Tensor&, const Tensor&, const Tensor&, Activation, const Tensor&)> linear_forward_kernel(
    "linear", &cpu::linear_forward);

DeviceKernel<void(const SgdStep&, const Tensor&, const Tensor&, const Tensor&)> sgd_step_kernel("SGD", &cpu::sgd_step);
DeviceKernel<void(const AdamStep&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    adam_step_kernel("Adam", &cpu::adam_step);

namespace {
std::atomic<CrossDeviceCopy> g_cross_device_copy{nullptr};
}
void set_cross_device_copy(CrossDeviceCopy fn) { g_cross_device_copy.store(fn); }
CrossDeviceCopy cross_device_copy() { return g_cross_device_copy.load(); }

}  // namespace ember
