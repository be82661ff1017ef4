// The SIMT simulator's engine; the model is described in executor.h.
//
// Note [misuse detection]: a GPU hangs or silently computes garbage when a barrier or a warp
// operation is not reached by every thread it waits for. The simulator instead fails the
// launch with an ember::Error as soon as such a wait can no longer complete:
// - __syncthreads while some thread of the block has exited, or reached from two different
//   source locations (a barrier inside a divergent branch);
// - a warp operation whose mask names a lane that does not exist, has exited, waits at
//   __syncthreads, or waits in a different warp operation; a shuffle reading a lane outside
//   the mask; lanes of one warp operation disagreeing on the operation or the width (or, for an
//   mma, which must be one instruction for the whole warp, on the source line).
// The waiting threads are then woken and unwound (an internal Abort exception), every thread
// finishes the block, and launch() throws the first error.
//
// Note [Execution modes]: CUDA threads run either as OS threads or as fibers (executor.h).
// Everything that waits (a barrier, a warp operation) goes through wait_until(), which blocks
// on the condition variable under OS threads and, under fibers, suspends the calling fiber
// until the scheduler (run_on_fibers) resumes it and the condition holds. The scheduler resumes
// the live fibers of a block round-robin: the first round runs every thread to its first
// barrier, the last arrival releases it, and the next round carries them all past it, so a
// barrier costs two switches per thread; a warp operation completes when its last lane
// arrives, so a shuffle reduction costs a round per step. Misuse detection is shared: the
// checks run before any wait, in both modes. Fibers give up what OS threads offer to
// ThreadSanitizer (a block's threads running concurrently), so TSan builds use threads.
//
// Note [spinning fibers]: a fiber runs until it waits in a barrier or a warp operation, so a
// CUDA thread spinning on memory that another thread of its block must change would spin
// forever. The common spin, a lock taken with atomicCAS, calls spin_wait() on each failed
// attempt, which suspends the fiber; a plain loop on a volatile flag still spins (as it may
// on a GPU without independent thread scheduling).
//
// Note [locks and ThreadSanitizer]: a mutex creates a happens-before edge for ThreadSanitizer.
// To keep kernel races visible, a CUDA thread takes a lock only where CUDA synchronises too:
// the block lock in __syncthreads (and once on exit), its warp's lock in warp operations.
#include "cuda/sim/executor.h"

#include <array>
#include <barrier>
#include <cstdlib>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <semaphore>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "cuda/sim/fiber.h"
#include "cuda/sim/launch_state.h"
#include "cuda/sim/profile.h"

