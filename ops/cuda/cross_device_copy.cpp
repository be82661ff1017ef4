// Copies between the host and the cuda device (Tensor::to(Device), .cpu()): one checked
// cudaMemcpy of contiguous bytes. A copy to the host returns when the data is there, so it
// waits for the kernels that produce it (the only synchronisation of the op layer besides
// item() and the index checks).
#include "core/error.h"
#include "core/tensor.h"
#include "cuda/runtime.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

// src and dst contiguous, one dtype and shape, on different devices (cpu <-> cuda).
void copy_between_devices(const Tensor& src, const Tensor& dst) {
  EMBER_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "to: expected one dtype and element count, got ",
              dtype_name(src.dtype()), " x ", src.numel(), " -> ", dtype_name(dst.dtype()), " x ", dst.numel());
  EMBER_CHECK(src.is_contiguous() && dst.is_contiguous(), "to: a copy between devices needs contiguous tensors");
  if (src.nbytes() == 0) return;
  const CopyKind kind = src.is_cpu()   ? CopyKind::host_to_device
                        : dst.is_cpu() ? CopyKind::device_to_host
                                       : CopyKind::device_to_device;
  memcpy(dst.raw_data(), src.raw_data(), src.nbytes(), kind);
}

}  // namespace

void bind_cross_device_copy_kernels() { set_cross_device_copy(&copy_between_devices); }

}  // namespace ember::cuda
