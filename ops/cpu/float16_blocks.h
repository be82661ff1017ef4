// Blocks of N elements of T <-> compute_t<T> (float for bf16 and f16), for CPU loops that the
// compiler should vectorise, 16-bit conversions included.
//
//   float v[16];
//   load_block<16>(dy + i, v);                 // widen 16 bf16 values (exact)
//   for (int j = 0; j < 16; ++j) v[j] *= 2;
//   store_block<16>(v, dz + i);                // round each once, as T(v[j]) would
//
// Note [Blocks of 16]: a per-element loop over the Float16 struct stayed scalar, while loops over
// uint16_t arrays converted through the bit patterns (core/float16.h) become vector code. A
// kernel loads a block into local arrays, computes in separate simple loops and only then stores,
// so the compiler need not fear that a store changes an input it has yet to read (a donated
// gradient may be its own input).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/float16.h"

namespace ember::cpu {

// What a T is stored as: its bit pattern for bf16 and f16, else T itself. A kernel that only
// moves or selects values (never rounds them) can work on these.
template <class T>
using storage_t = std::conditional_t<is_float16_v<T>, uint16_t, T>;

template <int N, class T>
inline void load_bits(const T* src, storage_t<T>* bits) {
  std::memcpy(bits, src, N * sizeof(T));
}

template <int N, class T>
inline void store_bits(const storage_t<T>* bits, T* dst) {
  std::memcpy(dst, bits, N * sizeof(T));
}

// The values of N stored elements (exact).
template <int N, class T>
inline void widen_bits(const storage_t<T>* bits, compute_t<T>* v) {
  for (int j = 0; j < N; ++j) {
    if constexpr (std::is_same_v<T, BFloat16>) v[j] = bfloat16_bits_to_float(bits[j]);
    else if constexpr (std::is_same_v<T, Half>) v[j] = half_bits_to_float(bits[j]);
    else v[j] = bits[j];
  }
}

template <int N, class T>
inline void load_block(const T* src, compute_t<T>* v) {
  storage_t<T> bits[N];
  load_bits<N>(src, bits);
  widen_bits<N, T>(bits, v);
}

template <int N, class T>
inline void store_block(const compute_t<T>* v, T* dst) {
  if constexpr (is_float16_v<T>) {
    uint16_t bits[N];
    for (int j = 0; j < N; ++j)
      bits[j] = std::is_same_v<T, BFloat16> ? float_to_bfloat16_bits(v[j]) : float_to_half_bits(v[j]);
    std::memcpy(dst, bits, sizeof bits);
  } else {
    std::memcpy(dst, v, N * sizeof(T));
  }
}

// Calls f(TypeTag<T>{}) for f32, f64, bf16 and f16: the kernels that read 16-bit values natively
// and compute in compute_t<T>; anything else is an error naming `op`.
template <class F>
void dispatch_float_or_16_bit(DType dtype, const char* op, F&& f) {
  if (dtype == DType::bf16) return f(TypeTag<BFloat16>{});
  if (dtype == DType::f16) return f(TypeTag<Half>{});
  dispatch_float(dtype, op, f);
}

}  // namespace ember::cpu
