#include "core/error.h"
#include "ops/kernels.h"
#include "ops/cpu/loops.h"

namespace ember::cpu {

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  const auto L = make_layout(out, {&x});
  dispatch_arithmetic(x.dtype(), "unary", [&]<class T>(TypeTag<T>) {
    visit_unary(op, [&](auto f) { cpu_elementwise<T, T>(L, in_compute_type(f)); });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&a, &b});
  dispatch_arithmetic(a.dtype(), "binary", [&]<class T>(TypeTag<T>) {
    visit_binary(op, [&](auto f) { cpu_elementwise<T, T, T>(L, in_compute_type(f)); });
  });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&a, &b});
  dispatch_all(a.dtype(), "compare", [&]<class T>(TypeTag<T>) {
    visit_compare(op, [&](auto f) { cpu_elementwise<bool, T, T>(L, in_compute_type(f)); });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&cond, &a, &b});
  dispatch_all(a.dtype(), "where", [&]<class T>(TypeTag<T>) {
    cpu_elementwise<T, bool, T, T>(L, [](bool c, T x, T y) { return c ? x : y; });
  });
}

void copy(const Tensor& src, const Tensor& dst) {
  const auto L = make_layout(dst, {&src});
  dispatch_all(dst.dtype(), "copy", [&]<class D>(TypeTag<D>) {
    dispatch_all(src.dtype(), "copy", [&]<class S>(TypeTag<S>) {
      cpu_elementwise<D, S>(L, [](S v) { return static_cast<D>(v); });
    });
  });
}

void fill(const Tensor& out, double value) {
  const auto L = make_layout(out, {});
  dispatch_all(out.dtype(), "fill", [&]<class T>(TypeTag<T>) {
    const T v = static_cast<T>(value);
    cpu_elementwise<T>(L, [v]() { return v; });
  });
}

}  // namespace ember::cpu
