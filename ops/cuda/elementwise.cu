// Elementwise kernels: unary, binary, compare, where, copy (dtype conversion), fill. Every
// operand broadcasts to out's shape and may have any strides; the scalar math is the CPU's
// (ops/elementwise_functors.h), the loops are ops/cuda/elementwise_loops.h.
#include <type_traits>

#include "ops/cuda/elementwise_loops.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"
#include "ops/cuda/transpose.h"

namespace ember::cuda {
namespace {

struct WhereFn {
  template <class T>
  EMBER_HOST_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};

template <class D>
struct CastFn {
  template <class S>
  EMBER_HOST_DEVICE D operator()(S v) const { return static_cast<D>(v); }
};

template <class T>
struct ConstantFn {
  T value;
  EMBER_HOST_DEVICE T operator()() const { return value; }
};

// Note [Float-only instantiations]: the CPU instantiates every op for every numeric dtype and
// the op layer refuses the meaningless ones (exp of an i64); here those kernels are not built
// at all (fewer kernels for nvcc, no float-constant-to-u8 warnings), and a call is an Error.
template <class F> struct OpOf;
template <UnaryOp op> struct OpOf<UnaryFn<op>> { static constexpr bool float_only = unary_needs_float(op); };
template <BinaryOp op> struct OpOf<BinaryFn<op>> { static constexpr bool float_only = binary_needs_float(op); };
template <class T, class F>
constexpr bool instantiated = std::is_floating_point_v<compute_t<T>> || !OpOf<F>::float_only;

[[noreturn]] void refuse_integer(const char* op, DType dtype) {
  EMBER_FAIL(op, ": this op needs a floating dtype (f32, f64, bf16 or f16) on cuda, got ", dtype_name(dtype));
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  const auto L = make_layout(out, {&x});
  dispatch_arithmetic(x.dtype(), "unary", [&]<class T>(TypeTag<T>) {
    visit_unary(op, [&](auto f) {
      if constexpr (instantiated<T, decltype(f)>) launch_elementwise<T, T>(L, in_compute_type(f));
      else refuse_integer("unary", x.dtype());
    });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&a, &b});
  dispatch_arithmetic(a.dtype(), "binary", [&]<class T>(TypeTag<T>) {
    visit_binary(op, [&](auto f) {
      if constexpr (instantiated<T, decltype(f)>) launch_elementwise<T, T, T>(L, in_compute_type(f));
      else refuse_integer("binary", a.dtype());
    });
  });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&a, &b});
  dispatch_all(a.dtype(), "compare", [&]<class T>(TypeTag<T>) {
    visit_compare(op, [&](auto f) { launch_elementwise<bool, T, T>(L, in_compute_type(f)); });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&cond, &a, &b});
  dispatch_all(a.dtype(), "where", [&]<class T>(TypeTag<T>) { launch_elementwise<T, bool, T, T>(L, WhereFn{}); });
}

void copy(const Tensor& src, const Tensor& dst) {
  const auto L = make_layout(dst, {&src});
  if (L.numel == 0 || copy_transposed(L, dst.dtype(), src.dtype())) return;
  dispatch_all(dst.dtype(), "copy", [&]<class D>(TypeTag<D>) {
    dispatch_all(src.dtype(), "copy", [&]<class S>(TypeTag<S>) { launch_elementwise<D, S>(L, CastFn<D>{}); });
  });
}

void fill(const Tensor& out, double value) {
  const auto L = make_layout(out, {});
  dispatch_all(out.dtype(), "fill", [&]<class T>(TypeTag<T>) {
    launch_elementwise<T>(L, ConstantFn<T>{static_cast<T>(value)});
  });
}

void bind_elementwise_kernels() {
  ember::unary_kernel.set_cuda(&cuda::unary);
  ember::binary_kernel.set_cuda(&cuda::binary);
  ember::compare_kernel.set_cuda(&cuda::compare);
  ember::where_kernel.set_cuda(&cuda::where);
  ember::copy_kernel.set_cuda(&cuda::copy);
  ember::fill_kernel.set_cuda(&cuda::fill);
}

}  // namespace ember::cuda
