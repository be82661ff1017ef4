#include "ops/softmax.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

namespace {

// A contiguous tensor viewed as (outer, n, inner) around `dim`. A 0-d tensor is one row of one.
Tensor around_dim(const Tensor& t, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.shape()[size_t(d)];
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.shape()[size_t(d)];
  const int64_t n = t.dim() == 0 ? 1 : t.shape()[size_t(dim)];
  return Tensor::view_of(t, {outer, n, inner}, {n * inner, inner, 1}, t.offset());
}

int64_t checked_dim(const char* op, const Tensor& x, int64_t dim) {
  EMBER_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got ", dtype_name(x.dtype()));
  return normalize_dim(dim, std::max<int64_t>(x.dim(), 1), op);
}

Tensor softmax_forward(const char* op, bool log, const Tensor& x, int64_t dim) {
  if (is_reduced_float(x.dtype())) return float_op_result(softmax_forward(op, log, widened(x), dim), x.dtype());
  const int64_t d = checked_dim(op, x, dim);
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.options());
  softmax_forward_kernel(x.device(), around_dim(xc, d), log, around_dim(y, d));
  if (needs_grad(x))
    record(op, {x}, y, [op, log, d, sy = save(y)](const Tensor& g) -> TensorList {
      const Tensor& yv = sy.get(op);
      return {log ? log_softmax_backward(g, yv, d) : softmax_backward(g, yv, d)};
    });
  return y;
}

Tensor backward_op(const char* op, bool log, const Tensor& grad, const Tensor& y, int64_t dim) {
  if (is_reduced_float(y.dtype())) return narrowed(backward_op(op, log, widened(grad), widened(y), dim), y.dtype());
  const int64_t d = checked_dim(op, y, dim);
  EMBER_CHECK(grad.shape() == y.shape(), op, ": expected grad of the output's shape ", shape_str(y.shape()),
              ", got ", shape_str(grad.shape()));
  check_same_device(op, grad, y);
  check_same_dtype(op, grad, y);
  const Tensor gc = grad.contiguous(), yc = y.contiguous();
  Tensor dx = Tensor::empty(y.shape(), y.options());
  softmax_backward_kernel(y.device(), around_dim(gc, d), around_dim(yc, d), log, around_dim(dx, d));
  return dx;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_forward("softmax", false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_forward("log_softmax", true, x, dim); }

Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return backward_op("softmax_backward", false, grad, y, dim);
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return backward_op("log_softmax_backward", true, grad, y, dim);
}

}  // namespace ember
