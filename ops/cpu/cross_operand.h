// The second matrix of a class loss's S = A B^T (A (M, D) the embeddings or the proxies, B (N, D)
// the class weights or the embeddings), held as rows or as columns, and the three GEMMs that
// read it (Note [Class weights as columns]):
//
//   auto B = CrossOperand<const float>::as_rows(E, D);      // (N, D)
//   auto W = CrossOperand<const float>::as_columns(w, ld);  // (D, N), rows ld apart
//   cross_tile(A, D, W, r0, r1, c0, c1, out, ldo);             // out = A[r0:r1] W[c0:c1]^T
//   add_weighted_rows(rows, k, G, ldg, W, c0, D, beta, dA);     // dA = beta dA + G W[c0:c0+k]
//   add_weighted_columns(rows, width, G, ldg, A_rows, D, dW, c0);  // dW[c0:c0+width] += G^T A_rows
//
// Note [Class weights as columns]: PML stores ArcFace's W as (D, C), a class's weights a column,
// and ArcFace keeps that layout (normalize_columns), so W's gradient reaches W's own layout with
// no transposed copy, and each GEMM finds its big operand where it lies: S = A W reads W's rows
// in place as op(B) (Note [B in place] in ops/cpu/gemm_packed.cpp), and dW += A^T G reads G's
// rows in place, packing only A's few rows transposed. Held as rows, (C, D), the first packed all
// of W per block of rows and the second transposed the block's weights G (perf of an ArcFace step,
// B 512, C 1,024: 5.5% and 8.7%, and 2.7% more for the transposed copy of the gradient). dA = G W^T
// now packs W, where the rows layout read it in place. normalize_columns pads the rows so that
// they are never a multiple of 4 KiB apart (Note [Padded rows] in ops/padded_rows.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/cpu/gemm.h"

namespace ember::cpu {

// B (N, D): row j at data + j * ld (rows), or row j of B is column j of a (D, N) matrix whose rows
// are ld apart (columns). T is const for an operand, mutable for a gradient.
template <class T>
struct CrossOperand {
  T* data = nullptr;
  int64_t ld = 0;
  bool columns = false;

  static CrossOperand as_rows(T* data, int64_t D) { return {data, D, false}; }
  static CrossOperand as_columns(T* data, int64_t ld) { return {data, ld, true}; }
  explicit operator bool() const { return data != nullptr; }
  // Where row j of B starts: its first value.
  T* at(int64_t j) const { return columns ? data + j : data + j * ld; }
  // B = 0, N rows of D.
  void zero(int64_t N, int64_t D) const {
    if (!columns) return std::fill(data, data + N * D, std::remove_const_t<T>(0));
    for (int64_t d = 0; d < D; ++d) std::fill(data + d * ld, data + d * ld + N, std::remove_const_t<T>(0));
  }
};

// out (r1 - r0, c1 - c0), row stride ldo, = A[r0:r1] B[c0:c1]^T for A (M, D) row-major.
template <class T>
void cross_tile(const T* A, int64_t D, CrossOperand<const T> B, int64_t r0, int64_t r1, int64_t c0, int64_t c1, T* out,
                int64_t ldo) {
  gemm<T>(false, !B.columns, r1 - r0, c1 - c0, D, T(1), A + r0 * D, D, B.at(c0), B.ld, T(0), out, ldo);
}

// dA (rows, D), row stride D, = beta dA + G B[c0:c0 + k] for G (rows, k), row stride ldg.
template <class T>
void add_weighted_rows(int64_t rows, int64_t k, const T* G, int64_t ldg, CrossOperand<const T> B, int64_t c0,
                       int64_t D, T beta, T* dA) {
  gemm<T>(false, B.columns, rows, D, k, T(1), G, ldg, B.at(c0), B.ld, beta, dA, D);
}

// dB[c0:c0 + width] += G^T A_rows for G (rows, width), row stride ldg, and A_rows (rows, D)
// row-major: the rows layout packs G transposed as op(A); the columns layout adds
// A_rows^T G to dB's (D, width) block, reading G in place.
template <class T>
void add_weighted_columns(int64_t rows, int64_t width, const T* G, int64_t ldg, const T* A_rows, int64_t D,
                          CrossOperand<T> dB, int64_t c0) {
  if (dB.columns) gemm<T>(true, false, D, width, rows, T(1), A_rows, D, G, ldg, T(1), dB.at(c0), dB.ld);
  else gemm<T>(true, false, width, D, rows, T(1), G, ldg, A_rows, D, T(1), dB.at(c0), dB.ld);
}

}  // namespace ember::cpu
