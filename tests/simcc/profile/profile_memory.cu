// Kernels whose memory statistics are known exactly, checked through the profiler
// (ember-simcc --profile): a coalesced and a stride-2 global load, a 32 x 32 transpose
// through static shared memory without and with padding, and a stride-2 store and a broadcast
// load of dynamic shared memory. Run as `profile_memory off`, built without
// --profile, it checks that the profiler is off: not instrumented, nothing recorded.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include "../kernels/check.cuh"
#include "profile_check.h"

using namespace profile_check;

constexpr int kThreads = 256, kBlocks = 2, kN = kThreads * kBlocks;  // 16 warps in all
constexpr int kTile = 32;

// in: (n,) -> out: (n,), out[i] = in[i], one thread per element: a warp reads 32 consecutive
// floats, 128 bytes in 4 sectors.
__global__ void coalesced_copy(const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i];
}

// in: (2n,) -> out: (n,), out[i] = in[2i]: a warp's 32 floats are spread over 256 bytes, 8
// sectors of which it uses half.
__global__ void strided_load(const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[2 * i];
}

// in: (32, 32) -> out: (32, 32), out = in transposed; one block of 32 x 32 threads. Warp y
// writes row y of the tile (32 banks), then reads column y: tile[x][y] for x = 0..31 are 32
// words 32 apart, all in bank y, a 32-way conflict.
__global__ void transpose_unpadded(const float* in, float* out) {
  __shared__ float tile[kTile][kTile];
  tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * kTile + threadIdx.x];
  __syncthreads();
  out[threadIdx.y * kTile + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}

// The same through a 32 x 33 tile: column y's words are 33 apart, in 32 different banks.
__global__ void transpose_padded(const float* in, float* out) {
  __shared__ float tile[kTile][kTile + 1];
  tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * kTile + threadIdx.x];
  __syncthreads();
  out[threadIdx.y * kTile + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}

