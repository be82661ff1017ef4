// Max pooling's argmax encodings (Note [Max pool window offsets]) and its 2x2 stride-2 passes in
// blocks of 16 outputs (Note [Max pool 2x2], Note [Max pool in blocks]), used by the CPU pooling
// kernels (ops/cpu/pool.cpp):
//   forward  x plane (H, W) -> y (Ho, Wo) = the maximum of each 2x2 window, idx its position;
//   backward dy (Ho, Wo), idx -> dx (H, W): each window's gradient where its maximum was, else 0.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "ops/cpu/float16_blocks.h"

namespace ember::cpu::pool_detail {

// Note [Max pool window offsets]: the position of each window's maximum is kept in one of two
// encodings, chosen by the indices tensor's dtype. PlaneIndex (i64) is the flat index h * W + w in
// the input plane: what max_pool2d_with_indices returns, as in PyTorch. WindowOffset (u8) is the
// position inside the window, (h - h0) * kernel_w + (w - w0) from the window's padded origin
// (h0, w0) = (oh * stride_h - pad_h, ow * stride_w - pad_w): what max_pool2d's autograd node saves
// on the CPU for windows of at most 256 cells. The passes are bound by memory, and an i64 index
// was 8 of the 28 bytes each output moves in each direction (for 2x2 windows in f32: 16 read,
// 4 + 8 written forward; 4 + 8 read, 16 written backward); one byte makes that 21.
// The 2x2 pass works with the winning candidate's number (0..3, row by row), which is its window
// offset. GCC 12 vectorises a loop with one vector size for all its types, so a loop that mixes
// u8 with f32 lanes runs in xmm pieces: the forward keeps the numbers in int lanes and converts
// them in a loop of their own (Note [Offset lanes] for the backward). Measured with Note
// [Partial blocks] too (n 128, 16 channels, 28x28, one thread, alternated with the i64-only code
// before): forward 0.43-0.48 ms against 0.89-0.91, backward 0.26 against 0.45-0.47.
struct PlaneIndex {
  using type = int64_t;
  static int64_t encode(int64_t flat, int64_t, int64_t, int64_t, int64_t) { return flat; }
  static int64_t decode(int64_t v, int64_t, int64_t, int64_t, int64_t) { return v; }
  // The 2x2 pass: candidate `pick` of the window whose corner is at plane index `corner`.
  static int64_t from_pick(int pick, int64_t corner, int64_t W) { return corner + (pick >> 1) * W + (pick & 1); }
  static int pick_of(int64_t v, int64_t corner, int64_t W) {
    const int64_t at = v - corner;
    return at == 0 ? 0 : at == 1 ? 1 : at == W ? 2 : 3;
  }
};

struct WindowOffset {
  using type = uint8_t;
  // flat = h * W + w, inside the window with padded origin (h0, w0) and width kw.
  static uint8_t encode(int64_t flat, int64_t W, int64_t h0, int64_t w0, int64_t kw) {
    return uint8_t((flat / W - h0) * kw + (flat % W - w0));
  }
  static int64_t decode(uint8_t v, int64_t W, int64_t h0, int64_t w0, int64_t kw) {
    return (h0 + v / kw) * W + w0 + v % kw;
  }
  static uint8_t from_pick(int pick, int64_t, int64_t) { return uint8_t(pick); }
  static int pick_of(uint8_t v, int64_t, int64_t) { return v; }
};

// Note [Max pool 2x2]: the 2x2 stride-2 unpadded window (every CNN's downsampling) reads two
// input rows once each and has no padding tests; the general loop handles the rest. Its
// windows do not overlap, so the backward writes every input element once (the gradient of the
// window's maximum, or 0) instead of zero-filling the plane and scattering into it.
// Note [Max pool in blocks]: both passes work on blocks of 16 outputs: the two input rows are
// loaded (widened, for bf16 and f16) into local arrays, and each output picks among its four
// candidates with selects rather than branches, so that GCC turns the loops into vector code
// (the scalar loop with branches took 10% of an MNIST training epoch). The candidates are taken
// in window_max's order with its rule: a later candidate wins if it is greater or NaN.
constexpr int kPoolBlock = 16;

// A candidate's number in an integer lane as wide as the stored value, so that the backward's
// selecting loop has lanes of one width (Note [Offset lanes]).
template <class S>
using PickLane = std::conditional_t<sizeof(S) == 8, int64_t, std::conditional_t<sizeof(S) == 4, int32_t, int16_t>>;

// The largest of one window's four candidates (scan order c0..c3), and in `pick` which one won.
template <class C>
C max_of_four(C c0, C c1, C c2, C c3, int& pick) {
  C best = c0;
  pick = 0;
  const C later[3] = {c1, c2, c3};
  for (int k = 0; k < 3; ++k) {
    const bool wins = later[k] > best || later[k] != later[k];
    best = wins ? later[k] : best;
    pick = wins ? k + 1 : pick;
  }
  return best;
}

// Note [Partial blocks]: a row shorter than a block, or a row's last partial block, is read and
// written under masks by the block's own loops: `k < n ? src[k] : 0` and `if (k < n) dst[k] = v`
// over a fixed length, which GCC turns into masked vector loads and stores (a copy of variable
// length became a call to memmove, which took 8% of an MNIST epoch for rows of 14 and 7
// outputs). Copying the partial block into a buffer and back instead cost a failed store
// forwarding per copy (a masked store read back by a load): a quarter of the row's time.
// bf16 and f16 are moved as their bit patterns (a loop over the Float16 struct stays scalar).
// A whole block (kWhole, n == N) is moved without masks: the masked form of the loops ran the
// forward on 64 MiB 1.35x slower. The two row functions spell out the whole/partial split each:
// routed through one helper taking a lambda, GCC 12's code ran the u8 forward 1.8x and the i64
// backward 9x slower (tried 2026-12-03). The tensors' elements (floats, Float16 structs) are moved as
// the bits S of the same size, through a may_alias type, as memcpy would.
template <class S>
struct Aliasing {
  typedef S __attribute__((__may_alias__)) type;
};

template <int N, bool kWhole, class S>
inline void load_prefix(const void* src, int n, S* dst) {
  if constexpr (kWhole) {
    std::memcpy(dst, src, N * sizeof(S));
  } else {
    const auto* from = static_cast<const typename Aliasing<S>::type*>(src);
    for (int k = 0; k < N; ++k) dst[k] = k < n ? from[k] : S(0);
  }
}

template <int N, bool kWhole, class S>
inline void store_prefix(const S* src, int n, void* dst) {
  if constexpr (kWhole) {
    std::memcpy(dst, src, N * sizeof(S));
  } else {
    auto* to = static_cast<typename Aliasing<S>::type*>(dst);
    for (int k = 0; k < N; ++k)
      if (k < n) to[k] = src[k];
  }
}

// One block of n <= kPoolBlock outputs: top and bottom are the windows' two input rows (2 n
// values each); `first` is the plane index of top[0], W the plane's width.
// The maximum is selected as stored (its bits), so bf16 and f16 need no rounding.
template <class T, class Argmax, bool kWhole>
void max_block_2x2(const T* top, const T* bottom, int n, int64_t first, int64_t W, T* out, typename Argmax::type* idx) {
  using C = compute_t<T>;
  using S = storage_t<T>;
  S tb[2 * kPoolBlock], bb[2 * kPoolBlock], best[kPoolBlock];
  C t[2 * kPoolBlock], b[2 * kPoolBlock];
  load_prefix<2 * kPoolBlock, kWhole>(top, 2 * n, tb);
  load_prefix<2 * kPoolBlock, kWhole>(bottom, 2 * n, bb);
  widen_bits<2 * kPoolBlock, T>(tb, t);
  widen_bits<2 * kPoolBlock, T>(bb, b);
  int picks[kPoolBlock];
  for (int j = 0; j < kPoolBlock; ++j) {
    int pick;
    (void)max_of_four(t[2 * j], t[2 * j + 1], b[2 * j], b[2 * j + 1], pick);
    const S row0 = pick == 0 ? tb[2 * j] : tb[2 * j + 1], row1 = pick == 2 ? bb[2 * j] : bb[2 * j + 1];
    best[j] = pick < 2 ? row0 : row1;
    picks[j] = pick;
  }
  store_prefix<kPoolBlock, kWhole>(best, n, out);
  typename Argmax::type at[kPoolBlock];
  for (int j = 0; j < kPoolBlock; ++j) at[j] = Argmax::from_pick(picks[j], first + 2 * j, W);
  store_prefix<kPoolBlock, kWhole>(at, n, idx);
}

// One output row: r0, r1 are the windows' input rows, `first` the plane index of r0[0].
template <class T, class Argmax, class I = typename Argmax::type>
void max_row_2x2(const T* r0, const T* r1, int64_t first, int64_t W, int64_t Wo, T* out, I* idx) {
  int64_t ow = 0;
  for (; ow + kPoolBlock <= Wo; ow += kPoolBlock)
    max_block_2x2<T, Argmax, true>(r0 + 2 * ow, r1 + 2 * ow, kPoolBlock, first + 2 * ow, W, out + ow, idx + ow);
  if (ow < Wo)
    max_block_2x2<T, Argmax, false>(r0 + 2 * ow, r1 + 2 * ow, int(Wo - ow), first + 2 * ow, W, out + ow, idx + ow);
}

template <class T, class Argmax, class I = typename Argmax::type>
void max_plane_2x2(const T* in, T* out, I* idx, int64_t W, int64_t Ho, int64_t Wo) {
  for (int64_t oh = 0; oh < Ho; ++oh)
    max_row_2x2<T, Argmax>(in + 2 * oh * W, in + (2 * oh + 1) * W, 2 * oh * W, W, Wo, out + oh * Wo, idx + oh * Wo);
}

// Widens n <= kPoolBlock window offsets to lanes of the gradient's width (0 past n).
// Note [Offset lanes]: GCC 12 vectorises a loop with one vector size for every type in it, so a
// loop from 16 u8 to 16 int32 lanes used 4 xmm registers and stored them where the next loop read
// one zmm register: a failed store forwarding that took 44% of the u8 backward. One conversion
// instruction per register avoids it; an i64 index is decoded in the selecting loop itself, which
// GCC vectorises well.
template <class Lane>
void widen_offsets(const uint8_t* src, int n, Lane* dst) {
  static_assert(kPoolBlock == 16);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // The zero-masking forms of the conversions: GCC 12's plain ones take an "undefined" source
  // that its -Wuninitialized flags.
  const __m128i v = _mm_maskz_loadu_epi8(__mmask16((1u << n) - 1), src);
  if constexpr (sizeof(Lane) == 8) {
    _mm512_storeu_si512(dst, _mm512_maskz_cvtepu8_epi64(0xFF, v));
    _mm512_storeu_si512(dst + 8, _mm512_maskz_cvtepu8_epi64(0xFF, _mm_srli_si128(v, 8)));
  } else if constexpr (sizeof(Lane) == 4) {
    _mm512_storeu_si512(dst, _mm512_maskz_cvtepu8_epi32(0xFFFF, v));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_maskz_cvtepu8_epi16(0xFFFF, v));
  }
#else
  for (int j = 0; j < kPoolBlock; ++j) dst[j] = j < n ? Lane(src[j]) : Lane(0);
#endif
}

