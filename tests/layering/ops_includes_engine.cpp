// Must not compile (tests/layering/CMakeLists.txt): the op layer sees autograd's graph, not its
// engine, which sits above the ops.
#include "autograd/engine.h"
