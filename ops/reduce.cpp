#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

// max, min, amax, amin and the inf-norm have no identity: an empty reduced dim is an error (as in
// PyTorch).
void check_not_empty(const ReducePlan& p, const char* name, const Tensor& x) {
  if (p.count > 0) return;
  Shape reduced;  // the reduced dims, for the message
  for (size_t d = 0; d < p.reduced.size(); ++d)
    if (p.reduced[d]) reduced.push_back(int64_t(d));
  EMBER_FAIL(name, ": cannot reduce over an empty dim (the reduction has no identity): expected every reduced dim ",
             "to be non-empty, got input shape ", shape_str(x.shape()), " reducing dims ", shape_str(reduced));
}

// amax/amin: PyTorch's scale_grad_by_count, (g / count) * mask, in that order (Note [Singular
// gradients] in ops/elementwise.cpp): ties share the gradient; a NaN result matches no element,
// so its whole slice gets NaN, as in PyTorch.
Tensor extreme(ReduceOp op, const char* name, const Tensor& x, const Dims& dims, bool keepdim) {
  ReducePlan p = plan_reduce(x, dims, keepdim, name);
  check_not_empty(p, name, x);
  Tensor y = reduce_forward(op, x, p);
  if (needs_grad(x)) {
    record(name, {x}, y, [name, sx = save(x), sy = save(y), keep = p.keep_shape](const Tensor& g) -> TensorList {
      const Tensor& xv = sx.get(name);
      Tensor mask = eq(xv, sy.get(name).reshape(keep)).to(g.dtype());
      return {mul(div(g.reshape(keep), sum_to(mask, keep)), mask)};
    });
  }
  return y;
}

