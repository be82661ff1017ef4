#include "support/test_support.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/safetensors.h"

namespace ember::test {
namespace {

std::string index_str(const Shape& shape, int64_t linear) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = linear % shape[d];
    linear /= shape[d];
  }
  return shape_str(idx);
}

std::vector<double> host_values(const Tensor& t) {
  autograd::NoGradGuard no_grad;
  return t.detach().cpu().to(DType::f64).contiguous().to_vector<double>();
}

struct CloseResult {
  bool ok = true;
  std::string message;  // on failure: the shape mismatch, or the worst element and how many failed
};

CloseResult compare_close(const Tensor& got, const Tensor& expected, double rtol, double atol) {
  CloseResult r;
  if (!got.defined() || !expected.defined()) {
    r.ok = got.defined() == expected.defined();
    if (!r.ok) r.message = got.defined() ? "expected an undefined tensor" : "got an undefined tensor";
    return r;
  }
  if (got.shape() != expected.shape()) {
    r.ok = false;
    r.message = "shape " + shape_str(got.shape()) + " != expected shape " + shape_str(expected.shape());
    return r;
  }
  const std::vector<double> g = host_values(got), e = host_values(expected);
  int64_t failures = 0, worst = -1;
  double worst_excess = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool both_nan = std::isnan(g[i]) && std::isnan(e[i]);
    const bool same_inf = std::isinf(e[i]) && g[i] == e[i];
    if (both_nan || same_inf) continue;
    const double err = std::fabs(g[i] - e[i]);
    const double tol = atol + rtol * std::fabs(e[i]);
    if (err <= tol) continue;  // NaN errors fall through as failures
    ++failures;
    const double excess = std::isnan(err) || std::isinf(err) ? INFINITY : err / tol;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = int64_t(i);
    }
  }
  if (failures == 0) return r;
  r.ok = false;
  std::ostringstream os;
  os.precision(9);
  os << failures << " of " << g.size() << " elements differ (rtol " << rtol << ", atol " << atol
     << "); worst at index " << index_str(got.shape(), worst) << ": got " << g[size_t(worst)] << ", expected "
     << e[size_t(worst)] << " (|error| " << std::fabs(g[size_t(worst)] - e[size_t(worst)]) << ")";
  r.message = os.str();
  return r;
}

}  // namespace

bool AllClose::match(const Tensor& actual) const {
  const CloseResult r = compare_close(actual, expected_, rtol_, atol_);
  last_ = r.message;
  return r.ok;
}

std::string AllClose::describe() const {
  std::ostringstream os;
  os << "is close to the expected tensor";
  if (!last_.empty()) os << ": " << last_;
  return os.str();
}

AllClose all_close(const Tensor& expected, double rtol, double atol) { return AllClose(expected, rtol, atol); }

void check_close(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  const CloseResult r = compare_close(actual, expected, rtol, atol);
  INFO(r.message);
  CHECK(r.ok);
}

std::string data_path(const std::string& file) { return std::string(EMBER_TEST_DATA_DIR) + "/" + file; }

std::string mnist_data_root() {
  const char* env = std::getenv("EMBER_DATA_DIR");
  return env && *env ? env : EMBER_REPO_DATA_DIR;
}

Fixtures::Fixtures(const std::string& file) : file_(file) {
  SafetensorsFile f = read_safetensors(data_path(file));
  metadata_ = f.metadata;
  for (const SafetensorsTensor& t : f.tensors)
    tensors_.emplace(t.name, from_data(t.bytes.data(), t.shape, t.dtype));
}

Tensor Fixtures::get(const std::string& name) const {
  auto it = tensors_.find(name);
  EMBER_CHECK(it != tensors_.end(), "fixtures: ", file_, " has no tensor named '", name, "'");
  return it->second;
}

std::vector<std::string> Fixtures::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

void require_gradcheck(const std::function<Tensor(const autograd::TensorList&)>& fn,
                       const autograd::TensorList& inputs, GradcheckOptions options) {
  const GradcheckResult r = gradcheck(fn, inputs, options);
  INFO(r.report);
  REQUIRE(r.ok);
}

Tensor relayout(const Tensor& x, Layout layout) {
  autograd::NoGradGuard no_grad;
  const Shape& shape = x.shape();
  int64_t big_dims = 0;  // a permutation only shows in dims of size > 1
  for (int64_t n : shape) big_dims += n > 1;
  if (layout == Layout::permuted && big_dims < 2) layout = Layout::strided;
  if (layout == Layout::contiguous || x.dim() == 0) return x.detach().clone();
  Tensor out;
  if (layout == Layout::permuted) {
    Dims reversed;
    Shape stored;
    for (int64_t d = x.dim() - 1; d >= 0; --d) {
      reversed.push_back(d);
      stored.push_back(shape[size_t(d)]);
    }
    out = empty(stored, x.options()).permute(reversed);
  } else {
    Shape wide = shape;
    wide.back() *= 2;
    out = zeros(wide, x.options()).slice(-1, 0, wide.back(), 2);
  }
  out.copy_(x.detach());
  return out;
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::contiguous: return "contiguous";
    case Layout::permuted: return "permuted";
    case Layout::strided: return "strided";
  }
  return "?";
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ember::test
