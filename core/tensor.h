// Tensor: a cheap handle to (storage, shape, strides, offset, dtype) plus autograd state.
// Copies of a Tensor share everything; views share storage.
//
//   #include "ember.h"
//   using namespace ember;
//   Tensor w = randn({3, 2}).requires_grad_();
//   Tensor x = ones({4, 3});
//   Tensor loss = relu(matmul(x, w)).sum();
//   loss.backward();
//   std::cout << w.grad() << "\n";
//
// The class is declared here in core/; the methods that run ops are defined in
// ops/tensor_methods.cpp and the autograd ones in autograd/tensor_autograd.cpp, so that core/
// itself depends on neither.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace ember {

namespace autograd {
struct AutogradMeta;
}

using Dims = std::vector<int64_t>;  // a set of dims; for reductions, {} means all dims

struct TensorOptions {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  bool requires_grad = false;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  int64_t numel = 0;
  DType dtype = DType::f32;
  std::shared_ptr<autograd::AutogradMeta> autograd;  // null until requires_grad or an op records
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialised contiguous memory from the device's caching allocator.
  static Tensor empty(const Shape& shape, TensorOptions options = {});
  // A view of `base`'s storage with other geometry (no checks: for op implementations).
  static Tensor view_of(const Tensor& base, Shape shape, Strides strides, int64_t offset);

  // ---- geometry ------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t numel() const { return impl().numel; }
  const Strides& strides() const { return impl().strides; }
  int64_t stride(int64_t dim) const;
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  TensorOptions options() const { return {dtype(), device(), false}; }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_contiguous() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype()); }

  // Pointer to the first element (storage base + offset). Device memory for cuda tensors.
  void* raw_data() const;
  // Typed pointer; a dtype mismatch is an Error.
  template <class T> T* data() const;

  Storage& storage() const { return *impl().storage; }
  bool shares_storage(const Tensor& other) const { return impl().storage == other.impl().storage; }
  // True when this handle is the only one to its tensor and no other tensor (view, detached
  // copy, saved tensor) shares the storage: an in-place write is then unobservable.
  bool is_exclusive() const { return impl_.use_count() == 1 && impl().storage.use_count() == 1; }
  uint32_t version() const { return storage().version.load(std::memory_order_relaxed); }
  void bump_version() const { storage().version.fetch_add(1, std::memory_order_relaxed); }

  // ---- values (defined in ops/) -----------------------------------------------------------
  double item() const;  // one-element tensors only; copies from the device if needed
  template <class T> std::vector<T> to_vector() const;  // all elements in row-major order
  Tensor contiguous() const;  // this tensor if already contiguous, else a copy
  Tensor clone() const;       // always a copy (contiguous), recorded by autograd
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }

  // ---- autograd (defined in autograd/) ----------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool enabled = true);  // leaves only
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward pass reaches this leaf
  void set_grad(const Tensor& grad) const;
  void zero_grad() const;  // drops the gradient (the next backward starts from zero)
  // Gradient of this tensor w.r.t. the leaves that require grad; `grad` may be omitted for a
  // one-element tensor. The graph's saved tensors are freed unless `retain_graph`.
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;
  Tensor detach() const;  // same storage, no autograd history
  autograd::AutogradMeta* autograd_meta() const { return impl().autograd.get(); }
  autograd::AutogradMeta& ensure_autograd_meta() const;

  // ---- views (defined in ops/) --------------------------------------------------------------
  Tensor reshape(const Shape& shape) const;  // a view when the strides allow, else a copy
  Tensor view(const Shape& shape) const;     // always a view; error if strides do not allow
  Tensor permute(const Dims& order) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-D transpose
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`

  // ---- reductions (defined in ops/) ---------------------------------------------------------
  Tensor sum(const Dims& dims = {}, bool keepdim = false) const;
  Tensor mean(const Dims& dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;

  // ---- in-place writes (not recorded by autograd; refused on tensors that need grad) ---------
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // broadcasts src, converts dtype; same device
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double factor);

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

template <class T>
T* Tensor::data() const {
  EMBER_CHECK(dtype() == dtype_of<T>(), "data: tensor has dtype ", dtype_name(dtype()),
              ", requested ", dtype_name(dtype_of<T>()));
  return static_cast<T*>(raw_data());
}

// t.data<T>(), or null for an undefined tensor: the pointer of a kernel's optional operand.
template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace ember
