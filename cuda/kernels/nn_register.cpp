// The Tensor-level CUDA kernels of the neural-network ops, bound to the DeviceKernel stubs of
// ops/kernels.h (same signatures and contracts as the CPU kernels). Each adapter takes the
// device pointers, allocates any workspace from the caching allocator and calls a launcher of
// nn_kernels.h on the default stream.
#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "cuda/kernels/nn_kernels.h"
#include "ops/kernels.h"

namespace ember::cuda::nn {
namespace {

// An uninitialised device tensor on t's device, from the caching allocator.
Tensor device_buffer(const Tensor& like, int64_t elements, DType dtype) {
  return Tensor::empty({elements}, {.dtype = dtype, .device = like.device()});
}

// ---- convolution -------------------------------------------------------------------------------
template <class T>
Tensor column_workspace(const Conv2dGeometry& g, const Tensor& like) {
  const int64_t images = conv2d_column_images(g, sizeof(T));
  return images ? device_buffer(like, images * conv2d_column_elements(g), like.dtype()) : Tensor();
}

void conv2d_forward_cuda(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                         const Tensor& y) {
  dispatch_float(x.dtype(), "conv2d", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, x);
    conv2d_forward<T>(g, x.data<T>(), w.data<T>(), data_or_null<T>(b), act, y.data<T>(), data_or_null<T>(columns),
                      {});
  });
}

void conv2d_input_grad_cuda(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  dispatch_float(dy.dtype(), "conv2d_input_grad", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, dy);
    conv2d_input_grad<T>(g, dy.data<T>(), w.data<T>(), dx.data<T>(), data_or_null<T>(columns), {});
  });
}

void conv2d_weight_grad_cuda(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  dispatch_float(x.dtype(), "conv2d_weight_grad", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, x);
    conv2d_weight_grad<T>(g, x.data<T>(), dy.data<T>(), dw.data<T>(), data_or_null<T>(columns), {});
  });
}

void bias_activation_backward_cuda(Activation act, const Tensor& dy, const Tensor& y, const Tensor& dz,
                                   const Tensor& db) {
  dispatch_float(dy.dtype(), "bias_activation_backward", [&]<class T>(TypeTag<T>) {
    bias_activation_backward<T>(act, dy.size(0), dy.size(1), dy.size(2), dy.data<T>(), data_or_null<T>(y),
                                data_or_null<T>(dz), data_or_null<T>(db), {});
  });
}

void linear_forward_cuda(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y) {
  dispatch_float(x.dtype(), "linear", [&]<class T>(TypeTag<T>) {
    linear_forward<T>(x.size(0), x.size(1), w.size(0), x.data<T>(), w.data<T>(), data_or_null<T>(b), act,
                      y.data<T>(), {});
  });
}

// ---- pooling -------------------------------------------------------------------------------------
void max_pool2d_forward_cuda(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  dispatch_float(x.dtype(), "max_pool2d", [&]<class T>(TypeTag<T>) {
    max_pool2d_forward<T>(g, x.data<T>(), y.data<T>(), indices.data<int64_t>(), {});
  });
}

void max_pool2d_backward_cuda(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  dispatch_float(dy.dtype(), "max_pool2d_backward", [&]<class T>(TypeTag<T>) {
    max_pool2d_backward<T>(g, dy.data<T>(), indices.data<int64_t>(), dx.data<T>(), {});
  });
}

void avg_pool2d_forward_cuda(const Pool2dGeometry& g, bool count_include_pad, const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    avg_pool2d_forward<T>(g, count_include_pad, x.data<T>(), y.data<T>(), {});
  });
}

void avg_pool2d_backward_cuda(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx) {
  dispatch_float(dy.dtype(), "avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    avg_pool2d_backward<T>(g, count_include_pad, dy.data<T>(), dx.data<T>(), {});
  });
}

// (planes, H, W) of x and (Ho, Wo) of y, whatever their rank.
struct AdaptiveShape {
  int64_t planes, H, W, Ho, Wo;
};
AdaptiveShape adaptive_shape(const Tensor& in, const Tensor& out) {
  const int64_t H = in.size(-2), W = in.size(-1);
  return {in.numel() / std::max<int64_t>(1, H * W), H, W, out.size(-2), out.size(-1)};
}

