// The squeeze-and-excitation tail on the CPU: y = relu(x * scale[n, c] + residual) and its
// one-pass backward (contracts in ops/kernels.h, Note [SE tail] in ops/scale_add_relu.h).
//
// Tensors are (N, C, S), f32/f64 or bf16/f16 (loaded into f32, each output rounded once; y is
// the widened computation's, bit for bit, and so are the gradients except where a positive y
// rounds to zero, whose relu mask then differs). A task owns whole (n, c) planes, so it alone
// writes its dscale entries and the result does not depend on the thread count. Inside a plane
// the loops are branch-free (the mask is a bit mask) and the dscale sum runs in 16 independent
// lanes, so the compiler vectorises both.
#include <algorithm>
#include <type_traits>

#include "core/parallel.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/cpu/vec_math.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

constexpr int64_t kElementsPerTask = 1 << 15;
constexpr int kLanes = 16;

// Planes per task: at least kElementsPerTask elements, so small planes (7 x 7) are batched.
int64_t plane_grain(int64_t S) { return std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(S, 1)); }

template <class T>
void forward_typed(const Tensor& x, const Tensor& scale, const Tensor& residual, const Tensor& y) {
  using C = compute_t<T>;
  const int64_t planes = x.size(0) * x.size(1), S = x.size(2);
  const T* xp = x.data<T>();
  const T* sp = scale.data<T>();
  const T* rp = residual.data<T>();
  T* yp = y.data<T>();
  const UnaryFn<UnaryOp::relu> relu;  // NaN stays NaN (Note [NaN through relu])
  parallel_for(0, planes, plane_grain(S), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const C s = C(sp[p]);
      const T* xs = xp + p * S;
      const T* rs = rp + p * S;
      T* ys = yp + p * S;
      int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
      if constexpr (std::is_same_v<T, BFloat16>) {
        // Note [bf16 SE tail in registers]: GCC 12 left the bf16 form of the loop below scalar (perf:
        // 12% of a bf16 se_resnext_cifar training step). The same fused multiply-add as the loops
        // below (multiply_add), relu as a mask (x <= 0 gives +0, NaN stays), rounded once.
        const __m512 sv = _mm512_set1_ps(s);
        for (; i + kLanes <= S; i += kLanes) {
          const __m512 v = _mm512_fmadd_ps(load_widened(xs + i, 0xFFFF), sv, load_widened(rs + i, 0xFFFF));
          const __mmask16 positive = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ);
          store_rounded(ys + i, _mm512_maskz_mov_ps(positive, v), 0xFFFF);
        }
      }
#endif
      for (; i + kLanes <= S; i += kLanes) {  // Note [Blocks of 16]
        C xv[kLanes], rv[kLanes];
        load_block<kLanes>(xs + i, xv);
        load_block<kLanes>(rs + i, rv);
        for (int j = 0; j < kLanes; ++j) xv[j] = relu(multiply_add(xv[j], s, rv[j]));  // Note [GCC contraction]
        store_block<kLanes>(xv, ys + i);
      }
      for (; i < S; ++i) ys[i] = T(relu(multiply_add(C(xs[i]), s, C(rs[i]))));
    }
  });
}

// One plane of the backward; the outputs that are not wanted (k* false) are not touched.
// Returns the plane's dscale, summed in compute_t<T> lanes. Blocks of 16 are loaded, computed and
// stored whole (Note [Blocks of 16]); relu's gradient is a bit mask (Note [GCC 12 masked-load
// miscompile]). Note [GCC contraction]: the dscale sums are explicit multiply_adds: left to
// -ffp-contract, GCC 12 fused the multiply-add in some instantiations and not in others (on a
// Zen 5, -march=native), so dscale alone and dscale beside dx differed in the last bit.
template <bool kDx, bool kDscale, bool kDresidual, class T>
compute_t<T> backward_plane(int64_t S, compute_t<T> s, const T* g, const T* y, const T* x, T* dx, T* dr) {
  using C = compute_t<T>;
  C lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= S; i += kLanes) {
    C gm[kLanes], yv[kLanes];
    load_block<kLanes>(g + i, gm);
    load_block<kLanes>(y + i, yv);
    for (int j = 0; j < kLanes; ++j) gm[j] = relu_backward_masked(gm[j], yv[j]);
    if constexpr (kDx) {
      C d[kLanes];
      for (int j = 0; j < kLanes; ++j) d[j] = gm[j] * s;
      store_block<kLanes>(d, dx + i);
    }
    if constexpr (kDresidual) store_block<kLanes>(gm, dr + i);
    if constexpr (kDscale) {
      C xv[kLanes];
      load_block<kLanes>(x + i, xv);
      for (int j = 0; j < kLanes; ++j) lanes[j] = multiply_add(gm[j], xv[j], lanes[j]);
    }
  }
  for (; i < S; ++i) {
    const C gm = relu_backward_masked(C(g[i]), C(y[i]));
    if constexpr (kDx) dx[i] = T(gm * s);
    if constexpr (kDresidual) dr[i] = T(gm);
    if constexpr (kDscale) lanes[0] = multiply_add(gm, C(x[i]), lanes[0]);
  }
  C total = 0;
  for (int j = 0; j < kLanes; ++j) total += lanes[j];
  return total;
}

// Calls f(std::true_type) or f(std::false_type): a runtime flag as a template argument.
template <class F>
void with_flag(bool flag, F&& f) {
  if (flag) f(std::true_type{});
  else f(std::false_type{});
}

template <bool kDx, bool kDscale, bool kDresidual, class T>
void backward_typed(const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& dx,
                    const Tensor& dscale, const Tensor& dresidual) {
  const int64_t planes = x.size(0) * x.size(1), S = x.size(2);
  const T *gp = grad.data<T>(), *yp = y.data<T>(), *xp = x.data<T>(), *sp = scale.data<T>();
  T *dxp = data_or_null<T>(dx), *dsp = data_or_null<T>(dscale), *drp = data_or_null<T>(dresidual);
  parallel_for(0, planes, plane_grain(S), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t at = p * S;
      const compute_t<T> total =
          backward_plane<kDx, kDscale, kDresidual, T>(S, compute_t<T>(sp[p]), gp + at, yp + at, xp + at,
                                                     kDx ? dxp + at : nullptr, kDresidual ? drp + at : nullptr);
      if constexpr (kDscale) dsp[p] = T(total);
    }
  });
}

}  // namespace

void scale_add_relu_forward(const Tensor& x, const Tensor& scale, const Tensor& residual, const Tensor& y) {
  dispatch_float_or_16_bit(x.dtype(), "scale_add_relu",
                           [&]<class T>(TypeTag<T>) { forward_typed<T>(x, scale, residual, y); });
}

void scale_add_relu_backward(const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& scale,
                             const Tensor& dx, const Tensor& dscale, const Tensor& dresidual) {
  dispatch_float_or_16_bit(x.dtype(), "scale_add_relu_backward", [&]<class T>(TypeTag<T>) {
    // Each combination of wanted outputs gets its own branch-free loop.
    with_flag(dx.defined(), [&](auto kDx) {
      with_flag(dscale.defined(), [&](auto kDscale) {
        with_flag(dresidual.defined(), [&](auto kDresidual) {
          constexpr bool kX = decltype(kDx)::value, kS = decltype(kDscale)::value, kR = decltype(kDresidual)::value;
          backward_typed<kX, kS, kR, T>(grad, y, x, scale, dx, dscale, dresidual);
        });
      });
    });
  });
}

}  // namespace ember::cpu
