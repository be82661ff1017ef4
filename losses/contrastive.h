// Contrastive loss, as pytorch-metric-learning 2.8.1's ContrastiveLoss with its default
// LpDistance (L2 distance of L2-normalised rows) and AvgNonZeroReducer.
//
//   Tensor emb = model(x);                                        // (B, D)
//   Tensor loss = contrastive_loss(emb, labels);                  // labels (B) i64; margins 0 and 1
//   Tensor l2 = contrastive_loss(emb, labels, {.pos_margin = 0.1, .neg_margin = 0.8});
//
// d_ij = ||e_i - e_j|| of the normalised rows. Every positive pair (i, j) (i != j, same label,
// both orders) has the term relu(d_ij - pos_margin), every negative pair (different labels)
// relu(neg_margin - d_ij); the hinges are not squared. Each part is the mean of its terms > 0
// (0 when there are none) and the loss is their sum: a batch where every pair is inside its
// margin gives 0 and zero gradients. The B x B distances are streamed in tiles
// (ops/pair_tiles.h); d == 0 (the diagonal, identical rows) has gradient 0, as torch.cdist.
#pragma once

#include "core/tensor.h"

namespace ember {

struct ContrastiveOptions {
  double pos_margin = 0, neg_margin = 1;
};

Tensor contrastive_loss(const Tensor& embeddings, const Tensor& labels, ContrastiveOptions options = {});

}  // namespace ember