void adaptive_avg_pool2d_forward_cuda(const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    const AdaptiveShape s = adaptive_shape(x, y);
    adaptive_avg_pool2d_forward<T>(s.planes, s.H, s.W, s.Ho, s.Wo, x.data<T>(), y.data<T>(), {});
  });
}

void adaptive_avg_pool2d_backward_cuda(const Tensor& dy, const Tensor& dx) {
  dispatch_float(dy.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    const AdaptiveShape s = adaptive_shape(dx, dy);
    adaptive_avg_pool2d_backward<T>(s.planes, s.H, s.W, s.Ho, s.Wo, dy.data<T>(), dx.data<T>(), {});
  });
}

// ---- batch norm ------------------------------------------------------------------------------------
void batch_norm_stats_cuda(const Tensor& x, double eps, double momentum, const Tensor& mean, const Tensor& invstd,
                           const Tensor& running_mean, const Tensor& running_var) {
  dispatch_float(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    batch_norm_stats<T>(x.size(0), x.size(1), x.size(2), x.data<T>(), eps, momentum, mean.data<T>(), invstd.data<T>(),
                        data_or_null<T>(running_mean), data_or_null<T>(running_var), {});
  });
}

void batch_norm_apply_cuda(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                           const Tensor& bias, Activation act, const Tensor& y) {
  dispatch_float(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    batch_norm_apply<T>(x.size(0), x.size(1), x.size(2), x.data<T>(), mean.data<T>(), invstd.data<T>(),
                        data_or_null<T>(weight), data_or_null<T>(bias), act, y.data<T>(), {});
  });
}

void batch_norm_backward_cuda(Activation act, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                              const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx,
                              const Tensor& dweight, const Tensor& dbias) {
  dispatch_float(x.dtype(), "batch_norm_backward", [&]<class T>(TypeTag<T>) {
    batch_norm_backward<T>(x.size(0), x.size(1), x.size(2), act, grad.data<T>(), data_or_null<T>(y), x.data<T>(),
                           mean.data<T>(), invstd.data<T>(), data_or_null<T>(weight), training, data_or_null<T>(dx),
                           data_or_null<T>(dweight), data_or_null<T>(dbias), {});
  });
}

// ---- softmax ---------------------------------------------------------------------------------------
void softmax_forward_cuda(const Tensor& x, bool log, const Tensor& y) {
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>(TypeTag<T>) {
    softmax_forward<T>(x.size(0), x.size(1), x.size(2), x.data<T>(), log, y.data<T>(), {});
  });
}

void softmax_backward_cuda(const Tensor& grad, const Tensor& y, bool log, const Tensor& dx) {
  dispatch_float(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&]<class T>(TypeTag<T>) {
    softmax_backward<T>(y.size(0), y.size(1), y.size(2), grad.data<T>(), y.data<T>(), log, dx.data<T>(), {});
  });
}

// ---- cross-entropy and NLL -------------------------------------------------------------------------
// Reads back the forward's target check (Note [Target check] in nn_cross_entropy.cu) and throws
// the CPU kernel's error (Note [Class targets] in ops/cpu/nn_kernels.h).
void throw_on_bad_target(const Tensor& check, int64_t C, int64_t ignore_index, const char* op) {
  int64_t host[2] = {0, 0};
  cuda::memcpy(host, check.raw_data(), sizeof(host), CopyKind::device_to_host);
  EMBER_CHECK(host[0] < 0, op, ": target ", host[1], " is out of range for ", C, " classes (expected 0 <= target < ",
              C, ", or ignore_index ", ignore_index, ")");
}

void cross_entropy_forward_cuda(const Tensor& logits, const Tensor& target, double smoothing, int64_t ignore_index,
                                const Tensor& losses, const Tensor& lse, const Tensor& totals) {
  dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>(TypeTag<T>) {
    const int64_t C = logits.size(1);
    const Tensor check = device_buffer(logits, 2, DType::i64);
    cross_entropy_forward<T>(logits.size(0), C, logits.size(2), logits.data<T>(), target.data<int64_t>(), smoothing,
                             ignore_index, losses.data<T>(), lse.data<double>(), totals.data<T>(),
                             check.data<int64_t>(), {});
    throw_on_bad_target(check, C, ignore_index, "cross_entropy");
  });
}

