// 2-D pooling on the CPU. Every kernel works on whole (n, c) planes, one task per group of
// planes, so the backward passes scatter into memory that only their own task writes: no
// atomics, deterministic sums.
// Average windows follow Note [Separable windows] (ops/pool_windows.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/parallel.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/cpu/window_sums.h"
#include "ops/kernels.h"
#include "ops/pool_windows.h"

namespace ember::cpu {
namespace {

constexpr int64_t kElementsPerTask = 1 << 15;

// Runs fn(plane) for every plane, in parallel tasks of about kElementsPerTask elements.
template <class F>
void for_each_plane(int64_t planes, int64_t plane_elements, F&& fn) {
  parallel_for(0, planes, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, plane_elements)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) fn(p);
               });
}

template <class T, class Spans>
void average_forward(const Tensor& x, const Tensor& y, Spans rows, Spans cols, bool count_pad) {
  const int64_t H = x.size(1), W = x.size(2), Ho = y.size(1), Wo = y.size(2);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  for_each_plane(x.size(0), H * W, [&](int64_t p) {
    const T* in = xp + p * H * W;
    T* out = yp + p * Ho * Wo;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const Span r = rows(oh);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Span c = cols(ow);
        const T sum = window_sum(in, W, r, c);
        const int64_t count = window_count(r, c, count_pad);
        out[oh * Wo + ow] = count > 0 ? sum / T(count) : T(0);
      }
    }
  });
}

template <class T, class Spans>
void average_backward(const Tensor& dy, const Tensor& dx, Spans rows, Spans cols, bool count_pad) {
  const int64_t H = dx.size(1), W = dx.size(2), Ho = dy.size(1), Wo = dy.size(2);
  const T* dyp = dy.data<T>();
  T* dxp = dx.data<T>();
  for_each_plane(dx.size(0), H * W, [&](int64_t p) {
    const T* g = dyp + p * Ho * Wo;
    T* out = dxp + p * H * W;
    std::fill(out, out + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const Span r = rows(oh);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Span c = cols(ow);
        const int64_t count = window_count(r, c, count_pad);
        if (count <= 0) continue;
        const T share = g[oh * Wo + ow] / T(count);
        for (int64_t h = r.begin; h < r.end; ++h)
          for (int64_t w = c.begin; w < c.end; ++w) out[h * W + w] += share;
      }
    }
  });
}

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

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// Note [16-bit max pool backward in registers]: for bf16 and f16 gradients with window offsets,
// GCC 12 vectorised the selecting loop above poorly (16-bit lanes from 8-bit offsets: the bf16
// backward took 26% of a bf16 MNIST step, against 11% for the f32 one, perf at batch 64). Here
// each of the n outputs is a 32-bit lane holding its gradient; the two dx values of its window in
// one row are the low and high halves of a 32-bit lane (little-endian), so the winning candidate
// picks the half: top = (pick == 0 ? g : 0) | (pick == 1 ? g << 16 : 0), bottom likewise with 2
// and 3. Bits are moved, never rounded: the same values as the loop.
inline void max_block_2x2_backward_16_bit(const void* dy, const uint8_t* offsets, int n, void* d0, void* d1) {
  const __mmask16 lanes = __mmask16((1u << n) - 1);
  const __m512i g = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(lanes, dy));
  const __m512i picks = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_maskz_loadu_epi8(lanes, offsets));
  const auto row = [&](int left) {
    const __mmask16 l = _mm512_cmpeq_epi32_mask(picks, _mm512_set1_epi32(left));
    const __mmask16 r = _mm512_cmpeq_epi32_mask(picks, _mm512_set1_epi32(left + 1));
    return _mm512_or_si512(_mm512_maskz_mov_epi32(l, g), _mm512_maskz_slli_epi32(r, g, 16));
  };
  _mm512_mask_storeu_epi32(d0, lanes, row(0));
  _mm512_mask_storeu_epi32(d1, lanes, row(2));
}
#endif

template <class T, class Argmax, class I = typename Argmax::type>
void max_row_2x2_backward(const T* dy, const I* idx, int64_t first, int64_t W, int64_t Wo, T* d0, T* d1) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (sizeof(T) == 2 && std::is_same_v<Argmax, WindowOffset>) {
    for (int64_t ow = 0; ow < Wo; ow += kPoolBlock)
      max_block_2x2_backward_16_bit(dy + ow, idx + ow, int(std::min<int64_t>(kPoolBlock, Wo - ow)), d0 + 2 * ow,
                                    d1 + 2 * ow);
    return;
  }
#endif
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

