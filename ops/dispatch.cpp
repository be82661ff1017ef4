#include "ops/dispatch.h"

#include "autograd/graph.h"
#include "core/allocator.h"
#include "ops/cuda/register.h"
#include "ops/nonfinite.h"

namespace ember {
namespace {

std::vector<const DeviceKernelBase*>& registry() {
  static std::vector<const DeviceKernelBase*> kernels;
  return kernels;
}

// Note [Lazy CUDA backend]: core knows nothing of CUDA; it runs the initializer registered for a
// device type the first time that device's allocator is asked for. Every op's stub is
// constructed by this file's DeviceKernelBase, so this file is in every program that runs an
// op, and registering here, during static initialisation, makes the first cuda tensor initialise
// the runtime and bind every CUDA kernel (ops/cuda/register.h).
[[maybe_unused]] const bool g_cuda_initializer_registered = [] {
  set_device_initializer(DeviceType::cuda, &cuda::init_cuda_backend);
  return true;
}();

// Anomaly mode (autograd/graph.h) lives below the op layer and checks tensors with this layer's
// kernel; it is installed here for the same reason.
[[maybe_unused]] const bool g_nonfinite_describer_registered = [] {
  autograd::set_nonfinite_describer(&describe_nonfinite);
  return true;
}();

}  // namespace

// Stubs are inline variables initialised during static initialisation, before main and before
// any thread could read the registry.
DeviceKernelBase::DeviceKernelBase(const char* name) : name_(name) { registry().push_back(this); }

const std::vector<const DeviceKernelBase*>& device_kernels() { return registry(); }

}  // namespace ember
