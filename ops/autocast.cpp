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

namespace {

bool promote(std::initializer_list<Tensor*> operands) {
  if (!g_autocast) return false;
  bool any_f32 = false, any_low = false;
  for (const Tensor* t : operands) {
    any_f32 |= t->dtype() == DType::f32;
    any_low |= is_reduced_float(t->dtype());
  }
  if (!any_f32 || !any_low) return false;
  for (Tensor* t : operands)
    if (is_reduced_float(t->dtype())) *t = t->to(DType::f32);
  return true;
}

}  // namespace

bool autocast_promote(Tensor& a, Tensor& b) { return promote({&a, &b}); }
bool autocast_promote(Tensor& a, Tensor& b, Tensor& c) { return promote({&a, &b, &c}); }

}  // namespace ember
