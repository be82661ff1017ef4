// The scalar math of every elementwise op, shared by the CPU loops and the CUDA kernels so both
// backends compute the same thing. Each functor is a plain struct with a templated call.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "core/host_device.h"
#include "ops/math_f32.h"

namespace ember {

enum class UnaryOp : uint8_t {
  neg, abs, sign, exp, log, log1p, sqrt, rsqrt, square, relu, sigmoid, tanh, gelu, softplus,
  logical_not,
};

enum class BinaryOp : uint8_t {
  add, sub, mul, div, pow, maximum, minimum,
  // fused backward kernels: (grad, saved) -> grad_input
  relu_backward,     // (g, y) -> y <= 0 ? 0 : g
  sigmoid_backward,  // (g, y) -> g * y * (1 - y)
  tanh_backward,     // (g, y) -> g * (1 - y^2)
  gelu_backward,     // (g, x) -> g * gelu'(x)
  softplus_backward, // (g, x) -> g * sigmoid(x)
};

enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge };

// Note [NaN through relu]: PyTorch's relu keeps NaN (relu(NaN) = NaN) and its backward is
// threshold_backward, `y <= 0 ? 0 : g`, which passes g where y is NaN. Every relu in ember, fused
// or not, CPU or CUDA, is therefore written as a test of `<= 0` (false for NaN), never as
// `x > 0 ? x : 0`, which would turn a diverging run's NaN into a healthy-looking 0. Vector code
// uses the unordered compare `not (x <= 0)` (_CMP_NLE_UQ), the same single instruction.
//
// Note [Host exp and tanh]: for float the host (CPU loops and the simulator's kernels) takes exp,
// tanh, log and log1p from ops/math_f32.h, which vectorise and stay within 2.5 ulp, where libm's
// calls kept every loop of exp, sigmoid, tanh, log, log1p and softplus scalar (10-100x slower than
// relu on the CPU); nvcc's device code keeps CUDA's functions (within 2 ulp). f64 keeps <cmath>.
namespace fn {

// fn::name(x): name_f32 (ops/math_f32.h) for float on the host, std::name otherwise.
#if defined(__CUDA_ARCH__)
#define EMBER_HOST_F32(name, f32_form) \
  template <class T> EMBER_HOST_DEVICE T name(T x) { return std::name(x); }
#else
#define EMBER_HOST_F32(name, f32_form)                                \
  template <class T> EMBER_HOST_DEVICE T name(T x) {                   \
    if constexpr (std::is_same_v<T, float>) return f32_form(x);        \
    else return std::name(x);                                          \
  }
#endif
EMBER_HOST_F32(exp, exp_f32)
EMBER_HOST_F32(tanh, tanh_f32)
EMBER_HOST_F32(log, log_f32)
EMBER_HOST_F32(log1p, log1p_f32)
#undef EMBER_HOST_F32

template <class T> EMBER_HOST_DEVICE T sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }
// Softplus with PyTorch's defaults (beta 1, threshold 20): linear above the threshold.
template <class T> EMBER_HOST_DEVICE T softplus(T x) { return x > T(20) ? x : log1p(exp(x)); }
// Exact GELU: x * Phi(x).
template <class T> EMBER_HOST_DEVICE T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
template <class T> EMBER_HOST_DEVICE T gelu_grad(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  const T pdf = exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
}  // namespace fn

template <UnaryOp op>
struct UnaryFn {
  template <class T>
  EMBER_HOST_DEVICE T operator()(T x) const {
    if constexpr (op == UnaryOp::neg) return -x;
    else if constexpr (op == UnaryOp::abs) { if constexpr (std::is_unsigned_v<T>) return x; else return x < T(0) ? -x : x; }
    else if constexpr (op == UnaryOp::sign) { if constexpr (std::is_unsigned_v<T>) return T(x > T(0)); else return T((x > T(0)) - (x < T(0))); }
    else if constexpr (op == UnaryOp::exp) return fn::exp(x);
    else if constexpr (op == UnaryOp::log) return fn::log(x);
    else if constexpr (op == UnaryOp::log1p) return fn::log1p(x);
    else if constexpr (op == UnaryOp::sqrt) return std::sqrt(x);
    else if constexpr (op == UnaryOp::rsqrt) return T(1) / std::sqrt(x);
    else if constexpr (op == UnaryOp::square) return x * x;
    else if constexpr (op == UnaryOp::relu) return x <= T(0) ? T(0) : x;  // Note [NaN through relu]
    else if constexpr (op == UnaryOp::sigmoid) return fn::sigmoid(x);
    else if constexpr (op == UnaryOp::tanh) return fn::tanh(x);
    else if constexpr (op == UnaryOp::gelu) return fn::gelu(x);
    else if constexpr (op == UnaryOp::softplus) return fn::softplus(x);
    else if constexpr (op == UnaryOp::logical_not) return T(!x);
  }
};