// Any other window: window_max's scan, its flat index encoded per output.
template <class T, class Argmax, class I = typename Argmax::type>
void max_plane(const Pool2dGeometry& g, const T* in, T* out, I* idx) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const Span r = rows(oh);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      int64_t flat;
      window_max(in, g.in_w, r, cols(ow), out[oh * g.out_w + ow], flat);
      idx[oh * g.out_w + ow] =
          Argmax::encode(flat, g.in_w, oh * g.stride_h - g.pad_h, ow * g.stride_w - g.pad_w, g.kernel_w);
    }
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// Note [Max pool by lanes]: windows other than 2x2 stride 2 (the ResNet stem's 3x3 stride 2,
// padding 1) took max_plane one output at a time, with integer divisions to encode each offset:
// 2.3% of an SE-ResNeXt-50 training step at batch 8 (perf) for that one layer. Here 16 outputs
// of a row go at once: each tap of the window is a vector of the 16 inputs it reads (padding and
// lanes past the row's end masked off, read as -inf: they never win), folded by window_max's
// rule in its order (row by row, replaced on > or NaN), and the winner's code, window offset or
// plane index, is kept in an int lane. So the maxima and their positions are window_max's, and
// the lanes start from its initial position, the first cell inside the window. A tap's inputs
// are one masked load at stride 1, two loads and a permute that keeps the even elements at
// stride 2, and a gather at other strides; the loads' masks are set up once per block of columns
// (the block then walks down the plane, which stays in L2), and a stride-2 tap whose 32 elements
// are all inside the row, every block but a row's first and last, loads them without masks:
// masked loads were most of the time. Measured (2026-12-06, Zen 5, the stem's pool at batch 8, u8
// offsets, 2 threads, poolprobe, min of 30): forward 24.2 ms one output at a time, 5.8 ms with a
// gather per tap, 4.5 ms with masked loads and permutes, 2.1 ms with plain interior loads.
constexpr int64_t kMaxLaneTaps = 16;  // window widths the lanes take (masks kept per tap)

inline bool lanes_suit(const Pool2dGeometry& g) {
  return g.in_h * g.in_w < (int64_t(1) << 31) && g.kernel_w <= kMaxLaneTaps;
}

// Loads of the 16 inputs of one tap for a block of outputs, set up once per block and used for
// every row of the window: lane i reads row[first + kStride i] (kStride 0: any stride, a gather
// of `column`), -inf where `valid` is off.
template <int kStride>
struct TapLoad {
  int64_t first;
  __m512i column;
  __mmask16 valid, low, high;  // stride 2: the elements first .. first + 31 inside the row
  bool interior;
  TapLoad() = default;
  TapLoad(int64_t first_column, __m512i columns, __mmask16 live_lanes, int64_t W)
      : first(first_column), column(columns), valid(live_lanes) {
    auto inside = [&](int64_t from) -> __mmask16 {
      const int64_t begin = std::clamp<int64_t>(-from, 0, 16), end = std::clamp<int64_t>(W - from, 0, 16);
      return __mmask16(((1u << end) - 1) & ~((1u << begin) - 1));
    };
    low = inside(first);
    high = inside(first + 16);
    interior = valid == 0xFFFF && low == 0xFFFF && high == 0xFFFF;
  }
  // The address of row[offset], which a masked load may take outside the row (its lanes there
  // off): computed as an integer, since a pointer outside its array is undefined behaviour.
  static const float* address(const float* row, int64_t offset) {
    return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + offset * int64_t(sizeof(float)));
  }
  __m512 operator()(const float* row) const {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    if constexpr (kStride == 1) {
      return _mm512_mask_loadu_ps(neg_inf, valid, address(row, first));
    } else if constexpr (kStride == 2) {  // lane i keeps element 2 i
      const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      if (interior)  // all 32 elements inside the row, every lane live
        return _mm512_permutex2var_ps(_mm512_loadu_ps(row + first), evens, _mm512_loadu_ps(row + first + 16));
      const __m512 a = _mm512_mask_loadu_ps(neg_inf, low, address(row, first));
      const __m512 b = _mm512_mask_loadu_ps(neg_inf, high, address(row, first + 16));
      return _mm512_mask_mov_ps(neg_inf, valid, _mm512_permutex2var_ps(a, evens, b));
    } else {
      return _mm512_mask_i32gather_ps(neg_inf, valid, column, row, 4);
    }
  }
};

