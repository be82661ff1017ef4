#include "ops/elementwise_layout.h"

namespace ember {

ElementwiseLayout make_layout(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  ElementwiseLayout L;
  L.operands = 1 + int(inputs.size());
  EMBER_CHECK(L.operands <= ElementwiseLayout::kMaxOperands, "elementwise: too many operands");
  EMBER_CHECK(out.dim() <= 12, "elementwise: tensors of rank > 12 are not supported, got rank ", out.dim());
  L.numel = out.numel();

  std::array<Strides, ElementwiseLayout::kMaxOperands> full;
  full[0] = out.strides();
  L.data[0] = static_cast<char*>(out.raw_data());
  int k = 1;
  for (const Tensor* t : inputs) {
    full[k] = broadcast_strides(t->shape(), t->strides(), out.shape());
    L.data[k] = static_cast<char*>(t->raw_data());
    ++k;
  }
  // Drop size-1 dims, then merge dim d into the previous kept dim when it continues it.
  for (int64_t d = 0; d < out.dim(); ++d) {
    const int64_t n = out.shape()[d];
    if (n == 1) continue;
    bool merge = !L.shape.empty();
    for (int o = 0; o < L.operands && merge; ++o)
      merge = L.strides[o].back() == full[o][d] * n;
    if (merge) {
      L.shape.back() *= n;
      for (int o = 0; o < L.operands; ++o) L.strides[o].back() = full[o][d];
    } else {
      L.shape.push_back(n);
      for (int o = 0; o < L.operands; ++o) L.strides[o].push_back(full[o][d]);
    }
  }
  if (L.shape.empty() && L.numel == 1) {
    L.shape.push_back(1);
    for (int o = 0; o < L.operands; ++o) L.strides[o].push_back(1);
  }
  L.dense = L.shape.size() == 1;
  for (int o = 0; o < L.operands && L.dense; ++o) L.dense = L.strides[o][0] == 1;
  return L;
}

}  // namespace ember
