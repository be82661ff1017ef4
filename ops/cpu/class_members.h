// The members of each class in a batch of labels, for the pair losses that visit a row's
// positives (the other rows with its label) without scanning all B labels per row:
//   const ClassMembers members(y, B);                    // O(B log B), 3 B i64 from the allocator
//   for (int64_t j : members.of(i)) ...                    // every index with label y[i], ascending
//   for (int64_t j : members.in_columns(i, c0, c1)) ...    // those in [c0, c1): one tile's columns
// Ascending order keeps the sums that visit positives in the order of a scan over j.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>

#include "core/tensor.h"

namespace ember::cpu {

class ClassMembers {
 public:
  ClassMembers(const int64_t* labels, int64_t n) : storage_(Tensor::empty({3 * n}, {.dtype = DType::i64})) {
    int64_t* order = storage_.data<int64_t>();
    int64_t* begin = order + n;
    int64_t* end = begin + n;
    std::iota(order, order + n, int64_t(0));
    std::sort(order, order + n, [&](int64_t a, int64_t b) {
      return labels[a] != labels[b] ? labels[a] < labels[b] : a < b;
    });
    for (int64_t run = 0; run < n;) {
      int64_t run_end = run + 1;
      while (run_end < n && labels[order[run_end]] == labels[order[run]]) ++run_end;
      for (int64_t k = run; k < run_end; ++k) begin[order[k]] = run, end[order[k]] = run_end;
      run = run_end;
    }
    order_ = order, begin_ = begin, end_ = end;
  }

  std::span<const int64_t> of(int64_t i) const { return {order_ + begin_[i], order_ + end_[i]}; }

  std::span<const int64_t> in_columns(int64_t i, int64_t c0, int64_t c1) const {
    const std::span<const int64_t> all = of(i);
    const int64_t* first = std::lower_bound(all.data(), all.data() + all.size(), c0);
    const int64_t* last = std::lower_bound(first, all.data() + all.size(), c1);
    return {first, last};
  }

 private:
  Tensor storage_;
  const int64_t* order_ = nullptr;
  const int64_t* begin_ = nullptr;
  const int64_t* end_ = nullptr;
};

}  // namespace ember::cpu
