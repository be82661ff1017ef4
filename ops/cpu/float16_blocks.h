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

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ember::cpu {

// What a T is stored as: its bit pattern for bf16 and f16, else T itself. A kernel that only
// moves or selects values (never rounds them) can work on these.
template <class T>
using storage_t = std::conditional_t<is_float16_v<T>, uint16_t, T>;

#if defined(__AVX512F__)
// The `lanes` of 16 values at src as f32 (exactly); the other lanes are 0 and not read.
inline __m512 load_widened(const float* src, __mmask16 lanes) { return _mm512_maskz_loadu_ps(lanes, src); }
// v's `lanes` stored at dst, each rounded to dst's type once.
inline void store_rounded(float* dst, __m512 v, __mmask16 lanes) { _mm512_mask_storeu_ps(dst, lanes, v); }
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
inline constexpr bool kFloat16Lanes = true;  // the build has the 16-bit lanes below
// bf16 and f16 in AVX-512 lanes (the masked forms of the shifts and conversions: GCC 12's plain
// ones take an "undefined" source that its -Wmaybe-uninitialized flags at every use).
// float_to_bfloat16_bits (core/float16.h) per lane, the bits in each lane's low half: round to
// nearest even, NaN quieted.
inline __m512i bfloat16_lanes(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i high = _mm512_maskz_srli_epi32(0xFFFF, u, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), _mm512_and_si512(high, _mm512_set1_epi32(1)));
  const __m512i bits = _mm512_maskz_srli_epi32(0xFFFF, _mm512_add_epi32(u, bias), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(bits, nan, high, _mm512_set1_epi32(0x40));
}
// float_to_half_bits (core/float16.h) per lane, the bits in each lane's low half: vcvtps2ph rounds
// to nearest even, to Inf from 65520 and into the subnormals as it does; a NaN becomes the quiet
// NaN of its sign, as there (the instruction would keep the top of its payload).
inline __m512i half_lanes(__m512 v) {
  const __m256i halves = _mm512_maskz_cvtps_ph(0xFFFF, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i bits = _mm512_maskz_cvtepu16_epi32(0xFFFF, halves);
  const __m512i sign = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, _mm512_castps_si512(v), 16),
                                        _mm512_set1_epi32(0x8000));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(bits, nan, sign, _mm512_set1_epi32(0x7E00));
}
// The values of bf16 bits held in each lane's low half (exact).
inline __m512 widen_bfloat16_lanes(__m512i bits) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, bits, 16));
}
// half_bits_to_float (core/float16.h) of 16 halves, exactly: vcvtph2ps sets a NaN's quiet bit,
// which the scalar leaves as the half had it (bit 9, the float's bit 22), so a signalling NaN
// gets that bit cleared again (and the conversion raises no invalid-operation flag for it).
inline __m512 widen_half_lanes(__m256i halves) {
  const __m512 v = _mm512_maskz_cvt_roundph_ps(0xFFFF, halves, _MM_FROUND_NO_EXC);
  const __m512i bits = _mm512_maskz_cvtepu16_epi32(0xFFFF, halves);
  const __m512i quiet_bit = _mm512_set1_epi32(0x00400000);
  const __m512i half_quiet_bit = _mm512_maskz_slli_epi32(0xFFFF, bits, 13);  // in the float's place
  const __m512i set_by_widening = _mm512_maskz_andnot_epi32(0xFFFF, half_quiet_bit, quiet_bit);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_castsi512_ps(
      _mm512_mask_xor_epi32(_mm512_castps_si512(v), nan, _mm512_castps_si512(v), set_by_widening));
}

inline __m512 load_widened(const BFloat16* src, __mmask16 lanes) {
  return widen_bfloat16_lanes(_mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(lanes, src)));
}
inline void store_rounded(BFloat16* dst, __m512 v, __mmask16 lanes) {
  _mm512_mask_cvtepi32_storeu_epi16(dst, lanes, bfloat16_lanes(v));
}
inline __m512 load_widened(const Half* src, __mmask16 lanes) {
  return widen_half_lanes(_mm256_maskz_loadu_epi16(lanes, src));
}
inline void store_rounded(Half* dst, __m512 v, __mmask16 lanes) {
  _mm512_mask_cvtepi32_storeu_epi16(dst, lanes, half_lanes(v));
}
#else
inline constexpr bool kFloat16Lanes = false;
#endif

template <int N, class T>
inline void load_bits(const T* src, storage_t<T>* bits) {
  std::memcpy(bits, src, N * sizeof(T));
}

template <int N, class T>
inline void store_bits(const storage_t<T>* bits, T* dst) {
  std::memcpy(dst, bits, N * sizeof(T));
}

// Note [f16 blocks in lanes]: GCC 12 vectorises the scalar f16 conversions of core/float16.h
// (Note [Branch-free f16 rounding]) at about 60 instructions per 16 elements each way, which made
// an f16 relu cost 3x a bf16 one; blocks of 16 f16 values convert with vcvtph2ps / vcvtps2ph
// instead (widen_half_lanes, half_lanes: the scalar's bits, NaNs included) where the build has
// them (kFloat16Lanes), and blocks of bf16 by the same lanes' shifts (widen_bfloat16_lanes,
// bfloat16_lanes), so that the elementwise loops' blocks convert both in registers.

// The values of N stored elements (exact).
template <int N, class T>
inline void widen_bits(const storage_t<T>* bits, compute_t<T>* v) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (is_float16_v<T> && N % 16 == 0) {  // Note [f16 blocks in lanes]
    for (int j = 0; j < N; j += 16) {
      const __m256i stored = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + j));
      if constexpr (std::is_same_v<T, Half>) _mm512_storeu_ps(v + j, widen_half_lanes(stored));
      else _mm512_storeu_ps(v + j, widen_bfloat16_lanes(_mm512_maskz_cvtepu16_epi32(0xFFFF, stored)));
    }
    return;
  }
#endif
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

// The stored form of N values, each rounded once (as T(v[j]) would).
template <int N, class T>
inline void narrow_bits(const compute_t<T>* v, storage_t<T>* bits) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (is_float16_v<T> && N % 16 == 0) {  // Note [f16 blocks in lanes]
    for (int j = 0; j < N; j += 16) {
      const __m512 values = _mm512_loadu_ps(v + j);
      const __m512i lanes = std::is_same_v<T, Half> ? half_lanes(values) : bfloat16_lanes(values);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(bits + j), _mm512_maskz_cvtepi32_epi16(0xFFFF, lanes));
    }
    return;
  }
#endif
  for (int j = 0; j < N; ++j) {
    if constexpr (std::is_same_v<T, BFloat16>) bits[j] = float_to_bfloat16_bits(v[j]);
    else if constexpr (std::is_same_v<T, Half>) bits[j] = float_to_half_bits(v[j]);
    else bits[j] = v[j];
  }
}

template <int N, class T>
inline void store_block(const compute_t<T>* v, T* dst) {
  storage_t<T> bits[N];
  narrow_bits<N, T>(v, bits);
  store_bits<N>(bits, dst);
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
