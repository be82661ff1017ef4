// Mixup (Zhang et al. 2018) as NVIDIA's ConvNets recipe applies it: one lambda ~ Beta(a, a) per
// batch and one random pairing of the batch with itself; inputs are mixed, and the loss is the
// lambda-weighted sum of the cross-entropies against both label sets, which equals the
// cross-entropy against the mixed soft targets exactly (cross-entropy is linear in the target).
//
//   MixedBatch m = mixup(batch.inputs, batch.targets, /*alpha=*/0.2, default_generator());
//   Tensor loss = mixed_cross_entropy(model(m.inputs), m, /*label_smoothing=*/0.1);
//
// All randomness comes from the generator passed in (the run's default generator, which a
// training checkpoint stores), so a resumed run draws the same lambdas and pairings.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace ember::apps {

// A Gamma(shape, 1) draw (Marsaglia and Tsang; shape < 1 through Gamma(shape + 1) * U^(1/shape)),
// each attempt taking two Philox blocks from `gen`.
double sample_gamma(double shape, Generator& gen);
// A Beta(a, b) draw: X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b).
double sample_beta(double a, double b, Generator& gen);

struct MixedBatch {
  Tensor inputs;     // lambda * x + (1 - lambda) * x[perm]
  Tensor targets;    // y
  Tensor targets_b;  // y[perm]
  double lambda = 1;
};

// alpha <= 0: no mixing (lambda 1, targets_b = targets) and nothing drawn.
MixedBatch mixup(const Tensor& inputs, const Tensor& targets, double alpha, Generator& gen);

// Mean over the batch of lambda * CE(logits, y) + (1 - lambda) * CE(logits, y[perm]).
Tensor mixed_cross_entropy(const Tensor& logits, const MixedBatch& batch, double label_smoothing);

}  // namespace ember::apps
