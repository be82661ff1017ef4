// Philox4x32-10 as one function usable on the host and in CUDA kernels (core/rng.h's
// Generator::block is a host-only wrapper over it), so both backends draw identical words.
//
//   const ember::PhiloxWords w = ember::philox4x32({index_lo, index_hi, 0, 0}, {seed_lo, seed_hi});
//   float u = ember::uniform_float(w.v[0]);  // core/rng.h
#pragma once

#include <cstdint>

#ifndef EMBER_HOST_DEVICE
#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define EMBER_HOST_DEVICE inline
#endif
#endif

namespace ember {

struct PhiloxWords {
  uint32_t v[4];
};
struct PhiloxKey {
  uint32_t v[2];
};

// Salmon et al., "Parallel random numbers: as easy as 1, 2, 3": 10 rounds.
EMBER_HOST_DEVICE PhiloxWords philox4x32(PhiloxWords c, PhiloxKey k) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c.v[0], p1 = uint64_t(kMul1) * c.v[2];
    c = {{uint32_t(p1 >> 32) ^ c.v[1] ^ k.v[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c.v[3] ^ k.v[1], uint32_t(p0)}};
    k.v[0] += kWeyl0;
    k.v[1] += kWeyl1;
  }
  return c;
}

// Block `index` of the stream of `seed` (the counter and key layout of Generator::block).
EMBER_HOST_DEVICE PhiloxWords philox_block(uint64_t seed, uint64_t index) {
  return philox4x32({{uint32_t(index), uint32_t(index >> 32), 0, 0}}, {{uint32_t(seed), uint32_t(seed >> 32)}});
}

// Conversions shared by every backend: a 32-bit word to a float in [0, 1), two words to a
// double in [0, 1).
EMBER_HOST_DEVICE float uniform_float(uint32_t w) { return float(w >> 8) * 0x1p-24f; }
EMBER_HOST_DEVICE double uniform_double(uint32_t lo, uint32_t hi) {
  return double((uint64_t(hi) << 21) ^ (lo >> 11)) * 0x1p-53;
}

}  // namespace ember
