// Element types and the helpers that turn a runtime DType into a C++ type.
//
//   dispatch_float(x.dtype(), "exp", [&]<class T>(TypeTag<T>) { exp_kernel<T>(x, y); });
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/float16.h"

namespace ember {

enum class DType : uint8_t { f32, f64, i64, i32, u8, boolean, bf16, f16 };

std::string_view dtype_name(DType dtype);  // "f32", "i64", "bool", ...
size_t dtype_size(DType dtype);            // bytes per element
bool is_floating(DType dtype);             // f32, f64, bf16, f16
bool is_integral(DType dtype);             // i64, i32, u8 (not bool)

template <class T> struct TypeTag { using type = T; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<Half>() { return DType::f16; }

// bf16 and f16: floating storage computed in f32 (Note [Reduced-precision arithmetic]).
constexpr bool is_reduced_float(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

// Calls f(TypeTag<T>{}) for the C++ type of a floating dtype computed in place (f32, f64);
// anything else is an error naming `op`.
template <class F>
decltype(auto) dispatch_float(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f64: return f(TypeTag<double>{});
    default: EMBER_FAIL(op, ": expected a floating dtype (f32 or f64), got ", dtype_name(dtype));
  }
}

// Numeric dtypes usable in arithmetic: f32, f64, i64, i32, u8.
template <class F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f64: return f(TypeTag<double>{});
    case DType::i64: return f(TypeTag<int64_t>{});
    case DType::i32: return f(TypeTag<int32_t>{});
    case DType::u8: return f(TypeTag<uint8_t>{});
    default: EMBER_FAIL(op, ": expected a numeric dtype, got ", dtype_name(dtype));
  }
}

// The numeric dtypes and the 16-bit floats, whose kernels compute in compute_t<T> (float).
template <class F>
decltype(auto) dispatch_arithmetic(DType dtype, const char* op, F&& f) {
  if (dtype == DType::bf16) return f(TypeTag<BFloat16>{});
  if (dtype == DType::f16) return f(TypeTag<Half>{});
  return dispatch_numeric(dtype, op, std::forward<F>(f));
}

// Every dtype with a C++ element type (numeric, bool, bf16, f16).
template <class F>
decltype(auto) dispatch_all(DType dtype, const char* op, F&& f) {
  if (dtype == DType::boolean) return f(TypeTag<bool>{});
  return dispatch_arithmetic(dtype, op, std::forward<F>(f));
}

}  // namespace ember
