// Batch-norm kernels over an (N, C, S) contiguous view: channel c's values are N runs of S
// contiguous elements. Note [Two-pass statistics]: the mean is computed first and the variance
// from the centred values, both accumulated in double, so a channel whose values sit far from
// zero (mean 1e4, spread 1) does not lose its variance to cancellation as E[x^2] - E[x]^2 would.
//
// Activations may be bf16/f16 with f32 per-channel tensors (Note [16-bit batch norm] in
// ops/norm.cpp): a kernel reads T, computes in P = compute_t<T> (f32 for 16-bit) and rounds
// each output once; the sums stay double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/parallel.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/cpu/vec_math.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

struct Planes {
  int64_t N, C, S;
  int64_t count() const { return N * S; }  // values per channel
};

Planes planes_of(const Tensor& x) { return {x.size(0), x.size(1), x.size(2)}; }

// Element i of p as compute_t<T>, through its bit pattern for bf16/f16 (Note [Blocks of 16]:
// the Float16 struct's own conversion kept loops scalar).
template <class T>
compute_t<T> value_at(const T* p, int64_t i) {
  storage_t<T> bits;
  std::memcpy(&bits, p + i, sizeof bits);
  compute_t<T> v;
  widen_bits<1, T>(&bits, &v);
  return v;
}

// The elementwise passes below load 16 values at a time into compute_t<T>, compute, and round
// and store 16 (Note [Blocks of 16]); a per-element T(...) store kept the 16-bit loops scalar.

// y[s] = T(fn(x[s] * a + shift)) for s < n.
template <class T, class Fn>
void normalize_run(const T* x, T* y, int64_t n, compute_t<T> a, compute_t<T> shift, Fn fn) {
  using C = compute_t<T>;
  int64_t s = 0;
  for (; s + 16 <= n; s += 16) {
    C v[16];
    load_block<16>(x + s, v);
    for (int j = 0; j < 16; ++j) v[j] = fn(v[j] * a + shift);
    store_block<16>(v, y + s);
  }
  for (; s < n; ++s) y[s] = T(fn(value_at(x, s) * a + shift));
}

// dx[s] = T(f(g[s], y[s], x[s])) for s < n; y may be null (f then ignores its second argument).
template <class T, class F>
[[gnu::always_inline]] inline void dx_run(const T* g, const T* y, const T* x, T* dx, int64_t n, F f) {
  using C = compute_t<T>;
  int64_t s = 0;
  for (; s + 16 <= n; s += 16) {
    C gv[16], yv[16] = {}, xv[16], r[16];
    load_block<16>(g + s, gv);
    if (y) load_block<16>(y + s, yv);
    load_block<16>(x + s, xv);
    for (int j = 0; j < 16; ++j) r[j] = f(gv[j], yv[j], xv[j]);
    store_block<16>(r, dx + s);
  }
  for (; s < n; ++s) dx[s] = T(f(value_at(g, s), y ? value_at(y, s) : C(0), value_at(x, s)));
}

// Note [Statistics in memory order]: channel c's values are N runs of S, C S values apart. A
// channel at a time walked memory in strides, and lane_sum combined its 16 lanes at the end of
// every run: at S = 16 (4 x 4 planes) each run was half a cache line and one block of 16, and the
// statistics of 512 such channels at batch 64 took as long in bf16 as in f32, with half the bytes.
// Instead a block of adjacent channels (at most kStatisticsBlockValues values, so that the second
// pass finds them in L2) is summed image by image, each image's runs of the block one contiguous
// stretch, and each channel keeps its 16 lanes (Note [Statistics in lanes]) across all its runs,
// combined once. Only the order of the double sums changed (and the squares are fused multiply-adds
// in the registers, as -ffp-contract=fast had made them in the loops); the mean and invstd, rounded
// to f32, kept their bits on every shape below. Measured with Note [Batch-norm statistics in
// registers] (2026-12-06, Zen 5, 2 threads, a scratch probe calling cpu::batch_norm_stats,
// medians of 100 calls, us, for (N, C, S)):
//   bf16 (64, 64, 1024) 707 -> 429-445, (64, 128, 256) 396 -> 200, (64, 256, 64) 306 -> 106-120,
//        (64, 512, 16) 245 -> 58-61, (8, 256, 3136) 1213 -> 692-762;
//   f32  (64, 256, 64) 174 -> 92, (64, 512, 16) 221 -> 57-58.
constexpr int64_t kStatisticsBlockValues = int64_t(1) << 15, kStatisticsBlockChannels = 64;

