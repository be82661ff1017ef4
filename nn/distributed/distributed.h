// Data-parallel training: process groups over MPI (CPU) and NCCL (CUDA), DistributedDataParallel,
// all_gather with gradients, metric losses over the global batch and synchronized batch norm.
// See each header; the DataLoader's shard of an epoch is datasets/distributed_sampler.h.
#pragma once

#include "nn/distributed/all_gather.h"
#include "nn/distributed/data_parallel.h"
#include "nn/distributed/global_batch_loss.h"
#include "nn/distributed/process_group.h"
#include "nn/distributed/sync_batch_norm.h"
