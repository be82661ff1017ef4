#include "nn/norm_layers.h"

#include "autograd/graph.h"
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
  if (exchange_ && is_training()) return synchronised_forward(x, act);
  return batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(), momentum_, eps_, act);
}

// Note [Synchronised batch statistics]: with R replicas each holding n_r samples per channel,
// the job's batch statistics combine every replica's (count, mean, M2 = sum of squared deviations
// from its own mean) as Chan et al.'s parallel variance does: mean = sum(n_r mean_r) / N and
// M2 = sum(M2_r) + sum(n_r (mean_r - mean)^2), never E[x^2] - E[x]^2, which cancels in f32 for a
// channel far from zero. One all-gather of (1, 2C + 1) per layer carries them. The forward is
// written with differentiable ops around the exchange, so autograd derives the backward: the
// gather's backward sums, over the replicas, each one's gradient with respect to this replica's
// statistics, which is PyTorch's SyncBatchNorm backward (its all-reduce of sum(dy) and
// sum(dy * xhat)) reached by the chain rule. It costs a few more passes over x than the fused
// batch_norm kernel; synchronised batch norm is for small per-replica batches, where the
// exchange's latency dominates. Running stats take the job's mean and unbiased variance
// (M2 / (N - 1)), the same on every replica.
Tensor BatchNorm::synchronised_forward(const Tensor& x, Activation act) {
  const int64_t c = channels_;
  Dims reduced{0};
  Shape per_channel(size_t(x.dim()), 1);  // (1, C, 1, ...): broadcasts over x
  per_channel[1] = c;
  for (int64_t d = 2; d < x.dim(); ++d) reduced.push_back(d);
  const double local_count = double(x.numel() / c);
  EMBER_CHECK(local_count > 0, type_name(), ": synchronised batch norm needs at least one sample per channel, got shape ",
              shape_str(x.shape()));

  Tensor local_mean = mean(x, reduced);                                                   // (C)
  Tensor local_m2 = sum(square(sub(x, local_mean.reshape(per_channel))), reduced);        // (C)
  Tensor row = cat({full({1}, local_count, {.dtype = x.dtype(), .device = x.device()}), local_mean, local_m2});
  Tensor all = exchange_->all_gather(row.reshape({1, 2 * c + 1}));                       // (R, 2C + 1)
  Tensor counts = all.narrow(1, 0, 1).detach();                                           // (R, 1)
  Tensor means = all.narrow(1, 1, c), m2s = all.narrow(1, 1 + c, c);                     // (R, C)
  Tensor total = sum(counts);  // 0-d, on x's device: no host round trip
  Tensor batch_mean = div(sum(mul(counts, means), {0}), total);                           // (C)
  Tensor m2 = add(sum(m2s, {0}), sum(mul(counts, square(sub(means, batch_mean))), {0}));  // (C)
  Tensor invstd = rsqrt(add(div(m2, total), eps_));
  {
    autograd::NoGradGuard no_grad;
    running_mean_.mul_(1 - momentum_).add_(batch_mean, momentum_);
    running_var_.mul_(1 - momentum_).add_(div(m2, maximum(sub(total, 1.0), 1.0)), momentum_);
  }
  Tensor scale = weight_.defined() ? mul(invstd, weight_) : invstd;
  Tensor y = mul(sub(x, batch_mean.reshape(per_channel)), scale.reshape(per_channel));
  if (bias_.defined()) y = add(y, bias_.reshape(per_channel));
  return act == Activation::none ? y : activate(y, act);
}

Dropout::Dropout(double p, Generator* gen) : Module("Dropout"), p_(p), gen_(gen) {
  EMBER_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training(), gen_); }

}  // namespace ember
