#include "apps/bench/bench_allocator.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <ostream>
#include <vector>

#include "core/allocator.h"
#include "core/caching_allocator.h"

namespace ember {
namespace {

constexpr int kBlocks = 9;            // timed blocks; the median is reported
constexpr int kPairsPerBlock = 2000;  // allocate+free pairs per block

// Written by every pair so that the loop has an observable effect.
volatile uintptr_t g_sink = 0;

// Nanoseconds per allocate+free pair, one block.
double time_block(Allocator& allocator, size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kPairsPerBlock; ++i) {
    DataPtr p = allocator.allocate(bytes);
    g_sink = g_sink + reinterpret_cast<uintptr_t>(p.get());
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / kPairsPerBlock;
}

// Median over kBlocks blocks after one warm-up block (which also fills the cache).
double median_ns_per_pair(Allocator& allocator, size_t bytes) {
  time_block(allocator, bytes);
  std::vector<double> blocks;
  for (int b = 0; b < kBlocks; ++b) blocks.push_back(time_block(allocator, bytes));
  std::nth_element(blocks.begin(), blocks.begin() + kBlocks / 2, blocks.end());
  return blocks[kBlocks / 2];
}

}  // namespace

void bench_allocator(std::ostream& out) {
  constexpr size_t KiB = 1024, MiB = 1024 * KiB;
  const size_t sizes[] = {1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB};
  CachingAllocator caching(std::make_unique<CpuRawAllocator>());
  PassThroughAllocator pass_through(std::make_unique<CpuRawAllocator>());

  char line[160];
  out << "allocator: ns per allocate+free pair, median of " << kBlocks << " blocks of " << kPairsPerBlock
      << " pairs after a warm-up block\n"
      << "(both over CpuRawAllocator; the memory is not touched, so first-touch page faults are not included;\n"
      << " raw calls: segments the caching allocator took from the system for that row, 0 or 1)\n";
  std::snprintf(line, sizeof line, "%10s %14s %16s %9s %12s\n", "size", "caching ns", "pass-through ns", "speedup",
                "raw calls");
  out << line;
  for (size_t bytes : sizes) {
    const int64_t raw_before = caching.stats().raw_allocations;
    const double cached_ns = median_ns_per_pair(caching, bytes);
    const int64_t raw_calls = caching.stats().raw_allocations - raw_before;  // 1 when the cache works
    const double direct_ns = median_ns_per_pair(pass_through, bytes);
    const bool mib = bytes >= MiB;
    char label[32];
    std::snprintf(label, sizeof label, "%zu %s", mib ? bytes / MiB : bytes / KiB, mib ? "MiB" : "KiB");
    std::snprintf(line, sizeof line, "%10s %14.1f %16.1f %8.2fx %12lld\n", label, cached_ns, direct_ns,
                  direct_ns / cached_ns, static_cast<long long>(raw_calls));
    out << line;
  }
  caching.empty_cache();
}

}  // namespace ember