template <class Argmax, int kStride>
void max_plane_in_lanes(const Pool2dGeometry& g, const float* in, float* out, typename Argmax::type* idx) {
  constexpr bool kOffsets = std::is_same_v<Argmax, WindowOffset>;
  const FixedSpans rows = row_spans(g);
  const int64_t W = g.in_w, Wo = g.out_w, kw = g.kernel_w;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i zero = _mm512_setzero_si512(), width = _mm512_set1_epi32(int32_t(W));
  TapLoad<kStride> taps[kMaxLaneTaps];
  for (int64_t ow0 = 0; ow0 < Wo; ow0 += 16) {
    const __mmask16 live = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(int32_t(std::min<int64_t>(16, Wo - ow0))));
    // Each lane's window starts at padded column w0 = ow * stride - pad.
    const int64_t first = ow0 * g.stride_w - g.pad_w;
    const __m512i w0 = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(int32_t(g.stride_w))),
                                        _mm512_set1_epi32(int32_t(first)));
    for (int64_t k = 0; k < kw; ++k) {
      const __m512i column = _mm512_add_epi32(w0, _mm512_set1_epi32(int32_t(k)));
      const __mmask16 valid = live & _mm512_cmpge_epi32_mask(column, zero) & _mm512_cmplt_epi32_mask(column, width);
      taps[k] = TapLoad<kStride>(first + k, column, valid, W);
    }
    const __m512i first_column = _mm512_maskz_max_epi32(0xFFFF, w0, zero);
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const Span r = rows(oh);
      const int64_t h0 = oh * g.stride_h - g.pad_h;
      __m512i arg = kOffsets ? _mm512_add_epi32(_mm512_set1_epi32(int32_t((r.begin - h0) * kw)),
                                                _mm512_sub_epi32(first_column, w0))
                             : _mm512_add_epi32(_mm512_set1_epi32(int32_t(r.begin * W)), first_column);
      __m512 best = _mm512_set1_ps(-INFINITY);
      for (int64_t h = r.begin; h < r.end; ++h) {
        const float* row = in + h * W;
        for (int64_t k = 0; k < kw; ++k) {
          const __m512 v = taps[k](row);
          const __mmask16 wins =
              taps[k].valid & (_mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
          best = _mm512_mask_mov_ps(best, wins, v);
          const __m512i code = kOffsets ? _mm512_set1_epi32(int32_t((h - h0) * kw + k))
                                        : _mm512_add_epi32(_mm512_set1_epi32(int32_t(h * W)), taps[k].column);
          arg = _mm512_mask_mov_epi32(arg, wins, code);
        }
      }
      _mm512_mask_storeu_ps(out + oh * Wo + ow0, live, best);
      auto* at = idx + oh * Wo + ow0;
      if constexpr (kOffsets) {
        _mm512_mask_cvtepi32_storeu_epi8(at, live, arg);
      } else {
        // The zero-masking forms: GCC 12's plain ones take an "undefined" source that
        // -Wmaybe-uninitialized flags (as in widen_offsets).
        const __m256i low = _mm512_maskz_extracti64x4_epi64(0xF, arg, 0);
        const __m256i high = _mm512_maskz_extracti64x4_epi64(0xF, arg, 1);
        _mm512_mask_storeu_epi64(at, __mmask8(live), _mm512_maskz_cvtepi32_epi64(0xFF, low));
        _mm512_mask_storeu_epi64(at + 8, __mmask8(live >> 8), _mm512_maskz_cvtepi32_epi64(0xFF, high));
      }
    }
  }
}
#endif

template <class T, class Argmax, class I = typename Argmax::type>
void max_plane_backward(const Pool2dGeometry& g, const T* grad, const I* idx, T* out) {
  std::fill(out, out + g.in_h * g.in_w, T(0));
  if constexpr (std::is_same_v<Argmax, WindowOffset>) {
    // A window offset's cell is the window's padded origin plus a step fixed per offset: a table
    // of kernel_h x kernel_w steps instead of a division and a remainder per output (the stem's
    // 3x3 pool at batch 8, `bench ops`: 4.3-4.8 -> 1.9-2.1 ms on one thread).
    int64_t step[kMaxPoolWindowOffsetCells];
    for (int64_t v = 0; v < g.kernel_h * g.kernel_w; ++v) step[v] = v / g.kernel_w * g.in_w + v % g.kernel_w;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const int64_t origin = (oh * g.stride_h - g.pad_h) * g.in_w - g.pad_w, i0 = oh * g.out_w;
      for (int64_t ow = 0; ow < g.out_w; ++ow) out[origin + ow * g.stride_w + step[idx[i0 + ow]]] += grad[i0 + ow];
    }
    return;
  }
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const int64_t i = oh * g.out_w + ow;
      out[Argmax::decode(idx[i], g.in_w, oh * g.stride_h - g.pad_h, ow * g.stride_w - g.pad_w, g.kernel_w)] += grad[i];
    }
}

bool is_2x2_stride_2(const Pool2dGeometry& g) {
  return g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0;
}

