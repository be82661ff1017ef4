// Launchers of the kernels that run one mma.sync (cuda/mma.h) for the tests
// (tests/cuda/test_mma.cpp). All pointers are device pointers.
#pragma once

#include <cstdint>

namespace ember::test_kernels {

enum class MmaElement { bf16, f16 };

// One block of `threads` threads; thread i passes a[4i..4i+3], b[2i..2i+1], c[4i..4i+3] to
// mma_m16n8k16 and writes its d to d[4i..4i+3]. Threads whose lane (i % 32) is >= calling_lanes
// return without calling it (a misuse). With split_lines, lanes 16..31 call it from another
// source line than lanes 0..15 (a misuse too: .aligned wants one instruction).
void mma_m16n8k16(MmaElement element, const uint32_t* a, const uint32_t* b, const float* c, float* d,
                  unsigned threads = 32, unsigned calling_lanes = 32, bool split_lines = false);

}  // namespace ember::test_kernels
