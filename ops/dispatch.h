// A kernel implemented once per device type. The CPU implementation is named where the kernel
// is defined (ops/kernels.cpp); the CUDA layer installs its own when it initialises. Ops call
//   unary_kernel(x.device(), UnaryOp::exp, x, y);
#pragma once

#include "core/device.h"
#include "core/error.h"

namespace ember {

template <class Fn>
class DeviceKernel;

template <class... Args>
class DeviceKernel<void(Args...)> {
 public:
  using Fn = void (*)(Args...);
  constexpr DeviceKernel(const char* name, Fn cpu) : name_(name), cpu_(cpu) {}

  void operator()(Device device, Args... args) const {
    if (device.is_cpu()) return cpu_(args...);
    EMBER_CHECK(cuda_ != nullptr, name_, ": no CUDA kernel is available for this op in this build");
    cuda_(args...);
  }
  void set_cuda(Fn fn) { cuda_ = fn; }
  const char* name() const { return name_; }

 private:
  const char* name_;
  Fn cpu_;
  Fn cuda_ = nullptr;
};

}  // namespace ember
