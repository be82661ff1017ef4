// Which storage a tensor had, and its version, when a value was derived from it: the value is
// stale once the tensor got another storage (Module::to swaps it inside the same handle) or was
// written in place (every in-place op bumps the storage's version).
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
  explicit TensorStamp(const Tensor& t)
      : storage_(t.defined() ? std::weak_ptr<Storage>(t.impl().storage) : std::weak_ptr<Storage>()),
        version_(t.defined() ? t.version() : 0),
        defined_(t.defined()),
        set_(true) {}

  // A weak pointer names its storage without keeping it alive, and never matches a later
  // storage at the same address: the control block it shares outlives the storage.
  bool matches(const Tensor& t) const {
    if (!set_ || t.defined() != defined_) return false;
    if (!t.defined()) return true;
    const std::shared_ptr<Storage>& now = t.impl().storage;
    return !storage_.owner_before(now) && !now.owner_before(storage_) && t.version() == version_;
  }

 private:
  std::weak_ptr<Storage> storage_;
  uint32_t version_ = 0;
  bool defined_ = false, set_ = false;
};

}  // namespace ember
