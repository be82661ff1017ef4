#include "ops/norm.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

namespace {

// x contiguous, viewed as (N, C, S) with S the product of the dims after C.
Tensor as_ncs(const Tensor& x) {
  const int64_t N = x.size(0), C = x.size(1), S = C * N == 0 ? 0 : x.numel() / (N * C);
  return Tensor::view_of(x, {N, C, S}, {C * S, S, 1}, x.offset());
}

// Note [16-bit batch norm]: on the CPU, bf16 and f16 activations are normalised where they lie:
// the kernels read them, compute in f32 with the statistics summed in double, and round y (and
// dx) once, while the per-channel tensors (weight, bias, running stats, the saved mean and
// invstd, dweight, dbias) are f32. y, the running stats, dweight and dbias are bit for bit the
// widening fallback's rounded once (same double sums of the same values, same f32 arithmetic);
// dx too without an activation or with relu, except where a positive y rounds to zero (f16 below
// 2^-25): the backward of a fused activation reads the saved y, which is now the 16-bit one, so
// sigmoid's and tanh's dx differ from the fallback's by that rounding. It saves the fallback's two
// conversion passes over every activation and their f32 copies: under autocast, where each
// convolution's bf16 output went through batch norm in f32 and back to bf16 for the next
// convolution, those passes were a tenth of an SE-ResNeXt training step. So under autocast
// batch_norm returns the input's 16-bit dtype on the CPU (the fallback returned f32), as
// PyTorch's CPU autocast leaves batch_norm in its input's dtype. CUDA keeps the fallback (its
// kernels are one-dtype).
bool native_16_bit(const Tensor& x, std::initializer_list<const Tensor*> per_channel) {
  if (!x.device().is_cpu() || !is_reduced_float(x.dtype())) return false;
  for (const Tensor* t : per_channel)
    if (t->defined() && t->dtype() != DType::f32) return false;
  return true;
}

// The dtype of the per-channel tensors for activations of x's dtype, and their options.
DType channel_dtype(const Tensor& x) { return is_reduced_float(x.dtype()) ? DType::f32 : x.dtype(); }
TensorOptions channel_options(const Tensor& x) { return {channel_dtype(x), x.device(), false}; }

void check_channel_vector(const Tensor& t, const char* what, const Tensor& x) {
  if (!t.defined()) return;
  EMBER_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "batch_norm: expected ", what, " of shape ",
              shape_str({x.size(1)}), " for input ", shape_str(x.shape()), ", got ", shape_str(t.shape()));
  check_same_device("batch_norm", x, t);
  EMBER_CHECK(t.dtype() == channel_dtype(x), "batch_norm: expected ", what, " of dtype ",
              dtype_name(channel_dtype(x)), " for input of dtype ", dtype_name(x.dtype()), ", got ",
              dtype_name(t.dtype()));
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps, Activation act) {
  EMBER_CHECK(x.dim() >= 2, "batch_norm: expected an input of shape (N, C) or (N, C, ...), got ",
              shape_str(x.shape()));
  EMBER_CHECK(is_floating(x.dtype()), "batch_norm: expected a floating input, got ", dtype_name(x.dtype()));
  const bool native = native_16_bit(x, {&weight, &bias, &running_mean, &running_var});
  if (!native &&
      (is_reduced_float(x.dtype()) || (running_mean.defined() && is_reduced_float(running_mean.dtype())))) {
    // Statistics in f32 (Note [Reduced-precision fallback]); 16-bit running stats get the update back.
    Tensor rm = widened(running_mean), rv = widened(running_var);
    Tensor y = batch_norm(widened(x), widened(weight), widened(bias), rm, rv, training, momentum, eps, act);
    if (training && rm.defined() && is_reduced_float(running_mean.dtype())) {
      autograd::NoGradGuard no_grad;
      Tensor(running_mean).copy_(rm);  // a handle: the update lands in the caller's storage
      Tensor(running_var).copy_(rv);
    }
    return float_op_result(y, x.dtype());
  }
  check_channel_vector(weight, "weight", x);
  check_channel_vector(bias, "bias", x);
  check_channel_vector(running_mean, "running_mean", x);
  check_channel_vector(running_var, "running_var", x);
  EMBER_CHECK(running_mean.defined() == running_var.defined(),
              "batch_norm: expected both running_mean and running_var, or neither");
  EMBER_CHECK(training || running_mean.defined(),
              "batch_norm: evaluation (training = false) needs running_mean and running_var");
  EMBER_CHECK(!needs_grad(running_mean) && !needs_grad(running_var),
              "batch_norm: running_mean and running_var are updated in place and must not require grad");
  EMBER_CHECK(eps > 0, "batch_norm: expected eps > 0, got ", eps);
  const int64_t C = x.size(1), per_channel = C == 0 ? 0 : x.numel() / C;
  EMBER_CHECK(!training || per_channel > 1, "batch_norm: expected more than 1 value per channel when training, "
              "got input size ", shape_str(x.shape()));

  const Tensor xc = x.contiguous();
  Tensor mean, invstd;
  if (training) {
    mean = Tensor::empty({C}, channel_options(x));
    invstd = Tensor::empty({C}, channel_options(x));
    EMBER_CHECK(!running_mean.defined() || (running_mean.is_contiguous() && running_var.is_contiguous()),
                "batch_norm: running stats must be contiguous (they are updated in place)");
    batch_norm_stats_kernel(x.device(), as_ncs(xc), eps, momentum, mean, invstd, running_mean, running_var);
    if (running_mean.defined()) {
      running_mean.bump_version();
      running_var.bump_version();
    }
  } else {
    // Copies, so a later training step that updates the running stats in place does not
    // invalidate what this node saved.
    autograd::NoGradGuard no_grad;
    mean = running_mean.clone();
    invstd = rsqrt(add(running_var, eps));
  }
  Tensor y = Tensor::empty(x.shape(), x.options());
  batch_norm_apply_kernel(x.device(), as_ncs(xc), mean, invstd, weight.defined() ? weight.contiguous() : Tensor(),
                          bias.defined() ? bias.contiguous() : Tensor(), act, as_ncs(y));
  if (needs_grad({x, weight, bias})) {
    const bool nx = needs_grad(x), nw = needs_grad(weight), nb = needs_grad(bias);
    const bool activated = act != Activation::none;
    record(activated ? "batch_norm_act" : "batch_norm", {x, weight, bias}, y,
           [sx = save(xc), sw = save(weight), sm = save(mean), si = save(invstd), sy = save(activated ? y : Tensor()),
            act, training, nx, nw, nb](const Tensor& g) -> TensorList {
             const char* op = "batch_norm";
             BatchNormGrads d = batch_norm_backward(g, sx.get(op), sw.get(op), sm.get(op), si.get(op), training, nx,
                                                    nw, nb, act, sy.get(op));
             return {d.dx, d.dweight, d.dbias};
           });
  }
  return y;
}

BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& invstd, bool training, bool need_dx, bool need_dweight,
                                   bool need_dbias, Activation act, const Tensor& output) {
  EMBER_CHECK(x.dim() >= 2 && grad.shape() == x.shape(), "batch_norm_backward: expected grad and x of one shape "
              "(N, C, ...), got ", shape_str(grad.shape()), " and ", shape_str(x.shape()));
  check_same_dtype("batch_norm_backward", grad, x);
  const bool activated = act != Activation::none;
  if (activated) {
    EMBER_CHECK(output.defined() && output.shape() == x.shape(), "batch_norm_backward: expected the activated "
                "output of shape ", shape_str(x.shape()), " for activation ", activation_name(act), ", got ",
                output.defined() ? shape_str(output.shape()) : std::string("none"));
    check_same_dtype("batch_norm_backward", output, x);
    check_same_device("batch_norm_backward", output, x);
  }
  check_channel_vector(weight, "weight", x);
  check_channel_vector(mean, "mean", x);
  check_channel_vector(invstd, "invstd", x);
  const int64_t C = x.size(1);
  BatchNormGrads d;
  if (need_dx) d.dx = Tensor::empty(x.shape(), x.options());
  if (need_dweight) d.dweight = Tensor::empty({C}, channel_options(x));
  if (need_dbias) d.dbias = Tensor::empty({C}, channel_options(x));
  const Tensor xc = x.contiguous(), gc = grad.contiguous();
  batch_norm_backward_kernel(x.device(), act, as_ncs(gc), activated ? as_ncs(output.contiguous()) : Tensor(),
                             as_ncs(xc), mean.contiguous(), invstd.contiguous(),
                             weight.defined() ? weight.contiguous() : Tensor(), training,
                             d.dx.defined() ? as_ncs(d.dx) : Tensor(), d.dweight, d.dbias);
  return d;
}

}  // namespace ember
