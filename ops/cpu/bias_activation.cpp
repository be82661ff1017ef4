// The backward of `y = act(z + bias)` on the CPU: dz = act'(y) * dy and db = sum of dz over
// every dim but the bias's, in one pass (Note [Epilogue activations] in ops/activation.h).
// With act none and no dz this is the convolution's bias gradient.
//
// Tensors are (outer, C, inner). Tasks own a range of channels, so they never write the same
// db entry; each channel's sum accumulates in double. bf16 and f16 load into float, round dz once
// and sum the rounded dz (what their bf16 / f16 linear and convolution backward hand over).
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

constexpr int64_t kElementsPerTask = 1 << 15;
constexpr int64_t kStretchBytes = 32 << 10;  // Note [Channel stretches]

// dz = act'(y) * dy rounded to T, returned as the value the sum adds.
template <class T, class Act>
compute_t<T> masked(Act act, compute_t<T> dy, T y, T& dz) {
  const T r = T(act.backward(dy, compute_t<T>(y)));
  dz = r;
  return compute_t<T>(r);
}

// Writes dz[i] = act.backward(dy[i], y[i]) (when kWriteDz) for one row of n elements and
// returns their sum, in 16 independent lanes: lane j adds the elements i = j mod 16 of the whole
// blocks in order, then the tail is summed from zero and the lanes added to it in order. On
// AVX-512 the lanes are one register (Note [Row sums in registers]); the portable loop below is
// the fallback, in blocks of 16 (Note [Blocks of 16] in ops/cpu/float16_blocks.h: a per-element
// loop stayed scalar for bf16, and its bias+relu backward took 18% of a bf16 MNIST epoch against
// f32's 7%). dz may be dy itself (Note [Donated gradients]).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// act.backward(g, y) in 16 lanes: ReLU's as a masked move (y <= 0 ? 0 : g, so a NaN y passes g,
// Note [NaN through relu]); other activations lane by lane.
template <class Act>
__m512 backward_lanes(Act act, __m512 g, __m512 y) {
  if constexpr (Act::kIdentity) {
    return g;
  } else if constexpr (std::is_same_v<Act, ActivationFn<Activation::relu>>) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_NLE_UQ), g);
  } else {
    alignas(64) float d[16], yv[16];
    _mm512_store_ps(d, g);
    _mm512_store_ps(yv, y);
    for (int j = 0; j < 16; ++j) d[j] = act.backward(d[j], yv[j]);
    return _mm512_load_ps(d);
  }
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// Stores 16 lanes of dz rounded to T and returns the values stored (what the sum adds).
inline __m512 store_lanes(float* dz, __m512 v) {
  _mm512_storeu_ps(dz, v);
  return v;
}
inline __m512 store_lanes(BFloat16* dz, __m512 v) {
  const __m512i bits = bfloat16_lanes(v);
  _mm512_mask_cvtepi32_storeu_epi16(dz, 0xFFFF, bits);
  return widen_bfloat16_lanes(bits);
}
inline __m512 store_lanes(Half* dz, __m512 v) {
  const __m512i bits = half_lanes(v);
  _mm512_mask_cvtepi32_storeu_epi16(dz, 0xFFFF, bits);
  return widen_half_lanes(_mm512_maskz_cvtepi32_epi16(0xFFFF, bits));
}
#endif

template <bool kWriteDz, class T, class Act>
compute_t<T> masked_row_sum(Act act, const T* dy, const T* y, T* dz, int64_t n) {
  using C = compute_t<T>;
  C lanes[16] = {};
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half> || std::is_same_v<T, float>) {
    // Note [Row sums in registers]: in the portable loop below GCC 12 kept a bf16 block's values
    // in memory and summed them one lane at a time (perf: the bias + ReLU backward took 8.7% of a
    // bf16 MNIST epoch against 3.8% for f32), and it left f32's sum scalar too: 16 vaddss per 64
    // bytes, so the convolution's bias gradient (n32 c128 64x64) read 27 GB/s on one thread and
    // 48 on two, against PyTorch's 74. Here the sum, the rounding and ReLU's backward live in
    // registers. One vector of 16 lanes adds what the loop below would (lane j takes the elements
    // i = j mod 16 in order), so the bits are the same. f16 too: its portable loop took 22% of an
    // f16 MNIST step once the convolutions' forwards ran in f16 (perf, batch 128).
    __m512 sum = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
      __m512 v = load_widened(dy + i, 0xFFFF);
      if constexpr (kWriteDz) v = store_lanes(dz + i, backward_lanes(act, v, load_widened(y + i, 0xFFFF)));
      sum = _mm512_add_ps(sum, v);
    }
    _mm512_storeu_ps(lanes, sum);
  }
