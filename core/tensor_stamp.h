// Which view of which storage a tensor was, at which version, when a value was derived from it:
// the value is stale once the tensor got another storage (Module::to swaps it inside the same
// handle), was written in place (every in-place op bumps the storage's version), or is another
// view of the storage (shape, strides or offset).
//
//   TensorStamp stamp(weight);  Tensor folded = derive(weight);
//   if (!stamp.matches(weight)) ...   // derive again
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace ember {

class TensorStamp {
 public:
  TensorStamp() = default;  // matches no tensor
  explicit TensorStamp(const Tensor& t) : defined_(t.defined()), set_(true) {
    if (!t.defined()) return;
    storage_ = t.impl().storage;
    version_ = t.version();
    shape_ = t.shape();
    strides_ = t.strides();
    offset_ = t.offset();
    dtype_ = t.dtype();
  }

  // A weak pointer names its storage without keeping it alive, and never matches a later
  // storage at the same address: the control block it shares outlives the storage.
  bool matches(const Tensor& t) const {
    if (!set_ || t.defined() != defined_) return false;
    if (!t.defined()) return true;
    const std::shared_ptr<Storage>& now = t.impl().storage;
    return !storage_.owner_before(now) && !now.owner_before(storage_) && t.version() == version_ &&
           t.offset() == offset_ && t.dtype() == dtype_ && t.shape() == shape_ && t.strides() == strides_;
  }

 private:
  std::weak_ptr<Storage> storage_;
  uint32_t version_ = 0;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
  bool defined_ = false, set_ = false;
};

}  // namespace ember
