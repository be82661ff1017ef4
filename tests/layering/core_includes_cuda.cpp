// Must not compile (tests/layering/CMakeLists.txt): core cannot see the CUDA runtime layer.
#include "cuda/runtime.h"
