#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EMBER_CPU_RELAX() _mm_pause()
#else
#define EMBER_CPU_RELAX() std::this_thread::yield()
#endif

namespace ember {
namespace {

thread_local bool t_in_parallel = false;

// Note [Spin before sleeping]: a training step runs hundreds of short parallel loops; waking a
// worker through a condition variable costs tens of microseconds each time, as much as the
// work of a small op (in a VM each wake is an interrupt through the hypervisor). So a worker
// polls for the next job for a while before it sleeps, and the caller polls for the workers to
// finish before it sleeps, as OpenMP runtimes do. Between training steps the pool still goes to
// sleep, so an idle process does not hold the (shared) cores. The while is a time, 200 us by
// default (EMBER_SPIN_US overrides it, 0 to 100000): it was 1000 pause instructions, whose
// length differs tenfold between x86 cores (19 ns each on Zen 5 measured: 19 us). Measured on Zen 5
// (2026-12-07, mnistprobe, median ms per mnist_cnn step, alternated): batch 32, 20 us 1.93-1.94,
// 200 us 1.83-1.88, 1000 us 1.86-1.89; batch 128 20 us 6.96-6.97, 200 us 6.80-6.88 (one outlier
// at 7.9 in either). The test suite took as long (115 s against 113 at 2 processes on 2 cores).
int spin_microseconds() {
  static const int us = [] {
    const char* env = std::getenv("EMBER_SPIN_US");
    if (!env) return 200;
    char* rest = nullptr;
    const long n = std::strtol(env, &rest, 10);
    EMBER_CHECK(rest != env && *rest == '\0' && n >= 0 && n <= 100000,
                "EMBER_SPIN_US: expected an integer in [0, 100000] (microseconds), got '", env, "'");
    return int(n);
  }();
  return us;
}

// Polls ready() for about spin_microseconds() (not at all for 0); whether it became true.
template <class Ready>
bool spin_until(Ready&& ready) {
  if (spin_microseconds() == 0) return ready();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_microseconds());
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      EMBER_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

// One job at a time: workers wake on a generation change, claim chunks, and the last one out
// signals the caller.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    (void)spin_microseconds();  // EMBER_SPIN_US is checked here, where an error can reach the caller
    for (int i = 0; i + 1 < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return int(workers_.size()) + 1; }

  void run(int64_t begin, int64_t end, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard job_lock(job_mutex_);  // one parallel_for at a time per pool
    {
      std::lock_guard lock(mutex_);
      fn_ = &fn;
      end_ = end;
      chunk_ = chunk;
      next_.store(begin);
      error_ = nullptr;
      busy_.store(int(workers_.size()));
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    work();
    spin_until([&] { return busy_.load(std::memory_order_acquire) == 0; });
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_.load() == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    t_in_parallel = true;
    for (;;) {
      const int64_t b = next_.fetch_add(chunk_);
      if (b >= end_) break;
      try {
        (*fn_)(b, std::min(end_, b + chunk_));
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_.store(end_);
      }
    }
    t_in_parallel = false;
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      spin_until([&] {
        return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      });
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
        if (stop_) return;
        seen = generation_.load();
      }
      work();
      std::lock_guard lock(mutex_);
      if (busy_.fetch_sub(1) == 1) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex job_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::atomic<bool> stop_{false};  // written under mutex_, polled without it (a spinning worker)
  std::atomic<uint64_t> generation_{0};  // written under mutex_, polled without it
  std::atomic<int> busy_{0};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  std::atomic<int64_t> next_{0};
  int64_t end_ = 0, chunk_ = 1;
  std::exception_ptr error_;
};

int default_threads() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    char* rest = nullptr;
    const long n = std::strtol(env, &rest, 10);
    EMBER_CHECK(rest != env && *rest == '\0' && n >= 1 && n <= 1024,
                "EMBER_NUM_THREADS: expected an integer in [1, 1024], got '", env, "'");
    return int(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Note [Resizing a pool in use]: set_num_threads may run while other threads are inside
// parallel_for. Each loop holds a reference to the pool it started on, so a resize installs a new
// pool for later loops and the old one is destroyed (its idle workers joined) by whichever
// thread lets go of it last, never under a running loop.
std::mutex g_pool_mutex;
std::shared_ptr<ThreadPool> g_pool;

std::shared_ptr<ThreadPool> current_pool() {
  std::lock_guard lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_shared<ThreadPool>(default_threads());
  return g_pool;
}

}  // namespace

int num_threads() { return current_pool()->size(); }

void set_num_threads(int n) {
  EMBER_CHECK(n >= 1 && n <= 1024, "set_num_threads: expected a count in [1, 1024], got ", n);
  std::shared_ptr<ThreadPool> old;  // destroyed after the lock is released
  std::lock_guard lock(g_pool_mutex);
  if (!g_pool || g_pool->size() != n) {
    old = std::move(g_pool);
    g_pool = std::make_shared<ThreadPool>(n);
  }
}

bool in_parallel_region() { return t_in_parallel; }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t range = end - begin;
  if (range <= grain || t_in_parallel) {
    fn(begin, end);
    return;
  }
  const std::shared_ptr<ThreadPool> p = current_pool();  // Note [Resizing a pool in use]
  if (p->size() == 1) {
    fn(begin, end);
    return;
  }
  const int64_t chunk = std::max(grain, (range + 4 * p->size() - 1) / (4 * p->size()));
  p->run(begin, end, chunk, fn);
}

}  // namespace ember
