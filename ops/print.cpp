// Printing: "tensor(shape=(2, 3), dtype=f32, device=cpu)" then the values, nested by dim, with
// the middle of long dims elided ("...") once the tensor has more than 1000 elements.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "ops/ops.h"

namespace ember {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

std::string format_value(double v, DType dtype, bool use_sci) {
  std::ostringstream os;
  if (dtype == DType::boolean) os << (v != 0 ? "true" : "false");
  else if (!is_floating(dtype)) os << int64_t(v);
  else if (std::isnan(v)) os << "nan";
  else if (std::isinf(v)) os << (v > 0 ? "inf" : "-inf");
  else if (use_sci) os << std::scientific << std::setprecision(4) << v;
  else os << std::fixed << std::setprecision(4) << v;
  return os.str();
}

void print_dim(std::ostream& os, const std::vector<double>& values, const Shape& shape, int64_t dim,
               int64_t offset, const Strides& strides, bool summarize, DType dtype, bool sci, int indent) {
  const int64_t n = shape[size_t(dim)];
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (dim + 1 == int64_t(shape.size()) ? "..., " : "...,\n" + std::string(size_t(indent + 1), ' '));
      i = n - kEdgeItems - 1;
      continue;
    }
    const int64_t at = offset + i * strides[size_t(dim)];
    if (dim + 1 == int64_t(shape.size())) os << format_value(values[size_t(at)], dtype, sci);
    else print_dim(os, values, shape, dim + 1, at, strides, summarize, dtype, sci, indent + 1);
    if (i + 1 < n) os << (dim + 1 == int64_t(shape.size()) ? ", " : ",\n" + std::string(size_t(indent + 1), ' '));
  }
  os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  os << "tensor(shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype()) << ", device=" << t.device();
  if (t.requires_grad()) os << ", requires_grad";
  os << ")\n";
  std::vector<double> values;
  {
    autograd::NoGradGuard no_grad;
    values = t.detach().to(Device::cpu()).to(DType::f64).contiguous().to_vector<double>();
  }
  if (t.dim() == 0) return os << format_value(values[0], t.dtype(), false);
  double largest = 0;
  for (double v : values)
    if (std::isfinite(v)) largest = std::max(largest, std::fabs(v));
  const bool sci = is_floating(t.dtype()) && (largest >= 1e6 || (largest > 0 && largest < 1e-3));
  print_dim(os, values, t.shape(), 0, 0, contiguous_strides(t.shape()), t.numel() > kSummarizeAbove, t.dtype(), sci, 0);
  return os;
}

}  // namespace ember
