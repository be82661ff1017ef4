// Synchronized batch norm: every BatchNorm of a model normalises, while training, with the
// statistics of all ranks' batches together, as torch.nn.SyncBatchNorm does. For data-parallel
// jobs whose per-rank batch is too small for good statistics (large images, many ranks).
//
//   auto model = make_model("se_resnext50_32x4d");
//   distributed::convert_sync_batchnorm(*model, group);      // before wrapping it in DDP
//   auto ddp = std::make_shared<distributed::DistributedDataParallel>(model, group);
//
// Each BatchNorm keeps its parameters, buffers and state-dict names; only its training forward
// changes (Note [Synchronised batch statistics], nn/norm_layers.cpp): one all-gather of
// (1, 2C + 1) per layer in forward and a reduce-scatter of it in backward. Evaluation uses the
// running statistics, which every rank updates identically. Every rank must run every BatchNorm
// layer in the same order (a collective), as in PyTorch.
#pragma once

#include <memory>

#include "nn/distributed/process_group.h"
#include "nn/module.h"

namespace ember::distributed {

// Makes every BatchNorm in `module` (itself included) exchange its batch statistics over `group`;
// returns how many it converted. A null group undoes it (each rank's batch alone).
int convert_sync_batchnorm(Module& module, std::shared_ptr<ProcessGroup> group);

}  // namespace ember::distributed