// Channels per block: as many as hold kStatisticsBlockValues values, at least one.
int64_t statistics_block(const Planes& p) {
  return std::clamp<int64_t>(kStatisticsBlockValues / std::max<int64_t>(p.count(), 1), 1, kStatisticsBlockChannels);
}

// Grain for loops over channels: aim for ~32K elements of work per chunk.
int64_t channel_grain(const Planes& p) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(p.count(), 1)); }

// Note [Statistics in lanes]: the sums stay in double (Note [Two-pass statistics]), but with one
// running double each element waits for the previous add (4 cycles): batch norm's statistics
// and backward sums were a fifth of an SE-ResNeXt training step. Independent partial sums (16
// lanes per sum, lane j adding the values 16 i + j of each run, combined as vec_math.h's
// combine_lanes does) stay in vector registers; only the order of the double sums changes.

#if defined(__AVX512F__) && defined(__AVX512VL__)
// Note [Batch-norm backward in registers]: GCC 12 left the f32 identity and relu forms of the
// loops below partly scalar: the sums converted each value to double one at a time, and the dx
// pass ran in xmm and ymm pieces through the stack (perf annotate, an SE-ResNeXt-50 training step,
// where batch norm's backward was 11% of the time). Written with AVX-512 intrinsics, 16 values
// stay in two registers of doubles per sum and one of floats for dx. The sums keep the 16
// lanes of Note [Statistics in lanes], each adding the same values in the same order, and the
// results kept their bits (a hash of dx, dweight, dbias over four SE-ResNeXt shapes). Measured
// (2026-12-06, Zen 5, 2 threads, bnprobe: backward through autograd at batch 8, alternated):
// 256 channels of 56 x 56 without activation 7.8 -> 3.1-3.2 ms, with relu 6.1 -> 3.8-4.0; 1024
// of 14 x 14 2.0 -> 0.7-0.8; 2048 of 7 x 7 with relu 0.67-0.75 -> 0.53-0.59.
// Note [bf16 batch-norm backward in registers]: bf16 takes the same registers, its values
// widened exactly as they load and dx rounded once as it is stored. Left to the loops, its
// backward took 27% of a bf16 se_resnext_cifar training step against 13% for f32 (perf, batch 64).
constexpr bool kBatchNormLanes = true;

// Whether T's values load into these registers: f32, and bf16 where AVX-512 has 16-bit lanes
// (Note [bf16 batch-norm backward in registers]).
#if defined(__AVX512BW__)
template <class T>
constexpr bool kLaneType = std::is_same_v<T, float> || std::is_same_v<T, BFloat16>;
#else
template <class T>
constexpr bool kLaneType = std::is_same_v<T, float>;
#endif

// 8 values as floats (bf16 widened exactly).
inline __m256 load8(const float* v) { return _mm256_loadu_ps(v); }
#if defined(__AVX512BW__)
inline __m256 load8(const BFloat16* v) {
  const __m256i bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16));
}
#endif

// The gradient of 8 normalised values: g, or g where !(y <= 0) (relu_backward_masked's rule: a
// NaN y keeps g) and +0 elsewhere.
template <bool kRelu, class T>
__m256 activated_grad8(const T* g, const T* y) {
  const __m256 gv = load8(g);
  if constexpr (!kRelu) return gv;
  else return _mm256_maskz_mov_ps(_mm256_cmp_ps_mask(load8(y), _mm256_setzero_ps(), _CMP_NLE_UQ), gv);
}

