// The layout of an elementwise loop over one output and up to three inputs that broadcast to
// its shape, any strides: computed once on the host and walked by the CPU loops (ops/cpu/loops.h)
// and the CUDA ones (ops/cuda/elementwise_loops.h) alike.
//
//   ElementwiseLayout L = make_layout(out, {&a, &b});   // L.shape: coalesced iteration shape
//
// Note [Coalescing]: dims of size 1 are dropped and neighbouring dims that are laid out
// back-to-back for every operand are merged, so a contiguous tensor of any rank becomes one
// flat loop and a (N, C) + (C) broadcast becomes N rows of C unit-stride elements.
#pragma once

#include <array>
#include <initializer_list>

#include "core/tensor.h"

namespace ember {

struct ElementwiseLayout {
  static constexpr int kMaxOperands = 4;
  int operands = 0;                             // [0] is the output
  Shape shape;                                  // coalesced iteration shape
  std::array<Strides, kMaxOperands> strides;    // in elements, 0 where broadcast
  std::array<char*, kMaxOperands> data{};
  int64_t numel = 0;
  bool dense = false;                           // one unit-stride run for every operand
};

ElementwiseLayout make_layout(const Tensor& out, std::initializer_list<const Tensor*> inputs);

}  // namespace ember
