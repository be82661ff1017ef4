// The simulator's CUDA runtime API (see runtime_api.h): host memory, synchronous streams.
#include "cuda/sim/runtime_api.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "cuda/sim/executor.h"

namespace {

thread_local cudaError_t tl_last_error = cudaSuccess;

cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) tl_last_error = e;
  return e;
}

// Every live cudaMalloc range, to check that copies touch device memory where they claim to.
class DeviceMemory {
 public:
  void* allocate(size_t bytes) {
    // 256-byte alignment, like cudaMalloc; exactly `bytes` are usable (AddressSanitizer sees
    // the true end through the aligned operator new).
    void* p = ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(256), std::nothrow);
    if (!p) return nullptr;
    std::lock_guard lock(mutex_);
    ranges_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }

  bool release(void* p) {
    {
      std::lock_guard lock(mutex_);
      if (ranges_.erase(reinterpret_cast<uintptr_t>(p)) == 0) return false;
    }
    ::operator delete(p, std::align_val_t(256));
    return true;
  }

  // Whether [p, p + bytes) lies inside one allocation.
  bool contains(const void* p, size_t bytes) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard lock(mutex_);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return false;
    --it;
    return a + bytes <= it->first + it->second;
  }

  std::vector<std::pair<uintptr_t, size_t>> ranges() const {
    std::lock_guard lock(mutex_);
    return {ranges_.begin(), ranges_.end()};
  }

 private:
  mutable std::mutex mutex_;
  std::map<uintptr_t, size_t> ranges_;
};

DeviceMemory& device_memory() {
  static auto* memory = new DeviceMemory;  // leaked: frees may come after static destruction
  return *memory;
}

bool valid_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return true;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  return (!dst_device || device_memory().contains(dst, bytes)) && (!src_device || device_memory().contains(src, bytes));
}

size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

}  // namespace

cudaError_t ember::sim::record_error(cudaError_t error) { return record(error); }
std::vector<std::pair<uintptr_t, size_t>> ember::sim::device_allocations() { return device_memory().ranges(); }

struct CUstream_st {};
struct CUevent_st {
  std::chrono::steady_clock::time_point time{};
  bool recorded = false;
};

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

cudaError_t cudaGetLastError() { return std::exchange(tl_last_error, cudaSuccess); }
cudaError_t cudaPeekAtLastError() { return tl_last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return record(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "ember SIMT simulator", sizeof(prop->name) - 1);
  prop->totalGlobalMem = physical_memory();
  prop->sharedMemPerBlock = ember::sim::kDefaultMaxDynamicSharedBytes;
  prop->sharedMemPerBlockOptin = ember::sim::kMaxDynamicSharedBytesOptin;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = int(ember::sim::kMaxThreadsPerBlock);
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;  // behaves like sm_90 where limits differ (opt-in shared memory)
  prop->minor = 0;
  prop->multiProcessorCount = int(std::max(1u, std::thread::hardware_concurrency()));
  // Note [device properties] in runtime_api.h: sm_90's limits, nominal H100-like figures.
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->maxBlocksPerMultiProcessor = 32;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->totalConstMem = 64 * 1024;
  prop->regsPerBlock = prop->regsPerMultiprocessor = 65536;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->persistingL2CacheMaxSize = 0;
  prop->clockRate = 1755000;
  prop->memoryClockRate = 2619000;
  prop->memoryBusWidth = 5120;
  prop->concurrentKernels = 1;
  prop->asyncEngineCount = 1;
  prop->unifiedAddressing = 1;
  prop->managedMemory = 0;
  prop->canMapHostMemory = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = int(p.sharedMemPerBlock); break;
    case cudaDevAttrTotalConstantMemory: *value = int(p.totalConstMem); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrClockRate: *value = p.clockRate; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMemoryClockRate: *value = p.memoryClockRate; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = int(p.sharedMemPerMultiprocessor); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(p.sharedMemPerBlockOptin); break;
    default: return record(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceReset() { return cudaSuccess; }

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : record(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = physical_memory();
  const long avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  *free_bytes = avail > 0 && page > 0 ? size_t(avail) * size_t(page) : 0;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = device_memory().allocate(bytes);
  return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes == 0 ? 1 : bytes);
  return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int) { return cudaMallocHost(ptr, bytes); }
cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  return device_memory().release(ptr) ? cudaSuccess : record(cudaErrorInvalidDevicePointer);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
  if (!valid_copy(dst, src, bytes, kind)) return record(cudaErrorInvalidValue);
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return record(cudaErrorInvalidPitchValue);
  // The span each side touches: from its first row to the end of its last.
  const size_t dst_span = dpitch * (height - 1) + width, src_span = spitch * (height - 1) + width;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_device && !device_memory().contains(dst, dst_span)) || (src_device && !device_memory().contains(src, src_span)))
    return record(cudaErrorInvalidValue);
  for (size_t row = 0; row < height; ++row)
    std::memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch, width);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (bytes && !device_memory().contains(ptr, bytes)) return record(cudaErrorInvalidValue);
  if (bytes) std::memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) { return cudaMemset(ptr, value, bytes); }

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) { return cudaStreamCreate(stream); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return record(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  return event ? cudaSuccess : record(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return record(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (!event) return record(cudaErrorInvalidResourceHandle);
  event->time = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? cudaSuccess : record(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return event ? cudaSuccess : record(cudaErrorInvalidResourceHandle); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start || !end) return record(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return record(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      size_t(value) > ember::sim::kMaxDynamicSharedBytesOptin)
    return record(cudaErrorInvalidValue);
  ember::sim::set_max_dynamic_shared_bytes(func, size_t(value));
  return cudaSuccess;
}
