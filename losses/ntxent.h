// NT-Xent (normalized temperature-scaled cross-entropy), as pytorch-metric-learning 2.8.1's
// NTXentLoss with its default cosine similarity and mean reduction.
//
//   Tensor emb = model(x);                                 // (B, D)
//   Tensor loss = ntxent_loss(emb, labels);                // labels (B) i64; temperature 0.07
//   Tensor l2 = ntxent_loss(emb, labels, {.temperature = 0.1});
//
// Rows are L2-normalised. Every positive pair (i, j) (i != j, same label, both orders) is one
// term: -log(exp(s_ij / t) / (exp(s_ij / t) + sum over the negatives k of i of exp(s_ik / t)));
// the anchor's other positives are left out of the denominator. The loss is the mean over
// positive pairs; a batch without a positive or without a negative pair gives 0 and zero
// gradients. The B x B similarities are streamed in tiles (ops/pair_tiles.h), never held.
#pragma once

#include "core/tensor.h"

namespace ember {

struct NTXentOptions {
  double temperature = 0.07;
};

Tensor ntxent_loss(const Tensor& embeddings, const Tensor& labels, NTXentOptions options = {});

}  // namespace ember
