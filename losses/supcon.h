// SupCon (supervised contrastive loss), as pytorch-metric-learning 2.8.1's SupConLoss with its
// default cosine similarity and AvgNonZeroReducer.
//
//   Tensor emb = model(x);                                 // (B, D)
//   Tensor loss = supcon_loss(emb, labels);                // labels (B) i64; temperature 0.1
//   Tensor l2 = supcon_loss(emb, labels, {.temperature = 0.2});
//
// Rows are L2-normalised. Each anchor i with positives has the loss -(1 / (P_i + small_val)) *
// sum over its P_i positives j of log(exp(s_ij / t) / sum over every k != i of exp(s_ik / t)):
// unlike NT-Xent, the denominator holds the anchor's other positives too. The loss is the mean
// over the anchors whose loss is > 0 (anchors without positives have 0 and are left out); a
// batch without a positive or without a negative pair gives 0 and zero gradients. The B x B
// similarities are streamed in tiles (ops/pair_tiles.h), never held.
#pragma once

#include "core/tensor.h"

namespace ember {

struct SupConOptions {
  double temperature = 0.1;
};

Tensor supcon_loss(const Tensor& embeddings, const Tensor& labels, SupConOptions options = {});

}  // namespace ember