// max(x) / min(x) over all elements: PyTorch's evenly_distribute_backward (its CPU form): the
// gradient is split among the elements equal to the result, or among the NaNs when the result is
// NaN, and every other element gets exactly 0.
Tensor extreme_all(ReduceOp op, const char* name, const Tensor& x) {
  ReducePlan p = plan_reduce(x, {}, false, name);
  check_not_empty(p, name, x);
  Tensor y = reduce_forward(op, x, p);
  if (needs_grad(x)) {
    record(name, {x}, y, [name, sx = save(x), sy = save(y)](const Tensor& g) -> TensorList {
      const Tensor& xv = sx.get(name);
      const Tensor& yv = sy.get(name);
      const DType dt = g.dtype();
      Tensor hits = add(eq(xv, yv).to(dt), mul(ne(xv, xv).to(dt), ne(yv, yv).to(dt)));
      return {where(gt(hits, 0.0), div(g, sum(hits)), scalar_like(0.0, g))};
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

// One reduction rounded once (ReduceOp::mean); the gradient is sum's of g / count, as it was when
// mean was sum times 1 / count.
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  EMBER_CHECK(is_floating(x.dtype()), "mean: expected a floating tensor, got ", dtype_name(x.dtype()));
  ReducePlan p = plan_reduce(x, dims, keepdim, "mean");
  Tensor y = reduce_forward(ReduceOp::mean, x, p);
  if (needs_grad(x))
    record("mean", {x}, y, [keep = p.keep_shape, shape = x.shape(), count = p.count](const Tensor& g) -> TensorList {
      return {expand_back(mul(g, 1.0 / double(count)), keep, shape)};
    });
  return y;
}

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim) {
  ReducePlan p = plan_reduce(x, dims, keepdim, "prod");
  return reduce_forward(ReduceOp::prod, x, p);
}

namespace {
// The forward of var and what its gradient needs.
struct VarParts {
  Tensor y;         // the variance, in the output's shape
  Tensor centered;  // x - mean(x, dims)
  Shape keep;       // the output's shape with the reduced dims kept as 1
  double dof;       // count - correction
};

VarParts var_parts(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim, const char* name) {
  EMBER_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor, got ", dtype_name(x.dtype()));
  ReducePlan p = plan_reduce(x, dims, keepdim, name);
  VarParts v;
  v.keep = p.keep_shape;
  v.dof = double(p.count - correction);
  autograd::NoGradGuard no_grad;
  v.centered = sub(x, mean(x, dims, true));
  v.y = div(sum(square(v.centered), dims, keepdim), std::max(v.dof, 0.0));
  return v;
}

// PyTorch's var_backward: (2 / dof) * g * (x - mean).
Tensor var_backward(const Tensor& g, const Tensor& centered, const Shape& keep, double dof) {
  return mul(mul(expand_back(g, keep, centered.shape()), 2.0 / dof), centered);
}
}  // namespace

Tensor var(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim) {
  if (is_reduced_float(x.dtype())) return float_op_result(var(widened(x), dims, correction, keepdim), x.dtype());
  VarParts v = var_parts(x, dims, correction, keepdim, "var");
  if (needs_grad(x))
    record("var", {x}, v.y, [c = save(v.centered), keep = v.keep, dof = v.dof](const Tensor& g) -> TensorList {
      return {var_backward(g, c.get("var"), keep, dof)};
    });
  return v.y;
}

// The gradient of a zero standard deviation (a constant slice) is 0, not g / (2 * 0) * 0 = NaN
// (PyTorch's std_backward masks it).
Tensor stddev(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim) {
  if (is_reduced_float(x.dtype())) return float_op_result(stddev(widened(x), dims, correction, keepdim), x.dtype());
  VarParts v = var_parts(x, dims, correction, keepdim, "stddev");
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = sqrt(v.y);
  }
  if (needs_grad(x))
    record("stddev", {x}, y, [c = save(v.centered), sy = save(y), keep = v.keep,
                              dof = v.dof](const Tensor& g) -> TensorList {
      const Tensor& yv = sy.get("stddev");
      Tensor gv = where(eq(yv, 0.0), scalar_like(0.0, g), div(g, mul(yv, 2.0)));
      return {var_backward(gv, c.get("stddev"), keep, dof)};
    });
  return y;
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) {
  return extreme(ReduceOp::max, "amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) {
  return extreme(ReduceOp::min, "amin", x, dims, keepdim);
}
Tensor max(const Tensor& x) { return extreme_all(ReduceOp::max, "max", x); }
Tensor min(const Tensor& x) { return extreme_all(ReduceOp::min, "min", x); }

namespace {
// The value and first index of the extreme along `dim`; the first NaN wins, and the gradient goes
// to the index (as PyTorch). A 0-d tensor accepts dim 0 / -1 and is its own extreme, at index 0.
ValuesIndices extreme_along(bool is_max, const char* name, const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = normalize_dim(dim, x.dim(), name);
  if (x.dim() == 0) {
    ValuesIndices r = extreme_along(is_max, name, x.reshape({1}), 0, false);
    return {r.values.reshape({}), r.indices.reshape({})};
  }
  ReducePlan p = plan_reduce(x, {d}, keepdim, name);
  check_not_empty(p, name, x);
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
  if (is_reduced_float(x.dtype())) return float_op_result(logsumexp(widened(x), dims, keepdim), x.dtype());
  EMBER_CHECK(is_floating(x.dtype()), "logsumexp: expected a floating tensor, got ", dtype_name(x.dtype()));
  ReducePlan p = plan_reduce(x, dims, keepdim, "logsumexp");
  // An empty input has no max to shift by; the sum of nothing is 0, whose log is -inf (PyTorch).
  if (x.numel() == 0) return log(sum(exp(x), dims, keepdim));
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    Tensor m = amax(x, dims, true);
    // A slice whose max is +-inf is shifted by 0 (as PyTorch): a +inf gives +inf and an all -inf
    // slice -inf, where shifting by the max would give inf - inf = NaN. The gradient,
    // exp(x - y), is then NaN at x = y = +-inf, as PyTorch's.
    m = where(eq(abs(m), std::numeric_limits<double>::infinity()), zeros_like(m), m);
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

// The backward of the p-norms is PyTorch's norm_backward, branch by branch (p < 1, 1, (1, 2), 2,
// > 2, inf; Note [Singular gradients] in ops/elementwise.cpp): a zero norm has gradient 0, and so
// has a zero element when p < 1; the inf-norm's gradient is split among the elements whose |x| is
// the norm, or that are NaN.
Tensor norm(const Tensor& x, double p, const Dims& dims, bool keepdim) {
  if (is_reduced_float(x.dtype())) return float_op_result(norm(widened(x), p, dims, keepdim), x.dtype());
  EMBER_CHECK(is_floating(x.dtype()), "norm: expected a floating tensor, got ", dtype_name(x.dtype()));
  EMBER_CHECK(p > 0, "norm: p must be positive, got ", p);
  if (p == 1.0) return sum(abs(x), dims, keepdim);
  ReducePlan plan = plan_reduce(x, dims, keepdim, "norm");
  if (std::isinf(p)) check_not_empty(plan, "norm (p = inf)", x);
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    if (std::isinf(p)) y = amax(abs(x), dims, keepdim);
    else if (p == 2.0) y = sqrt(sum(square(x), dims, keepdim));
    else y = pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
  }
  if (needs_grad(x))
    record("norm", {x}, y, [sx = save(x), sy = save(y), keep = plan.keep_shape, p](const Tensor& g) -> TensorList {
      const Tensor& xv = sx.get("norm");
      Tensor yk = sy.get("norm").reshape(keep);
      Tensor gk = g.reshape(keep);
      const Tensor zero = scalar_like(0.0, g);
      if (std::isinf(p)) {
        Tensor ax = abs(xv);
        Tensor mask = add(eq(ax, yk).to(g.dtype()), ne(ax, ax).to(g.dtype()));
        return {mul(sign(xv), mul(div(gk, sum_to(mask, keep)), mask))};
      }
      if (p == 2.0) return {mul(gk, where(eq(yk, 0.0), zero, div(xv, yk)))};
      if (p < 1.0) {  // |x|^(p - 1) is inf at x = 0, where the gradient is 0
        Tensor scaled = mul(sign(xv), where(eq(xv, 0.0), zero, pow(abs(xv), p - 1.0)));
        return {mul(mul(scaled, gk), pow(yk, 1.0 - p))};
      }
      Tensor scaled = p < 2.0 ? mul(sign(xv), pow(abs(xv), p - 1.0)) : mul(xv, pow(abs(xv), p - 2.0));
      return {mul(scaled, where(eq(yk, 0.0), zero, div(gk, pow(yk, p - 1.0))))};
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
