// Batch-norm kernels over an (N, C, S) contiguous view: channel c's values are N runs of S
// contiguous elements. Note [Two-pass statistics]: the mean is computed first and the variance
// from the centred values, both accumulated in double, so a channel whose values sit far from
// zero (mean 1e4, spread 1) does not lose its variance to cancellation as E[x^2] - E[x]^2 would.
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/vec_math.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

struct Planes {
  int64_t N, C, S;
  int64_t count() const { return N * S; }  // values per channel
};

Planes planes_of(const Tensor& x) { return {x.size(0), x.size(1), x.size(2)}; }

// Calls f(run, length) for every contiguous run of channel c.
template <class T, class F>
void for_channel(const T* base, const Planes& p, int64_t c, F&& f) {
  for (int64_t n = 0; n < p.N; ++n) f(base + (n * p.C + c) * p.S, p.S);
}

// Grain for loops over channels: aim for ~32K elements of work per chunk.
int64_t channel_grain(const Planes& p) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(p.count(), 1)); }

// Note [Statistics in lanes]: the sums stay in double (Note [Two-pass statistics]), but with one
// running double each element waits for the previous add (4 cycles): batch norm's statistics
// and backward sums were a fifth of an SE-ResNeXt training step. The lane sums of vec_math.h
// keep independent partial sums in vector registers; only the order of the double sums changes.

// batch_norm_backward for one dtype and activation (Fn: an ActivationFn).
template <class T, class Fn>
void backward_typed(Fn fn, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                    const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx, const Tensor& dweight,
                    const Tensor& dbias) {
  const Planes p = planes_of(x);
  const T *gd = grad.data<T>(), *xd = x.data<T>(), *md = mean.data<T>(), *id = invstd.data<T>();
  const T* w = data_or_null<T>(weight);
  const T* yd = data_or_null<T>(y);
  // The gradient of the normalised value at i: grad itself, or through the activation.
  // relu's as a bit mask, which vectorises (Note [GCC 12 masked-load miscompile]).
  auto g_at = [&](int64_t i) {
    if constexpr (Fn::kIdentity) return gd[i];
    else if constexpr (std::is_same_v<Fn, ActivationFn<Activation::relu>>) return relu_backward_masked(gd[i], yd[i]);
    else return fn.backward(gd[i], yd[i]);
  };
  // Per channel: sum(grad) and sum(grad * xhat).
  std::vector<double> sum_g(size_t(p.C)), sum_gxhat(size_t(p.C));
  parallel_for(0, p.C, channel_grain(p), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double mu = double(md[c]);
      double sums[2] = {};  // sum(g), sum(g * (x - mean))
      for (int64_t n = 0; n < p.N; ++n) {
        const int64_t at = (n * p.C + c) * p.S;
        lane_sums(p.S, sums, [&](int64_t s, double (&t)[2]) {
          const double g = double(g_at(at + s));
          t[0] = g;
          t[1] = g * (double(xd[at + s]) - mu);
        });
      }
      sum_g[size_t(c)] = sums[0];
      sum_gxhat[size_t(c)] = sums[1] * double(id[c]);
    }
  });
  if (dweight.defined())
    for (int64_t c = 0; c < p.C; ++c) dweight.data<T>()[c] = T(sum_gxhat[size_t(c)]);
  if (dbias.defined())
    for (int64_t c = 0; c < p.C; ++c) dbias.data<T>()[c] = T(sum_g[size_t(c)]);
  if (!dx.defined()) return;
  // dx = k * (g - mean_g - xhat * mean_gxhat) = g * k - (x - mean) * a + b per channel, with
  // k = weight * invstd, a = k * invstd * mean_gxhat, b = -k * mean_g.
  // Note [Centred dx]: the x term is centred before it is scaled. Expanded into g * k - x * a + b'
  // (one multiply fewer), a channel far from zero (x ~ 1e4) makes x * a and b' large terms that
  // cancel, so dx kept only ~3 significant digits and moved by 1e-3 with FMA contraction; x - mean
  // is exact there (Sterbenz) and small.
  // Note [Evaluation dx]: in evaluation the statistics are constants and dx = g * k alone. The
  // general form would add x * 0 there, which turns a NaN or infinite x into a NaN dx where
  // PyTorch gives g * k; so evaluation skips the x term (a uniform branch, hoisted by the compiler).
  std::vector<T> k(size_t(p.C)), a(size_t(p.C)), b(size_t(p.C));
  const double m = double(p.count());
  for (int64_t c = 0; c < p.C; ++c) {
    const double kc = (w ? double(w[c]) : 1.0) * double(id[c]);
    const double mg = training ? sum_g[size_t(c)] / m : 0.0, mgx = training ? sum_gxhat[size_t(c)] / m : 0.0;
    k[size_t(c)] = T(kc);
    a[size_t(c)] = T(kc * double(id[c]) * mgx);
    b[size_t(c)] = T(-kc * mg);
  }
  T* dxd = dx.data<T>();
  parallel_for(0, p.N, std::max<int64_t>(1, 32768 / std::max<int64_t>(p.C * p.S, 1)), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t c = 0; c < p.C; ++c) {
        const int64_t at = (n * p.C + c) * p.S;
        const T kc = k[size_t(c)], ac = a[size_t(c)], bc = b[size_t(c)], mc = md[c];
        for (int64_t s = 0; s < p.S; ++s)
          dxd[at + s] = training ? g_at(at + s) * kc - (xd[at + s] - mc) * ac + bc : g_at(at + s) * kc;
      }
  });
}

}  // namespace