void cross_entropy_backward_cuda(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                                 double smoothing, int64_t ignore_index, const Tensor& dlogits) {
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&]<class T>(TypeTag<T>) {
    cross_entropy_backward<T>(logits.size(0), logits.size(1), logits.size(2), grad.data<T>(), grad.stride(0),
                              grad.stride(1), logits.data<T>(), target.data<int64_t>(), lse.data<double>(), smoothing,
                              ignore_index, dlogits.data<T>(), {});
  });
}

void nll_loss_forward_cuda(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& losses,
                           const Tensor& totals) {
  dispatch_float(log_probs.dtype(), "nll_loss", [&]<class T>(TypeTag<T>) {
    const int64_t C = log_probs.size(1);
    const Tensor check = device_buffer(log_probs, 2, DType::i64);
    nll_loss_forward<T>(log_probs.size(0), C, log_probs.size(2), log_probs.data<T>(), target.data<int64_t>(),
                        ignore_index, losses.data<T>(), totals.data<T>(), check.data<int64_t>(), {});
    throw_on_bad_target(check, C, ignore_index, "nll_loss");
  });
}

void nll_loss_backward_cuda(const Tensor& grad, const Tensor& target, int64_t ignore_index, const Tensor& dlog_probs) {
  dispatch_float(dlog_probs.dtype(), "nll_loss_backward", [&]<class T>(TypeTag<T>) {
    nll_loss_backward<T>(dlog_probs.size(0), dlog_probs.size(1), dlog_probs.size(2), grad.data<T>(), grad.stride(0),
                         grad.stride(1), target.data<int64_t>(), ignore_index, dlog_probs.data<T>(), {});
  });
}

// ---- dropout ---------------------------------------------------------------------------------------
void dropout_cuda(const Tensor& x, const Generator& gen, uint64_t first_block, double p, const Tensor& y) {
  dispatch_float(x.dtype(), "dropout", [&]<class T>(TypeTag<T>) {
    dropout<T>(x.numel(), x.data<T>(), gen.seed(), first_block, p, y.data<T>(), {});
  });
}

}  // namespace

void register_nn_kernels() {
  conv2d_forward_kernel.set_cuda(&conv2d_forward_cuda);
  conv2d_input_grad_kernel.set_cuda(&conv2d_input_grad_cuda);
  conv2d_weight_grad_kernel.set_cuda(&conv2d_weight_grad_cuda);
  bias_activation_backward_kernel.set_cuda(&bias_activation_backward_cuda);
  linear_forward_kernel.set_cuda(&linear_forward_cuda);
  max_pool2d_forward_kernel.set_cuda(&max_pool2d_forward_cuda);
  max_pool2d_backward_kernel.set_cuda(&max_pool2d_backward_cuda);
  avg_pool2d_forward_kernel.set_cuda(&avg_pool2d_forward_cuda);
  avg_pool2d_backward_kernel.set_cuda(&avg_pool2d_backward_cuda);
  adaptive_avg_pool2d_forward_kernel.set_cuda(&adaptive_avg_pool2d_forward_cuda);
  adaptive_avg_pool2d_backward_kernel.set_cuda(&adaptive_avg_pool2d_backward_cuda);
  batch_norm_stats_kernel.set_cuda(&batch_norm_stats_cuda);
  batch_norm_apply_kernel.set_cuda(&batch_norm_apply_cuda);
  batch_norm_backward_kernel.set_cuda(&batch_norm_backward_cuda);
  softmax_forward_kernel.set_cuda(&softmax_forward_cuda);
  softmax_backward_kernel.set_cuda(&softmax_backward_cuda);
  cross_entropy_forward_kernel.set_cuda(&cross_entropy_forward_cuda);
  cross_entropy_backward_kernel.set_cuda(&cross_entropy_backward_cuda);
  nll_loss_forward_kernel.set_cuda(&nll_loss_forward_cuda);
  nll_loss_backward_kernel.set_cuda(&nll_loss_backward_cuda);
  dropout_kernel.set_cuda(&dropout_cuda);
}

}  // namespace ember::cuda::nn
