#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/graph.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

namespace {

// Which dims a reduction removes, and how to view the input for the kernels.
struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;            // with the reduced dims removed (or kept as 1)
  Shape keep_shape;           // with the reduced dims kept as 1 (for broadcasting back)
  int64_t count = 1;          // elements combined into each output
  Tensor view;                // (outer, R, inner)
};

ReducePlan plan_reduce(const Tensor& x, const Dims& dims, bool keepdim, const char* op) {
  ReducePlan p;
  const int64_t rank = x.dim();
  p.reduced.assign(size_t(rank), dims.empty());
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, rank, op);
    if (rank == 0) continue;
    EMBER_CHECK(!p.reduced[size_t(n)], op, ": dim ", d, " appears more than once in the dims to reduce");
    p.reduced[size_t(n)] = true;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (p.reduced[size_t(d)]) {
      p.count *= x.shape()[d];
      p.keep_shape.push_back(1);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.keep_shape.push_back(x.shape()[d]);
      p.out_shape.push_back(x.shape()[d]);
    }
  }
  // A contiguous input whose reduced dims form one block is viewed in place; anything else is
  // permuted (kept dims first) and copied.
  int64_t first = rank, last = -1;
  for (int64_t d = 0; d < rank; ++d)
    if (p.reduced[size_t(d)]) { first = std::min(first, d); last = d; }
  bool block = last >= 0;
  for (int64_t d = first; d <= last && block; ++d) block = p.reduced[size_t(d)];
  int64_t outer = 1, inner = 1;
  if (block && x.is_contiguous()) {
    for (int64_t d = 0; d < first; ++d) outer *= x.shape()[d];
    for (int64_t d = last + 1; d < rank; ++d) inner *= x.shape()[d];
    p.view = Tensor::view_of(x, {outer, p.count, inner}, {p.count * inner, inner, 1}, x.offset());
  } else {
    Dims order;
    for (int64_t d = 0; d < rank; ++d) if (!p.reduced[size_t(d)]) order.push_back(d);
    for (int64_t d = 0; d < rank; ++d) if (p.reduced[size_t(d)]) order.push_back(d);
    Tensor c;
    {
      autograd::NoGradGuard no_grad;
      c = x.permute(order).contiguous();
    }
    outer = 1;
    for (int64_t d = 0; d < rank; ++d)
      if (!p.reduced[size_t(d)]) outer *= x.shape()[d];
    p.view = Tensor::view_of(c, {outer, p.count, 1}, {p.count, 1, 1}, c.offset());
  }
  return p;
}

Tensor reduce_forward(ReduceOp op, const Tensor& x, const ReducePlan& p) {
  Tensor out = Tensor::empty({p.view.size(0), p.view.size(2)}, x.options());
  reduce_kernel(x.device(), op, p.view, out);
  return out.view(p.out_shape);
}

// Gradient of an output reduced with `plan` broadcast back to the input's shape.
Tensor expand_back(const Tensor& g, const Shape& keep_shape, const Shape& input_shape) {
  return g.reshape(keep_shape).expand(input_shape);
}

Tensor extreme(ReduceOp op, const char* name, const Tensor& x, const Dims& dims, bool keepdim) {
  ReducePlan p = plan_reduce(x, dims, keepdim, name);
  EMBER_CHECK(p.count > 0, name, ": cannot reduce over an empty dim (input shape ", shape_str(x.shape()), ")");
  Tensor y = reduce_forward(op, x, p);
  if (needs_grad(x)) {
    record(name, {x}, y, [name, sx = save(x), sy = save(y), keep = p.keep_shape](const Tensor& g) -> TensorList {
      const Tensor& xv = sx.get(name);
      Tensor mask = eq(xv, sy.get(name).reshape(keep)).to(g.dtype());
      Tensor share = div(mask, sum_to(mask, keep));  // ties share the gradient
      return {mul(share, expand_back(g, keep, xv.shape()))};
    });
  }
  return y;
}

}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) {
  EMBER_CHECK(x.dtype() != DType::boolean, "sum: expected a numeric tensor, got bool (convert with .to(DType::i64))");
  ReducePlan p = plan_reduce(x, dims, keepdim, "sum");
  Tensor y = reduce_forward(ReduceOp::sum, x, p);
  if (needs_grad(x))
    record("sum", {x}, y, [keep = p.keep_shape, shape = x.shape()](const Tensor& g) -> TensorList {
      return {expand_back(g, keep, shape)};
    });
  return y;
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  EMBER_CHECK(is_floating(x.dtype()), "mean: expected a floating tensor, got ", dtype_name(x.dtype()));
  int64_t count = 1;
  if (dims.empty()) count = x.numel();
  else
    for (int64_t d : dims) {
      const int64_t n = normalize_dim(d, x.dim(), "mean");
      if (x.dim() > 0) count *= x.shape()[size_t(n)];  // a 0-d tensor accepts dim 0 / -1 (one element)
    }
  return mul(sum(x, dims, keepdim), 1.0 / double(count));
}

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim) {
  ReducePlan p = plan_reduce(x, dims, keepdim, "prod");
  return reduce_forward(ReduceOp::prod, x, p);
}

