// Storage: one allocation that several tensors (views) may share.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/allocator.h"

namespace ember {

struct Storage {
  Storage(DataPtr data, size_t nbytes, Device device)
      : data(std::move(data)), nbytes(nbytes), device(device) {}

  DataPtr data;
  size_t nbytes;
  Device device;
  // Bumped by every in-place write, so autograd can tell that a tensor it saved for backward
  // was modified afterwards (see SavedTensor in autograd/graph.h).
  std::atomic<uint32_t> version{0};
};

}  // namespace ember
