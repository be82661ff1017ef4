// The values of one Philox block for each random draw, shared by the CPU (ops/cpu/fill.cpp) and
// the CUDA kernels (ops/cuda/fill.cu) so both produce the same numbers for one seed.
// Note [Philox layout] in ops/cpu/fill.cpp says which block each value comes from.
//
//   uint32_t w[4];
//   philox_block(seed, first_block + b, w);
//   float v[values_per_block<float>];
//   uniform_values(w, v, /*low=*/0.0f, /*span=*/1.0f);   // values b*4 .. b*4+3
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/philox.h"

namespace ember {

// f32: one word per value; f64: two words per value.
template <class T> inline constexpr int values_per_block = sizeof(T) == 8 ? 2 : 4;
// randint: 64 random bits (two words) per value.
inline constexpr int randint_per_block = 2;

// Note [Bitwise uniforms]: low + span * u is written as one fma so that no compiler is free to
// contract it differently (nvcc contracts by default, the CPU build with -ffp-contract=fast may
// or may not): fma is exactly rounded everywhere, so every backend gets the same bits.
template <class T>
EMBER_HOST_DEVICE void uniform_values(const uint32_t w[4], T* v, T low, T span) {
  if constexpr (sizeof(T) == 8) {
    v[0] = std::fma(span, T(uniform_double(w[0], w[1])), low);
    v[1] = std::fma(span, T(uniform_double(w[2], w[3])), low);
  } else {
    for (int j = 0; j < 4; ++j) v[j] = std::fma(span, T(uniform_float(w[j])), low);
  }
}

// Box-Muller on consecutive pairs of uniforms of the block; u1 = 1 - u lies in (0, 1].
template <class T>
EMBER_HOST_DEVICE void normal_values(const uint32_t w[4], T* v, T mean, T std) {
  uniform_values<T>(w, v, T(0), T(1));
  for (int j = 0; j < values_per_block<T>; j += 2) {
    const T u1 = T(1) - v[j], u2 = v[j + 1];
    const T r = std::sqrt(T(-2) * std::log(u1)), theta = T(6.283185307179586476925) * u2;
    v[j] = mean + std * r * std::cos(theta);
    v[j + 1] = mean + std * r * std::sin(theta);
  }
}

// Value j (0 or 1) of the block: low + (64 random bits mod span).
template <class T>
EMBER_HOST_DEVICE T randint_value(const uint32_t w[4], int j, int64_t low, uint64_t span) {
  const uint64_t bits = (uint64_t(w[2 * j + 1]) << 32) | w[2 * j];
  return static_cast<T>(low + int64_t(bits % span));
}

}  // namespace ember
