// Mixup (mixup.h).
#include "apps/train/mixup.h"

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "datasets/data_loader.h"
#include "ember.h"

namespace ember::apps {
namespace {

// Two uniform doubles in (0, 1] from words (0, 1) and (2, 3) of one block.
std::pair<double, double> uniform_pair(Generator& gen) {
  const std::array<uint32_t, 4> w = gen.block(gen.reserve(1));
  return {1.0 - uniform_double(w[0], w[1]), 1.0 - uniform_double(w[2], w[3])};
}

}  // namespace

double sample_gamma(double shape, Generator& gen) {
  EMBER_CHECK(shape > 0, "sample_gamma: shape must be positive, got ", shape);
  if (shape < 1) {
    const double g = sample_gamma(shape + 1, gen);
    return g * std::pow(uniform_pair(gen).first, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const auto [u1, u2] = uniform_pair(gen);  // Box-Muller normal
    const double x = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    const double u = uniform_pair(gen).first;
    const double v = std::pow(1.0 + c * x, 3);
    if (v <= 0) continue;
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double sample_beta(double a, double b, Generator& gen) {
  const double x = sample_gamma(a, gen), y = sample_gamma(b, gen);
  return x / (x + y);
}

MixedBatch mixup(const Tensor& inputs, const Tensor& targets, double alpha, Generator& gen) {
  if (alpha <= 0) return {inputs, targets, targets, 1.0};
  const double lambda = sample_beta(alpha, alpha, gen);
  const std::vector<int64_t> order = random_permutation(inputs.size(0), gen);
  const Tensor perm = tensor(order).to(inputs.device());
  Tensor mixed = add(mul(inputs, lambda), mul(index_select(inputs, 0, perm), 1.0 - lambda));
  return {mixed, targets, index_select(targets, 0, perm), lambda};
}

Tensor mixed_cross_entropy(const Tensor& logits, const MixedBatch& batch, double label_smoothing) {
  Tensor loss = cross_entropy(logits, batch.targets, Reduction::mean, label_smoothing);
  if (batch.lambda == 1.0) return loss;
  return add(mul(loss, batch.lambda),
             mul(cross_entropy(logits, batch.targets_b, Reduction::mean, label_smoothing), 1.0 - batch.lambda));
}

}  // namespace ember::apps
