// The kernel behind the mma tests: each thread passes its fragments to one mma_m16n8k16 and
// stores the result. Compiles unchanged with nvcc (.ci/cuda-checks builds it for sm_80, sm_90).
#include "mma_kernels.h"

#include "cuda/launch.h"
#include "cuda/mma.h"

namespace ember::test_kernels {
namespace {

// a: (threads, 4), b: (threads, 2), c: (threads, 4) fragments -> d: (threads, 4)
template <class T>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d, unsigned calling_lanes,
                           bool split_lines) {
  const unsigned i = threadIdx.x;
  if (i % 32 >= calling_lanes) return;
  const uint32_t af[4] = {a[4 * i], a[4 * i + 1], a[4 * i + 2], a[4 * i + 3]};
  const uint32_t bf[2] = {b[2 * i], b[2 * i + 1]};
  const float cf[4] = {c[4 * i], c[4 * i + 1], c[4 * i + 2], c[4 * i + 3]};
  float df[4];
  if (split_lines && i % 32 >= 16) cuda::mma_m16n8k16<T>(df, af, bf, cf);
  else cuda::mma_m16n8k16<T>(df, af, bf, cf);
  for (int j = 0; j < 4; ++j) d[4 * i + j] = df[j];
}

}  // namespace

void mma_m16n8k16(MmaElement element, const uint32_t* a, const uint32_t* b, const float* c, float* d,
                  unsigned threads, unsigned calling_lanes, bool split_lines) {
  if (element == MmaElement::bf16)
    cuda::launch<mma_kernel<__nv_bfloat16>>(1, threads, 0, {}, a, b, c, d, calling_lanes, split_lines);
  else
    cuda::launch<mma_kernel<__half>>(1, threads, 0, {}, a, b, c, d, calling_lanes, split_lines);
}

}  // namespace ember::test_kernels
