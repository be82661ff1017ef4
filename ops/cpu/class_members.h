// The members of each class in a batch of labels, for the pair losses that visit a row's
// positives (the other rows with its label) without scanning all B labels per row:
//   const ClassMembers members(y, B);                    // O(B log B), 3 B i64 from the allocator
//   for (int64_t j : members.of(i)) ...                    // every index with label y[i], ascending
//   for (int64_t j : members.in_columns(i, c0, c1)) ...    // those in [c0, c1): one tile's columns
// Ascending order keeps the sums that visit positives in the order of a scan over j.
//
// MembersByClass has the same lists by class, for the losses with a row per class (ProxyAnchor):
//   const MembersByClass by_class(y, B, C);  // labels in [0, C); O(B + C), B + C + 1 i64
//   for (int64_t i : by_class.of(c)) ...     // every index with label c, ascending (maybe none)
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

class MembersByClass {
 public:
  MembersByClass(const int64_t* labels, int64_t n, int64_t classes)
      : storage_(Tensor::empty({n + classes + 1}, {.dtype = DType::i64})) {
    int64_t* start = storage_.data<int64_t>();  // start[c]: where class c's run begins in order
    int64_t* order = start + classes + 1;
    std::fill(start, start + classes + 1, int64_t(0));
    for (int64_t i = 0; i < n; ++i) ++start[labels[i] + 1];
    for (int64_t c = 0; c < classes; ++c) start[c + 1] += start[c];
    for (int64_t i = 0; i < n; ++i) order[start[labels[i]]++] = i;  // start[c] moves to class c's end
    for (int64_t c = classes; c > 0; --c) start[c] = start[c - 1];
    start[0] = 0;
    start_ = start, order_ = order, classes_ = classes;
  }

  std::span<const int64_t> of(int64_t c) const { return {order_ + start_[c], order_ + start_[c + 1]}; }

  // The number of classes with at least one member.
  int64_t present() const {
    int64_t count = 0;
    for (int64_t c = 0; c < classes_; ++c) count += start_[c + 1] > start_[c];
    return count;
  }

 private:
  Tensor storage_;
  const int64_t* start_ = nullptr;
  const int64_t* order_ = nullptr;
  int64_t classes_ = 0;
};

}  // namespace ember::cpu
