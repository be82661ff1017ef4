// A metric loss over the global batch: every rank's embeddings and labels gathered (with
// gradients) before the loss, so each pair or triplet may join samples of different ranks, as
// pytorch-metric-learning's DistributedLossWrapper does.
//
//   auto group = distributed::init_process_group();
//   DistributedDataParallel ddp(model, group);
//   Tensor emb = ddp(x);                                            // (B_r, D) on rank r
//   Tensor loss = distributed::global_batch_loss(group, emb, y,    // y: (B_r) i64
//       [](const Tensor& e, const Tensor& l) { return ntxent_loss(e, l); });
//   loss.backward();                                               // DDP averages the gradients
//
// Contract: embeddings (B_r, D) floating, labels (B_r) i64 on every rank r, D and dtype the same
// everywhere (B_r may differ); `loss` maps the gathered (sum of B_r, D) and (sum of B_r) in rank
// order to a 0-d tensor. A module loss (ArcFaceLoss, ProxyAnchorLoss) goes in the callable; its
// parameters must then be trained under DDP too (or their gradients averaged), like the model's.
//
// Note [Global batch gradients]: every rank computes the same loss L of the same gathered
// batch, so the value is the one-process loss on the concatenated batch, on every rank. The
// gather's backward sums, over the ranks, the gradient of each rank's copy of L with respect to
// this rank's rows (a reduce-scatter, all_gather.h): W * dL/dx_r for a world of W ranks. DDP then
// averages the parameters' gradients, dividing by W, which leaves exactly one-process dL/dθ; a
// module loss's own parameters get the full dL/dw on each rank, whose average is dL/dw again.
// PML multiplies its loss by W and stops the gradient at the other ranks' rows for the same
// effect; here the value stays the one-process loss, so logs and tests compare it directly.
// The reduce-scatter costs one (sum of B_r, D) exchange, small beside the model's gradients, and
// stays right even if ranks round the loss differently (different thread counts).
#pragma once

#include <functional>
#include <memory>

#include "nn/distributed/process_group.h"

namespace ember::distributed {

using EmbeddingLoss = std::function<Tensor(const Tensor& embeddings, const Tensor& labels)>;

// The loss of every rank's batch together (Note [Global batch gradients]); a collective, so every
// rank calls it, and later runs backward through it, in the same order.
Tensor global_batch_loss(const std::shared_ptr<ProcessGroup>& group, const Tensor& embeddings,
                         const Tensor& labels, const EmbeddingLoss& loss);

}  // namespace ember::distributed
