// Creation and random-number kernels. Note [Philox layout]: value i of a draw reads its words
// from Philox block first_block + i / per_block (f32 and integers: 4 values per block, one word
// each; f64: 2 values per block, two words each; normals pair up values through Box-Muller
// inside one block; randint: 2 values per block, two words each). A CUDA thread can therefore
// compute any value on its own, and both backends produce identical numbers for one seed: the
// per-block math is shared with the CUDA kernels (ops/random_functors.h).
#include <cmath>

#include "core/parallel.h"
#include "ops/kernels.h"
#include "ops/random_functors.h"

namespace ember::cpu {
namespace {

// per_block(words, values) fills kPer values from one block's words.
template <class T, int kPer, class F>
void for_each_block(const Tensor& out, const Generator& gen, uint64_t first_block, F per_block) {
  T* data = out.data<T>();
  const int64_t n = out.numel(), blocks = (n + kPer - 1) / kPer;
  parallel_for(0, blocks, 2048, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T vals[kPer];
      const auto w = gen.block(first_block + uint64_t(b));
      per_block(w.data(), vals);
      for (int64_t j = 0; j < kPer && b * kPer + j < n; ++j) data[b * kPer + j] = vals[j];
    }
  });
}

}  // namespace

void arange(const Tensor& out, double start, double step) {
  dispatch_arithmetic(out.dtype(), "arange", [&]<class T>(TypeTag<T>) {
    T* data = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) data[i] = static_cast<T>(start + double(i) * step);
  });
}

void uniform(const Tensor& out, const Generator& gen, uint64_t first_block, double low, double high) {
  dispatch_float(out.dtype(), "rand", [&]<class T>(TypeTag<T>) {
    const T lo = T(low), span = T(high - low);
    for_each_block<T, values_per_block<T>>(out, gen, first_block,
                                           [&](const uint32_t* w, T* v) { uniform_values<T>(w, v, lo, span); });
  });
}

void normal(const Tensor& out, const Generator& gen, uint64_t first_block, double mean, double std) {
  dispatch_float(out.dtype(), "randn", [&]<class T>(TypeTag<T>) {
    const T m = T(mean), s = T(std);
    for_each_block<T, values_per_block<T>>(out, gen, first_block,
                                           [&](const uint32_t* w, T* v) { normal_values<T>(w, v, m, s); });
  });
}

void randint(const Tensor& out, const Generator& gen, uint64_t first_block, int64_t low, int64_t high) {
  const uint64_t span = uint64_t(high - low);
  auto draw = [&]<class T>(TypeTag<T>) {
    for_each_block<T, randint_per_block>(out, gen, first_block, [&](const uint32_t* w, T* v) {
      for (int j = 0; j < randint_per_block; ++j) v[j] = randint_value<T>(w, j, low, span);
    });
  };
  if (out.dtype() == DType::i64) draw(TypeTag<int64_t>{});
  else if (out.dtype() == DType::i32) draw(TypeTag<int32_t>{});
  else EMBER_FAIL("randint: expected dtype i64 or i32, got ", dtype_name(out.dtype()));
}

}  // namespace ember::cpu
