// The SIMT simulator's engine: runs a kernel launch on CPU threads and implements the
// block- and warp-level synchronisation the kernel language needs.
//
//   ember::sim::launch({"saxpy", &saxpy, grid, block, 0}, body);   // what cuda/launch.h does
//
// Execution model (see cuda/README.md), one of two (Note [Execution modes] in executor.cpp):
// - fibers (the default): each CUDA thread of a block is a user-level fiber, and the thread
//   that launched runs them in turn, switching at __syncthreads and warp operations. A switch
//   costs nanoseconds, so barrier-heavy kernels run at the speed of their arithmetic.
// - threads (ThreadSanitizer builds, or EMBER_SIM_EXECUTION=threads): ONE CUDA THREAD = ONE OS
//   THREAD from a persistent pool (grown on demand, reused across blocks and launches). The
//   threads of a block run concurrently, so ThreadSanitizer sees the same races a GPU would
//   have; __syncthreads is a real barrier among them.
// Both detect the same misuses with the same messages.
// - The blocks of a grid run one after another, and launches one at a time (a process-wide
//   lock); this is what lets static __shared__ be a function-local `static` (Note [static
//   __shared__] in builtins.h). Races between blocks are therefore not observed.
// - Every launch is synchronous: when launch() returns, the kernel has finished; a misuse the
//   simulator detects (divergent barrier, bad shuffle mask, kernel exception) is an
//   ember::Error thrown from launch() naming the kernel and the source location.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <source_location>
#include <string_view>

#include "cuda/sim/builtins.h"

namespace ember::sim {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr size_t kDefaultMaxDynamicSharedBytes = 48 * 1024;
constexpr size_t kMaxDynamicSharedBytesOptin = 227 * 1024;  // sm_90

// A kernel call with its arguments bound: invoke(context) runs one CUDA thread's work.
struct KernelBody {
  const void* context;
  void (*invoke)(const void* context);
};

struct LaunchSpec {
  std::string_view kernel_name;  // for messages
  const void* kernel;            // identity, for per-kernel attributes
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes;
};

enum class Execution { threads, fibers };
// The mode of the next launches: EMBER_SIM_EXECUTION (threads|fibers) at start-up, fibers
// by default; threads only under ThreadSanitizer, where asking for fibers is an error.
Execution execution();
void set_execution(Execution mode);
bool fibers_available();  // x86-64 and not a ThreadSanitizer build

// Runs body on grid x block CUDA threads; throws ember::Error on a launch error or a kernel
// misuse. The caller has validated the grid and block shape (cuda/launch.h does).
void launch(const LaunchSpec& spec, KernelBody body);

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).
void set_max_dynamic_shared_bytes(const void* kernel, size_t bytes);
size_t max_dynamic_shared_bytes(const void* kernel);

// ---- called from kernel code (through builtins in sync.h) -----------------------------------
enum class WarpOp : uint8_t { sync, ballot, shfl_idx, shfl_up, shfl_down, shfl_xor, mma };

void* dynamic_shared_memory();
// The calling CUDA thread's linear index in its block, warp and lane; nullopt outside kernel
// code (for the profiler, cuda/sim/profile.h).
struct ThreadPlace {
  unsigned tid, warp, lane;
};
std::optional<ThreadPlace> current_thread();
// Called by a CUDA thread that waits for another one to change memory (a failed atomicCAS in a
// spin lock): under fibers, lets the other threads of the block run first.
void spin_wait();
void syncthreads(const std::source_location& where);
// The lanes of the calling thread's warp that exist (all 32 but in a block's last, partial
// warp): __activemask() and the mask of cooperative groups' tiles. Note [__activemask]: a GPU
// also leaves out lanes that have returned or are on the other side of a divergent branch. The
// simulator cannot see branches, and which lanes have returned depends on thread timing, so it
// answers with every existing lane: a warp operation over that mask then fails with a clear
// message if a lane has returned, instead of giving a timing-dependent mask.
unsigned warp_lanes();
// One lane's part of a warp-wide operation among the lanes of `mask`; returns this lane's
// result (the shuffled value's bits, or the ballot).
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         const std::source_location& where);
// One lane's part of a warp-wide exchange among the lanes of `mask` (the simulated mma.sync of
// cuda/mma.h): deposits `nwords` 32-bit words (at most kMaxExchangeWords), waits like a shuffle
// until every lane of the mask has, then copies lane l's words to gathered[l * nwords + i] for
// every lane l (zeros for lanes outside the mask). The same checks as a shuffle's: a lane that
// does not exist, has exited, waits at __syncthreads or in another warp operation fails it.
constexpr int kMaxExchangeWords = 8;
void warp_exchange(WarpOp op, unsigned mask, const uint32_t* words, int nwords, uint32_t* gathered,
                   const std::source_location& where);

}  // namespace ember::sim
