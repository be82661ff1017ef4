// Shared by the drop-in test programs: the usual CUDA_CHECK macro and a float comparison that
// prints the first mismatch and makes main() fail.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

// Number of positions where got and want differ by more than tol (relative to max(1, |want|)).
inline int count_mismatches(const char* what, const float* got, const float* want, int n, float tol) {
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol * std::fmax(1.0f, std::fabs(want[i])))) {
      if (bad == 0) std::fprintf(stderr, "%s: at %d expected %g, got %g\n", what, i, want[i], got[i]);
      ++bad;
    }
  }
  return bad;
}
