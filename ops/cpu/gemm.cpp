#include "ops/cpu/gemm.h"

// Note [Eigen warnings]: GCC 12 reports -Wmaybe-uninitialized (and -Wuninitialized in the
// sanitizer builds of .ci/sanitize and .ci/cuda-checks) inside its own AVX-512 headers
// (the `__Y = __Y` of _mm512_undefined_ps, GCC bug 105593, fixed in GCC 13) wherever Eigen's
// packet code inlines them: ~270 warnings for this file although both Eigen (-isystem, from its
// imported CMake target) and the intrinsics headers are system headers. The headers' lines are
// first read here, and GCC judges such a warning by the diagnostic state at the header's line,
// so ignoring it around the include silences exactly those, never one in ember's own code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "core/parallel.h"
#include "ops/cpu/gemm_packed.h"

namespace ember::cpu {
namespace {

template <class T, int Order>
using MatMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, 0, Eigen::OuterStride<>>;
template <class T>
using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;

// C rows [r0, r1) = alpha * op(A) op(B) + beta * C for those rows.
template <class T, int OrderA, int OrderB>
void gemm_rows(int64_t r0, int64_t r1, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
               const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  const int64_t rows = r1 - r0;
  // A row-major: row r starts at A + r*lda. A column-major (the transpose of a row-major (K, M)
  // matrix): row r is column r, starting at A + r.
  const T* a0 = OrderA == Eigen::RowMajor ? A + r0 * lda : A + r0;
  MatMap<T, OrderA> a(a0, rows, K, Eigen::OuterStride<>(lda));
  MatMap<T, OrderB> b(B, K, N, Eigen::OuterStride<>(ldb));
  OutMap<T> c(C + r0 * ldc, rows, N, Eigen::OuterStride<>(ldc));
  if (beta == T(0)) c.noalias() = alpha * (a * b);
  else {
    if (beta != T(1)) c *= beta;
    c.noalias() += alpha * (a * b);
  }
}

// C rows [r0, r1) = act(C + bias) for those rows, while the GEMM has just left them in cache.
template <class T>
void finish_rows(Activation act, const GemmBias<T>& bias, int64_t r0, int64_t r1, int64_t N, T* C, int64_t ldc) {
  visit_activation(act, [&](auto fn) {
    if constexpr (decltype(fn)::kIdentity)
      if (!bias.rows && !bias.columns) return;
    for (int64_t r = r0; r < r1; ++r) {
      T* row = C + r * ldc;
      const T row_bias = bias.rows ? bias.rows[r] : T(0);
      for (int64_t j = 0; j < N; ++j) row[j] = fn(row[j] + row_bias + (bias.columns ? bias.columns[j] : T(0)));
    }
  });
}

// C = act(beta * C + bias): the whole GEMM when K == 0.
template <class T>
void scale_only(int64_t M, int64_t N, T beta, T* C, int64_t ldc, Activation act, const GemmBias<T>& bias) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
  finish_rows(act, bias, 0, M, N, C, ldc);
}

}  // namespace

template <class T>
void gemm_eigen(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                const T* B, int64_t ldb, T beta, T* C, int64_t ldc, Activation act, GemmBias<T> bias) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_only(M, N, beta, C, ldc, act, bias);
  auto rows = [&](int64_t r0, int64_t r1) {
    constexpr int R = Eigen::RowMajor, Cm = Eigen::ColMajor;
    if (!trans_a && !trans_b) gemm_rows<T, R, R>(r0, r1, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else if (!trans_a && trans_b) gemm_rows<T, R, Cm>(r0, r1, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else if (trans_a && !trans_b) gemm_rows<T, Cm, R>(r0, r1, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else gemm_rows<T, Cm, Cm>(r0, r1, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    finish_rows(act, bias, r0, r1, N, C, ldc);
  };
  // Note [GEMM split]: blocks of 64 rows keep Eigen's packed panels efficient; small problems
  // (under ~1 MFLOP) are not worth waking the pool.
  const int64_t flops = M * N * K;
  const int64_t grain = flops < (1 << 20) ? M : std::max<int64_t>(32, M / (4 * num_threads()) / 16 * 16);
  parallel_for(0, M, grain, rows);
}

// EMBER_GEMM=eigen sends f32 to Eigen too: a same-binary A/B for whole-model benchmarks.
bool f32_gemm_is_ember() {
  static const bool ember = [] {
    const char* choice = std::getenv("EMBER_GEMM");
    return !(choice && std::string_view(choice) == "eigen");
  }();
  return ember;
}

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, Activation act, GemmBias<T> bias) {
  if constexpr (std::is_same_v<T, float>) {
    if (!f32_gemm_is_ember())
      return gemm_eigen(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, act, bias);
    if (M == 0 || N == 0) return;
    if (K == 0) return scale_only(M, N, beta, C, ldc, act, bias);
    gemm_detail::gemm_packed(gemm_detail::default_micro_kernel(), gemm_detail::cache_blocking(), trans_a, trans_b,
                             M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, act, bias.rows, bias.columns);
  } else {
    gemm_eigen(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, act, bias);
  }
}

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, Activation act) {
  gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, act, GemmBias<T>{});
}

#define EMBER_GEMM_INSTANTIATE(T)                                                                            \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, T*,     \
                        int64_t, Activation);                                                                      \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, T*,     \
                        int64_t, Activation, GemmBias<T>);                                                         \
  template void gemm_eigen<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T,   \
                              T*, int64_t, Activation, GemmBias<T>);
EMBER_GEMM_INSTANTIATE(float)
EMBER_GEMM_INSTANTIATE(double)
#undef EMBER_GEMM_INSTANTIATE

}  // namespace ember::cpu
