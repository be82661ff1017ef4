// Philox4x32-10 and the word-to-float conversions, usable on the host and in CUDA kernels, so
// both backends draw the same numbers for one seed (see core/rng.h for the Generator API and
// Note [Philox layout] in ops/cpu/fill.cpp for how draws map values to blocks).
//
//   uint32_t w[4];
//   philox_block(/*seed=*/42, /*index=*/7, w);   // the 4 words of block 7
//   float u = uniform_float(w[0]);               // in [0, 1)
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace ember {

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"):
// counter c (4 words) and key (k0, k1) -> 4 random words, written back into c.
EMBER_HOST_DEVICE void philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0], p1 = uint64_t(kMul1) * c[2];
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ k0, n1 = uint32_t(p1);
    const uint32_t n2 = uint32_t(p0 >> 32) ^ c[3] ^ k1, n3 = uint32_t(p0);
    c[0] = n0;
    c[1] = n1;
    c[2] = n2;
    c[3] = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
}

// Block `index` of the stream for `seed`: counter (index lo, index hi, 0, 0), key (seed lo, hi).
EMBER_HOST_DEVICE void philox_block(uint64_t seed, uint64_t index, uint32_t w[4]) {
  w[0] = uint32_t(index);
  w[1] = uint32_t(index >> 32);
  w[2] = 0;
  w[3] = 0;
  philox4x32_10(w, uint32_t(seed), uint32_t(seed >> 32));
}

// Conversions shared by every backend: a 32-bit word to a float in [0, 1), two words to a
// double in [0, 1).
EMBER_HOST_DEVICE float uniform_float(uint32_t w) { return float(w >> 8) * 0x1p-24f; }
EMBER_HOST_DEVICE double uniform_double(uint32_t lo, uint32_t hi) {
  return double((uint64_t(hi) << 21) ^ (lo >> 11)) * 0x1p-53;
}

}  // namespace ember