Tensor var(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim) {
  EMBER_CHECK(is_floating(x.dtype()), "var: expected a floating tensor, got ", dtype_name(x.dtype()));
  ReducePlan p = plan_reduce(x, dims, keepdim, "var");
  const double denom = double(p.count - correction);
  Tensor centered, y;
  {
    autograd::NoGradGuard no_grad;
    centered = sub(x, mean(x, dims, true));
    y = div(sum(square(centered), dims, keepdim), std::max(denom, 0.0));
  }
  if (needs_grad(x))
    record("var", {x}, y, [c = save(centered), keep = p.keep_shape, denom](const Tensor& g) -> TensorList {
      const Tensor& cv = c.get("var");
      return {mul(expand_back(g, keep, cv.shape()), mul(cv, 2.0 / denom))};
    });
  return y;
}

Tensor stddev(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) {
  return extreme(ReduceOp::max, "amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) {
  return extreme(ReduceOp::min, "amin", x, dims, keepdim);
}
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }

namespace {
ValuesIndices extreme_along(bool is_max, const char* name, const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = normalize_dim(dim, x.dim(), name);
  ReducePlan p = plan_reduce(x, {d}, keepdim, name);
  EMBER_CHECK(p.count > 0, name, ": cannot reduce over an empty dim (input shape ", shape_str(x.shape()), ")");
  Tensor values = Tensor::empty({p.view.size(0), p.view.size(2)}, x.options());
  Tensor indices = Tensor::empty({p.view.size(0), p.view.size(2)}, {.dtype = DType::i64, .device = x.device()});
  arg_reduce_kernel(x.device(), is_max, p.view, values, indices);
  values = values.view(p.out_shape);
  indices = indices.view(p.out_shape);
  if (needs_grad(x)) {
    record(name, {x}, values, [idx = save(indices), keep = p.keep_shape, shape = x.shape(), d,
                               name](const Tensor& g) -> TensorList {
      Tensor gx = zeros(shape, g.options());
      gx = scatter_add(gx, d, idx.get(name).reshape(keep), g.reshape(keep));
      return {gx};
    });
  }
  return {values, indices};
}
}  // namespace

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme_along(true, "max", x, dim, keepdim); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme_along(false, "min", x, dim, keepdim); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  autograd::NoGradGuard no_grad;
  return extreme_along(true, "argmax", x, dim, keepdim).indices;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  autograd::NoGradGuard no_grad;
  return extreme_along(false, "argmin", x, dim, keepdim).indices;
}
Tensor argmax(const Tensor& x) { return argmax(x.reshape({x.numel()}), 0); }

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  EMBER_CHECK(is_floating(x.dtype()), "logsumexp: expected a floating tensor, got ", dtype_name(x.dtype()));
  ReducePlan p = plan_reduce(x, dims, keepdim, "logsumexp");
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    Tensor m = amax(x, dims, true);
    // An all -inf slice has max -inf; shift by 0 there so the result is -inf, not NaN.
    m = where(eq(m, -std::numeric_limits<double>::infinity()), zeros_like(m), m);
    y = add(log(sum(exp(sub(x, m)), dims, true)), m).reshape(p.out_shape);
  }
  if (needs_grad(x))
    record("logsumexp", {x}, y, [sx = save(x), sy = save(y), keep = p.keep_shape](const Tensor& g) -> TensorList {
      const Tensor& xv = sx.get("logsumexp");
      Tensor softmax = exp(sub(xv, sy.get("logsumexp").reshape(keep)));
      return {mul(softmax, expand_back(g, keep, xv.shape()))};
    });
  return y;
}

Tensor norm(const Tensor& x, double p, const Dims& dims, bool keepdim) {
  EMBER_CHECK(is_floating(x.dtype()), "norm: expected a floating tensor, got ", dtype_name(x.dtype()));
  EMBER_CHECK(p > 0, "norm: p must be positive, got ", p);
  if (std::isinf(p)) return amax(abs(x), dims, keepdim);
  if (p == 1.0) return sum(abs(x), dims, keepdim);
  if (p != 2.0) return pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
  ReducePlan plan = plan_reduce(x, dims, keepdim, "norm");
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = sqrt(sum(square(x), dims, keepdim));
  }
  if (needs_grad(x))
    record("norm", {x}, y, [sx = save(x), sy = save(y), keep = plan.keep_shape](const Tensor& g) -> TensorList {
      const Tensor& xv = sx.get("norm");
      Tensor yk = sy.get("norm").reshape(keep);
      Tensor scale = where(eq(yk, 0.0), zeros_like(yk), div(g.reshape(keep), yk));
      return {mul(xv, scale)};
    });
  return y;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - int64_t(shape.size());
  EMBER_CHECK(lead >= 0, "sum_to: cannot sum shape ", shape_str(g.shape()), " down to ", shape_str(shape));
  Dims dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead) dims.push_back(d);
    else if (shape[size_t(d - lead)] == 1 && g.shape()[d] != 1) dims.push_back(d);
  }
  Tensor s = dims.empty() ? g : sum(g, dims, true);
  return s.reshape(shape);
}

}  // namespace ember
