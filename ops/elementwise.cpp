#include "ops/elementwise.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.device() == b.device(), op, ": expected tensors on one device, got ", a.device(), " and ",
              b.device());
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": expected tensors of one dtype, got ", dtype_name(a.dtype()),
              " and ", dtype_name(b.dtype()), " (convert one with .to(dtype))");
}

namespace {

Tensor unary_forward(UnaryOp op, const char* name, const Tensor& x) {
  if (unary_needs_float(op))
    EMBER_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor, got ", dtype_name(x.dtype()));
  if (op == UnaryOp::logical_not)
    EMBER_CHECK(x.dtype() == DType::boolean, name, ": expected a bool tensor, got ", dtype_name(x.dtype()));
  Tensor y = Tensor::empty(x.shape(), x.options());
  if (op == UnaryOp::logical_not) {
    Tensor f = Tensor::empty(x.shape(), {.dtype = DType::u8, .device = x.device()});
    unary_kernel(x.device(), op, x.to(DType::u8), f);
    copy_kernel(x.device(), f, y);
    return y;
  }
  unary_kernel(x.device(), op, x, y);
  return y;
}

Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  check_same_device(name, a, b);
  check_same_dtype(name, a, b);
  EMBER_CHECK(a.dtype() != DType::boolean, name, ": expected numeric tensors, got bool");
  Tensor y = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), name), a.options());
  binary_kernel(a.device(), op, a, b, y);
  return y;
}

// Unary op whose gradient is g * d(x) where d is computed from the saved input or output.
template <class Grad>
Tensor unary_op(UnaryOp op, const char* name, const Tensor& x, bool save_output, Grad grad) {
  Tensor y = unary_forward(op, name, x);
  if (needs_grad(x)) {
    record(name, {x}, y, [name, grad, s = save(save_output ? y : x)](const Tensor& g) -> TensorList {
      return {grad(g, s.get(name))};
    });
  }
  return y;
}

Tensor compare(CompareOp op, const char* name, const Tensor& a, const Tensor& b) {
  check_same_device(name, a, b);
  check_same_dtype(name, a, b);
  Tensor y = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), name), {.dtype = DType::boolean, .device = a.device()});
  compare_kernel(a.device(), op, a, b, y);
  return y;
}

Tensor fused(BinaryOp op, const Tensor& g, const Tensor& saved) {
  Tensor r = Tensor::empty(g.shape(), g.options());
  binary_kernel(g.device(), op, g, saved, r);
  return r;
}

}  // namespace

// ---- unary -------------------------------------------------------------------------------------
Tensor neg(const Tensor& x) {
  return unary_op(UnaryOp::neg, "neg", x, false, [](const Tensor& g, const Tensor&) { return neg(g); });
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::abs, "abs", x, false, [](const Tensor& g, const Tensor& x) { return mul(g, sign(x)); });
}
Tensor sign(const Tensor& x) { return unary_forward(UnaryOp::sign, "sign", x); }
Tensor exp(const Tensor& x) {
  return unary_op(UnaryOp::exp, "exp", x, true, [](const Tensor& g, const Tensor& y) { return mul(g, y); });
}
Tensor log(const Tensor& x) {
  return unary_op(UnaryOp::log, "log", x, false, [](const Tensor& g, const Tensor& x) { return div(g, x); });
}
Tensor log1p(const Tensor& x) {
  return unary_op(UnaryOp::log1p, "log1p", x, false,
                  [](const Tensor& g, const Tensor& x) { return div(g, add(x, 1.0)); });
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::sqrt, "sqrt", x, true,
                  [](const Tensor& g, const Tensor& y) { return div(g, mul(y, 2.0)); });
}
Tensor rsqrt(const Tensor& x) {
  return unary_op(UnaryOp::rsqrt, "rsqrt", x, true,
                  [](const Tensor& g, const Tensor& y) { return mul(g, mul(pow(y, 3.0), -0.5)); });
}
Tensor square(const Tensor& x) {
  return unary_op(UnaryOp::square, "square", x, false,
                  [](const Tensor& g, const Tensor& x) { return mul(g, mul(x, 2.0)); });
}
Tensor relu(const Tensor& x) {
  return unary_op(UnaryOp::relu, "relu", x, true,
                  [](const Tensor& g, const Tensor& y) { return fused(BinaryOp::relu_backward, g, y); });
}
Tensor relu_backward(const Tensor& grad, const Tensor& output) { return fused(BinaryOp::relu_backward, grad, output); }
Tensor sigmoid(const Tensor& x) {
  return unary_op(UnaryOp::sigmoid, "sigmoid", x, true,
                  [](const Tensor& g, const Tensor& y) { return fused(BinaryOp::sigmoid_backward, g, y); });
}
Tensor tanh(const Tensor& x) {
  return unary_op(UnaryOp::tanh, "tanh", x, true,
                  [](const Tensor& g, const Tensor& y) { return fused(BinaryOp::tanh_backward, g, y); });
}
Tensor gelu(const Tensor& x) {
  return unary_op(UnaryOp::gelu, "gelu", x, false,
                  [](const Tensor& g, const Tensor& x) { return fused(BinaryOp::gelu_backward, g, x); });
}
Tensor softplus(const Tensor& x) {
  return unary_op(UnaryOp::softplus, "softplus", x, false,
                  [](const Tensor& g, const Tensor& x) { return fused(BinaryOp::softplus_backward, g, x); });
}
Tensor logical_not(const Tensor& x) { return unary_forward(UnaryOp::logical_not, "logical_not", x); }