template <class T, class Argmax>
void max_forward_typed(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  using I = typename Argmax::type;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  I* ip = indices.data<I>();
  const bool two_by_two = is_2x2_stride_2(g);
  for_each_plane(g.planes, in_plane, [&](int64_t p) {
    if (two_by_two)
      return max_plane_2x2<T, Argmax>(xp + p * in_plane, yp + p * out_plane, ip + p * out_plane, g.in_w, g.out_h,
                                      g.out_w);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    if constexpr (std::is_same_v<T, float>) {
      if (lanes_suit(g)) {
        const float* x_plane = xp + p * in_plane;
        if (g.stride_w == 1) return max_plane_in_lanes<Argmax, 1>(g, x_plane, yp + p * out_plane, ip + p * out_plane);
        if (g.stride_w == 2) return max_plane_in_lanes<Argmax, 2>(g, x_plane, yp + p * out_plane, ip + p * out_plane);
        return max_plane_in_lanes<Argmax, 0>(g, x_plane, yp + p * out_plane, ip + p * out_plane);
      }
    }
#endif
    max_plane<T, Argmax>(g, xp + p * in_plane, yp + p * out_plane, ip + p * out_plane);
  });
}

template <class T, class Argmax>
void max_backward_typed(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  using I = typename Argmax::type;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const T* dyp = dy.data<T>();
  const I* ip = indices.data<I>();
  T* dxp = dx.data<T>();
  const bool two_by_two = is_2x2_stride_2(g);
  for_each_plane(g.planes, in_plane, [&](int64_t p) {
    T* out = dxp + p * in_plane;
    const T* grad = dyp + p * out_plane;
    const I* idx = ip + p * out_plane;
    if (two_by_two) max_plane_2x2_backward<T, Argmax>(grad, idx, out, g.in_h, g.in_w, g.out_h, g.out_w);
    else max_plane_backward<T, Argmax>(g, grad, idx, out);
  });
}

// Calls fn(TypeTag<Argmax>) for the encoding of `indices` (Note [Max pool window offsets]).
template <class F>
void dispatch_argmax(const Pool2dGeometry& g, const Tensor& indices, const char* op, F&& fn) {
  if (indices.dtype() == DType::i64) return fn(TypeTag<PlaneIndex>{});
  EMBER_CHECK(indices.dtype() == DType::u8 && g.kernel_h * g.kernel_w <= kMaxPoolWindowOffsetCells, op,
              ": expected i64 plane indices, or u8 window offsets for windows of at most ",
              kMaxPoolWindowOffsetCells, " cells; got ", dtype_name(indices.dtype()), " for a ", g.kernel_h, "x",
              g.kernel_w, " window");
  fn(TypeTag<WindowOffset>{});
}

// Views x (planes, H, W) whatever its rank (the op layer passes contiguous (N, C, H, W)).
Tensor planes_view(const Tensor& t) {
  const int64_t H = t.size(-2), W = t.size(-1);
  return Tensor::view_of(t, {t.numel() / std::max<int64_t>(1, H * W), H, W}, {H * W, W, 1}, t.offset());
}

}  // namespace

// Max pooling also takes bf16 and f16 (Note [Native 16-bit max pooling] in ops/pool.cpp).
void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  dispatch_float_or_16_bit(x.dtype(), "max_pool2d", [&]<class T>(TypeTag<T>) {
    dispatch_argmax(g, indices, "max_pool2d",
                    [&]<class Argmax>(TypeTag<Argmax>) { max_forward_typed<T, Argmax>(g, x, y, indices); });
  });
}

void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  dispatch_float_or_16_bit(dy.dtype(), "max_pool2d_backward", [&]<class T>(TypeTag<T>) {
    dispatch_argmax(g, indices, "max_pool2d_backward",
                    [&]<class Argmax>(TypeTag<Argmax>) { max_backward_typed<T, Argmax>(g, dy, indices, dx); });
  });
}

void avg_pool2d_forward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& x, const Tensor& y) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  dispatch_float(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, count_include_pad);
  });
}

void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  dispatch_float(dy.dtype(), "avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    average_backward<T>(planes_view(dy), planes_view(dx), rows, cols, count_include_pad);
  });
}

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  const AdaptiveSpans rows{x.size(-2), y.size(-2)}, cols{x.size(-1), y.size(-1)};
  dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, false);
  });
}

void adaptive_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  const AdaptiveSpans rows{dx.size(-2), dy.size(-2)}, cols{dx.size(-1), dy.size(-1)};
  dispatch_float(dy.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    average_backward<T>(planes_view(dy), planes_view(dx), rows, cols, false);
  });
}

}  // namespace ember::cpu
