// Kernels whose control-flow statistics are known exactly, checked through the profiler
// (ember-simcc --profile): a branch half of every warp takes, a kernel with a partial last warp
// and no branch, and barriers in and out of a loop.
#include <cstdio>
#include <iostream>
#include <vector>

#include "../kernels/check.cuh"
#include "profile_check.h"

using namespace profile_check;

constexpr int kBlocks = 3, kThreads = 64;  // 2 warps per block
constexpr int kPartialThreads = 40;        // warps of 32 and 8 lanes
constexpr int kRounds = 3;

// out: (blockDim.x,) ints; out[t] = 1 for odd t, even t untouched: in every warp the odd lanes
// run the branch's body and the even ones wait, so each warp runs the body once, divergent.
__global__ void odd_threads(int* out) {
  if (threadIdx.x % 2) out[threadIdx.x] = 1;
}

// out: (blockDim.x,) ints; out[t] = 2. No branch: a partial last warp has no inactive lanes,
// only absent ones, and is not divergent.
__global__ void all_threads(int* out) { out[threadIdx.x] = 2; }

// data: (blockDim.x,) ints, blockDim.x <= 64; rotates data left by `rounds` places through
// shared memory: one barrier after loading, then two per round (read, then write).
__global__ void rotate(int* data, int rounds) {
  __shared__ int ring[64];
  ring[threadIdx.x] = data[threadIdx.x];
  __syncthreads();
  for (int r = 0; r < rounds; ++r) {
    const int next = ring[(threadIdx.x + 1) % blockDim.x];
    __syncthreads();
    ring[threadIdx.x] = next;
    __syncthreads();
  }
  data[threadIdx.x] = ring[threadIdx.x];
}

void run_kernels() {
  int* d;
  CUDA_CHECK(cudaMalloc(&d, kThreads * sizeof(int)));
  std::vector<int> got(kThreads), start(kThreads);
  for (int t = 0; t < kThreads; ++t) start[t] = t;
  const auto read = [&] {
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(got.data(), d, kThreads * sizeof(int), cudaMemcpyDeviceToHost));
  };
  CUDA_CHECK(cudaMemset(d, 0, kThreads * sizeof(int)));
  odd_threads<<<kBlocks, kThreads>>>(d);
  read();
  bool ok = true;
  for (int t = 0; t < kThreads; ++t) ok = ok && got[t] == t % 2;
  expect(ok, "odd_threads computes its result");
  all_threads<<<1, kPartialThreads>>>(d);
  read();
  ok = true;
  for (int t = 0; t < kThreads; ++t) ok = ok && got[t] == (t < kPartialThreads ? 2 : t % 2);
  expect(ok, "all_threads computes its result");
  CUDA_CHECK(cudaMemcpy(d, start.data(), kThreads * sizeof(int), cudaMemcpyHostToDevice));
  rotate<<<1, kThreads>>>(d, kRounds);
  read();
  ok = true;
  for (int t = 0; t < kThreads; ++t) ok = ok && got[t] == (t + kRounds) % kThreads;
  expect(ok, "rotate computes its result");
  cudaFree(d);
}

int main() {
  if (skipped_without_fibers()) return 0;
  expect(ember::sim::profile::enabled(), "profiler on in a build with --profile");
  run_kernels();
  const auto all = ember::sim::profile::kernels();
  ember::sim::profile::print(std::cout, all);
  const std::string file = "profile_control.cu";

  // The divergent basic block is the branch's body: the line of its store.
  const KernelProfile odd = kernel(all, "odd_threads");
  const MemorySite store = site(odd, Kind::global_store, file);
  expect_eq(odd.divergent.size(), 1, "odd_threads: one divergent site");
  if (odd.divergent.size() == 1) {
    expect(ends_with(odd.divergent[0].file, file) && odd.divergent[0].line == store.line,
           "odd_threads: the divergent site is the branch's body, line " + std::to_string(store.line));
    expect_eq(odd.divergent[0].divergent, kBlocks * 2, "odd_threads: divergent warp executions (1 per warp)");
    expect_eq(odd.divergent[0].executions, kBlocks * 2, "odd_threads: warp executions of the body");
  }
  expect_eq(store.requests, kBlocks * 2, "odd_threads: store requests (1 per warp)");
  expect_eq(store.bytes, kBlocks * kThreads / 2 * sizeof(int), "odd_threads: bytes the active lanes store");

  const KernelProfile all_of = kernel(all, "all_threads");
  expect(all_of.divergent.empty(), "all_threads: a partial warp is not divergent");
  expect_eq(site(all_of, Kind::global_store, file).requests, 2, "all_threads: store requests (2 warps)");

  const KernelProfile rot = kernel(all, "rotate");
  expect(rot.divergent.empty(), "rotate: no divergent branch");
  expect_eq(rot.barriers.size(), 3, "rotate: three barrier sites");
  if (rot.barriers.size() == 3) {
    const uint64_t want[3] = {1, kRounds, kRounds};
    for (int i = 0; i < 3; ++i) {
      expect(ends_with(rot.barriers[i].file, file), "rotate: barrier in " + file);
      expect_eq(rot.barriers[i].count, want[i], "rotate: barriers at line " + std::to_string(rot.barriers[i].line));
    }
    expect(rot.barriers[0].line < rot.barriers[1].line && rot.barriers[1].line < rot.barriers[2].line,
           "rotate: barrier sites in source order");
  }
  std::printf("%s\n", failures() ? "profile_control: FAILED" : "profile_control: all checks passed");
  return failures() ? 1 : 0;
}