// ---- binary ------------------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b) {
  if (Tensor pa = a, pb = b; autocast_promote(pa, pb)) return add(pa, pb);  // Note [Autocast policy]
  Tensor y = binary_forward(BinaryOp::add, "add", a, b);
  if (needs_grad({a, b}))
    record("add", {a, b}, y, [sa = a.shape(), sb = b.shape()](const Tensor& g) -> TensorList {
      return {sum_to(g, sa), sum_to(g, sb)};
    });
  return y;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (Tensor pa = a, pb = b; autocast_promote(pa, pb)) return sub(pa, pb);  // Note [Autocast policy]
  Tensor y = binary_forward(BinaryOp::sub, "sub", a, b);
  if (needs_grad({a, b}))
    record("sub", {a, b}, y, [sa = a.shape(), sb = b.shape(), nb = needs_grad(b)](const Tensor& g) -> TensorList {
      return {sum_to(g, sa), nb ? sum_to(neg(g), sb) : Tensor()};
    });
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (Tensor pa = a, pb = b; autocast_promote(pa, pb)) return mul(pa, pb);  // Note [Autocast policy]
  Tensor y = binary_forward(BinaryOp::mul, "mul", a, b);
  if (needs_grad({a, b})) {
    const bool na = needs_grad(a), nb = needs_grad(b);
    record("mul", {a, b}, y,
           [sa = save(nb ? a : Tensor()), sb = save(na ? b : Tensor()), shape_a = a.shape(), shape_b = b.shape(), na,
            nb](const Tensor& g) -> TensorList {
             return {na ? sum_to(mul(g, sb.get("mul")), shape_a) : Tensor(),
                     nb ? sum_to(mul(g, sa.get("mul")), shape_b) : Tensor()};
           });
  }
  return y;
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (Tensor pa = a, pb = b; autocast_promote(pa, pb)) return div(pa, pb);  // Note [Autocast policy]
  Tensor y = binary_forward(BinaryOp::div, "div", a, b);
  if (needs_grad({a, b})) {
    record("div", {a, b}, y,
           [sb = save(b), sy = save(needs_grad(b) ? y : Tensor()), shape_a = a.shape(), shape_b = b.shape(),
            nb = needs_grad(b)](const Tensor& g) -> TensorList {
             Tensor ga = div(g, sb.get("div"));
             return {sum_to(ga, shape_a), nb ? sum_to(neg(mul(ga, sy.get("div"))), shape_b) : Tensor()};
           });
  }
  return y;
}

// Note [Singular gradients]: at the points where a formula's factors are 0 and inf (or NaN), a
// gradient is whatever PyTorch 1.13's derivatives.yaml returns there, so backward passes written
// against PyTorch agree on every value, finite or not. Each backward below spells out PyTorch's
// formula, in its order of operations, and masks with where() (never by multiplying with a 0/1
// mask, which turns an infinite upstream gradient into NaN).
// pow: d/da is 0 where b == 0 (so pow(0, 0) has gradient 0, not 0 * 0^-1 = NaN); d/db is 0 where
// a == 0 and b >= 0 (not 0 * log 0).
Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor y = binary_forward(BinaryOp::pow, "pow", a, b);
  if (needs_grad({a, b})) {
    record("pow", {a, b}, y,
           [sa = save(a), sb = save(b), sy = save(needs_grad(b) ? y : Tensor()), shape_a = a.shape(),
            shape_b = b.shape(), na = needs_grad(a), nb = needs_grad(b)](const Tensor& g) -> TensorList {
             const Tensor& av = sa.get("pow");
             const Tensor& bv = sb.get("pow");
             const Tensor zero = scalar_like(0.0, g);
             Tensor ga, gb;
             if (na) ga = sum_to(where(eq(bv, 0.0), zero, mul(g, mul(bv, pow(av, sub(bv, 1.0))))), shape_a);
             if (nb) {
               Tensor d = mul(sy.get("pow"), log(av));
               gb = sum_to(mul(g, where(eq(av, 0.0), where(ge(bv, 0.0), zero, d), d)), shape_b);
             }
             return {ga, gb};
           });
  }
  return y;
}

