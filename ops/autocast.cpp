#include "ops/autocast.h"

#include "ops/reduced_precision.h"

namespace ember {
namespace {

thread_local std::optional<DType> g_autocast;

}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : previous_(g_autocast) {
  EMBER_CHECK(dtype == DType::f32 || is_reduced_float(dtype),
              "AutocastGuard: expected bf16, f16 (on) or f32 (off), got ", dtype_name(dtype));
  g_autocast = dtype == DType::f32 ? std::nullopt : std::optional<DType>(dtype);
}

AutocastGuard::~AutocastGuard() { g_autocast = previous_; }

std::optional<DType> autocast_dtype() { return g_autocast; }

Tensor autocast_low(const Tensor& x) {
  return g_autocast && x.defined() && x.dtype() == DType::f32 ? x.to(*g_autocast) : x;
}

Tensor float_op_result(const Tensor& y, DType dtype) { return g_autocast ? y : narrowed(y, dtype); }

bool autocast_promote(Tensor& a, Tensor& b) {
  if (!g_autocast || a.dtype() == b.dtype()) return false;
  if (is_reduced_float(a.dtype()) && b.dtype() == DType::f32) a = a.to(DType::f32);
  else if (is_reduced_float(b.dtype()) && a.dtype() == DType::f32) b = b.to(DType::f32);
  else return false;
  return true;
}

}  // namespace ember