namespace ember::sim {
using namespace engine;
namespace {

// What a GPU does with the misuses the simulator stops (Note [misuse detection]), from the PTX
// ISA's `exit` (exited threads release a barrier that waits only for them) and the CUDA guide
// (warp operations over exited lanes are undefined).
constexpr std::string_view kBarrierAfterExit =
    " (a barrier every thread must reach: not after an early return or inside a divergent branch; a GPU "
    "releases it without the exited threads, which CUDA leaves undefined, so such code may seem to work there "
    "and break on another GPU or compiler)";
constexpr std::string_view kWarpOpAfterExit =
    " (on a GPU a warp operation whose mask names an exited lane is undefined: it may hang or read a stale "
    "value; leave exited lanes out of the mask)";

std::string where_str(const std::source_location& w) {
  return detail::concat(w.file_name(), ":", w.line());
}

std::string hex(unsigned mask) {
  std::ostringstream os;
  os << "0x" << std::hex << mask;
  return os.str();
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::shfl_idx: return "__shfl_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::mma: return "mma.sync.m16n8k16";
  }
  return "?";
}

ThreadContext& context(const char* what) {
  EMBER_CHECK(tl_context.launch != nullptr, what, ": called outside a kernel running on the simulator");
  return tl_context;
}

[[noreturn]] void fail_and_abort(Launch& l, std::string message) {
  l.fail(std::move(message));
  throw Abort{};
}

// ---- one CUDA thread ----------------------------------------------------------------------

void thread_exit(Launch& l, const ThreadContext& c) {
  std::optional<std::string> err;
  {
    WarpState& ws = l.block.warps[c.warp];
    std::lock_guard lock(ws.mutex);
    ws.exited |= bit(c.lane);
    for (const Collective& col : ws.collectives)
      if (col.active && !col.done && (col.mask & bit(c.lane)))
        err = detail::concat(l.thread_str(c.tid), " (lane ", c.lane, ") exited while lanes ", hex(col.arrived),
                             " of its warp wait for it in ", op_name(col.op), " with mask ", hex(col.mask), " at ",
                             where_str(col.where), kWarpOpAfterExit);
  }
  if (!err) {
    std::lock_guard lock(l.block.mutex);
    ++l.block.exited;
    if (l.block.arrived > 0)
      err = detail::concat(l.thread_str(c.tid), " exited while ", l.block.arrived,
                           " threads of its block wait in __syncthreads at ", where_str(l.block.barrier_where),
                           kBarrierAfterExit);
  }
  if (err) l.fail(std::move(*err));
}


#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

Execution initial_execution() {
  const char* env = std::getenv("EMBER_SIM_EXECUTION");
  const std::string_view asked = env ? env : "";
  EMBER_CHECK(asked.empty() || asked == "threads" || asked == "fibers",
              "EMBER_SIM_EXECUTION: expected threads or fibers, got '", asked, "'");
  EMBER_CHECK(!(kThreadSanitizer && asked == "fibers"),
              "EMBER_SIM_EXECUTION=fibers: a ThreadSanitizer build runs CUDA threads as OS threads, so that "
              "it sees their races");
  return asked == "threads" || kThreadSanitizer || !fibers_supported() ? Execution::threads : Execution::fibers;
}

std::atomic<Execution>& execution_setting() {
  static std::atomic<Execution> mode{initial_execution()};
  return mode;
}

std::mutex g_launch_mutex;  // one launch at a time (Note [static __shared__] in builtins.h)

std::mutex g_attribute_mutex;
std::unordered_map<const void*, size_t>& dynamic_shared_limits() {
  static auto* limits = new std::unordered_map<const void*, size_t>;
  return *limits;
}

// ---- warp operations ------------------------------------------------------------------------

// Fills c.result for every lane of the mask; an error when a lane reads outside the mask.
std::optional<std::string> compute_results(Collective& c, unsigned warp) {
  uint64_t ballot = 0;
  for (unsigned l = 0; l < kWarpSize; ++l)
    if ((c.mask & bit(l)) && c.value[l]) ballot |= bit(l);
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if (!(c.mask & bit(l))) continue;
    const int w = c.width, a = c.arg[l], base = int(l) & ~(w - 1), in_segment = int(l) & (w - 1);
    int src = int(l);
    switch (c.op) {
      case WarpOp::sync:
      case WarpOp::mma: c.result[l] = 0; continue;  // mma: the lanes read the deposited words
      case WarpOp::ballot: c.result[l] = ballot; continue;
      case WarpOp::shfl_idx: src = base + ((a % w) + w) % w; break;
      case WarpOp::shfl_up: src = in_segment - a < 0 ? int(l) : int(l) - a; break;
      case WarpOp::shfl_down: src = in_segment + a >= w ? int(l) : int(l) + a; break;
      case WarpOp::shfl_xor: src = (int(l) ^ a) >= base + w ? int(l) : int(l) ^ a; break;
    }
    if (!(c.mask & bit(unsigned(src))))
      return detail::concat(op_name(c.op), " at ", where_str(c.where), ": lane ", l, " of warp ", warp,
                            " reads lane ", src, ", which is not in the mask ", hex(c.mask));
    c.result[l] = c.value[unsigned(src)];
  }
  return std::nullopt;
}