template <BinaryOp op>
struct BinaryFn {
  template <class T>
  EMBER_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (op == BinaryOp::add) return a + b;
    else if constexpr (op == BinaryOp::sub) return a - b;
    else if constexpr (op == BinaryOp::mul) return a * b;
    else if constexpr (op == BinaryOp::div) return a / b;
    else if constexpr (op == BinaryOp::pow) return T(std::pow(a, b));
    else if constexpr (op == BinaryOp::maximum) return (a != a || a > b) ? a : b;  // NaN propagates
    else if constexpr (op == BinaryOp::minimum) return (a != a || a < b) ? a : b;
    else if constexpr (op == BinaryOp::relu_backward) return b <= T(0) ? T(0) : a;  // Note [NaN through relu]
    else if constexpr (op == BinaryOp::sigmoid_backward) return a * b * (T(1) - b);
    else if constexpr (op == BinaryOp::tanh_backward) return a * (T(1) - b * b);
    else if constexpr (op == BinaryOp::gelu_backward) return a * fn::gelu_grad(b);
    else if constexpr (op == BinaryOp::softplus_backward) return a * fn::sigmoid(b);
  }
};

template <CompareOp op>
struct CompareFn {
  template <class T>
  EMBER_HOST_DEVICE bool operator()(T a, T b) const {
    if constexpr (op == CompareOp::eq) return a == b;
    else if constexpr (op == CompareOp::ne) return a != b;
    else if constexpr (op == CompareOp::lt) return a < b;
    else if constexpr (op == CompareOp::le) return a <= b;
    else if constexpr (op == CompareOp::gt) return a > b;
    else if constexpr (op == CompareOp::ge) return a >= b;
  }
};

// Calls f(std::integral_constant-like tag) for the runtime op value: turns an enum value into
// a compile-time functor without a switch per call site.
template <class F>
decltype(auto) visit_unary(UnaryOp op, F&& f) {
  switch (op) {
#define EMBER_CASE(name) case UnaryOp::name: return f(UnaryFn<UnaryOp::name>{});
    EMBER_CASE(neg) EMBER_CASE(abs) EMBER_CASE(sign) EMBER_CASE(exp) EMBER_CASE(log) EMBER_CASE(log1p)
    EMBER_CASE(sqrt) EMBER_CASE(rsqrt) EMBER_CASE(square) EMBER_CASE(relu) EMBER_CASE(sigmoid)
    EMBER_CASE(tanh) EMBER_CASE(gelu) EMBER_CASE(softplus) EMBER_CASE(logical_not)
#undef EMBER_CASE
  }
  return f(UnaryFn<UnaryOp::neg>{});
}

template <class F>
decltype(auto) visit_binary(BinaryOp op, F&& f) {
  switch (op) {
#define EMBER_CASE(name) case BinaryOp::name: return f(BinaryFn<BinaryOp::name>{});
    EMBER_CASE(add) EMBER_CASE(sub) EMBER_CASE(mul) EMBER_CASE(div) EMBER_CASE(pow) EMBER_CASE(maximum)
    EMBER_CASE(minimum) EMBER_CASE(relu_backward) EMBER_CASE(sigmoid_backward) EMBER_CASE(tanh_backward)
    EMBER_CASE(gelu_backward) EMBER_CASE(softplus_backward)
#undef EMBER_CASE
  }
  return f(BinaryFn<BinaryOp::add>{});
}

template <class F>
decltype(auto) visit_compare(CompareOp op, F&& f) {
  switch (op) {
#define EMBER_CASE(name) case CompareOp::name: return f(CompareFn<CompareOp::name>{});
    EMBER_CASE(eq) EMBER_CASE(ne) EMBER_CASE(lt) EMBER_CASE(le) EMBER_CASE(gt) EMBER_CASE(ge)
#undef EMBER_CASE
  }
  return f(CompareFn<CompareOp::eq>{});
}

// Ops that need a floating dtype (the rest also accept integers). The CUDA kernels are built
// for floating dtypes only for these (Note [Float-only instantiations] in ops/cuda/elementwise.cu).
constexpr bool unary_needs_float(UnaryOp op) {
  return !(op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::sign || op == UnaryOp::square ||
           op == UnaryOp::relu || op == UnaryOp::logical_not);
}
constexpr bool binary_needs_float(BinaryOp op) {
  return op == BinaryOp::sigmoid_backward || op == BinaryOp::tanh_backward || op == BinaryOp::gelu_backward ||
         op == BinaryOp::softplus_backward;
}

// Calls f on its operands widened to compute_t (bf16 and f16 to float, others unchanged); the
// loop's store into the output rounds once (Note [Reduced-precision arithmetic] in core/float16.h).
template <class F>
struct InComputeType {
  F f;
  template <class... A>
  EMBER_HOST_DEVICE auto operator()(A... a) const { return f(static_cast<compute_t<A>>(a)...); }
};
template <class F>
EMBER_HOST_DEVICE InComputeType<F> in_compute_type(F f) { return {f}; }

// Whether F is an InComputeType, whose operands may be given already widened (the CPU's f16
// loops, Note [f16 loops in blocks] in ops/cpu/loops.h).
template <class F>
inline constexpr bool is_in_compute_type_v = false;
template <class F>
inline constexpr bool is_in_compute_type_v<InComputeType<F>> = true;

}  // namespace ember