// A channel's two sums in 16 double lanes each (lane j: element 16 i + j of every run, in
// registers j / 8), the whole blocks of 16 of each run (the zero-masking conversions: GCC 12's
// plain ones take an "undefined" source that -Wmaybe-uninitialized flags).
template <bool kRelu>
struct LaneSums {
  __m512d g[2], gx[2];
  // The lanes so far: lanes_g[j] and lanes_gx[j] for lane j.
  LaneSums(const double* lanes_g, const double* lanes_gx) {
    for (int half = 0; half < 2; ++half) {
      g[half] = _mm512_loadu_pd(lanes_g + 8 * half);
      gx[half] = _mm512_loadu_pd(lanes_gx + 8 * half);
    }
  }
  // Adds the whole blocks of a run of n values; returns the values it took.
  template <class T>
  int64_t add(const T* grad, const T* y, const T* x, int64_t n, double mu) {
    const __m512d mean = _mm512_set1_pd(mu);
    int64_t s = 0;
    for (; s + 16 <= n; s += 16)
      for (int half = 0; half < 2; ++half) {
        const int64_t at = s + 8 * half;
        const __m512d gd = _mm512_maskz_cvtps_pd(0xFF, activated_grad8<kRelu>(grad + at, y + at));
        g[half] = _mm512_add_pd(g[half], gd);
        const __m512d xd = _mm512_maskz_cvtps_pd(0xFF, load8(x + at));
        gx[half] = _mm512_fmadd_pd(gd, _mm512_sub_pd(xd, mean), gx[half]);
      }
    return s;
  }
  void store(double* lanes_g, double* lanes_gx) const {
    for (int half = 0; half < 2; ++half) {
      _mm512_storeu_pd(lanes_g + 8 * half, g[half]);
      _mm512_storeu_pd(lanes_gx + 8 * half, gx[half]);
    }
  }
};

// Note [Batch-norm statistics in registers]: the statistics' sums, left to the compiler, ran in
// ymm registers, four doubles at a time, and bf16 ran slower than f32 (perf: batch_norm_stats 8%
// of a bf16 se_resnext_cifar training step, 5.6% of an f32 one). Here a channel's 16 lanes of
// doubles (Note [Statistics in lanes]) are two registers of eight while a run is added.
// Adds the whole blocks of 16 of a run of n values to a channel's 16 lanes (lanes[j]: the
// values 16 i + j), x or, for kSquares, (x - mu)^2; returns the values it took.
template <bool kSquares, class T>
int64_t add_run_to_lanes(const T* v, int64_t n, double mu, double* lanes) {
  __m512d acc[2] = {_mm512_loadu_pd(lanes), _mm512_loadu_pd(lanes + 8)};
  const __m512d mean = _mm512_set1_pd(mu);
  int64_t s = 0;
  for (; s + 16 <= n; s += 16)
    for (int half = 0; half < 2; ++half) {
      const __m512d x = _mm512_maskz_cvtps_pd(0xFF, load8(v + s + 8 * half));
      if constexpr (kSquares) {
        const __m512d d = _mm512_sub_pd(x, mean);
        acc[half] = _mm512_fmadd_pd(d, d, acc[half]);
      } else {
        acc[half] = _mm512_add_pd(acc[half], x);
      }
    }
  _mm512_storeu_pd(lanes, acc[0]);
  _mm512_storeu_pd(lanes + 8, acc[1]);
  return s;
}

