// CUDA's atomic functions for the SIMT simulator, on std::atomic_ref (so ThreadSanitizer sees
// them as atomics, not races). Each returns the old value, as on a GPU.
//
//   atomicAdd(&counts[label], 1);
#pragma once

#include <atomic>

#include "cuda/sim/executor.h"  // spin_wait

namespace ember::sim {
template <class T>
std::atomic_ref<T> atomic_at(T* address) { return std::atomic_ref<T>(*address); }

template <class T, class Op>
T atomic_update(T* address, Op op) {  // CAS loop for the operations std::atomic lacks
  auto a = atomic_at(address);
  T old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, op(old), std::memory_order_relaxed)) {}
  return old;
}
}  // namespace ember::sim

// Note [which overloads]: exactly the types CUDA provides for each function, so a kernel that
// compiles here also compiles with nvcc (float atomicMax, for instance, does not exist there).
#define EMBER_SIM_ATOMIC_ADD(T) \
  inline T atomicAdd(T* a, T v) { return ember::sim::atomic_at(a).fetch_add(v, std::memory_order_relaxed); }
EMBER_SIM_ATOMIC_ADD(int)
EMBER_SIM_ATOMIC_ADD(unsigned int)
EMBER_SIM_ATOMIC_ADD(unsigned long long)
EMBER_SIM_ATOMIC_ADD(float)
EMBER_SIM_ATOMIC_ADD(double)
#undef EMBER_SIM_ATOMIC_ADD

#define EMBER_SIM_ATOMIC_INTEGER(T)                                                                  \
  inline T atomicExch(T* a, T v) { return ember::sim::atomic_at(a).exchange(v, std::memory_order_relaxed); } \
  inline T atomicMax(T* a, T v) { return ember::sim::atomic_update(a, [v](T o) { return o < v ? v : o; }); } \
  inline T atomicMin(T* a, T v) { return ember::sim::atomic_update(a, [v](T o) { return v < o ? v : o; }); } \
  inline T atomicAnd(T* a, T v) { return ember::sim::atomic_at(a).fetch_and(v, std::memory_order_relaxed); } \
  inline T atomicOr(T* a, T v) { return ember::sim::atomic_at(a).fetch_or(v, std::memory_order_relaxed); }   \
  inline T atomicXor(T* a, T v) { return ember::sim::atomic_at(a).fetch_xor(v, std::memory_order_relaxed); } \
  inline T atomicCAS(T* a, T compare, T v) { /* Note [spinning fibers] in executor.cpp */         \
    if (!ember::sim::atomic_at(a).compare_exchange_strong(compare, v, std::memory_order_relaxed))    \
      ember::sim::spin_wait();                                                                       \
    return compare;                                                                                  \
  }
EMBER_SIM_ATOMIC_INTEGER(int)
EMBER_SIM_ATOMIC_INTEGER(unsigned int)
EMBER_SIM_ATOMIC_INTEGER(unsigned long long)
#undef EMBER_SIM_ATOMIC_INTEGER

// Wrapping counters: atomicInc counts up to v and then restarts at 0; atomicDec counts down from
// v and restarts at v after 0 (or when the value is above v), as CUDA defines them.
inline unsigned int atomicInc(unsigned int* a, unsigned int v) {
  return ember::sim::atomic_update(a, [v](unsigned int o) { return o >= v ? 0u : o + 1; });
}
inline unsigned int atomicDec(unsigned int* a, unsigned int v) {
  return ember::sim::atomic_update(a, [v](unsigned int o) { return o == 0 || o > v ? v : o - 1; });
}
inline float atomicExch(float* a, float v) { return ember::sim::atomic_at(a).exchange(v, std::memory_order_relaxed); }
inline int atomicSub(int* a, int v) { return ember::sim::atomic_at(a).fetch_sub(v, std::memory_order_relaxed); }
inline unsigned int atomicSub(unsigned int* a, unsigned int v) {
  return ember::sim::atomic_at(a).fetch_sub(v, std::memory_order_relaxed);
}
inline long long atomicMax(long long* a, long long v) {
  return ember::sim::atomic_update(a, [v](long long o) { return o < v ? v : o; });
}
inline long long atomicMin(long long* a, long long v) {
  return ember::sim::atomic_update(a, [v](long long o) { return v < o ? v : o; });
}