void batch_norm_stats(const Tensor& x, double eps, double momentum, const Tensor& mean, const Tensor& invstd,
                      const Tensor& running_mean, const Tensor& running_var) {
  dispatch_float(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    const Planes p = planes_of(x);
    const T* xd = x.data<T>();
    T* md = mean.data<T>();
    T* id = invstd.data<T>();
    T* rm = data_or_null<T>(running_mean);
    T* rv = data_or_null<T>(running_var);
    const double m = double(p.count());
    parallel_for(0, p.C, channel_grain(p), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double sum = 0;
        for_channel(xd, p, c, [&](const T* run, int64_t len) { sum += lane_sum(len, [&](int64_t s) { return run[s]; }); });
        const double mu = sum / m;
        double sq = 0;
        for_channel(xd, p, c, [&](const T* run, int64_t len) {
          sq += lane_sum(len, [&](int64_t s) {
            const double d = double(run[s]) - mu;
            return d * d;
          });
        });
        const double var = sq / m;
        md[c] = T(mu);
        id[c] = T(1.0 / std::sqrt(var + eps));
        if (rm) rm[c] = T((1 - momentum) * double(rm[c]) + momentum * mu);
        if (rv) rv[c] = T((1 - momentum) * double(rv[c]) + momentum * (m > 1 ? sq / (m - 1) : var));
      }
    });
  });
}

void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                      const Tensor& bias, Activation act, const Tensor& y) {
  dispatch_float(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    const Planes p = planes_of(x);
    // y = x * scale[c] + shift[c]
    std::vector<T> scale(size_t(p.C)), shift(size_t(p.C));
    const T *md = mean.data<T>(), *id = invstd.data<T>(), *w = data_or_null<T>(weight), *b = data_or_null<T>(bias);
    for (int64_t c = 0; c < p.C; ++c) {
      scale[size_t(c)] = id[c] * (w ? w[c] : T(1));
      shift[size_t(c)] = (b ? b[c] : T(0)) - md[c] * scale[size_t(c)];
    }
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    // One row of C runs of S at a time: works for S = 1 (2-D input) and large S alike.
    visit_activation(act, [&](auto fn) {
      parallel_for(0, p.N, std::max<int64_t>(1, 32768 / std::max<int64_t>(p.C * p.S, 1)), [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t c = 0; c < p.C; ++c) {
            const int64_t at = (n * p.C + c) * p.S;
            const T a = scale[size_t(c)], sh = shift[size_t(c)];
            for (int64_t s = 0; s < p.S; ++s) yd[at + s] = fn(xd[at + s] * a + sh);
          }
      });
    });
  });
}

void batch_norm_backward(Activation act, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                         const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias) {
  dispatch_float(x.dtype(), "batch_norm_backward", [&]<class T>(TypeTag<T>) {
    visit_activation(act, [&](auto fn) {
      backward_typed<T>(fn, grad, y, x, mean, invstd, weight, training, dx, dweight, dbias);
    });
  });
}

}  // namespace ember::cpu
