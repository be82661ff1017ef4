// The one header a kernel file includes, and the one way to launch a kernel: under nvcc it is
// `kernel<<<grid, block, shared_bytes, stream>>>(args...)` plus an error check; in a SIM build
// it runs the kernel on the SIMT simulator. Never write <<<>>> anywhere else.
//
//   // x: (n,), y: (n,) -> y = a * x + y
//   __global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
//     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
//       y[i] = a * x[i] + y[i];
//   }
//   void saxpy(int n, float a, const float* x, float* y, ember::cuda::Stream stream) {
//     ember::cuda::launch<saxpy_kernel>(ember::cuda::blocks_for(n, 256), 256, 0, stream, n, a, x, y);
//   }
//
// The kernel is a template argument so that errors can name it ("launch of saxpy_kernel...").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "cuda/platform.h"
#include "cuda/launch_limits.h"  // after platform.h: needs dim3
#include "cuda/runtime.h"

namespace ember::cuda {

// Blocks of `per_block` threads needed to cover n items, clamped to [1, max_blocks] (a
// grid-stride loop in the kernel covers the rest).
//
// Note [Simulator grids]: the simulator runs a grid's blocks one after another and wakes every
// thread of a block, so a launch costs about (blocks x threads) thread wake-ups whatever the
// work. Under it the clamp drops to kSimMaxBlocks: every kernel sized by blocks_for is a
// grid-stride loop (the contract above), so fewer blocks compute the same result, and the
// tests still run several blocks (and the stride loop itself) per launch.
inline unsigned blocks_for(int64_t n, unsigned per_block, unsigned max_blocks = 4096) {
#if defined(EMBER_CUDA_SIM)
  constexpr unsigned kSimMaxBlocks = 8;
  if (max_blocks > kSimMaxBlocks) max_blocks = kSimMaxBlocks;
#endif
  const int64_t blocks = (n + per_block - 1) / per_block;
  return unsigned(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

namespace detail {

// "saxpy_kernel", "block_sum<float, 256>": the kernel's name from the compiler's signature.
template <auto Kernel>
constexpr std::string_view kernel_name() {
  constexpr std::string_view signature = __PRETTY_FUNCTION__;
  constexpr std::string_view key = "Kernel = ";
  constexpr size_t begin = signature.find(key);
  if constexpr (begin == std::string_view::npos) {
    return "kernel";
  } else {
    constexpr std::string_view rest = signature.substr(begin + key.size());
    constexpr std::string_view full = rest.substr(0, rest.find_first_of(";]"));
    // Drop the namespaces (but not those inside template arguments).
    constexpr size_t scope = full.substr(0, full.find('<')).rfind("::");
    return scope == std::string_view::npos ? full : full.substr(scope + 2);
  }
}

template <class F>
struct KernelArgs;
template <class... A>
struct KernelArgs<void (*)(A...)> {
  using type = std::tuple<std::decay_t<A>...>;
};

[[noreturn]] inline void throw_launch_error(std::string_view name, dim3 grid, dim3 block, size_t shared_bytes,
                                            const char* message) {
  EMBER_FAIL(launch_str(name, grid, block, shared_bytes), ": ", message);
}

}  // namespace detail

// Launches Kernel on grid x block threads with shared_bytes of dynamic shared memory on
// `stream`. Arguments convert to the kernel's parameter types as in a call.
template <auto Kernel, class... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, Stream stream, Args&&... args) {
  using Bound = typename detail::KernelArgs<decltype(Kernel)>::type;
  static_assert(sizeof...(Args) == std::tuple_size_v<Bound>, "launch: wrong number of kernel arguments");
  constexpr std::string_view name = detail::kernel_name<Kernel>();
  detail::check_launch_shape(name, grid, block, shared_bytes);
#if defined(EMBER_CUDA_REAL)
  Kernel<<<grid, block, shared_bytes, static_cast<cudaStream_t>(stream.handle)>>>(std::forward<Args>(args)...);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) detail::throw_launch_error(name, grid, block, shared_bytes, cudaGetErrorString(status));
#else
  (void)stream;  // the simulator is synchronous: every stream is the default stream
  const Bound bound(std::forward<Args>(args)...);
  const sim::KernelBody body{&bound, [](const void* context) { std::apply(Kernel, *static_cast<const Bound*>(context)); }};
  sim::launch({name, reinterpret_cast<const void*>(Kernel), grid, block, shared_bytes}, body);
#endif
}

}  // namespace ember::cuda
