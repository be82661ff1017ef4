// An allocator memory limit hit in the middle of training: the step throws ember::OutOfMemory
// whose message carries the allocator's statistics, the failed step leaves the model and the
// optimizer exactly as they were (Note [A failed step changes nothing] in nn/optim/optimizer.h),
// and a program that catches it, frees memory and goes on ends with the same parameters, bit for
// bit, as a run that never hit the limit.
#include <catch2/catch.hpp>

#include <string>

#include "core/caching_allocator.h"
#include "cuda/runtime.h"
#include "ember.h"
#include "load_testing.h"
#include "support/test_support.h"

using namespace ember;

namespace {

constexpr int kSteps = 6;       // of every run
constexpr int kFailAtStep = 3;  // where the limit is hit

enum class Opt { adam, sgd };

struct Run {
  std::shared_ptr<Sequential> model;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<test::SyntheticBatch> batches;

  explicit Run(Device device, Opt opt = Opt::adam) {
    Generator gen(21);
    model = mlp({32, 64, 4}, &gen);
    model->to(device);
    if (opt == Opt::adam) optimizer = std::make_unique<Adam>(model->parameters(), AdamOptions{.lr = 1e-2});
    else optimizer = std::make_unique<SGD>(model->parameters(), SgdOptions{.lr = 0.05, .momentum = 0.9});
    batches = test::to_device(test::synthetic_batches(kSteps, {8, 32}, 4, /*seed=*/22), device);
  }
  void step(int i) { test::train_step(*model, *optimizer, batches[size_t(i)]); }
  // Everything a step may change: parameters, buffers and the optimizer's state.
  StateDict state() const {
    StateDict s = test::snapshot(model->state_dict());
    add_prefixed(s, "optimizer.", test::snapshot(optimizer->state_dict()));
    return s;
  }
  bool all_grads_defined() const {
    for (const Tensor& p : model->parameters())
      if (!p.grad().defined()) return false;
    return true;
  }
};

// Removes the limit whatever the test does, so that the next test starts without one.
struct LimitGuard {
  Allocator& allocator;
  ~LimitGuard() { allocator.set_memory_limit(0); }
};

// A run that never hits a limit: its final state, and how many bytes step kFailAtStep allocated
// on top of what was live before it (its peak).
struct Reference {
  StateDict final_state;
  int64_t step_bytes = 0;
};
Reference reference_run(Device device, Opt opt = Opt::adam) {
  Allocator& allocator = allocator_for(device);
  Run run(device, opt);
  Reference r;
  for (int i = 0; i < kSteps; ++i) {
    if (i == kFailAtStep) allocator.reset_peak_stats();
    const int64_t before = allocator.stats().allocated_bytes;
    run.step(i);
    if (i == kFailAtStep) r.step_bytes = allocator.stats().peak_allocated_bytes - before;
  }
  r.final_state = run.state();
  return r;
}

// The bytes the caching allocator holds for `tensors` (or their gradients), one block each.
int64_t block_bytes(const std::vector<Tensor>& tensors, bool grads = false) {
  int64_t bytes = 0;
  for (const Tensor& t : tensors) {
    const Tensor& u = grads ? t.grad() : t;
    if (u.defined()) bytes += int64_t(CachingAllocator::round_size(u.nbytes()));
  }
  return bytes;
}

// What every OutOfMemory message must say: the request, the limit and the statistics.
void check_message(const std::string& message) {
  INFO(message);
  CHECK_THAT(message, Catch::Contains("memory limit of") && Catch::Contains("tried to allocate") &&
                          Catch::Contains(" allocated, ") && Catch::Contains(" reserved, ") &&
                          Catch::Contains(" cached"));
}

// Hits the limit with a batch 64 times as big in the middle of training, then drops it, empties
// the cache and goes on with the normal batches under the same limit.
void check_big_batch_recovery(Device device) {
  const Reference reference = reference_run(device);
  Allocator& allocator = allocator_for(device);
  LimitGuard guard{allocator};
  Run run(device);
  for (int i = 0; i < kFailAtStep; ++i) run.step(i);
  const StateDict before = run.state();
  auto big = test::to_device(test::synthetic_batches(1, {8 * 64, 32}, 4, /*seed=*/23), device);

  // Room for one more normal step and a little: not for 64 times its activations.
  const int64_t live = allocator.stats().allocated_bytes;
  const int64_t grad_bytes = block_bytes(run.model->parameters(), /*grads=*/true);  // the last step's
  const size_t limit = size_t(live + reference.step_bytes + 4096);
  allocator.set_memory_limit(limit);
  const int64_t ooms = allocator.stats().ooms;
  std::string message;
  try {
    test::train_step(*run.model, *run.optimizer, big[0]);
    FAIL("expected OutOfMemory from the big batch");
  } catch (const OutOfMemory& e) {
    message = e.what();
  }
  CHECK(allocator.stats().ooms == ooms + 1);
  // The checks copy the state (to the CPU): lift the limit for them.
  allocator.set_memory_limit(0);
  check_message(message);
  CHECK_THAT(message, Catch::Contains(device.str()));
  CHECK(test::first_difference(run.state(), before) == "");  // the failed step changed nothing

  // Recover: drop the batch and the failed step's gradients, give the cache back, and go on
  // under the same limit. Nothing of the failed step stays allocated (its zero_grad() had
  // already dropped the last step's gradients).
  const int64_t batch_bytes = block_bytes({big[0].x, big[0].y});
  big.clear();
  run.optimizer->zero_grad();
  allocator.empty_cache();
  CHECK(allocator.stats().allocated_bytes == live - grad_bytes - batch_bytes);
  allocator.set_memory_limit(limit);
  for (int i = kFailAtStep; i < kSteps; ++i) run.step(i);
  allocator.set_memory_limit(0);
  CHECK(allocator.stats().ooms == ooms + 1);
  CHECK(test::first_difference(run.state(), reference.final_state) == "");
}

// Fault injection: steps 0 (where the optimizer creates its state) and kFailAtStep run under every limit
// from "no room at all" up, `granularity` bytes apart, until they succeed, so OutOfMemory comes
// from every allocation of forward, backward and the optimizer in turn. Every failure must leave
// the state as it was, and the run must end as the reference did.
void check_every_allocation_can_fail(Device device, Opt opt, int64_t granularity) {
  const Reference reference = reference_run(device, opt);
  Allocator& allocator = allocator_for(device);
  LimitGuard guard{allocator};
  Run run(device, opt);
  int failures = 0, failures_in_optimizer = 0, corrupted = 0;
  std::string message;
  for (int i = 0; i < kSteps; ++i) {
    if (i != 0 && i != kFailAtStep) {
      run.step(i);
      continue;
    }
    const StateDict before = run.state();
    const int64_t live = allocator.stats().allocated_bytes;
    for (int64_t room = 0;; room += granularity) {
      allocator.set_memory_limit(size_t(live + room));
      bool failed = false;
      try {
        run.step(i);
      } catch (const OutOfMemory& e) {
        failed = true;
        message = e.what();
      }
      allocator.set_memory_limit(0);
      if (!failed) break;
      ++failures;
      if (run.all_grads_defined()) ++failures_in_optimizer;  // backward had finished
      if (!test::first_difference(run.state(), before).empty()) ++corrupted;
    }
  }
  WARN(failures << " failed attempts, " << failures_in_optimizer << " of them in the optimizer's step");
  CHECK(failures > 10);
  CHECK(failures_in_optimizer > 0);
  CHECK(corrupted == 0);
  check_message(message);
  CHECK(test::first_difference(run.state(), reference.final_state) == "");
}

}  // namespace

TEST_CASE("OOM recovery (cpu): a big batch hits the memory limit mid-training, and after dropping it training goes on unchanged") {
  check_big_batch_recovery(Device::cpu());
}

TEST_CASE("OOM recovery (cpu): OutOfMemory from any allocation of a step leaves the model and optimizer unchanged") {
  SECTION("Adam") { check_every_allocation_can_fail(Device::cpu(), Opt::adam, /*granularity=*/512); }
  SECTION("SGD with momentum") { check_every_allocation_can_fail(Device::cpu(), Opt::sgd, /*granularity=*/512); }
}

TEST_CASE("OOM recovery (cuda): a big batch hits the device allocator's limit, and training goes on unchanged") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_big_batch_recovery(Device::cuda());
}

TEST_CASE("OOM recovery (cuda): OutOfMemory from any allocation of a step leaves the model and optimizer unchanged") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_every_allocation_can_fail(Device::cuda(), Opt::adam, /*granularity=*/2048);
}