// dx for the whole blocks of 16 of a run of n values (dx = g k - (x - mean) a + b in training,
// g k in evaluation), rounded once for bf16; returns the values it wrote.
template <bool kRelu, class T>
int64_t dx16(const T* g, const T* y, const T* x, T* dx, int64_t n, bool training, float mean, float k, float a,
             float b) {
  const __m512 kv = _mm512_set1_ps(k), av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b), mv = _mm512_set1_ps(mean);
  int64_t s = 0;
  for (; s + 16 <= n; s += 16) {
    __m512 gm = load_widened(g + s, 0xFFFF);
    if constexpr (kRelu)
      gm = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(load_widened(y + s, 0xFFFF), _mm512_setzero_ps(), _CMP_NLE_UQ), gm);
    __m512 r = _mm512_mul_ps(gm, kv);
    if (training)
      r = _mm512_add_ps(_mm512_sub_ps(r, _mm512_mul_ps(_mm512_sub_ps(load_widened(x + s, 0xFFFF), mv), av)), bv);
    store_rounded(dx + s, r, 0xFFFF);
  }
  return s;
}
#else
constexpr bool kBatchNormLanes = false;
// Never called (kBatchNormLanes is false): they let the kernel below name the register forms
// without guards of its own.
template <class T>
constexpr bool kLaneType = false;
template <bool kRelu>
struct LaneSums {
  LaneSums(const double*, const double*) {}
  template <class T>
  int64_t add(const T*, const T*, const T*, int64_t, double) { return 0; }
  void store(double*, double*) const {}
};
template <bool kRelu, class T>
int64_t dx16(const T*, const T*, const T*, T*, int64_t, bool, float, float, float, float) {
  return 0;
}
template <bool kSquares, class T>
int64_t add_run_to_lanes(const T*, int64_t, double, double*) {
  return 0;
}
#endif

