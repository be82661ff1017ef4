// The SIMT simulator's kernel language and runtime API in one include: what nvcc provides
// implicitly (plus cuda_runtime.h, cuda_fp16.h and cuda_bf16.h) for a .cu file compiled by the
// host compiler. Included through "cuda/platform.h", never directly.
#pragma once

#include "cuda/sim/atomics.h"
#include "cuda/sim/builtins.h"
#include "cuda/sim/executor.h"
#include "cuda/sim/half.h"
#include "cuda/sim/half2.h"
#include "cuda/sim/runtime_api.h"
#include "cuda/sim/sync.h"
