// A typed device buffer for the cuda tests: upload a vector, download it back.
//
//   DeviceBuffer<float> d(host);          // cudaMalloc + copy
//   std::vector<float> back = d.download();
#pragma once

#include <cstddef>
#include <vector>

#include "cuda/runtime.h"

namespace ember::testing {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n), ptr_(static_cast<T*>(cuda::malloc_device(n * sizeof(T)))) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cuda::free_device(ptr_); }

  void upload(const std::vector<T>& host) {
    cuda::memcpy(ptr_, host.data(), host.size() * sizeof(T), cuda::CopyKind::host_to_device);
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    cuda::memcpy(host.data(), ptr_, n_ * sizeof(T), cuda::CopyKind::device_to_host);
    return host;
  }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  size_t n_;
  T* ptr_;
};

}  // namespace ember::testing