// batch_norm_backward for one dtype and activation (Fn: an ActivationFn).
template <class T, class Fn>
void backward_typed(Fn fn, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                    const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx, const Tensor& dweight,
                    const Tensor& dbias) {
  using P = compute_t<T>;
  const Planes p = planes_of(x);
  const T *gd = grad.data<T>(), *xd = x.data<T>();
  const P *md = mean.data<P>(), *id = invstd.data<P>();
  const P* w = data_or_null<P>(weight);
  const T* yd = data_or_null<T>(y);
  // The gradient of the normalised value at i: grad itself, or through the activation; relu's as
  // a bit mask, which vectorises (Note [GCC 12 masked-load miscompile]).
  auto grad_of = [&](P g, P yv) -> P {
    if constexpr (Fn::kIdentity) return g;
    else if constexpr (std::is_same_v<Fn, ActivationFn<Activation::relu>>) return relu_backward_masked(g, yv);
    else return fn.backward(g, yv);
  };
  auto g_at = [&](int64_t i) -> P { return grad_of(value_at(gd, i), Fn::kIdentity ? P(0) : value_at(yd, i)); };
  // f32 identity and relu run their blocks of 16 in registers (Note [Batch-norm backward in registers]).
  [[maybe_unused]] constexpr bool kRelu = std::is_same_v<Fn, ActivationFn<Activation::relu>>;
  [[maybe_unused]] constexpr bool kInRegisters =
      kBatchNormLanes && kLaneType<T> && (Fn::kIdentity || kRelu);
  // Channel c's sum(g) and sum(g * xhat), with g through the activation.
  struct Sums {
    double g, gxhat;
  };
  // The sums of channels [b0, b0 + count), count <= kStatisticsBlockChannels, summed image by
  // image (Note [Statistics in memory order]); also writes their dweight and dbias.
  auto sums_of_block = [&](int64_t b0, int64_t count, Sums* out) {
    // sum(g) and sum(g * (x - mean)) in 16 double lanes each (Note [Statistics in lanes]), the
    // values loaded 16 at a time (Note [Blocks of 16]).
    alignas(64) double lanes_g[kStatisticsBlockChannels][16], lanes_gx[kStatisticsBlockChannels][16];
    double tail_g[kStatisticsBlockChannels], tail_gx[kStatisticsBlockChannels];
    std::fill_n(&lanes_g[0][0], count * 16, 0.0);
    std::fill_n(&lanes_gx[0][0], count * 16, 0.0);
    std::fill_n(tail_g, count, 0.0);
    std::fill_n(tail_gx, count, 0.0);
    for (int64_t n = 0; n < p.N; ++n) {
      for (int64_t i = 0; i < count; ++i) {
        const int64_t c = b0 + i, at = (n * p.C + c) * p.S;
        const double mu = double(md[c]);
        int64_t s = 0;
        if constexpr (kInRegisters) {
          if (p.S >= 16) {  // whole blocks to add
            LaneSums<kRelu> in_registers(lanes_g[i], lanes_gx[i]);
            s = in_registers.add(gd + at, yd ? yd + at : nullptr, xd + at, p.S, mu);
            in_registers.store(lanes_g[i], lanes_gx[i]);
          }
        }
        for (; s + 16 <= p.S; s += 16) {
          P gv[16], yv[16] = {}, xv[16];
          load_block<16>(gd + at + s, gv);
          if (!Fn::kIdentity) load_block<16>(yd + at + s, yv);
          load_block<16>(xd + at + s, xv);
          for (int j = 0; j < 16; ++j) {
            const double g = double(grad_of(gv[j], yv[j]));
            lanes_g[i][j] += g;
            lanes_gx[i][j] += g * (double(xv[j]) - mu);
          }
        }
        for (; s < p.S; ++s) {
          const double g = double(g_at(at + s));
          tail_g[i] += g;
          tail_gx[i] += g * (double(value_at(xd, at + s)) - mu);
        }
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      const int64_t c = b0 + i;
      for (int j = 0; j < 16; ++j) {
        tail_g[i] += lanes_g[i][j];
        tail_gx[i] += lanes_gx[i][j];
      }
      if (dweight.defined()) dweight.data<P>()[c] = P(tail_gx[i] * double(id[c]));
      if (dbias.defined()) dbias.data<P>()[c] = P(tail_g[i]);
      out[i] = {tail_g[i], tail_gx[i] * double(id[c])};
    }
  };
  // dx = k * (g - mean_g - xhat * mean_gxhat) = g * k - (x - mean) * a + b per channel, with
  // k = weight * invstd, a = k * invstd * mean_gxhat, b = -k * mean_g.
  // Note [Centred dx]: the x term is centred before it is scaled. Expanded into g * k - x * a + b'
  // (one multiply fewer), a channel far from zero (x ~ 1e4) makes x * a and b' large terms that
  // cancel, so dx kept only ~3 significant digits and moved by 1e-3 with FMA contraction; x - mean
  // is exact there (Sterbenz) and small.
  // Note [Evaluation dx]: in evaluation the statistics are constants and dx = g * k alone. The
  // general form would add x * 0 there, which turns a NaN or infinite x into a NaN dx where
  // PyTorch gives g * k; so evaluation skips the x term (a uniform branch, hoisted by the compiler).
  struct Coefficients {
    P k, a, b;
  };
  const double m = double(p.count());
  auto coefficients_of = [&](int64_t c, Sums sums) -> Coefficients {
    const double kc = (w ? double(w[c]) : 1.0) * double(id[c]);
    const double mg = training ? sums.g / m : 0.0, mgx = training ? sums.gxhat / m : 0.0;
    return {P(kc), P(kc * double(id[c]) * mgx), P(-kc * mg)};
  };
  T* dxd = dx.defined() ? dx.data<T>() : nullptr;
  auto dx_of_run = [&](int64_t n, int64_t c, Coefficients co) {
    const int64_t at = (n * p.C + c) * p.S;
    const P mc = md[c];
    auto dx_of = [&](P g, P yv, P xv) {
      const P gm = grad_of(g, yv);
      return training ? gm * co.k - (xv - mc) * co.a + co.b : gm * co.k;
    };
    int64_t s = 0;
    if constexpr (kInRegisters)
      s = dx16<kRelu>(gd + at, yd ? yd + at : nullptr, xd + at, dxd + at, p.S, training, mc, co.k, co.a, co.b);
    dx_run(gd + at + s, yd ? yd + at + s : nullptr, xd + at + s, dxd + at + s, p.S - s, dx_of);
  };
  // Note [Channel at a time]: a task takes a few channels and, for each block of them (Note
  // [Statistics in memory order]), sums and then writes their dx while the block's grad, x and y
  // are still in L2 (N S values per channel: 100 KiB at SE-ResNeXt's largest, 256 channels of
  // 56 x 56 at batch 8), instead of one pass over every channel for the sums and a second that reads all
  // of them from memory again (batch norm's backward was 12% of an SE-ResNeXt-50 training step,
  // perf; Note [Batch-norm backward in registers] took on the rest of it). Runs shorter than a
  // vector (S < 16, e.g. 2-D input, S = 1) keep the second pass a row of channels at a time, whose
  // elements are contiguous, and so do layers with fewer channels than threads, whose dx would
  // otherwise leave threads idle. Both paths compute each sum and each dx with the same code, so
  // the bits do not depend on which one runs.
  // Measured (2026-12-06, Zen 5, 2 threads, bnprobe alternated with the two-pass form, backward
  // through autograd at batch 8): 256 channels of 56 x 56 with relu 6.2-6.7 -> 4.7-5.5 ms,
  // without 7.9-8.7 -> 7.8-8.6; 1024 of 14 x 14 even (1.9-2.2); 2048 of 7 x 7 with relu
  // 0.64-0.81 -> 0.50-0.65; an SE-ResNeXt-50 training step 1-2% faster. dx_run is always
  // inlined: called once per element where S = 1, the call was most of the time (64 x 32
  // values: 0.035 ms against 0.016). Blocks of channels instead of one (bnprobe, bf16, batch 64,
  // alternated, the bits unchanged): 256 channels of 8 x 8 with relu 0.74-0.82 -> 0.43-0.47 ms,
  // 512 of 4 x 4 0.30-0.36 -> 0.25-0.27, 2048 of 7 x 7 at batch 8 0.41-0.46 -> 0.34-0.39.
  const int64_t block = statistics_block(p);
  if (!dxd || (p.S >= 16 && p.C >= num_threads())) {
    parallel_for(0, p.C, channel_grain(p), [&](int64_t c0, int64_t c1) {
      for (int64_t b0 = c0; b0 < c1; b0 += block) {
        const int64_t count = std::min(block, c1 - b0);
        Sums sums[kStatisticsBlockChannels];
        sums_of_block(b0, count, sums);
        if (!dxd) continue;
        Coefficients co[kStatisticsBlockChannels];
        for (int64_t i = 0; i < count; ++i) co[i] = coefficients_of(b0 + i, sums[i]);
        for (int64_t n = 0; n < p.N; ++n)
          for (int64_t i = 0; i < count; ++i) dx_of_run(n, b0 + i, co[i]);
      }
    });
    return;
  }
  std::vector<Coefficients> co(size_t(p.C));
  parallel_for(0, p.C, channel_grain(p), [&](int64_t c0, int64_t c1) {
    for (int64_t b0 = c0; b0 < c1; b0 += block) {
      const int64_t count = std::min(block, c1 - b0);
      Sums sums[kStatisticsBlockChannels];
      sums_of_block(b0, count, sums);
      for (int64_t i = 0; i < count; ++i) co[size_t(b0 + i)] = coefficients_of(b0 + i, sums[i]);
    }
  });
  parallel_for(0, p.N, std::max<int64_t>(1, 32768 / std::max<int64_t>(p.C * p.S, 1)), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t c = 0; c < p.C; ++c) dx_of_run(n, c, co[size_t(c)]);
  });
}

}  // namespace

