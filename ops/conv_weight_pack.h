// A convolution's weights packed once for the CPU GEMMs of many forwards (Note [Conv weight
// packs] in ops/cpu/conv.cpp): a layer that runs inference after inference with unchanging
// weights hands the same pack to every conv2d call (nn/conv_bn.h does).
//
//   auto pack = std::make_shared<Conv2dWeightPack>();
//   Tensor y = conv2d(x, w, {}, 1, 0, 1, 1, Activation::none, pack.get());   // packs w
//   Tensor z = conv2d(x2, w, {}, 1, 0, 1, 1, Activation::none, pack.get());  // reads the packed w
//
// The first forward that multiplies by the weights fills the pack; a forward given other weights,
// the same weights after a change (a new storage, view or version: core/tensor_stamp.h), or another
// number of groups packs again, so a stale pack is never read. Threads may share a pack. Forwards
// that do not run the packed f32 GEMM (CUDA, f64, bf16, the direct and grid algorithms) leave it as
// it is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "core/tensor.h"
#include "core/tensor_stamp.h"

namespace ember {

class Conv2dWeightPack {
 public:
  struct Panels;  // the CPU backend's layout (ops/cpu/conv.cpp)

  // The panels of w as it is now, cut into `groups` GEMMs: those in hand if they were built from
  // it for as many groups, else build()'s.
  std::shared_ptr<const Panels> panels_for(const Tensor& w, int64_t groups,
                                           const std::function<std::shared_ptr<const Panels>()>& build);
  // How many times the panels were built (for tests).
  int64_t builds() const;

 private:
  mutable std::mutex mutex_;  // guards the four below
  TensorStamp stamp_;         // of the weights the panels hold
  int64_t groups_ = 0;        // and how many groups they were cut into
  std::shared_ptr<const Panels> panels_;
  int64_t builds_ = 0;
};

}  // namespace ember
