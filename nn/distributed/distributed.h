// Data-parallel training: process groups over MPI (CPU) and NCCL (CUDA), DistributedDataParallel,
// and all_gather with gradients. See each header; the DataLoader's shard of an epoch is
// datasets/distributed_sampler.h.
#pragma once

#include "nn/distributed/all_gather.h"
#include "nn/distributed/data_parallel.h"
#include "nn/distributed/process_group.h"
