// all_gather as a differentiable op, for losses that need the global batch (metric losses
// across ranks, as pytorch-metric-learning's DistributedLossWrapper and
// torch.distributed.nn.all_gather do).
//
//   Tensor local = model(x);                                   // (B_r, D) on rank r
//   Tensor global = distributed::all_gather(group, local);     // (sum of B_r, D), rank order
//   Tensor loss = metric_loss(global, distributed::all_gather(group, labels));
//   loss.backward();
//
// Backward: rank r's input gradient is the sum over ranks of the rows of their output
// gradients that came from rank r (a reduce-scatter). That is the gradient of the sum of all
// ranks' losses; every rank computes the same global loss here, so dividing by the world size
// gives the gradient of one loss, as DDP's average does when it all-reduces the parameters'
// gradients. Every rank must run backward through its all_gather (a collective).
#pragma once

#include <memory>

#include "nn/distributed/process_group.h"

namespace ember::distributed {

// x: (B_r, ...) on each rank r -> (sum of B_r, ...), every rank's rows in rank order.
Tensor all_gather(const std::shared_ptr<ProcessGroup>& group, const Tensor& x);

}  // namespace ember::distributed
