// The SIMT simulator's engine; the model is described in executor.h.
//
// Note [misuse detection]: a GPU hangs or silently computes garbage when a barrier or a warp
// operation is not reached by every thread it waits for. The simulator instead fails the
// launch with an ember::Error as soon as such a wait can no longer complete:
// - __syncthreads while some thread of the block has exited, or reached from two different
//   source locations (a barrier inside a divergent branch);
// - a warp operation whose mask names a lane that does not exist, has exited, waits at
//   __syncthreads, or waits in a different warp operation; a shuffle reading a lane outside
//   the mask; lanes of one warp operation disagreeing on the operation or the width.
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
#include "cuda/sim/profile.h"

namespace ember::sim {
namespace {

struct Abort {};  // unwinds a CUDA thread after another one failed the launch

constexpr int kWarpSize = 32;
constexpr int kMaxCollectives = 8;  // warp operations with disjoint masks in flight at once

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

unsigned bit(unsigned lane) { return 1u << lane; }

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
  }
  return "?";
}

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

void ResetBlock::operator()() noexcept {
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
thread_local ThreadContext tl_context;

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

void run_thread(Launch& l, ThreadContext& c) {
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

void run_launch(Launch& l, unsigned tid) {
  const dim3 b = l.spec.block, g = l.spec.grid;
  tl_context = {&l, tid, tid / kWarpSize, tid % kWarpSize};
  threadIdx = {tid % b.x, tid / b.x % b.y, tid / (b.x * b.y)};
  blockDim = b;
  gridDim = g;
  while (l.current_block < l.nblocks) {
    const uint64_t id = l.current_block;
    blockIdx = {unsigned(id % g.x), unsigned(id / g.x % g.y), unsigned(id / (uint64_t(g.x) * g.y))};
    run_thread(l, tl_context);
    l.block_end.arrive_and_wait();
  }
  tl_context = {};
}

// ---- fibers ---------------------------------------------------------------------------------

// Large enough for kernels' local arrays and for the frames of an exception unwinding a
// CUDA thread; only the pages a thread touches are ever backed by memory.
constexpr size_t kFiberStackBytes = 256 * 1024;

struct FiberThread {
  ThreadContext context;
  uint3 thread_index;
  Fiber* fiber;
};

void fiber_entry(void* arg) {
  FiberThread& t = *static_cast<FiberThread*>(arg);
  run_thread(*t.context.launch, t.context);
}

// Runs the launch's blocks one after another on the calling thread, each CUDA thread a fiber
// (Note [Execution modes]).
class FiberScheduler {
 public:
  void run(Launch& l) {
    while (fibers_.size() < l.nthreads) fibers_.push_back(std::make_unique<Fiber>(kFiberStackBytes));
    const dim3 b = l.spec.block, g = l.spec.grid;
    threads_.resize(l.nthreads);
    for (unsigned tid = 0; tid < l.nthreads; ++tid)
      threads_[tid] = {{&l, tid, tid / kWarpSize, tid % kWarpSize, fibers_[tid].get()},
                       {tid % b.x, tid / b.x % b.y, tid / (b.x * b.y)}, fibers_[tid].get()};
    blockDim = b;
    gridDim = g;
    for (uint64_t id = 0; id < l.nblocks && !l.failed.load(); ++id) {
      if (id > 0) l.reset_block();
      blockIdx = {unsigned(id % g.x), unsigned(id / g.x % g.y), unsigned(id / (uint64_t(g.x) * g.y))};
      profile::block_begin(l.spec, id, l.dynamic_shared);  // fibers only: Note [profile model]
      run_block();
      profile::block_end();
    }
    tl_context = {};
  }

 private:
  void run_block() {
    live_.clear();
    for (FiberThread& t : threads_) {
      t.fiber->start(&fiber_entry, &t);
      live_.push_back(&t);
    }
    while (!live_.empty()) {
      size_t kept = 0;
      for (FiberThread* t : live_) {
        tl_context = t->context;
        threadIdx = t->thread_index;
        if (!t->fiber->resume()) live_[kept++] = t;
      }
      live_.resize(kept);
    }
  }

  std::vector<std::unique_ptr<Fiber>> fibers_;  // reused across launches (one at a time)
  std::vector<FiberThread> threads_;
  std::vector<FiberThread*> live_;
};

FiberScheduler& fiber_scheduler() {
  static FiberScheduler* s = new FiberScheduler;  // leaked, like the pool
  return *s;
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

// ---- the pool -------------------------------------------------------------------------------

class Pool {
 public:
  // Runs the launch on threads 0..nthreads-1 and waits for them.
  void run(Launch& l) {
    grow(l.nthreads);
    current_ = &l;
    running_.store(int(l.nthreads));
    for (unsigned i = 0; i < l.nthreads; ++i) workers_[i]->start.release();
    done_.acquire();
    current_ = nullptr;
  }

 private:
  struct Worker {
    std::binary_semaphore start{0};
  };

  void grow(unsigned n) {
    while (workers_.size() < n) {
      workers_.push_back(std::make_unique<Worker>());
      const unsigned id = unsigned(workers_.size() - 1);
      Worker* w = workers_.back().get();
      // Detached and never stopped: the pool lives as long as the process.
      std::thread([this, w, id] {
        for (;;) {
          w->start.acquire();
          run_launch(*current_, id);
          if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.release();
        }
      }).detach();
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  Launch* current_ = nullptr;
  std::atomic<int> running_{0};
  std::binary_semaphore done_{0};
};

std::mutex g_launch_mutex;  // one launch at a time (Note [static __shared__] in builtins.h)

Pool& pool() {
  static Pool* p = new Pool;  // leaked: its threads outlive static destruction
  return *p;
}

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
      case WarpOp::sync: c.result[l] = 0; continue;
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

unsigned warp_lanes() {
  ThreadContext& c = context("__activemask");
  return c.launch->block.warps[c.warp].existing;  // set before the block runs, then constant
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         const std::source_location& where) {
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
    if (k.mask != mask || k.op != op || k.width != width)
      err = detail::concat("divergent warp operations in warp ", c.warp, ": lane ", c.lane, " calls ", op_name(op),
                           " with mask ", hex(mask), " at ", where_str(where), " while lanes ", hex(k.arrived),
                           " wait in ", op_name(k.op), " with mask ", hex(k.mask), " at ", where_str(k.where));
    col = &k;
  }
  if (!err && !col) {
    for (Collective& k : ws.collectives)
      if (!k.active) { col = &k; break; }
    if (!col) err = detail::concat(op_name(op), " at ", where_str(where), ": more than ", kMaxCollectives,
                                   " warp operations with disjoint masks in flight in one warp");
    else *col = Collective{true, false, op, mask, 0, 0, width, where, {}, {}, {}};
  }
  if (!err) {
    col->value[c.lane] = value;
    col->arg[c.lane] = arg;
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
  col->unread &= ~bit(c.lane);
  if (!col->unread) col->active = false;
  return result;
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
    if (execution() == Execution::fibers) fiber_scheduler().run(*l);
    else pool().run(*l);
  }
  if (l->failed.load()) EMBER_FAIL("kernel ", spec.kernel_name, " failed on the simulator: ", l->error);
}

}  // namespace ember::sim