// Checks, under ws.mutex, that every lane of `mask` can still join a warp operation.
std::optional<std::string> check_participants(const Launch& l, const WarpState& ws, unsigned warp, WarpOp op,
                                              unsigned mask, const std::source_location& where) {
  const auto head = [&] { return detail::concat(op_name(op), " with mask ", hex(mask), " at ", where_str(where), ": "); };
  if (mask & ~ws.existing)
    return head() + detail::concat("lanes ", hex(mask & ~ws.existing), " of warp ", warp,
                                   " do not exist (the block has ", l.nthreads, " threads)");
  if (mask & ws.exited)
    return head() + detail::concat("lanes ", hex(mask & ws.exited), " of warp ", warp, " have already exited",
                                   kWarpOpAfterExit);
  const uint64_t gen = l.block.generation.load();
  for (unsigned lane = 0; lane < kWarpSize; ++lane)
    if ((mask & ws.at_barrier & bit(lane)) && ws.barrier_gen[lane] == gen)
      return head() + detail::concat("lane ", lane, " of warp ", warp, " waits in __syncthreads at ",
                                     where_str(l.block.barrier_where), " instead");
  return std::nullopt;
}

}  // namespace

void engine::run_thread(Launch& l, ThreadContext& c) {
  try {
    l.body.invoke(l.body.context);
  } catch (const Abort&) {
    return;  // another thread failed the launch; its message is the one reported
  } catch (const std::exception& e) {
    l.fail(detail::concat(l.thread_str(c.tid), " threw: ", e.what()));
    return;
  }
  thread_exit(l, c);
}

unsigned warp_lanes() {
  ThreadContext& c = context("__activemask");
  return c.launch->block.warps[c.warp].existing;  // set before the block runs, then constant
}

namespace {
// A lane's deposit into a warp operation, and where it wants the other lanes' words (exchange).
struct Deposit {
  uint64_t value = 0;
  int arg = 0;
  const uint32_t* words = nullptr;
  int nwords = 0;
  uint32_t* gathered = nullptr;
};

uint64_t join_collective(WarpOp op, unsigned mask, const Deposit& in, int width, const std::source_location& where) {
  ThreadContext& c = context(op_name(op));
  Launch& l = *c.launch;
  if (!(mask & bit(c.lane)))
    fail_and_abort(l, detail::concat(op_name(op), " at ", where_str(where), ": ", l.thread_str(c.tid), " (lane ",
                                     c.lane, ") is not in its own mask ", hex(mask)));
  if (width < 1 || width > kWarpSize || (width & (width - 1)))
    fail_and_abort(l, detail::concat(op_name(op), " at ", where_str(where),
                                     ": expected a width that is a power of two up to 32, got ", width));
  WarpState& ws = l.block.warps[c.warp];
  std::unique_lock lock(ws.mutex);
  std::optional<std::string> err = check_participants(l, ws, c.warp, op, mask, where);
  Collective* col = nullptr;
  for (Collective& k : ws.collectives) {
    if (err || !k.active || k.done || !(k.mask & mask)) continue;
    // mma.sync.aligned: every lane executes the same instruction, so the same source line too.
    const bool other_mma = op == WarpOp::mma && (k.where.line() != where.line() ||
                                                 std::string_view(k.where.file_name()) != where.file_name());
    if (k.mask != mask || k.op != op || k.width != width || other_mma)
      err = detail::concat("divergent warp operations in warp ", c.warp, ": lane ", c.lane, " calls ", op_name(op),
                           " with mask ", hex(mask), " at ", where_str(where), " while lanes ", hex(k.arrived),
                           " wait in ", op_name(k.op), " with mask ", hex(k.mask), " at ", where_str(k.where));
    col = &k;
  }
  if (!err && !col) {
    for (Collective& k : ws.collectives)
      if (!k.active) { col = &k; break; }
    if (!col) {
      err = detail::concat(op_name(op), " at ", where_str(where), ": more than ", kMaxCollectives,
                           " warp operations with disjoint masks in flight in one warp");
    } else {  // field by field: the per-lane arrays are written before they are read
      col->active = true, col->done = false, col->op = op, col->mask = mask;
      col->arrived = col->unread = 0, col->width = width, col->where = where;
    }
  }
  if (!err) {
    col->value[c.lane] = in.value;
    col->arg[c.lane] = in.arg;
    std::copy_n(in.words, in.nwords, col->words[c.lane].begin());
    col->arrived |= bit(c.lane);
    if (col->arrived == col->mask) {
      err = compute_results(*col, c.warp);
      col->done = !err;
      col->unread = col->mask;
      ws.cv.notify_all();
    } else {
      wait_until(lock, ws.cv, [&] { return col->done || l.failed.load(); });
    }
  }
  if (err) {
    lock.unlock();
    fail_and_abort(l, std::move(*err));
  }
  if (!col->done) throw Abort{};
  const uint64_t result = col->result[c.lane];
  for (unsigned lane = 0; in.gathered && lane < kWarpSize; ++lane)
    for (int i = 0; i < in.nwords; ++i) in.gathered[lane * unsigned(in.nwords) + unsigned(i)] =
        (mask & bit(lane)) ? col->words[lane][size_t(i)] : 0u;
  col->unread &= ~bit(c.lane);
  if (!col->unread) col->active = false;
  return result;
}
}  // namespace

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         const std::source_location& where) {
  return join_collective(op, mask, Deposit{value, arg}, width, where);
}

