// Helpers for the CUDA nn kernel tests: move tensors between the host and the cuda device, and
// run one DeviceKernel stub on both devices.
//
//   Tensor xd = test::to_cuda(x);                 // contiguous copy on Device::cuda()
//   Tensor yd = test::empty_cuda({2, 3});         // uninitialised, f32
//   softmax_forward_kernel(Device::cuda(), xd, false, yd);
//   REQUIRE_THAT(test::to_cpu(yd), test::all_close(y_cpu, 1e-5, 1e-6));
#pragma once

#include "cuda/runtime.h"
#include "ember.h"
#include "ops/kernels.h"

namespace ember::test {

inline Tensor empty_cuda(const Shape& shape, DType dtype = DType::f32) {
  return Tensor::empty(shape, {.dtype = dtype, .device = Device::cuda()});
}

// A contiguous copy of a CPU tensor on the cuda device; undefined stays undefined.
inline Tensor to_cuda(const Tensor& t) { return t.defined() ? t.contiguous().to(Device::cuda()) : Tensor(); }

// A CPU copy of a cuda tensor.
inline Tensor to_cpu(const Tensor& d) { return d.cpu(); }

}  // namespace ember::test
