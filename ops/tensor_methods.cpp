// The op-backed half of Tensor's methods (see core/tensor.h).
#include "autograd/graph.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::TensorList;

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape(), options());
  copy_kernel(device(), *this, out);
  if (needs_grad(*this))
    record("clone", {*this}, out, [](const Tensor& g) -> TensorList { return {g}; });
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), {.dtype = target, .device = device()});
  copy_kernel(device(), *this, out);
  if (needs_grad(*this) && is_floating(target))
    record("to", {*this}, out, [from = dtype()](const Tensor& g) -> TensorList { return {g.to(from)}; });
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  // The output first: allocating on the cuda device initialises the CUDA layer, which installs
  // the cross-device copy.
  Tensor out = Tensor::empty(shape(), {.dtype = dtype(), .device = target});
  CrossDeviceCopy copy = cross_device_copy();
  EMBER_CHECK(copy != nullptr, "to: cannot move a tensor from ", device(), " to ", target,
              ": this build of ember has no CUDA backend or no GPU is visible");
  Tensor src = contiguous();
  copy(src, out);
  if (needs_grad(*this))
    record("to", {*this}, out, [from = device()](const Tensor& g) -> TensorList { return {g.to(from)}; });
  return out;
}

double Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape_str(shape()));
  Tensor host = to(Device::cpu()).to(DType::f64);
  return *host.data<double>();
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device::cpu()).contiguous();
  EMBER_CHECK(host.dtype() == dtype_of<T>(), "to_vector: tensor has dtype ", dtype_name(dtype()),
              ", requested ", dtype_name(dtype_of<T>()));
  const T* p = host.data<T>();
  return std::vector<T>(p, p + numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

// ---- in-place writes ---------------------------------------------------------------------------
Tensor& Tensor::fill_(double value) {
  autograd::check_inplace(*this, "fill_");
  fill_kernel(device(), *this, value);
  bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  autograd::check_inplace(*this, "copy_");
  check_same_device("copy_", *this, src);
  EMBER_CHECK(broadcast_shapes(src.shape(), shape(), "copy_") == shape(), "copy_: source shape ",
              shape_str(src.shape()), " does not broadcast to ", shape_str(shape()));
  copy_kernel(device(), src, *this);
  bump_version();
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  autograd::check_inplace(*this, "add_");
  check_same_device("add_", *this, other);
  check_same_dtype("add_", *this, other);
  EMBER_CHECK(broadcast_shapes(other.shape(), shape(), "add_") == shape(), "add_: shape ", shape_str(other.shape()),
              " does not broadcast to ", shape_str(shape()));
  if (alpha == 1.0) {
    binary_kernel(device(), BinaryOp::add, *this, other, *this);
  } else {
    autograd::NoGradGuard no_grad;
    binary_kernel(device(), BinaryOp::add, *this, mul(other, alpha), *this);
  }
  bump_version();
  return *this;
}

Tensor& Tensor::mul_(double factor) {
  autograd::check_inplace(*this, "mul_");
  binary_kernel(device(), BinaryOp::mul, *this, scalar_like(factor, *this), *this);
  bump_version();
  return *this;
}

// ---- method forms of free functions ----------------------------------------------------------------
Tensor Tensor::reshape(const Shape& s) const { return ember::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return ember::view(*this, s); }
Tensor Tensor::permute(const Dims& order) const { return ember::permute(*this, order); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return ember::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  EMBER_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape ", shape_str(shape()));
  return ember::transpose(*this, 0, 1);
}
Tensor Tensor::flatten(int64_t s, int64_t e) const { return ember::flatten(*this, s, e); }
Tensor Tensor::squeeze() const { return ember::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return ember::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return ember::unsqueeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return ember::expand(*this, s); }
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const { return ember::narrow(*this, d, start, length); }
Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return ember::slice(*this, d, start, end, step);
}
Tensor Tensor::select(int64_t d, int64_t index) const { return ember::select(*this, d, index); }
Tensor Tensor::sum(const Dims& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const Dims& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return ember::max(*this); }
Tensor Tensor::min() const { return ember::min(*this); }
Tensor Tensor::argmax(int64_t d, bool keepdim) const { return ember::argmax(*this, d, keepdim); }

}  // namespace ember