void warp_exchange(WarpOp op, unsigned mask, const uint32_t* words, int nwords, uint32_t* gathered,
                   const std::source_location& where) {
  EMBER_CHECK(nwords >= 0 && nwords <= kMaxExchangeWords, "warp_exchange: expected at most ", kMaxExchangeWords,
              " words per lane, got ", nwords);
  join_collective(op, mask, Deposit{0, nwords, words, nwords, gathered}, kWarpSize, where);
}

void syncthreads(const std::source_location& where) {
  ThreadContext& c = context("__syncthreads");
  Launch& l = *c.launch;
  BlockState& b = l.block;
  WarpState& ws = b.warps[c.warp];
  std::optional<std::string> err;
  {
    std::lock_guard lock(ws.mutex);
    ws.at_barrier |= bit(c.lane);
    ws.barrier_gen[c.lane] = b.generation.load();
    for (const Collective& k : ws.collectives)
      if (k.active && !k.done && (k.mask & bit(c.lane)))
        err = detail::concat("__syncthreads at ", where_str(where), ": lane ", c.lane, " of warp ", c.warp,
                             " arrived while lanes ", hex(k.arrived), " wait for it in ", op_name(k.op), " at ",
                             where_str(k.where));
  }
  if (err) fail_and_abort(l, std::move(*err));
  uint64_t gen = 0;
  {
    std::unique_lock lock(b.mutex);
    gen = b.generation.load();
    if (b.exited > 0) {
      err = detail::concat("__syncthreads at ", where_str(where), ": ", l.thread_str(c.tid), " waits for ",
                           b.exited, " threads of its block that have already exited", kBarrierAfterExit);
    } else if (b.arrived > 0 && (b.barrier_where.line() != where.line() ||
                                 std::string_view(b.barrier_where.file_name()) != where.file_name())) {
      err = detail::concat("divergent __syncthreads: ", l.thread_str(c.tid), " waits at ", where_str(where),
                           " while ", b.arrived, " threads of its block wait at ", where_str(b.barrier_where));
    } else {
      if (b.arrived == 0) b.barrier_where = where;
      if (++b.arrived == l.nthreads) {
        profile::barrier_completed(where);
        b.arrived = 0;
        b.generation.store(gen + 1);
        b.cv.notify_all();
      } else {
        wait_until(lock, b.cv, [&] { return b.generation.load() != gen || l.failed.load(); });
      }
    }
  }
  if (err) fail_and_abort(l, std::move(*err));
  {
    std::lock_guard lock(ws.mutex);
    ws.at_barrier &= ~bit(c.lane);
  }
  if (b.generation.load() == gen) throw Abort{};  // woken by a failure, not by the barrier
}

