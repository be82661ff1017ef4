// Batch-hard triplet mining, as pytorch-metric-learning 2.8.1's BatchHardMiner with its default
// LpDistance (L2 distance of L2-normalised rows).
//
//   Triplets t = batch_hard_miner(emb, labels);          // no gradient, indices only
//   Tensor loss = triplet_margin_loss(emb, labels, t);   // the loss it is made for
//
// For each anchor a, its hardest positive (the largest d_ap, p != a, same label) and its
// hardest negative (the smallest d_an); ties go to the smaller index. Anchors without a
// positive or without a negative are dropped; the rest come in increasing order. Mining
// records nothing on the autograd tape. The result is on the embeddings' device.
#pragma once

#include "core/tensor.h"
#include "losses/triplet.h"

namespace ember {

Triplets batch_hard_miner(const Tensor& embeddings, const Tensor& labels);

}  // namespace ember
