// find_nonfinite and describe_nonfinite (ops/nonfinite.h).
#include "ops/nonfinite.h"

#include <cmath>

#include "autograd/graph.h"
#include "ops/kernels.h"

namespace ember {

NonfiniteCount find_nonfinite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return {};
  autograd::NoGradGuard no_grad;  // the copies below must not record (anomaly mode calls this from record())
  Tensor x = t.detach();
  x = (x.dtype() == DType::f32 || x.dtype() == DType::f64) ? x.contiguous() : x.to(DType::f32);
  Tensor out = Tensor::empty({3}, {.dtype = DType::i64, .device = x.device()});
  count_nonfinite_kernel(x.device(), x, out);
  const Tensor host = out.cpu();
  const int64_t* v = host.data<int64_t>();
  return {v[0], v[1], v[2]};
}

std::string describe_nonfinite(const Tensor& t) {
  const NonfiniteCount c = find_nonfinite(t);
  if (!c.any()) return "";
  autograd::NoGradGuard no_grad;
  const double first = t.detach().reshape({-1}).select(0, c.first).item();
  const char* kind = std::isnan(first) ? "NaN" : first > 0 ? "Inf" : "-Inf";
  return detail::concat(kind, " at element ", c.first, " of ", shape_str(t.shape()), " (", c.nan, " NaN, ", c.inf,
                        " Inf among ", t.numel(), " elements)");
}

}  // namespace ember