Execution execution() { return execution_setting().load(); }

bool fibers_available() { return fibers_supported() && !kThreadSanitizer; }

void set_execution(Execution mode) {
  EMBER_CHECK(mode == Execution::threads || !kThreadSanitizer,
              "SIMT simulator: a ThreadSanitizer build runs CUDA threads as OS threads, so that it sees their races");
  EMBER_CHECK(mode == Execution::threads || fibers_supported(), "SIMT simulator: fibers are implemented for x86-64 only");
  EMBER_CHECK(tl_context.launch == nullptr, "SIMT simulator: set_execution called from a kernel");
  std::lock_guard lock(g_launch_mutex);  // not in the middle of a launch
  execution_setting().store(mode);
}

void spin_wait() {
  if (tl_context.fiber != nullptr) tl_context.fiber->suspend();
  else if (tl_context.launch != nullptr) std::this_thread::yield();
}

std::optional<ThreadPlace> current_thread() {
  if (tl_context.launch == nullptr) return std::nullopt;
  return ThreadPlace{tl_context.tid, tl_context.warp, tl_context.lane};
}

void* dynamic_shared_memory() { return context("EMBER_DYNAMIC_SHARED").launch->dynamic_shared; }

void set_max_dynamic_shared_bytes(const void* kernel, size_t bytes) {
  EMBER_CHECK(bytes <= kMaxDynamicSharedBytesOptin,
              "cudaFuncSetAttribute(MaxDynamicSharedMemorySize): expected at most ",
              kMaxDynamicSharedBytesOptin, " bytes, got ", bytes);
  std::lock_guard lock(g_attribute_mutex);
  dynamic_shared_limits()[kernel] = bytes;
}

size_t max_dynamic_shared_bytes(const void* kernel) {
  std::lock_guard lock(g_attribute_mutex);
  auto it = dynamic_shared_limits().find(kernel);
  return it == dynamic_shared_limits().end() ? kDefaultMaxDynamicSharedBytes : it->second;
}

void launch(const LaunchSpec& spec, KernelBody body) {
  EMBER_CHECK(tl_context.launch == nullptr, "launch of ", spec.kernel_name,
              ": launching a kernel from inside a kernel (dynamic parallelism) is not supported by the simulator");
  const size_t limit = max_dynamic_shared_bytes(spec.kernel);
  const dim3 g = spec.grid, b = spec.block;
  EMBER_CHECK(spec.dynamic_shared_bytes <= limit, "launch of ", spec.kernel_name, "<<<(", g.x, ",", g.y, ",", g.z,
              "), (", b.x, ",", b.y, ",", b.z, "), ", spec.dynamic_shared_bytes, ">>>: expected at most ", limit,
              " bytes of dynamic shared memory (raise the limit with cudaFuncSetAttribute(kernel, "
              "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)), got ", spec.dynamic_shared_bytes);
  const unsigned nthreads = spec.block.x * spec.block.y * spec.block.z;
  EMBER_CHECK(nthreads >= 1 && nthreads <= kMaxThreadsPerBlock, "launch of ", spec.kernel_name,
              ": expected 1 to ", kMaxThreadsPerBlock, " threads per block, got ", nthreads);

  std::lock_guard lock(g_launch_mutex);
  // Exactly the requested size, so AddressSanitizer flags any access past it.
  std::unique_ptr<unsigned char[]> shared(new unsigned char[spec.dynamic_shared_bytes]);
  auto l = std::make_unique<Launch>(spec, body, nthreads);
  l->dynamic_shared = shared.get();
  l->reset_block();
  if (l->nblocks > 0) {
    if (execution() == Execution::fibers) run_on_fibers(*l);
    else run_on_threads(*l);
  }
  if (l->failed.load()) EMBER_FAIL("kernel ", spec.kernel_name, " failed on the simulator: ", l->error);
}

}  // namespace ember::sim
