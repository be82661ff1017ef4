// The two ways the simulator runs a launch's blocks (Note [Execution modes] in executor.cpp):
// each CUDA thread a fiber on the launching thread, or an OS thread of a persistent pool.
#include <memory>
#include <semaphore>
#include <thread>
#include <vector>

#include "cuda/sim/launch_state.h"
#include "cuda/sim/profile.h"

namespace ember::sim::engine {
namespace {

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

Pool& pool() {
  static Pool* p = new Pool;  // leaked: its threads outlive static destruction
  return *p;
}

}  // namespace

void run_on_fibers(Launch& l) { fiber_scheduler().run(l); }
void run_on_threads(Launch& l) { pool().run(l); }

}  // namespace ember::sim::engine
