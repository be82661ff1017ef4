// What an unmodified .cu file gets from <cuda_runtime.h> when ember-simcc compiles it for the
// SIMT simulator: the kernel language and runtime API of cuda/sim/sim.h, plus the pieces only
// such files need: the target of the `<<<>>>` rewrite (cuda/simcc/rewrite.h), the runtime's
// flag constants, and a few host-side names nvcc makes visible. Not used by ember's own kernels,
// which launch through cuda/launch.h.
//
//   k<<<grid, block, smem, stream>>>(a, b);        // what the user wrote; ember-simcc makes it
//   ::ember::sim::dropin::make_launch(::ember::sim::dropin::configure(grid, block, smem, stream),
//       "k", EMBER_SIM_KERNEL_BODY(k), EMBER_SIM_KERNEL_ADDRESS(k))(a, b);
#pragma once

#include <cmath>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda/sim/sim.h"

// ---- runtime flags (their values in cuda_runtime_api.h / driver_types.h) --------------------
constexpr unsigned int cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
constexpr unsigned int cudaEventDefault = 0, cudaEventBlockingSync = 1, cudaEventDisableTiming = 2;
constexpr unsigned int cudaHostAllocDefault = 0, cudaHostAllocPortable = 1, cudaHostAllocMapped = 2;

// ---- names nvcc's headers put in the global namespace ---------------------------------------
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;
// Mixed-type min/max, as CUDA's math headers declare them (the common type wins).
inline unsigned int max(int a, unsigned int b) { return std::max(unsigned(a), b); }
inline unsigned int max(unsigned int a, int b) { return std::max(a, unsigned(b)); }
inline unsigned int min(int a, unsigned int b) { return std::min(unsigned(a), b); }
inline unsigned int min(unsigned int a, int b) { return std::min(a, unsigned(b)); }
inline double max(float a, double b) { return std::max(double(a), b); }
inline double max(double a, float b) { return std::max(a, double(b)); }
inline double min(float a, double b) { return std::min(double(a), b); }
inline double min(double a, float b) { return std::min(a, double(b)); }
inline long long max(long long a, int b) { return std::max(a, (long long)b); }
inline long long max(int a, long long b) { return std::max((long long)a, b); }
inline long long min(long long a, int b) { return std::min(a, (long long)b); }
inline long long min(int a, long long b) { return std::min((long long)a, b); }

// ---- the `<<<>>>` launch ---------------------------------------------------------------------
namespace ember::sim::dropin {

struct Config {
  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;
};

// The launch configuration `<<<grid, block, shared_bytes, stream>>>` as a call, so the C++
// compiler parses it and converts each part as nvcc would.
inline Config configure(dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = nullptr) {
  return {grid, block, shared_bytes, stream};
}

// Runs one launch: a launch configuration that a GPU refuses (threads, grid or shared memory
// over the limits) prints why and makes cudaGetLastError() return cudaErrorInvalidConfiguration,
// as on a GPU; a kernel misuse the simulator detects (Note [misuse detection] in executor.cpp)
// prints the simulator's message and ends the program with exit status 1.
void run_launch(const Config& config, std::string_view name, const void* kernel, KernelBody body);

// `kernel<<<config>>>` before its arguments: calling it with the arguments launches.
template <class Body, class Address>
struct Launch {
  Config config;
  std::string_view name;
  Body body;        // [&](const auto&... args) { kernel(args...); }
  Address address;  // the kernel's address for the argument types, or nullptr

  template <class... Args>
  void operator()(Args&&... args) const {
    // Kernel parameters are passed by value: each thread sees copies made at launch time.
    using Bound = std::tuple<std::decay_t<Args>...>;
    struct Context {
      const Body* body;
      Bound args;
    };
    const Context context{&body, Bound(std::forward<Args>(args)...)};
    const void* kernel = address(static_cast<void (*)(std::decay_t<Args>...)>(nullptr));
    run_launch(config, name, kernel, KernelBody{&context, [](const void* c) {
                                         const auto* ctx = static_cast<const Context*>(c);
                                         std::apply(*ctx->body, ctx->args);
                                       }});
  }
};

template <class Body, class Address>
Launch<Body, Address> make_launch(Config config, std::string_view name, Body body, Address address) {
  return {config, name, std::move(body), std::move(address)};
}

// An int that depends on a template parameter (see EMBER_SIM_KERNEL_ADDRESS).
template <class T>
int dependent(const T&) { return 0; }

}  // namespace ember::sim::dropin

// The body of a launch: calls the kernel (a function, a function template whose arguments are
// deduced from the call as nvcc does, or a function pointer).
#define EMBER_SIM_KERNEL_BODY(...) [&](const auto&... ember_args_) { __VA_ARGS__(ember_args_...); }

// Note [kernel address]: the simulator keys per-kernel attributes (cudaFuncSetAttribute's
// shared-memory limit) by the kernel's address. A kernel template launched with deduced
// arguments has no address until the argument types are known, so the address is taken in a
// generic lambda called with a null pointer of type void(*)(argument types...): first as that
// exact pointer type (deduces the template), else as the name's own address (a non-template
// kernel whose parameters differ from the argument types), else nullptr (default limits).
// `dependent(f), name` keeps the second test inside the template, where a failure is not an error.
#define EMBER_SIM_KERNEL_ADDRESS(...)                                                                  \
  [&](auto* ember_fn_) -> const void* {                                                               \
    if constexpr (requires { ember_fn_ = __VA_ARGS__; }) {                                            \
      ember_fn_ = __VA_ARGS__;                                                                        \
      return reinterpret_cast<const void*>(ember_fn_);                                                \
    } else if constexpr (requires { +(::ember::sim::dropin::dependent(ember_fn_), __VA_ARGS__); }) {  \
      return reinterpret_cast<const void*>(+(::ember::sim::dropin::dependent(ember_fn_), __VA_ARGS__)); \
    } else {                                                                                          \
      return nullptr;                                                                                 \
    }                                                                                                 \
  }
