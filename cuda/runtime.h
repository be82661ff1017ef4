// ember's CUDA runtime layer: device queries, memory, copies, streams and events, every call
// checked. Usable from plain C++ in every build (no CUDA headers here); in a build without a
// CUDA backend is_available() is false and the other calls throw.
//
//   if (ember::cuda::init()) {                       // registers the cuda allocator once
//     void* d = ember::cuda::malloc_device(bytes);
//     ember::cuda::memcpy(d, host, bytes, ember::cuda::CopyKind::host_to_device);
//     ember::cuda::free_device(d);
//   }
//
// In .cu files (which see the CUDA API), wrap every runtime call:
//   EMBER_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/allocator.h"

namespace ember::cuda {

// "cuda" (a real GPU runtime), "simulator" (the SIMT simulator) or "none" (no CUDA backend).
std::string_view backend_name();

// Whether the cuda device can be used: always with the simulator; with real CUDA when a GPU is
// visible to this process (never an error when none is); never without a backend.
bool is_available();

// Registers the cuda allocator (caching, over CudaRawAllocator) on the first call; returns
// is_available(). Thread-safe. Programs need not call it: the first cuda tensor does, through
// the op layer's device initializer (Note [Lazy CUDA backend] in ops/dispatch.cpp), which also
// binds the CUDA kernels.
bool init();

int device_count();  // 0 when unavailable

struct DeviceProperties {
  std::string name;              // "NVIDIA H200", "ember SIMT simulator"
  size_t total_memory = 0;       // bytes
  int major = 0, minor = 0;      // compute capability
  int multiprocessors = 0;
  int warp_size = 32;
  int max_threads_per_block = 0;
  size_t shared_per_block = 0;        // default limit per block, bytes
  size_t shared_per_block_optin = 0;  // with cudaFuncAttributeMaxDynamicSharedMemorySize
};
DeviceProperties device_properties(int device = 0);

void set_device(int device);
int current_device();

// A stream handle, not owning. Stream{} is the default stream. Under the simulator every
// stream is synchronous.
struct Stream {
  void* handle = nullptr;  // a cudaStream_t
  StreamId id() const { return reinterpret_cast<uintptr_t>(handle); }
  friend bool operator==(Stream a, Stream b) = default;
};
Stream create_stream();  // destroy with destroy_stream
void destroy_stream(Stream stream);
void synchronize(Stream stream);
void synchronize();  // the whole device

// A timing/ordering event; owns its cudaEvent_t.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(Stream stream = {});
  void synchronize() const;
  void wait_on(Stream stream) const;  // later work on `stream` waits for this event
  // Milliseconds from `start` to this event; both recorded and complete.
  float elapsed_ms_since(const Event& start) const;

 private:
  void* handle_ = nullptr;
};

// Device memory without the caching allocator (tests, the raw allocator itself).
void* malloc_device(size_t bytes);  // throws OutOfMemory
void free_device(void* ptr);

enum class CopyKind { host_to_device, device_to_host, device_to_device };
void memcpy(void* dst, const void* src, size_t bytes, CopyKind kind);
void memcpy_async(void* dst, const void* src, size_t bytes, CopyKind kind, Stream stream);
void memset(void* dst, int byte_value, size_t bytes);
void memset_async(void* dst, int byte_value, size_t bytes, Stream stream);

// cudaMalloc/cudaFree (the simulator: host memory) for the current device.
std::unique_ptr<RawAllocator> make_raw_allocator();

namespace detail {
// Throws ember::Error: "<call> failed at <file>:<line>: <CUDA's message> (<error name>)".
[[noreturn]] void throw_cuda_error(int status, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace ember::cuda

// Checks a CUDA runtime call (needs the CUDA API in scope: .cu files, cuda/runtime.cpp).
#define EMBER_CUDA_CHECK(call)                                                              \
  do {                                                                                      \
    const auto ember_cuda_status_ = (call);                                                 \
    if (ember_cuda_status_ != cudaSuccess) [[unlikely]]                                     \
      ::ember::cuda::detail::throw_cuda_error(static_cast<int>(ember_cuda_status_), #call, __FILE__, __LINE__); \
  } while (0)
