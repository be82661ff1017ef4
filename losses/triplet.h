// Triplet margin loss, as pytorch-metric-learning 2.8.1's TripletMarginLoss with its default
// LpDistance (L2 distance of L2-normalised rows), triplets_per_anchor "all", no swap, no smooth
// loss, and AvgNonZeroReducer.
//
//   Tensor loss = triplet_margin_loss(emb, labels);                   // every triplet, margin 0.05
//   Tensor l2 = triplet_margin_loss(emb, labels, {.margin = 0.2});
//   Tensor hard = triplet_margin_loss(emb, labels, batch_hard_miner(emb, labels));  // mined
//
// A triplet (a, p, n) has p a positive of a (p != a, same label) and n a negative (different
// label); its term is relu(d_ap - d_an + margin) with d = ||e_i - e_j|| of the normalised rows.
// The loss is the mean of the terms > 0, 0 (with zero gradients) when there are none: every
// triplet satisfied, one class, all singletons. All triplets are O(B^3): they are never listed
// (per anchor, its negatives' distances are sorted and searched for each positive). The second
// form takes given triplets: anchor, positive, negative (T) i64 in [0, B), used as they are.
#pragma once

#include "core/tensor.h"

namespace ember {

struct TripletOptions {
  double margin = 0.05;
};

// (T) i64 each: the triplets (anchor[t], positive[t], negative[t]).
struct Triplets {
  Tensor anchor, positive, negative;
};

Tensor triplet_margin_loss(const Tensor& embeddings, const Tensor& labels, TripletOptions options = {});
Tensor triplet_margin_loss(const Tensor& embeddings, const Tensor& labels, const Triplets& mined,
                           TripletOptions options = {});

}  // namespace ember
