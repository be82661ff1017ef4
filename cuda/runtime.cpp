// ember's CUDA runtime layer over the CUDA runtime API: the real one (REAL builds) or the
// simulator's (SIM builds, cuda/sim/runtime_api.h); this file is the same for both.
#include "cuda/runtime.h"

#include <mutex>
#include <utility>

#include "core/error.h"
#include "cuda/platform.h"

namespace ember::cuda {

namespace detail {
void throw_cuda_error(int status, const char* call, const char* file, int line) {
  const auto error = static_cast<cudaError_t>(status);
  cudaGetLastError();  // clear a non-sticky error so later calls do not see it again
  throw Error(ember::detail::concat(call, " failed at ", file, ":", line, ": ", cudaGetErrorString(error), " (",
                     cudaGetErrorName(error), ")"),
              file, line);
}
}  // namespace detail

namespace {

cudaStream_t native(Stream s) { return static_cast<cudaStream_t>(s.handle); }

cudaMemcpyKind native(CopyKind kind) {
  switch (kind) {
    case CopyKind::host_to_device: return cudaMemcpyHostToDevice;
    case CopyKind::device_to_host: return cudaMemcpyDeviceToHost;
    case CopyKind::device_to_device: return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

void require_available(const char* what) {
  EMBER_CHECK(is_available(), what, ": the cuda device is not available (backend '", backend_name(),
              "', ", device_count(), " devices visible)");
}

class CudaRawAllocator final : public RawAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();  // out of memory is an answer here, not an error to keep
      return nullptr;
    }
    return p;
  }
  void deallocate(void* ptr, size_t) override { EMBER_CUDA_CHECK(cudaFree(ptr)); }
  Device device() const override { return Device::cuda(current_device()); }
  size_t total_bytes() const override {
    size_t free_bytes = 0, total = 0;
    return cudaMemGetInfo(&free_bytes, &total) == cudaSuccess ? total : 0;
  }
};

}  // namespace

std::string_view backend_name() {
#if defined(EMBER_CUDA_SIM)
  return "simulator";
#else
  return "cuda";
#endif
}

int device_count() {
  // Note [no GPU]: without a driver or a visible device this returns an error, which only
  // means "unavailable"; it is cleared so that it never surfaces from a later call.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

bool init() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: tensors in static objects may be freed after main returns.
    if (!is_available()) return;
    register_allocator(DeviceType::cuda, make_allocator(make_raw_allocator()).release());
  });
  return is_available();
}

DeviceProperties device_properties(int device) {
  require_available("cuda::device_properties");
  EMBER_CHECK(device >= 0 && device < device_count(), "cuda::device_properties: expected a device index in [0, ",
              device_count(), "), got ", device);
  cudaDeviceProp p{};
  EMBER_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProperties d;
  d.name = p.name;
  d.total_memory = p.totalGlobalMem;
  d.major = p.major;
  d.minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.warp_size = p.warpSize;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.shared_per_block = p.sharedMemPerBlock;
  d.shared_per_block_optin = p.sharedMemPerBlockOptin;
  return d;
}

void set_device(int device) {
  require_available("cuda::set_device");
  EMBER_CHECK(device >= 0 && device < device_count(), "cuda::set_device: expected a device index in [0, ",
              device_count(), "), got ", device);
  EMBER_CUDA_CHECK(cudaSetDevice(device));
}

int current_device() {
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

Stream create_stream() {
  require_available("cuda::create_stream");
  cudaStream_t s = nullptr;
  EMBER_CUDA_CHECK(cudaStreamCreate(&s));
  return Stream{s};
}

void destroy_stream(Stream stream) {
  if (stream.handle) EMBER_CUDA_CHECK(cudaStreamDestroy(native(stream)));
}

void synchronize(Stream stream) { EMBER_CUDA_CHECK(cudaStreamSynchronize(native(stream))); }
void synchronize() { EMBER_CUDA_CHECK(cudaDeviceSynchronize()); }

Event::Event() {
  require_available("cuda::Event");
  cudaEvent_t e = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreate(&e));
  handle_ = e;
}

Event::~Event() {
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));  // no throwing from a destructor
}

Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Event::record(Stream stream) { EMBER_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), native(stream))); }
void Event::synchronize() const { EMBER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_))); }
void Event::wait_on(Stream stream) const {
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(native(stream), static_cast<cudaEvent_t>(handle_), 0));
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_), static_cast<cudaEvent_t>(handle_)));
  return ms;
}

void* malloc_device(size_t bytes) {
  require_available("cuda::malloc_device");
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw OutOfMemory(ember::detail::concat("cuda::malloc_device: out of memory allocating ", bytes, " bytes"),
                      __FILE__, __LINE__);
  }
  EMBER_CUDA_CHECK(status);
  return p;
}

void free_device(void* ptr) { EMBER_CUDA_CHECK(cudaFree(ptr)); }

void memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  EMBER_CUDA_CHECK(cudaMemcpy(dst, src, bytes, native(kind)));
}

void memcpy_async(void* dst, const void* src, size_t bytes, CopyKind kind, Stream stream) {
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, native(kind), native(stream)));
}

void memset(void* dst, int byte_value, size_t bytes) { EMBER_CUDA_CHECK(cudaMemset(dst, byte_value, bytes)); }

void memset_async(void* dst, int byte_value, size_t bytes, Stream stream) {
  EMBER_CUDA_CHECK(cudaMemsetAsync(dst, byte_value, bytes, native(stream)));
}

std::unique_ptr<RawAllocator> make_raw_allocator() {
  require_available("cuda::make_raw_allocator");
  return std::make_unique<CudaRawAllocator>();
}

}  // namespace ember::cuda