void batch_norm_stats(const Tensor& x, double eps, double momentum, const Tensor& mean, const Tensor& invstd,
                      const Tensor& running_mean, const Tensor& running_var) {
  dispatch_float_or_16_bit(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    using P = compute_t<T>;
    const Planes p = planes_of(x);
    const T* xd = x.data<T>();
    P* md = mean.data<P>();
    P* id = invstd.data<P>();
    P* rm = data_or_null<P>(running_mean);
    P* rv = data_or_null<P>(running_var);
    const double m = double(p.count());
    // Adds run's values (x, or (x - mu)^2 for kSquares) to its channel's lanes and rest.
    auto add_run = [&]<bool kSquares>(const T* run, double mu, double* lanes, double& rest) {
      auto term = [&](int64_t s) {
        const double x = double(value_at(run, s));
        return kSquares ? (x - mu) * (x - mu) : x;
      };
      int64_t s = 0;
      if constexpr (kBatchNormLanes && kLaneType<T>)
        if (p.S >= 16) s = add_run_to_lanes<kSquares>(run, p.S, mu, lanes);  // whole blocks to add
      for (; s + kAccLanes <= p.S; s += kAccLanes)
        for (int64_t j = 0; j < kAccLanes; ++j) lanes[j] += term(s + j);
      for (; s < p.S; ++s) rest += term(s);
    };
    auto total = [](const double (&lanes)[kAccLanes], double rest) {
      return combine_lanes(lanes, rest, [](double a, double b) { return a + b; });
    };
    const int64_t block = statistics_block(p);  // Note [Statistics in memory order]
    parallel_for(0, p.C, channel_grain(p), [&](int64_t c0, int64_t c1) {
      for (int64_t b0 = c0; b0 < c1; b0 += block) {
        const int64_t channels = std::min(c1 - b0, block);
        alignas(64) double lanes[kStatisticsBlockChannels][kAccLanes];
        double rest[kStatisticsBlockChannels], mu[kStatisticsBlockChannels];
        std::fill_n(&lanes[0][0], channels * kAccLanes, 0.0);
        std::fill_n(rest, channels, 0.0);
        for (int64_t n = 0; n < p.N; ++n)
          for (int64_t c = 0; c < channels; ++c)
            add_run.template operator()<false>(xd + (n * p.C + b0 + c) * p.S, 0.0, lanes[c], rest[c]);
        for (int64_t c = 0; c < channels; ++c) {
          mu[c] = total(lanes[c], rest[c]) / m;
          std::fill_n(lanes[c], kAccLanes, 0.0);
          rest[c] = 0;
        }
        for (int64_t n = 0; n < p.N; ++n)
          for (int64_t c = 0; c < channels; ++c)
            add_run.template operator()<true>(xd + (n * p.C + b0 + c) * p.S, mu[c], lanes[c], rest[c]);
        for (int64_t c = 0; c < channels; ++c) {
          const double sq = total(lanes[c], rest[c]), var = sq / m;
          md[b0 + c] = P(mu[c]);
          id[b0 + c] = P(1.0 / std::sqrt(var + eps));
          if (rm) rm[b0 + c] = P((1 - momentum) * double(rm[b0 + c]) + momentum * mu[c]);
          if (rv) rv[b0 + c] = P((1 - momentum) * double(rv[b0 + c]) + momentum * (m > 1 ? sq / (m - 1) : var));
        }
      }
    });
  });
}

