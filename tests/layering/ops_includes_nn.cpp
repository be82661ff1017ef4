// Must not compile (tests/layering/CMakeLists.txt): the op layer cannot see nn/, above it.
#include "nn/module.h"
