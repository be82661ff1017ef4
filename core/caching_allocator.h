// The caching allocator: keeps freed blocks and hands them out again, so that a training step
// that allocates the same temporaries every iteration stops calling the system after the first.
//
//   CachingAllocator a(std::make_unique<CpuRawAllocator>());
//   { DataPtr p = a.allocate(1000); }   // one 2 MiB segment from the raw allocator ...
//   DataPtr q = a.allocate(1000);       // ... whose cached block is reused: no raw call
//   a.empty_cache();                    // gives unused segments back to the raw allocator
//
// Normally reached through allocator_for(device) (core/allocator.h), which builds one per device
// with make_allocator() unless EMBER_NO_CACHING=1.
//
// Policy (after PyTorch's CUDA caching allocator):
// - Every request is rounded up to a multiple of 512 bytes (kMinBlockSize); zero bytes gives an
//   empty DataPtr and touches nothing.
// - Requests of at most 1 MiB (kSmallSize) come from the small pool, whose segments are 2 MiB
//   (kSmallBuffer). Larger requests come from the large pool: a request below 10 MiB
//   (kMinLargeAlloc) gets a 20 MiB segment (kLargeBuffer), a bigger one a segment of its own size
//   rounded up to 2 MiB (kRoundLarge). See Note [Segment sizes].
// - A request takes the smallest cached block of its pool that was freed on the same stream and
//   is big enough (best fit, ordered by stream, then size, then address). Only when there is none
//   is a new segment taken from the raw allocator.
// - A block bigger than the request is split; the remainder goes back to the pool. Small-pool
//   blocks split when the remainder is at least 512 bytes, large-pool blocks only when it is over
//   1 MiB (Note [Splitting large blocks]).
// - A freed block merges with free neighbours of its segment, so that a segment whose blocks are
//   all free is again one block, usable by any request that fits.
// - A block freed on stream S is reused for stream S only (Note [Per-stream blocks]).
// - When the raw allocator fails, every cached, unsplit segment is given back and the raw call
//   retried once (stats().retries); if that fails too, OutOfMemory is thrown with the request and
//   the statistics in its message (stats().ooms).
// - empty_cache() gives every cached segment that is wholly free back to the raw allocator.
// - set_memory_limit(n) caps the bytes handed out at once (Note [Memory limit] in allocator.h).
// - Block addresses are segment base + a multiple of 512, so they keep the raw allocator's
//   alignment up to 512 bytes (64 for CpuRawAllocator).
// - One mutex guards everything, including the raw calls. Releasing a pointer this allocator did
//   not hand out aborts the process (it happens on destructor paths, where throwing is not allowed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/allocator.h"

namespace ember {

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kMinBlockSize = 512;          // every request is rounded to this
  static constexpr size_t kSmallSize = 1 << 20;         // largest request of the small pool
  static constexpr size_t kSmallBuffer = 2 << 20;       // small-pool segment size
  static constexpr size_t kLargeBuffer = 20 << 20;      // segment for requests in (1 MiB, 10 MiB)
  static constexpr size_t kMinLargeAlloc = 10 << 20;    // from here a request gets its own segment
  static constexpr size_t kRoundLarge = 2 << 20;        // ... rounded up to this

  explicit CachingAllocator(std::unique_ptr<RawAllocator> raw);
  // Gives the cached segments back. Segments that still hold live blocks are leaked (their
  // DataPtrs must not outlive the allocator).
  ~CachingAllocator() override;

  DataPtr allocate(size_t bytes, StreamId stream = 0) override;
  AllocatorStats stats() const override;
  void reset_peak_stats() override;
  void empty_cache() override;
  void set_memory_limit(size_t bytes) override;
  size_t memory_limit() const override;
  Device device() const override;

  // The size a request of `bytes` occupies: rounded up to kMinBlockSize (at least one unit).
  static size_t round_size(size_t bytes);
  // The segment taken from the raw allocator when no cached block fits a rounded request.
  static size_t segment_size(size_t rounded_bytes);

 private:
  void release(void* ptr) override;
  struct State;
  std::unique_ptr<State> state_;
};

// "512 bytes", "1.50 KiB", "2.00 MiB", "24.00 GiB": sizes as allocator messages print them.
std::string format_bytes(uint64_t bytes);

// "2.00 MiB allocated, 20.00 MiB reserved, 18.00 MiB cached": the statistics every OutOfMemory
// message ends with (cached = reserved but not allocated: what empty_cache() could give back).
std::string format_usage(const AllocatorStats& stats);

}  // namespace ember
