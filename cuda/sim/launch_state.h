// The simulator's engine state, shared by executor.cpp (barriers, warp operations, misuse
// detection, launch) and block_runners.cpp (the two ways a block's threads run: fibers, or OS
// threads of a pool; Note [Execution modes] in executor.cpp). Internal to the simulator.
#pragma once

#include <array>
#include <atomic>
#include <barrier>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <source_location>
#include <string>

#include "core/error.h"
#include "cuda/sim/executor.h"
#include "cuda/sim/fiber.h"

namespace ember::sim::engine {

struct Abort {};  // unwinds a CUDA thread after another one failed the launch

constexpr int kWarpSize = 32;
constexpr int kMaxCollectives = 8;  // warp operations with disjoint masks in flight at once

inline unsigned bit(unsigned lane) { return 1u << lane; }

// One warp operation in progress among the lanes of `mask`.
struct Collective {
  bool active = false;
  bool done = false;
  WarpOp op = WarpOp::sync;
  unsigned mask = 0, arrived = 0, unread = 0;
  int width = kWarpSize;
  std::source_location where;
  std::array<uint64_t, kWarpSize> value{}, result{};
  std::array<int, kWarpSize> arg{};
  std::array<std::array<uint32_t, kMaxExchangeWords>, kWarpSize> words{};  // warp_exchange's deposits
};

struct WarpState {
  std::mutex mutex;
  std::condition_variable cv;
  unsigned existing = 0;    // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;      // lanes whose thread has returned
  unsigned at_barrier = 0;  // lanes waiting in __syncthreads, at barrier_gen[lane]
  std::array<uint64_t, kWarpSize> barrier_gen{};
  std::array<Collective, kMaxCollectives> collectives;
};

struct BlockState {
  std::mutex mutex;
  std::condition_variable cv;
  unsigned arrived = 0, exited = 0;
  std::atomic<uint64_t> generation{0};  // completed __syncthreads; written under mutex
  std::source_location barrier_where;
  std::unique_ptr<WarpState[]> warps;
};

struct Launch;

struct ResetBlock {  // std::barrier completion: runs once between two blocks
  Launch* launch;
  void operator()() noexcept;
};

struct Launch {
  LaunchSpec spec;
  KernelBody body;
  unsigned nthreads = 0, nwarps = 0;
  uint64_t nblocks = 0;
  uint64_t current_block = 0;  // written by ResetBlock only
  unsigned char* dynamic_shared = nullptr;
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
  BlockState block;
  std::barrier<ResetBlock> block_end;

  Launch(const LaunchSpec& s, KernelBody b, unsigned n)
      : spec(s), body(b), nthreads(n), nwarps((n + kWarpSize - 1) / kWarpSize), block_end(n, ResetBlock{this}) {
    nblocks = uint64_t(s.grid.x) * s.grid.y * s.grid.z;
    block.warps = std::make_unique<WarpState[]>(nwarps);
    for (unsigned w = 0; w < nwarps; ++w) {
      const unsigned lanes = std::min<unsigned>(kWarpSize, n - w * kWarpSize);
      block.warps[w].existing = lanes == kWarpSize ? ~0u : bit(lanes) - 1;
    }
  }

  void reset_block() {
    block.arrived = block.exited = 0;
    for (unsigned w = 0; w < nwarps; ++w) {
      WarpState& ws = block.warps[w];
      ws.exited = ws.at_barrier = 0;
      for (Collective& c : ws.collectives) c.active = false;
    }
    // Shared memory starts as garbage on a GPU; all-ones bytes make floats NaN, so a kernel
    // that reads shared memory it never wrote shows it.
    std::memset(dynamic_shared, 0xff, spec.dynamic_shared_bytes);
  }

  std::string thread_str(unsigned tid) const {
    const dim3 b = spec.block;
    return detail::concat("thread (", tid % b.x, ",", tid / b.x % b.y, ",", tid / (b.x * b.y), ")");
  }

  // Records the first error and wakes every waiting thread. Call without holding any lock.
  void fail(std::string message) {
    {
      std::lock_guard lock(error_mutex);
      if (failed.load()) return;
      error = std::move(message);
      failed.store(true);
    }
    { std::lock_guard lock(block.mutex); block.cv.notify_all(); }
    for (unsigned w = 0; w < nwarps; ++w) {
      std::lock_guard lock(block.warps[w].mutex);
      block.warps[w].cv.notify_all();
    }
  }
};

inline void ResetBlock::operator()() noexcept {
  Launch& l = *launch;
  l.current_block = l.failed.load() ? l.nblocks : l.current_block + 1;
  if (l.current_block < l.nblocks) l.reset_block();
}

// What an OS thread knows about the CUDA thread it is running.
struct ThreadContext {
  Launch* launch = nullptr;
  unsigned tid = 0, warp = 0, lane = 0;
  Fiber* fiber = nullptr;  // null when the CUDA thread is an OS thread
};
inline thread_local ThreadContext tl_context;

// Waits, with `lock` held on entry and on return, until pred() holds (Note [Execution modes]).
template <class Pred>
void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Pred pred) {
  if (tl_context.fiber == nullptr) {
    cv.wait(lock, pred);
    return;
  }
  while (!pred()) {
    lock.unlock();
    tl_context.fiber->suspend();  // the scheduler restores tl_context before resuming us
    lock.lock();
  }
}

// Runs one CUDA thread's work for the current block, then records its exit (executor.cpp).
void run_thread(Launch& l, ThreadContext& c);

// Runs every block of the launch, one after another (block_runners.cpp).
void run_on_fibers(Launch& l);
void run_on_threads(Launch& l);

}  // namespace ember::sim::engine
