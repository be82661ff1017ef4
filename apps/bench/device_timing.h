// Timing options for benchmark rows that run on `device`: on cuda, blocks end with a device
// synchronisation (launches are asynchronous), never a per-call one.
#pragma once

#include "apps/bench/timing.h"
#include "core/device.h"
#include "cuda/runtime.h"

namespace ember::bench {

inline TimingOptions timing_for(Device device) {
  TimingOptions options;
  if (device.is_cuda()) options.sync = [] { cuda::synchronize(); };
  return options;
}

}  // namespace ember::bench