void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                      const Tensor& bias, Activation act, const Tensor& y) {
  dispatch_float_or_16_bit(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    using P = compute_t<T>;
    const Planes p = planes_of(x);
    // y = x * scale[c] + shift[c]
    std::vector<P> scale(size_t(p.C)), shift(size_t(p.C));
    const P *md = mean.data<P>(), *id = invstd.data<P>(), *w = data_or_null<P>(weight), *b = data_or_null<P>(bias);
    for (int64_t c = 0; c < p.C; ++c) {
      scale[size_t(c)] = id[c] * (w ? w[c] : P(1));
      shift[size_t(c)] = (b ? b[c] : P(0)) - md[c] * scale[size_t(c)];
    }
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    // One row of C runs of S at a time: works for S = 1 (2-D input) and large S alike.
    visit_activation(act, [&](auto fn) {
      parallel_for(0, p.N, std::max<int64_t>(1, 32768 / std::max<int64_t>(p.C * p.S, 1)), [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t c = 0; c < p.C; ++c) {
            const int64_t at = (n * p.C + c) * p.S;
            const P a = scale[size_t(c)], sh = shift[size_t(c)];
            normalize_run(xd + at, yd + at, p.S, a, sh, fn);
          }
      });
    });
  });
}

void batch_norm_backward(Activation act, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                         const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias) {
  dispatch_float_or_16_bit(x.dtype(), "batch_norm_backward", [&]<class T>(TypeTag<T>) {
    visit_activation(act, [&](auto fn) {
      backward_typed<T>(fn, grad, y, x, mean, invstd, weight, training, dx, dweight, dbias);
    });
  });
}

}  // namespace ember::cpu
