// Must compile (tests/layering/CMakeLists.txt): the control that proves the probes' failures
// come from the layering, not from the probe set-up.
#include "autograd/graph.h"
#include "core/tensor.h"
#include "cuda/runtime.h"
#include "ops/kernels.h"