// The backward of one block of n <= kPoolBlock outputs: the dx rows d0, d1 (2 n values each) get
// each window's gradient where its maximum was and 0 elsewhere; `first` is the plane index of d0[0].
// The gradients are moved as bits, ANDed with a mask of the winning candidate (all-zero bits are
// +0 in every float format): with selects GCC 12 made masked stores of the loop and left it scalar.
template <class T, class Argmax, bool kWhole>
void max_block_2x2_backward(const T* dy, const typename Argmax::type* idx, int n, int64_t first, int64_t W, T* d0,
                            T* d1) {
  using Lane = PickLane<storage_t<T>>;
  using Bits = std::make_unsigned_t<Lane>;
  Bits g[kPoolBlock], top[2 * kPoolBlock], bottom[2 * kPoolBlock];
  load_prefix<kPoolBlock, kWhole>(dy, n, g);
  const auto select = [&](auto pick_of) {
    for (int j = 0; j < kPoolBlock; ++j) {
      const Lane picked = pick_of(j);
      const auto where = [&](int pick) { return g[j] & Bits(-Lane(picked == pick)); };
      top[2 * j] = where(0);
      top[2 * j + 1] = where(1);
      bottom[2 * j] = where(2);
      bottom[2 * j + 1] = where(3);
    }
  };
  if constexpr (std::is_same_v<Argmax, WindowOffset>) {
    Lane picks[kPoolBlock];
    widen_offsets(idx, n, picks);
    select([&](int j) { return picks[j]; });
  } else {
    typename Argmax::type at[kPoolBlock];
    load_prefix<kPoolBlock, kWhole>(idx, n, at);
    select([&](int j) { return Lane(Argmax::pick_of(at[j], first + 2 * j, W)); });
  }
  store_prefix<2 * kPoolBlock, kWhole>(top, 2 * n, d0);
  store_prefix<2 * kPoolBlock, kWhole>(bottom, 2 * n, d1);
}

