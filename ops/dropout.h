// Dropout: zeroes each element with probability p at training time and scales the survivors by
// 1 / (1 - p); the identity in evaluation.
//
//   Tensor h = dropout(x, 0.5, /*training=*/true);          // default generator
//   Generator g(7); Tensor a = dropout(x, 0.1, true, &g);   // reproducible mask
//
// The mask comes from counter-based Philox (core/rng.h; layout in ops/cpu/dropout.cpp), so
// one seed gives one mask on every backend. Note [Dropout backward]: the backward regenerates
// the mask from the (seed, first block) the forward used instead of storing it: that costs one
// Philox block per four elements, which is cheaper than reading a stored mask back and saves
// its memory (a u8 mask is a quarter of an f32 activation) for the whole forward-backward gap.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace ember {

// 0 <= p <= 1; p = 1 gives zeros (and a zero gradient). Returns x itself when !training or p = 0.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace ember
