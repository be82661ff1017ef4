// Binds the CUDA kernels to the op layer's DeviceKernel stubs (ops/kernels.h). Called once,
// from cuda::init(), when the cuda device is first used.
#include "cuda/kernels.h"
#include "cuda/kernels/matmul.h"
#include "cuda/kernels/nn_kernels.h"
#include "cuda/kernels/optim.h"
#include "ops/kernels.h"

namespace ember::cuda {

void register_cuda_kernels() {
  unary_kernel.set_cuda(&cuda::unary);
  binary_kernel.set_cuda(&cuda::binary);
  compare_kernel.set_cuda(&cuda::compare);
  where_kernel.set_cuda(&cuda::where);
  copy_kernel.set_cuda(&cuda::copy);
  fill_kernel.set_cuda(&cuda::fill);
  arange_kernel.set_cuda(&cuda::arange);
  uniform_kernel.set_cuda(&cuda::uniform);
  normal_kernel.set_cuda(&cuda::normal);
  randint_kernel.set_cuda(&cuda::randint);
  reduce_kernel.set_cuda(&cuda::reduce);
  arg_reduce_kernel.set_cuda(&cuda::arg_reduce);
  index_select_kernel.set_cuda(&cuda::index_select);
  index_add_kernel.set_cuda(&cuda::index_add);
  gather_kernel.set_cuda(&cuda::gather);
  scatter_add_kernel.set_cuda(&cuda::scatter_add);
  register_matmul_kernels();  // bmm (kernels/matmul.cu)
  register_optim_kernels();   // SGD, Adam/AdamW steps (kernels/optim.cu)
  nn::register_nn_kernels();  // conv, pooling, linear, batch norm, softmax, losses, dropout (kernels/nn_*)
  set_cross_device_copy(&cuda::copy_between_devices);
}

}  // namespace ember::cuda
