// A kernel implemented once per device type. The CPU implementation is named where the stub is
// defined (ops/kernels.h); the CUDA backend binds its own when it initialises
// (ops/cuda/register.h). Ops call
//   unary_kernel(x.device(), UnaryOp::exp, x, y);
#pragma once

#include <vector>

#include "core/device.h"
#include "core/error.h"

namespace ember {

// What every stub has, whatever its signature: a name and whether a CUDA function is bound.
class DeviceKernelBase {
 public:
  const char* name() const { return name_; }
  bool has_cuda() const { return has_cuda_; }

 protected:
  explicit DeviceKernelBase(const char* name);  // registers the stub in device_kernels()
  ~DeviceKernelBase() = default;
  DeviceKernelBase(const DeviceKernelBase&) = delete;
  DeviceKernelBase& operator=(const DeviceKernelBase&) = delete;
  bool has_cuda_ = false;

 private:
  const char* name_;
};

// Every stub of the process, in registration order (tests check that a CUDA build binds all).
const std::vector<const DeviceKernelBase*>& device_kernels();

template <class Fn>
class DeviceKernel;

template <class... Args>
class DeviceKernel<void(Args...)> final : public DeviceKernelBase {
 public:
  using Fn = void (*)(Args...);
  DeviceKernel(const char* name, Fn cpu) : DeviceKernelBase(name), cpu_(cpu) {}

  void operator()(Device device, Args... args) const {
    if (device.is_cpu()) return cpu_(args...);
    EMBER_CHECK(cuda_ != nullptr, name(), ": no CUDA kernel is bound to this stub in this build");
    cuda_(args...);
  }
  void set_cuda(Fn fn) {
    cuda_ = fn;
    has_cuda_ = fn != nullptr;
  }

 private:
  Fn cpu_;
  Fn cuda_ = nullptr;
};

}  // namespace ember

// Declares and defines the stub `<name>_kernel` of the CPU kernel `cpu::<name>` (one line in
// ops/kernels.h): its signature is cpu::<name>'s and its name, in errors, is "<name>".
#define EMBER_DEVICE_KERNEL(name) inline ::ember::DeviceKernel<decltype(::ember::cpu::name)> name##_kernel(#name, &::ember::cpu::name)
