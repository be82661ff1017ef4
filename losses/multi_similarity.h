// Multi-Similarity loss, as pytorch-metric-learning 2.8.1's MultiSimilarityLoss with its default
// cosine similarity and MeanReducer.
//
//   Tensor emb = model(x);                                     // (B, D)
//   Tensor loss = multi_similarity_loss(emb, labels);          // alpha 2, beta 50, base 0.5
//   Tensor l2 = multi_similarity_loss(emb, labels, {.alpha = 1, .beta = 40});
//
// Rows are L2-normalised. Row i's loss is
//   (1 / alpha) log(1 + sum over its positives j of exp(-alpha (s_ij - base)))
// + (1 / beta)  log(1 + sum over its negatives k of exp(beta (s_ik - base))),
// a part being 0 for a row without positives (negatives); the loss is the mean over all B rows
// (0 for an empty batch). The B x B similarities are streamed in tiles (ops/pair_tiles.h),
// never held. alpha and beta must be > 0.
#pragma once

#include "core/tensor.h"

namespace ember {

struct MultiSimilarityOptions {
  double alpha = 2, beta = 50, base = 0.5;
};

Tensor multi_similarity_loss(const Tensor& embeddings, const Tensor& labels, MultiSimilarityOptions options = {});

}  // namespace ember
