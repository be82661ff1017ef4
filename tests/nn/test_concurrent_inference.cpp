// Several threads running inference on one shared model at once: every output must equal, bit
// for bit, the output of a serial run, and the model must be left untouched. Also run under
// ThreadSanitizer (build-tsan-load, see the report of issue #12), which is what finds shared
// mutable state that a bitwise comparison could miss by luck of scheduling.
//
// Note [Threads in the load tests]: 4 user threads on a 2-core machine with ember's pool of
// EMBER_NUM_THREADS (default: the hardware threads), so user threads and pool workers are
// oversubscribed and interleave; every kernel's result is independent of the thread count
// (core/parallel.h), which is why "bitwise equal to the serial run" is the right bar.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/runtime.h"
#include "ember.h"
#include "load_testing.h"
#include "support/test_support.h"

using namespace ember;

namespace {

constexpr int kThreads = 4;

// Runs `body(thread_index)` on `threads` threads at once and rethrows the first exception.
// Catch's assertions are not thread-safe: bodies count failures and the caller CHECKs them.
void run_on_threads(int threads, const std::function<void(int)>& body) {
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        body(t);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

std::vector<Tensor> serial_outputs(Module& model, const std::vector<Tensor>& inputs) {
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> out;
  for (const Tensor& x : inputs) out.push_back(model(x).cpu());
  return out;
}

// Every thread runs the model on every input `rounds` times, thread t starting at input t so
// that different threads work on different batches at the same time; returns how many outputs
// differed bitwise from `expected`.
int concurrent_mismatches(Module& model, const std::vector<Tensor>& inputs, const std::vector<Tensor>& expected,
                          int rounds) {
  std::atomic<int> mismatches{0};
  run_on_threads(kThreads, [&](int t) {
    autograd::NoGradGuard no_grad;  // per thread: grad mode is thread-local
    const size_t n = inputs.size();
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (k + size_t(t)) % n;
        if (!test::bitwise_equal(model(inputs[i]), expected[i])) ++mismatches;
      }
    }
  });
  return mismatches.load();
}

// The whole check for one model: serial reference, concurrent runs, model state untouched.
void check_concurrent_inference(Module& model, const Shape& input_shape, int batches, int rounds,
                                Device device = Device::cpu()) {
  model.eval();
  model.to(device);
  Generator gen(12);
  std::vector<Tensor> inputs;
  for (int i = 0; i < batches; ++i) inputs.push_back(randn(input_shape, {}, &gen).to(device));
  const StateDict before = test::snapshot(model.state_dict());
  const std::vector<Tensor> expected = serial_outputs(model, inputs);
  {
    // New versions of every parameter and buffer, same values: what the serial run cached from
    // them (the folded batch norms of nn/conv_bn.h and their weight packs) is stale, so the
    // threads race to rebuild it.
    autograd::NoGradGuard no_grad;
    for (auto& [name, t] : model.state_dict())
      if (is_floating(t.dtype())) Tensor(t).mul_(1.0);
  }

  CHECK(concurrent_mismatches(model, inputs, expected, rounds) == 0);
  CHECK(test::first_difference(model.state_dict(), before) == "");
  CHECK(autograd::is_grad_enabled());  // the threads' guards did not reach this thread
}

}  // namespace

TEST_CASE("concurrent inference: mnist_cnn shared by 4 threads equals a serial run bitwise") {
  Generator gen(1);
  auto model = mnist_cnn(&gen);
  check_concurrent_inference(*model, {8, 1, 28, 28}, /*batches=*/4, /*rounds=*/3);
}

TEST_CASE("concurrent inference: se_resnext_cifar in eval mode (batch norm, SE) shared by 4 threads") {
  Generator gen(2);
  auto model = se_resnext_cifar(10, /*depth=*/11, /*width=*/16, &gen);
  // Non-trivial running statistics, so that eval-mode batch norm has something to read.
  {
    autograd::NoGradGuard no_grad;
    Generator data(3);
    for (int i = 0; i < 2; ++i) (*model)(randn({4, 3, 32, 32}, {}, &data));
  }
  check_concurrent_inference(*model, {2, 3, 32, 32}, /*batches=*/4, /*rounds=*/2);
}

TEST_CASE("concurrent inference: on the cuda device (simulator or GPU), 4 host threads launching at once") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  // Note [Simulator launches from several threads]: the simulator runs one launch at a time
  // (cuda/sim/executor.cpp, g_launch_mutex), so host threads interleave at launch granularity;
  // a small model keeps the simulated CUDA threads few.
  Generator gen(4);
  auto model = mlp({64, 32, 10}, &gen);
  check_concurrent_inference(*model, {4, 64}, /*batches=*/3, /*rounds=*/2, Device::cuda());
}

TEST_CASE("parallel_for: several user threads calling it at once get their own correct results") {
  const int saved = num_threads();
  set_num_threads(3);  // a pool with workers even on a 1-core machine
  std::atomic<int> wrong{0};
  run_on_threads(kThreads, [&](int t) {
    for (int r = 0; r < 200; ++r) {
      const int64_t n = 1000 + 37 * t + r;
      std::vector<int64_t> values(size_t(n), 0);
      parallel_for(0, n, /*grain=*/16, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) values[size_t(i)] = i * (t + 1);
        // A nested loop runs inline on the calling thread (and must not deadlock).
        parallel_for(0, 4, 1, [&](int64_t, int64_t) {
          if (!in_parallel_region()) ++wrong;
        });
      });
      for (int64_t i = 0; i < n; ++i)
        if (values[size_t(i)] != i * (t + 1)) ++wrong;
    }
    if (in_parallel_region()) ++wrong;
  });
  set_num_threads(saved);
  CHECK(wrong.load() == 0);
}

// Note [Resizing a pool in use] (core/parallel.cpp): the pool a loop runs on outlives the loop
// even when another thread resizes it meanwhile (a use-after-free under ASan before).
TEST_CASE("parallel_for: set_num_threads on another thread while loops run leaves them correct") {
  const int saved = num_threads();
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::thread resizer([&] {
    for (int r = 0; !done.load(); ++r) {
      set_num_threads(2 + r % 3);
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // a resize every few loops
    }
  });
  run_on_threads(kThreads, [&](int t) {
    for (int r = 0; r < 100; ++r) {
      const int64_t n = 2000 + 13 * t + r;
      std::vector<int64_t> values(size_t(n), 0);
      parallel_for(0, n, /*grain=*/32, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) values[size_t(i)] = i + t;
      });
      for (int64_t i = 0; i < n; ++i)
        if (values[size_t(i)] != i + t) ++wrong;
    }
  });
  done = true;
  resizer.join();
  set_num_threads(saved);
  CHECK(wrong.load() == 0);
}

TEST_CASE("grad mode is per thread: one thread's NoGradGuard does not stop another's recording") {
  Tensor w = randn({3, 3}).requires_grad_();
  std::atomic<bool> recorded{false}, not_recorded{false};
  run_on_threads(2, [&](int t) {
    if (t == 0) {
      autograd::NoGradGuard no_grad;
      for (int i = 0; i < 100; ++i) not_recorded = !matmul(w, w).requires_grad();
    } else {
      for (int i = 0; i < 100; ++i) recorded = matmul(w, w).requires_grad();
    }
  });
  CHECK(recorded.load());
  CHECK(not_recorded.load());
}