#endif
  for (; i + 16 <= n; i += 16) {
    C v[16];
    load_block<16>(dy + i, v);
    if constexpr (kWriteDz) {
      C yv[16];
      load_block<16>(y + i, yv);
      for (int j = 0; j < 16; ++j) v[j] = act.backward(v[j], yv[j]);
      store_block<16>(v, dz + i);
      load_block<16>(dz + i, v);  // the sum adds the rounded values
    }
    for (int j = 0; j < 16; ++j) lanes[j] += v[j];
  }
  C total = 0;
  for (; i < n; ++i) {
    C v = C(dy[i]);
    if constexpr (kWriteDz) v = masked(act, v, y[i], dz[i]);
    total += v;
  }
  for (int j = 0; j < 16; ++j) total += lanes[j];
  return total;
}

template <bool kWriteDz, class T, class Act>
void channel_pass(Act act, int64_t outer, int64_t C, int64_t inner, const T* dy, const T* y, T* dz, T* db) {
  const int64_t per_channel = std::max<int64_t>(1, outer * inner);
  // In the linear layout a task's channels are a run of each row: at least 64 of them, so that
  // two threads never write one cache line of dz and each row visit reads whole lines.
  // Note [Channel stretches]: in the convolution layout a task reads its channels' planes of every
  // image, one stretch per image. Tasks get enough channels for stretches of kStretchBytes, or
  // failing that an even share of the channels per thread (so fewer tasks than Note [Dynamic
  // chunks] would like, where planes are small). With the pool's usual four tasks per thread,
  // MNIST's first layer read stretches of 2 planes (6 KiB), and the pass took 1.2-1.8x as long
  // at 2 threads (n 128, 16 x 28 x 28: 267-363 us against 199-226). Each channel sums its images
  // in order whatever the split: the same bits at any thread count (a test).
  const int64_t plane_bytes = std::max<int64_t>(1, inner * int64_t(sizeof(T)));  // inner may be 0
  const int64_t stretch_channels =
      std::min((kStretchBytes + plane_bytes - 1) / plane_bytes, (C + num_threads() - 1) / num_threads());
  const int64_t min_channels = inner == 1 ? 64 : stretch_channels;
  parallel_for(0, C, std::max(min_channels, kElementsPerTask / per_channel), [&](int64_t c0, int64_t c1) {
    std::vector<double> acc(size_t(c1 - c0), 0.0);
    // Outer index first: a task reads its channels' rows of one outer index as one stretch.
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t base = (o * C + c0) * inner;
      if (inner == 1) {  // the linear layer's layout: one element per (row, channel)
        for (int64_t c = 0; c < c1 - c0; ++c) {
          compute_t<T> v = compute_t<T>(dy[base + c]);
          if constexpr (kWriteDz) v = masked(act, v, y[base + c], dz[base + c]);
          acc[size_t(c)] += double(v);
        }
        continue;
      }
      for (int64_t c = 0; c < c1 - c0; ++c) {
        const int64_t at = base + c * inner;
        acc[size_t(c)] += double(masked_row_sum<kWriteDz>(act, dy + at, kWriteDz ? y + at : nullptr,
                                                           kWriteDz ? dz + at : nullptr, inner));
      }
    }
    for (int64_t c = c0; c < c1; ++c) db[c] = T(acc[size_t(c - c0)]);
  });
}

// Without a bias gradient the pass is elementwise.
template <class T, class Act>
void mask_only(Act act, int64_t n, const T* dy, const T* y, T* dz) {
  parallel_for(0, n, kElementsPerTask, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) (void)masked(act, compute_t<T>(dy[i]), y[i], dz[i]);
  });
}

}  // namespace

void bias_activation_backward(Activation act, const Tensor& dy, const Tensor& y, const Tensor& dz,
                              const Tensor& db) {
  auto typed = [&]<class T>(TypeTag<T>) {
    const int64_t outer = dy.size(0), C = dy.size(1), inner = dy.size(2);
    const T* yp = data_or_null<T>(y);
    T* dzp = data_or_null<T>(dz);
    visit_activation(act, [&](auto fn) {
      if (!db.defined()) {
        if (dzp) mask_only(fn, dy.numel(), dy.data<T>(), yp, dzp);
      } else if (dzp) {
        channel_pass<true>(fn, outer, C, inner, dy.data<T>(), yp, dzp, db.data<T>());
      } else {
        channel_pass<false>(fn, outer, C, inner, dy.data<T>(), yp, dzp, db.data<T>());
      }
    });
  };
  dispatch_float_or_16_bit(dy.dtype(), "bias_activation_backward", typed);
}

}  // namespace ember::cpu
