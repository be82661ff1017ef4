#include "nn/norm_layers.h"

#include "ops/ops.h"

namespace ember {

BatchNorm::BatchNorm(const char* type_name, int64_t expected_rank, int64_t channels, double eps, double momentum,
                     bool affine)
    : Module(type_name), expected_rank_(expected_rank), channels_(channels), eps_(eps), momentum_(momentum) {
  EMBER_CHECK(channels > 0, type_name, ": expected a positive channel count, got ", channels);
  if (affine) {
    weight_ = register_parameter("weight", ones({channels}));
    bias_ = register_parameter("bias", zeros({channels}));
  }
  running_mean_ = register_buffer("running_mean", zeros({channels}));
  running_var_ = register_buffer("running_var", ones({channels}));
  num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::i64}));
}

Tensor BatchNorm::forward(const Tensor& x) { return forward_activated(x, Activation::none); }

Tensor BatchNorm::forward_activated(const Tensor& x, Activation act) {
  EMBER_CHECK(x.dim() == expected_rank_ || (expected_rank_ == 2 && x.dim() == 3), type_name(), ": expected a ",
              expected_rank_, "-D input (N, C", expected_rank_ == 4 ? ", H, W" : "", "), got shape ",
              shape_str(x.shape()));
  EMBER_CHECK(x.size(1) == channels_, type_name(), ": expected ", channels_, " channels, got shape ",
              shape_str(x.shape()));
  if (is_training()) {
    autograd::NoGradGuard no_grad;
    num_batches_tracked_.add_(ones_like(num_batches_tracked_));
  }
  return batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(), momentum_, eps_, act);
}

Dropout::Dropout(double p, Generator* gen) : Module("Dropout"), p_(p), gen_(gen) {
  EMBER_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training(), gen_); }

}  // namespace ember
