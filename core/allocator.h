// Memory for tensors. A RawAllocator talks to the system (aligned host memory, cudaMalloc);
// an Allocator hands out DataPtrs over it and keeps the statistics that benchmarks report.
//
//   Allocator& a = allocator_for(Device::cpu());
//   DataPtr p = a.allocate(1 << 20);          // freed (or returned to the cache) when p dies
//   int64_t peak = a.stats().peak_allocated_bytes;
//
// allocator_for() returns the caching allocator for each device unless the environment sets
// EMBER_NO_CACHING=1 (for sanitizers), which selects a pass-through allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "core/device.h"

namespace ember {

// Opaque stream identity; 0 is the default stream. Memory freed on one stream is reused on the
// same stream only (a CUDA stream's id is its handle, cuda::Stream::id(); the CPU has only stream 0).
using StreamId = uint64_t;

struct AllocatorStats {
  int64_t allocated_bytes = 0;       // bytes in blocks handed out now (after rounding)
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = 0;        // bytes held from the raw allocator, in use or cached
  int64_t peak_reserved_bytes = 0;
  int64_t active_blocks = 0;         // blocks handed out now
  int64_t peak_active_blocks = 0;
  int64_t raw_allocations = 0;       // successful calls into the RawAllocator
  int64_t raw_frees = 0;
  int64_t retries = 0;               // raw failures answered by emptying the cache and retrying
  int64_t ooms = 0;                  // OutOfMemory errors thrown
};

// The system's allocator for one device. Thread-safe.
class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  virtual void* allocate(size_t bytes) = 0;  // nullptr when the memory is not there
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual Device device() const = 0;
  virtual size_t total_bytes() const = 0;    // the device's capacity, for messages (0: unknown)
};

class Allocator;

// Move-only owner of one allocation; gives it back to its Allocator on destruction.
class DataPtr {
 public:
  DataPtr() = default;
  DataPtr(void* ptr, Allocator* owner) : ptr_(ptr), owner_(owner) {}
  DataPtr(DataPtr&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), owner_(o.owner_) {}
  DataPtr& operator=(DataPtr&& o) noexcept {
    if (this != &o) { reset(); ptr_ = std::exchange(o.ptr_, nullptr); owner_ = o.owner_; }
    return *this;
  }
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { reset(); }

  void* get() const { return ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  void reset();

 private:
  void* ptr_ = nullptr;
  Allocator* owner_ = nullptr;
};

// Hands out memory for tensors on one device. Thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Zero bytes gives an empty DataPtr. Throws OutOfMemory when the memory cannot be had.
  virtual DataPtr allocate(size_t bytes, StreamId stream = 0) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak_stats() = 0;
  // Gives every cached, unused block back to the raw allocator.
  virtual void empty_cache() = 0;
  // Note [Memory limit]: caps the bytes handed out at once (stats().allocated_bytes, as
  // rounded): a request that would pass the cap throws OutOfMemory naming the limit, before any
  // raw allocation, and the program can free tensors and go on. 0 removes the cap. Benchmarks
  // use it as a memory budget (`ember bench losses --budget-mib`).
  virtual void set_memory_limit(size_t bytes) = 0;
  virtual size_t memory_limit() const = 0;
  virtual Device device() const = 0;

 protected:
  friend class DataPtr;
  virtual void release(void* ptr) = 0;
};

inline void DataPtr::reset() {
  if (ptr_) owner_->release(std::exchange(ptr_, nullptr));
}

// 64-byte aligned host memory (one cache line, one AVX-512 vector).
class CpuRawAllocator final : public RawAllocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return Device::cpu(); }
  size_t total_bytes() const override;  // physical memory
};

// No cache: every allocate/free goes to the raw allocator. Keeps the same statistics.
// Used when EMBER_NO_CACHING=1, so sanitizers see every buffer's true bounds and lifetime.
class PassThroughAllocator final : public Allocator {
 public:
  explicit PassThroughAllocator(std::unique_ptr<RawAllocator> raw);
  ~PassThroughAllocator() override;
  DataPtr allocate(size_t bytes, StreamId stream = 0) override;
  AllocatorStats stats() const override;
  void reset_peak_stats() override;
  void empty_cache() override {}
  void set_memory_limit(size_t bytes) override;
  size_t memory_limit() const override;
  Device device() const override { return raw_->device(); }

 private:
  void release(void* ptr) override;
  struct State;
  std::unique_ptr<RawAllocator> raw_;
  std::unique_ptr<State> state_;
};

// The process-wide allocator for `device`. Throws for a device that has no allocator (a
// `cuda` device in a build without CUDA, or with no GPU visible).
Allocator& allocator_for(Device device);

// Installs the allocator for a device type (the CUDA runtime layer does this when it
// initialises). The allocator must live until the process ends.
void register_allocator(DeviceType type, Allocator* allocator);

// Note [Device initializers]: core knows no backend. A backend registers a function that
// initialises its device type (and registers its allocator); allocator_for() runs it once, the
// first time that device type is asked for, and it returns whether the device is available.
// The op layer registers the CUDA backend's (ops/dispatch.cpp, Note [Lazy CUDA backend]).
using DeviceInitializer = bool (*)();
void set_device_initializer(DeviceType type, DeviceInitializer init);

// The allocator ember uses over `raw`: the caching allocator, or a PassThroughAllocator when
// caching_disabled(). Every device's allocator is made here.
std::unique_ptr<Allocator> make_allocator(std::unique_ptr<RawAllocator> raw);

// True when EMBER_NO_CACHING=1 is set in the environment.
bool caching_disabled();

}  // namespace ember
