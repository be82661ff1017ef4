// Included by `ember-simcc --profile` at the top of each .cu file:
// - every static __shared__ variable lives in the section `ember_sim_shared`, whose bounds the
//   linker publishes (__start_ember_sim_shared, __stop_ember_sim_shared), so the profiler tells
//   shared memory from the program's other static data (Note [memory spaces] in profile.cpp);
// - kernels are never inlined into the simulator's launch code, so their basic blocks show
//   their own lines (Note [divergence] in profile.cpp).
#pragma once

#include "cuda/sim/builtins.h"

#undef __shared__
#define __shared__ static __attribute__((section("ember_sim_shared")))
#undef __global__
#define __global__ __attribute__((noinline))