namespace {
// maximum/minimum (PyTorch's formula, Note [Singular gradients]): ties split the gradient evenly,
// the loser gets exactly 0, and a NaN operand (neither wins nor loses) passes the whole gradient
// to both inputs.
Tensor extremum(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor y = binary_forward(op, name, a, b);
  if (needs_grad({a, b})) {
    record(name, {a, b}, y, [name, op, sa = save(a), sb = save(b), shape_a = a.shape(),
                             shape_b = b.shape()](const Tensor& g) -> TensorList {
      const Tensor& av = sa.get(name);
      const Tensor& bv = sb.get(name);
      const Tensor zero = scalar_like(0.0, g);
      Tensor shared = where(eq(av, bv), mul(g, 0.5), g);
      const bool is_max = op == BinaryOp::maximum;
      Tensor ga = where(is_max ? lt(av, bv) : gt(av, bv), zero, shared);
      Tensor gb = where(is_max ? gt(av, bv) : lt(av, bv), zero, shared);
      return {sum_to(ga, shape_a), sum_to(gb, shape_b)};
    });
  }
  return y;
}

// x clamped to [lo, hi] (either bound optional). NaN stays NaN and, as for every x outside the
// bounds, gets gradient 0; x on a bound gets the whole gradient (PyTorch's clamp_backward).
Tensor clamp_op(const char* name, const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  EMBER_CHECK(!(lo && hi) || *lo <= *hi, name, ": expected lo <= hi, got ", *lo, " > ", *hi);
  Tensor y;
  if (lo) y = binary_forward(BinaryOp::maximum, name, x, scalar_like(*lo, x));
  if (hi) y = binary_forward(BinaryOp::minimum, name, y.defined() ? y : x, scalar_like(*hi, x));
  if (!y.defined()) {
    autograd::NoGradGuard no_grad;
    y = x.clone();
  }
  if (needs_grad(x)) {
    record(name, {x}, y, [name, sx = save(x), lo, hi](const Tensor& g) -> TensorList {
      const Tensor& xv = sx.get(name);
      const Tensor zero = scalar_like(0.0, g);
      Tensor gx = g;
      if (lo) gx = where(ge(xv, *lo), gx, zero);
      if (hi) gx = where(le(xv, *hi), gx, zero);
      return {gx};
    });
  }
  return y;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::maximum, "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::minimum, "minimum", a, b); }

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
// Note [Scalar pow]: PyTorch computes x ** 0.5 with sqrt and x ** -0.5 with rsqrt (its
// pow_tensor_scalar_kernel), which differ from std::pow at -inf (sqrt(-inf) = NaN, pow(-inf, 0.5)
// = inf) and -0; ember does the same, in the forward and in the gradient, whose x ** (s - 1) is
// again a scalar pow (so x ** 1.5 has gradient NaN at -inf, as in PyTorch). Its other special
// cases (2, 3, -1, -2) agree with std::pow on every non-finite input.
Tensor pow(const Tensor& a, double exponent) {
  Tensor y;
  if (is_floating(a.dtype()) && exponent == 0.5) y = unary_forward(UnaryOp::sqrt, "pow", a);
  else if (is_floating(a.dtype()) && exponent == -0.5) y = unary_forward(UnaryOp::rsqrt, "pow", a);
  else y = binary_forward(BinaryOp::pow, "pow", a, scalar_like(exponent, a));
  if (needs_grad(a))
    record("pow", {a}, y, [sa = save(a), exponent](const Tensor& g) -> TensorList {
      if (exponent == 0.0) return {zeros_like(g)};  // even where g is inf or NaN (PyTorch)
      return {mul(g, mul(pow(sa.get("pow"), exponent - 1.0), exponent))};
    });
  return y;
}
// With a scalar bound these are PyTorch's clamp_min / clamp_max (a tie passes the whole gradient).
Tensor maximum(const Tensor& a, double b) { return clamp_op("maximum", a, b, std::nullopt); }
Tensor minimum(const Tensor& a, double b) { return clamp_op("minimum", a, std::nullopt, b); }

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  return clamp_op("clamp", x, lo, hi);
}

// ---- comparisons ---------------------------------------------------------------------------------
Tensor eq(const Tensor& a, const Tensor& b) { return compare(CompareOp::eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(CompareOp::ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(CompareOp::lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(CompareOp::le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(CompareOp::gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(CompareOp::ge, "ge", a, b); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(b, a)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(b, a)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(b, a)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like(b, a)); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(b, a)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(b, a)); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(cond.dtype() == DType::boolean, "where: condition must be bool, got ", dtype_name(cond.dtype()));
  check_same_device("where", cond, a);
  check_same_device("where", a, b);
  check_same_dtype("where", a, b);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor y = Tensor::empty(shape, a.options());
  where_kernel(a.device(), cond, a, b, y);
  if (needs_grad({a, b})) {
    record("where", {a, b}, y, [c = save(cond), shape_a = a.shape(), shape_b = b.shape()](const Tensor& g) -> TensorList {
      Tensor zero = scalar_like(0.0, g);
      const Tensor& cv = c.get("where");
      return {sum_to(where(cv, g, zero), shape_a), sum_to(where(cv, zero, g), shape_b)};
    });
  }
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  EMBER_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(), "masked_fill: mask shape ",
              shape_str(mask.shape()), " does not broadcast to the input shape ", shape_str(x.shape()));
  return where(mask, scalar_like(value, x), x);
}

// ---- operators -------------------------------------------------------------------------------------
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace ember
