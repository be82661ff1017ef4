#include "ops/kernels.h"

#include <atomic>

namespace ember {

namespace {
std::atomic<CrossDeviceCopy> g_cross_device_copy{nullptr};
}  // namespace

void set_cross_device_copy(CrossDeviceCopy fn) { g_cross_device_copy.store(fn); }
CrossDeviceCopy cross_device_copy() { return g_cross_device_copy.load(); }

}  // namespace ember
