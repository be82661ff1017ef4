#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "ops/ops.h"

namespace ember::autograd {
namespace {

// A 0-d view of element `linear` (row-major over the shape) of t.
Tensor element(const Tensor& t, int64_t linear) {
  int64_t off = t.offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (linear % t.shape()[size_t(d)]) * t.strides()[size_t(d)];
    linear /= t.shape()[size_t(d)];
  }
  return Tensor::view_of(t, {}, {}, off);
}

std::string index_str(const Shape& shape, int64_t linear) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = linear % shape[d];
    linear /= shape[d];
  }
  return shape_str(idx);
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                          GradcheckOptions opt) {
  TensorList xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    EMBER_CHECK(!is_floating(in.dtype()) || in.dtype() == DType::f64, "gradcheck: floating input ", i,
                " must be f64 for a meaningful finite difference, got ", dtype_name(in.dtype()));
    Tensor x = in.detach();
    if (is_floating(x.dtype())) x.requires_grad_(true);
    xs.push_back(x);
  }

  // Analytic gradients of L = sum(fn(x) * w).
  Tensor out = fn(xs);
  EMBER_CHECK(out.dtype() == DType::f64, "gradcheck: fn must return f64, got ", dtype_name(out.dtype()));
  Generator weights_gen(1234);
  Tensor w = randn(out.shape(), {.dtype = DType::f64}, &weights_gen).to(out.device());
  auto loss = [&](const TensorList& in) { return sum(mul(fn(in), w)).item(); };
  sum(mul(out, w)).backward();

  GradcheckResult result;
  double worst_ratio = -1;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!is_floating(xs[i].dtype())) continue;
    Tensor analytic = xs[i].grad();
    std::vector<double> a = analytic.defined() ? analytic.to(Device::cpu()).contiguous().to_vector<double>()
                                               : std::vector<double>(size_t(xs[i].numel()), 0.0);
    NoGradGuard no_grad;
    for (int64_t e = 0; e < xs[i].numel(); ++e) {
      Tensor v = element(xs[i], e);
      const double orig = v.item();
      v.fill_(orig + opt.eps);
      const double lp = loss(xs);
      v.fill_(orig - opt.eps);
      const double lm = loss(xs);
      v.fill_(orig);
      const double numeric = (lp - lm) / (2 * opt.eps);
      const double err = std::fabs(a[size_t(e)] - numeric);
      const double ratio = err / (opt.atol + opt.rtol * std::fabs(numeric));
      if (!(ratio <= 1.0)) result.ok = false;  // also catches NaN
      if (ratio > worst_ratio || std::isnan(ratio)) {
        worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
        result.worst_abs_error = err;
        std::ostringstream os;
        os << "input " << i << " element " << index_str(xs[i].shape(), e) << ": analytic " << a[size_t(e)]
           << ", numeric " << numeric << ", |error| " << err << " (tolerance " << opt.atol + opt.rtol * std::fabs(numeric)
           << ")";
        result.report = os.str();
      }
    }
  }
  if (!result.ok) result.report = "gradcheck failed: " + result.report;
  return result;
}

}  // namespace ember::autograd
