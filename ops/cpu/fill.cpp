// Creation and random-number kernels. Note [Philox layout]: value i of a draw reads its words
// from Philox block first_block + i / per_block (f32 and integers: 4 values per block, one word
// each; f64: 2 values per block, two words each; normals pair up values through Box-Muller
// inside one block). A CUDA thread can therefore compute any value on its own, and both
// backends produce identical numbers for one seed.
#include <cmath>

#include "core/parallel.h"
#include "ops/cpu/kernels.h"

namespace ember::cpu {
namespace {

template <class T, class F>
void for_each_block(const Tensor& out, const Generator& gen, uint64_t first_block, F per_block) {
  constexpr int64_t kPer = sizeof(T) == 8 ? 2 : 4;
  T* data = out.data<T>();
  const int64_t n = out.numel(), blocks = (n + kPer - 1) / kPer;
  parallel_for(0, blocks, 2048, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T vals[kPer];
      per_block(gen.block(first_block + uint64_t(b)), vals);
      for (int64_t j = 0; j < kPer && b * kPer + j < n; ++j) data[b * kPer + j] = vals[j];
    }
  });
}

template <class T>
void uniforms(const std::array<uint32_t, 4>& w, T* u) {
  if constexpr (sizeof(T) == 8) {
    u[0] = uniform_double(w[0], w[1]);
    u[1] = uniform_double(w[2], w[3]);
  } else {
    for (int j = 0; j < 4; ++j) u[j] = uniform_float(w[j]);
  }
}

}  // namespace

void arange(const Tensor& out, double start, double step) {
  dispatch_numeric(out.dtype(), "arange", [&]<class T>(TypeTag<T>) {
    T* data = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) data[i] = static_cast<T>(start + double(i) * step);
  });
}

void uniform(const Tensor& out, const Generator& gen, uint64_t first_block, double low, double high) {
  dispatch_float(out.dtype(), "rand", [&]<class T>(TypeTag<T>) {
    const T lo = T(low), span = T(high - low);
    for_each_block<T>(out, gen, first_block, [&](const std::array<uint32_t, 4>& w, T* v) {
      constexpr int kPer = sizeof(T) == 8 ? 2 : 4;
      uniforms<T>(w, v);
      for (int j = 0; j < kPer; ++j) v[j] = lo + span * v[j];
    });
  });
}

void normal(const Tensor& out, const Generator& gen, uint64_t first_block, double mean, double std) {
  dispatch_float(out.dtype(), "randn", [&]<class T>(TypeTag<T>) {
    const T m = T(mean), s = T(std);
    for_each_block<T>(out, gen, first_block, [&](const std::array<uint32_t, 4>& w, T* v) {
      constexpr int kPer = sizeof(T) == 8 ? 2 : 4;
      uniforms<T>(w, v);
      for (int j = 0; j < kPer; j += 2) {  // Box-Muller on (v[j], v[j+1]); u1 in (0, 1]
        const T u1 = T(1) - v[j], u2 = v[j + 1];
        const T r = std::sqrt(T(-2) * std::log(u1)), theta = T(6.283185307179586476925) * u2;
        v[j] = m + s * r * std::cos(theta);
        v[j + 1] = m + s * r * std::sin(theta);
      }
    });
  });
}

void randint(const Tensor& out, const Generator& gen, uint64_t first_block, int64_t low, int64_t high) {
  const uint64_t span = uint64_t(high - low);
  auto draw = [&]<class T>(TypeTag<T>) {
    T* data = out.data<T>();
    const int64_t n = out.numel();
    parallel_for(0, (n + 1) / 2, 2048, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {  // two values per block, 64 random bits each
        const auto w = gen.block(first_block + uint64_t(b));
        for (int64_t j = 0; j < 2 && 2 * b + j < n; ++j) {
          const uint64_t bits = (uint64_t(w[2 * j + 1]) << 32) | w[2 * j];
          data[2 * b + j] = static_cast<T>(low + int64_t(bits % span));
        }
      }
    });
  };
  if (out.dtype() == DType::i64) draw(TypeTag<int64_t>{});
  else if (out.dtype() == DType::i32) draw(TypeTag<int32_t>{});
  else EMBER_FAIL("randint: expected dtype i64 or i32, got ", dtype_name(out.dtype()));
}

}  // namespace ember::cpu
