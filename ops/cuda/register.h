// Binding ember's CUDA kernels to the op layer's DeviceKernel stubs (ops/kernels.h).
//
// Each family file ops/cuda/<family>.cu ends with bind_<family>_kernels(), which points the
// family's stubs at its Tensor-level CUDA functions (`ember::dropout_kernel.set_cuda(&dropout_cuda)`,
// type-checked against the CPU kernel's signature). init_cuda_backend() runs every binder once,
// the first time a cuda tensor is allocated (core's device initializer, installed by
// ops/kernels.cpp). A new family adds one name to EMBER_CUDA_KERNEL_FAMILIES.
#pragma once

#define EMBER_CUDA_KERNEL_FAMILIES(X) \
  X(arcface)                          \
  X(bias_activation)                  \
  X(contrastive)                      \
  X(conv)                             \
  X(cross_device_copy)                \
  X(cross_entropy)                    \
  X(dropout)                          \
  X(elementwise)                      \
  X(fill)                             \
  X(index)                            \
  X(linear)                           \
  X(matmul)                           \
  X(multi_similarity)                 \
  X(norm)                             \
  X(normalize)                        \
  X(ntxent)                           \
  X(optim)                            \
  X(pool)                             \
  X(proxy_anchor)                     \
  X(reduce)                           \
  X(softmax)                          \
  X(supcon)                           \
  X(triplet)                          \
  X(scale_add_relu)                   \
  X(nonfinite)

namespace ember::cuda {

#define EMBER_DECLARE_BINDER(family) void bind_##family##_kernels();
EMBER_CUDA_KERNEL_FAMILIES(EMBER_DECLARE_BINDER)
#undef EMBER_DECLARE_BINDER

// Initialises the CUDA runtime layer (cuda::init(): the device and its caching allocator) and
// binds every family's kernels. Returns whether the cuda device is available. Thread-safe when
// called through core's device initializer, which runs it once.
bool init_cuda_backend();

}  // namespace ember::cuda