// out: (blockDim.x,), out[t] = 0 (thread 0's value), through blockDim.x * 2 floats of dynamic
// shared memory: buf[2t] puts lanes l and l + 16 in one bank (a 2-way conflict), and every
// lane reading buf[0] is a broadcast (none).
__global__ void shared_strides(float* out) {
  extern __shared__ float buf[];
  buf[2 * threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = buf[0];
}

// Runs every kernel and checks its results against the CPU.
void run_kernels() {
  std::vector<float> h(2 * kN), got(kN);
  for (int i = 0; i < 2 * kN; ++i) h[i] = float(i);
  float *in, *out;
  CUDA_CHECK(cudaMalloc(&in, h.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&out, kN * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  const auto check = [&](const char* kernel, auto want) {
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(got.data(), out, kN * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < kN; ++i) ok = ok && got[i] == want(i);
    expect(ok, std::string(kernel) + " computes its result");
  };
  coalesced_copy<<<kBlocks, kThreads>>>(in, out);
  check("coalesced_copy", [&](int i) { return h[i]; });
  strided_load<<<kBlocks, kThreads>>>(in, out);
  check("strided_load", [&](int i) { return h[2 * i]; });
  static_assert(kTile * kTile <= 2 * kN, "the transposes read the first 32 x 32 inputs");
  float* t_out;
  CUDA_CHECK(cudaMalloc(&t_out, kTile * kTile * sizeof(float)));
  const auto check_transpose = [&](const char* kernel) {
    CUDA_CHECK(cudaGetLastError());
    std::vector<float> t_got(kTile * kTile);
    CUDA_CHECK(cudaMemcpy(t_got.data(), t_out, t_got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int r = 0; r < kTile; ++r)
      for (int c = 0; c < kTile; ++c) ok = ok && t_got[r * kTile + c] == h[c * kTile + r];
    expect(ok, std::string(kernel) + " computes its result");
  };
  transpose_unpadded<<<1, dim3(kTile, kTile)>>>(in, t_out);
  check_transpose("transpose_unpadded");
  transpose_padded<<<1, dim3(kTile, kTile)>>>(in, t_out);
  check_transpose("transpose_padded");
  shared_strides<<<1, kThreads, 2 * kThreads * sizeof(float)>>>(out);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(got.data(), out, kThreads * sizeof(float), cudaMemcpyDeviceToHost));
  bool zeros = true;
  for (int t = 0; t < kThreads; ++t) zeros = zeros && got[t] == 0.0f;
  expect(zeros, "shared_strides computes its result");
  cudaFree(in);
  cudaFree(out);
  cudaFree(t_out);
}

// A warp request of 32 floats: `sectors` sectors and efficiency 128 / (32 sectors).
void check_global(const MemorySite& m, const std::string& what, uint64_t requests, uint64_t sectors_per_request) {
  expect_eq(m.requests, requests, what + " requests");
  expect_eq(m.sectors, requests * sectors_per_request, what + " sectors");
  expect_eq(m.bytes, requests * 32 * sizeof(float), what + " bytes requested");
  expect_eq(m.bank_conflicts, 0, what + " bank conflicts");
}

void check_profiled() {
  const auto all = ember::sim::profile::kernels();
  ember::sim::profile::print(std::cout, all);  // the same table as at exit, in the test's log
  const std::string file = "profile_memory.cu";
  constexpr uint64_t warps = kN / 32;

  const KernelProfile copy = kernel(all, "coalesced_copy");
  expect_eq(copy.launches, 1, "coalesced_copy launches");
  expect_eq(copy.blocks, kBlocks, "coalesced_copy blocks");
  expect_eq(copy.memory.size(), 2, "coalesced_copy: a load and a store, nothing else");
  const MemorySite coalesced = site(copy, Kind::global_load, file);
  check_global(coalesced, "coalesced_copy load", warps, 4);
  expect(coalesced.efficiency() == 1.0, "coalesced_copy load efficiency 100%");
  check_global(site(copy, Kind::global_store, file), "coalesced_copy store", warps, 4);

  const KernelProfile strided = kernel(all, "strided_load");
  const MemorySite load = site(strided, Kind::global_load, file);
  check_global(load, "strided_load load", warps, 8);
  expect(load.efficiency() == 0.5, "strided_load load efficiency 50%");
  check_global(site(strided, Kind::global_store, file), "strided_load store", warps, 4);

  for (const char* name : {"transpose_unpadded", "transpose_padded"}) {
    const KernelProfile t = kernel(all, name);
    const std::string n = name;
    expect_eq(t.memory.size(), 4, n + ": global load and store, shared load and store");
    check_global(site(t, Kind::global_load, file), n + " global load", kTile, 4);
    check_global(site(t, Kind::global_store, file), n + " global store", kTile, 4);
    const MemorySite row = site(t, Kind::shared_store, file), column = site(t, Kind::shared_load, file);
    expect_eq(row.requests, kTile, n + " shared store requests");
    expect_eq(row.bank_conflicts, 0, n + " shared store (a row) bank conflicts");
    expect_eq(column.requests, kTile, n + " shared load requests");
    const uint64_t per_request = n == "transpose_unpadded" ? 31 : 0;  // 32-way, or none
    expect_eq(column.bank_conflicts, kTile * per_request, n + " shared load (a column) bank conflicts");
    expect_eq(t.barriers.size(), 1, n + ": one barrier site");
    if (t.barriers.size() == 1) expect_eq(t.barriers[0].count, 1, n + ": one barrier per block");
    expect(t.divergent.empty(), n + ": no divergent branch");
  }

  const KernelProfile strides = kernel(all, "shared_strides");
  const MemorySite stride2 = site(strides, Kind::shared_store, file), broadcast = site(strides, Kind::shared_load, file);
  expect_eq(stride2.requests, kThreads / 32, "shared_strides store requests");
  expect_eq(stride2.bank_conflicts, kThreads / 32, "shared_strides store bank conflicts (2-way: 1 per request)");
  expect_eq(broadcast.requests, kThreads / 32, "shared_strides load requests");
  expect_eq(broadcast.bank_conflicts, 0, "shared_strides load bank conflicts (a broadcast)");
}

int main(int argc, char** argv) {
  const bool expect_off = argc > 1 && std::strcmp(argv[1], "off") == 0;
  if (!expect_off && skipped_without_fibers()) return 0;
  expect(ember::sim::profile::enabled() != expect_off,
         expect_off ? "profiler off in a build without --profile" : "profiler on in a build with --profile");
  run_kernels();
  if (expect_off) expect(ember::sim::profile::kernels().empty(), "nothing recorded without --profile");
  else check_profiled();
  std::printf("%s\n", failures() ? "profile_memory: FAILED" : "profile_memory: all checks passed");
  return failures() ? 1 : 0;
}