template <class T, class Argmax, class I = typename Argmax::type>
void max_row_2x2_backward(const T* dy, const I* idx, int64_t first, int64_t W, int64_t Wo, T* d0, T* d1) {
  int64_t ow = 0;
  for (; ow + kPoolBlock <= Wo; ow += kPoolBlock)
    max_block_2x2_backward<T, Argmax, true>(dy + ow, idx + ow, kPoolBlock, first + 2 * ow, W, d0 + 2 * ow, d1 + 2 * ow);
  if (ow < Wo)
    max_block_2x2_backward<T, Argmax, false>(dy + ow, idx + ow, int(Wo - ow), first + 2 * ow, W, d0 + 2 * ow,
                                             d1 + 2 * ow);
}

template <class T, class Argmax, class I = typename Argmax::type>
void max_plane_2x2_backward(const T* dy, const I* idx, T* dx, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  for (int64_t oh = 0; oh < Ho; ++oh) {
    T* d0 = dx + 2 * oh * W;
    max_row_2x2_backward<T, Argmax>(dy + oh * Wo, idx + oh * Wo, 2 * oh * W, W, Wo, d0, d0 + W);
    std::fill(d0 + 2 * Wo, d0 + W, T(0));  // an odd width's last column: in no window
    std::fill(d0 + W + 2 * Wo, d0 + 2 * W, T(0));
  }
  std::fill(dx + 2 * Ho * W, dx + H * W, T(0));  // an odd height's last row
}

}  // namespace ember::cpu::pool_detail
