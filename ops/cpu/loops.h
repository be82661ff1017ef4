// Elementwise iteration on the CPU: one output and up to three inputs that broadcast to the
// output's shape, any strides, parallel over the elements.
//
//   ElementwiseLayout L = make_layout(out, {&a, &b});
//   cpu_elementwise<float, float, float>(L, [](float x, float y) { return x + y; });
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/elementwise_functors.h"
#include "ops/elementwise_layout.h"

namespace ember::cpu {

// Elements per chunk below which a loop is not worth splitting across threads.
constexpr int64_t kElementwiseGrain = 32768;

namespace detail {

// Note [f16 loops in blocks]: the plain loop, o[i] = f(x[i]), converts each f16 element through
// core/float16.h's software conversions (Note [f16 blocks in lanes] in ops/cpu/float16_blocks.h:
// an f16 relu cost 3x a bf16 one). A loop with a 16-bit operand whose f takes widened operands (an
// InComputeType) runs in blocks of 16 instead: its 16-bit inputs widened in AVX-512 lanes into
// arrays, f's own function over them, the results rounded in lanes, and the tail in the plain
// loop. The same bits as the plain loop. bf16's conversions are shifts, which GCC vectorises in
// the plain loop too, but there f's vector code fared worse: bf16 log took 2.7-3.0 ms against
// 1.57 in blocks (unaryprobe, 8x256x56x56, 2 threads, alternated, 2026-12-08; f32's 1.46), relu
// 0.36 -> 0.30, exp, sigmoid, tanh, log1p and add/mul within the noise, softplus 3.4-4.1 -> 4.3-4.6.
// Builds without the lanes (kFloat16Lanes) keep the plain loop: with scalar conversions in
// them, blocks of bf16 ran exp 9x slower than the plain loop.
template <class Out, class F, class... In>
inline constexpr bool kRunsInBlocks =
    kFloat16Lanes && (is_float16_v<Out> || (is_float16_v<In> || ...)) && is_in_compute_type_v<F>;
constexpr int64_t kBlock = 16;

// The unit-stride loop in blocks (bit k of Broadcast: input k is one value); returns the
// elements done, a multiple of kBlock.
template <unsigned Broadcast, class Out, class... In, class F, size_t... I>
inline int64_t run_in_blocks(Out* o, const std::array<const char*, sizeof...(In)>& in, int64_t n, F& f,
                             std::index_sequence<I...>) {
  using Inputs = std::tuple<In...>;
  std::tuple<std::array<compute_t<In>, kBlock>...> v;  // the inputs' blocks, widened
  auto input = [&]<size_t K>(std::integral_constant<size_t, K>) {
    return reinterpret_cast<const std::tuple_element_t<K, Inputs>*>(in[K]);
  };
  auto broadcast = [&]<size_t K>(std::integral_constant<size_t, K> k) {
    if constexpr ((Broadcast >> K) & 1u) std::get<K>(v).fill(compute_t<std::tuple_element_t<K, Inputs>>(input(k)[0]));
  };
  auto load = [&]<size_t K>(std::integral_constant<size_t, K> k, int64_t at) {
    if constexpr (!((Broadcast >> K) & 1u)) load_block<kBlock>(input(k) + at, std::get<K>(v).data());
  };
  if (n < kBlock) return 0;
  (broadcast(std::integral_constant<size_t, I>{}), ...);
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    (load(std::integral_constant<size_t, I>{}, i), ...);
    compute_t<Out> r[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) r[j] = f.f(std::get<I>(v)[j]...);
    store_block<kBlock>(r, o + i);
  }
  return i;
}

// Runs n elements from the given pointers. The common stride patterns (every input unit-stride
// or broadcast) get loops the compiler can vectorise; anything else takes the strided loop.
template <class Out, class... In, class F, size_t... I>
inline void run_inner(Out* o, int64_t so, const std::array<const char*, sizeof...(In)>& in,
                      const std::array<int64_t, sizeof...(In)>& s, int64_t n, F& f,
                      std::index_sequence<I...>) {
  constexpr size_t N = sizeof...(In);
  auto ptr = [&]<size_t K>(std::integral_constant<size_t, K>) {
    using T = std::tuple_element_t<K, std::tuple<In...>>;
    return reinterpret_cast<const T*>(in[K]);
  };
  if (so == 1) {
    unsigned mask = 0;  // bit k: input k is broadcast (stride 0); others must be unit-stride
    bool unit = true;
    for (size_t k = 0; k < N; ++k) {
      if (s[k] == 0) mask |= 1u << k;
      else unit &= s[k] == 1;
    }
    if (unit) {
      auto go = [&]<unsigned M>(std::integral_constant<unsigned, M>) {
        int64_t i = 0;
        if constexpr (kRunsInBlocks<Out, F, In...>)  // Note [f16 loops in blocks]
          i = run_in_blocks<M, Out, In...>(o, in, n, f, std::index_sequence<I...>{});
        for (; i < n; ++i)
          o[i] = f(ptr(std::integral_constant<size_t, I>{})[((M >> I) & 1u) ? 0 : i]...);
      };
      if constexpr (N == 1) {
        if (mask == 0) return go(std::integral_constant<unsigned, 0>{});
      } else if constexpr (N == 2) {
        switch (mask) {
          case 0: return go(std::integral_constant<unsigned, 0>{});
          case 1: return go(std::integral_constant<unsigned, 1>{});
          case 2: return go(std::integral_constant<unsigned, 2>{});
          default: break;
        }
      } else {
        if (mask == 0) return go(std::integral_constant<unsigned, 0>{});
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) o[i * so] = f(ptr(std::integral_constant<size_t, I>{})[i * s[I]]...);
}

}  // namespace detail

// Applies f to every element: out[i] = f(in0[i], in1[i], ...).
template <class Out, class... In, class F>
void cpu_elementwise(const ElementwiseLayout& L, F f) {
  constexpr size_t N = sizeof...(In);
  const int nd = int(L.shape.size());
  parallel_for(0, L.numel, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    F fn = f;
    std::array<int64_t, 12> idx{};
    {
      int64_t rest = begin;
      for (int d = nd - 1; d >= 0; --d) {
        idx[d] = rest % L.shape[d];
        rest /= L.shape[d];
      }
    }
    std::array<const char*, N> in;
    std::array<int64_t, N> s;
    const int last = nd - 1;
    for (size_t k = 0; k < N; ++k) s[k] = nd ? L.strides[k + 1][last] : 0;
    const int64_t so = nd ? L.strides[0][last] : 1;
    while (begin < end) {
      int64_t off0 = 0;
      std::array<int64_t, N> offs{};
      for (int d = 0; d < nd; ++d) {
        off0 += idx[d] * L.strides[0][d];
        for (size_t k = 0; k < N; ++k) offs[k] += idx[d] * L.strides[k + 1][d];
      }
      [&]<size_t... I>(std::index_sequence<I...>) {
        ((in[I] = L.data[I + 1] + offs[I] * int64_t(sizeof(std::tuple_element_t<I, std::tuple<In...>>))), ...);
      }(std::make_index_sequence<N>{});
      const int64_t row = nd ? L.shape[last] - idx[last] : 1;
      const int64_t n = std::min(row, end - begin);
      detail::run_inner<Out, In...>(reinterpret_cast<Out*>(L.data[0]) + off0, so, in, s, n, fn,
                                    std::make_index_sequence<N>{});
      begin += n;
      if (nd == 0) break;
      idx[last] += n;
      for (int d = last; d > 0 && idx[d] >= L.shape[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  });
}

}  // namespace ember::cpu
