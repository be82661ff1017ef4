#include "core/tensor.h"

namespace ember {

TensorImpl& Tensor::impl() const {
  EMBER_CHECK(impl_ != nullptr, "tensor: use of an undefined tensor (default-constructed Tensor)");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, TensorOptions options) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->numel = numel_of(shape, "empty");
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype;
  const auto nbytes = size_t(checked_size_mul(impl->numel, int64_t(dtype_size(options.dtype)), "empty"));
  impl->storage = std::make_shared<Storage>(allocator_for(options.device).allocate(nbytes), nbytes,
                                            options.device);
  Tensor t(std::move(impl));
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor Tensor::view_of(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->numel = numel_of(shape, "view");
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// normalize_dim accepts dim 0 / -1 of a 0-d tensor (for reductions); there is no size to read.
int64_t Tensor::size(int64_t d) const {
  EMBER_CHECK(dim() > 0, "size: expected a tensor with at least one dim, got a 0-d tensor");
  return shape()[size_t(normalize_dim(d, dim(), "size"))];
}

int64_t Tensor::stride(int64_t d) const {
  EMBER_CHECK(dim() > 0, "stride: expected a tensor with at least one dim, got a 0-d tensor");
  return strides()[size_t(normalize_dim(d, dim(), "stride"))];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to lay out (PyTorch agrees); its strides are arbitrary
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    const int64_t n = shape()[i];
    if (n == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= n;
  }
  return true;
}

void* Tensor::raw_data() const {
  auto* base = static_cast<char*>(impl().storage->data.get());
  return base ? base + offset() * int64_t(dtype_size(dtype())) : nullptr;
}

}  // namespace ember
