// A long training run must not grow: after warm-up, every training step allocates and frees the
// same buffers, so the caching allocator's statistics at the end equal those after warm-up. A
// leak of one tensor per hundred steps must be caught (the negative test below proves the check
// can fail).
//
// Note [Soak statistics]: compared are the bytes and blocks handed out now (allocated_bytes,
// active_blocks), the bytes held from the system (reserved_bytes, so also the cached bytes,
// reserved - allocated) and the number of raw allocations and frees: a steady state makes no
// system call at all, so growth in any of them after warm-up is a leak or fragmentation. They are
// taken between steps, when only the parameters, their gradients, the optimizer's state and the
// data set are alive.
#include <catch2/catch.hpp>

#include <functional>
#include <ostream>

#include "cuda/runtime.h"
#include "ember.h"
#include "load_testing.h"
#include "support/test_support.h"

using namespace ember;

namespace {

struct AllocatorSnapshot {
  int64_t allocated_bytes, reserved_bytes, cached_bytes, active_blocks, raw_allocations, raw_frees;
  bool operator==(const AllocatorSnapshot&) const = default;
};

AllocatorSnapshot snapshot_of(Device device) {
  const AllocatorStats s = allocator_for(device).stats();
  return {s.allocated_bytes, s.reserved_bytes,  s.reserved_bytes - s.allocated_bytes,
          s.active_blocks,   s.raw_allocations, s.raw_frees};
}

std::ostream& operator<<(std::ostream& os, const AllocatorSnapshot& s) {
  return os << "{allocated " << s.allocated_bytes << " B, reserved " << s.reserved_bytes << " B, cached "
            << s.cached_bytes << " B, active blocks " << s.active_blocks << ", raw allocations "
            << s.raw_allocations << ", raw frees " << s.raw_frees << "}";
}

struct SoakResult {
  AllocatorSnapshot after_warm_up, at_end;
  double first_loss, last_loss;  // means over the first and the last pass over the batches
};

// Trains for `steps` steps, cycling through `batches`, and takes the allocator's statistics after
// step `warm_up` and after the last one. `keep` (if set) sees every step's loss: the negative
// test leaks through it.
SoakResult soak(Module& model, Optimizer& optimizer, const std::vector<test::SyntheticBatch>& batches, int steps,
                int warm_up, Device device, const std::function<void(int, const Tensor&)>& keep = {}) {
  SoakResult r{};
  const int n = int(batches.size());
  for (int step = 1; step <= steps; ++step) {
    {
      const Tensor loss = test::train_step(model, optimizer, batches[size_t(step % n)]);
      if (step <= n) r.first_loss += loss.item() / n;  // reads sync the device, as a display does
      if (step > steps - n) r.last_loss += loss.item() / n;
      if (keep) keep(step, loss);
    }
    if (step == warm_up) r.after_warm_up = snapshot_of(device);
  }
  r.at_end = snapshot_of(device);
  return r;
}

void report(const SoakResult& r) {
  WARN("soak: after warm-up " << r.after_warm_up << "; at end " << r.at_end << "; loss " << r.first_loss << " -> "
                              << r.last_loss);
}

}  // namespace

TEST_CASE("training soak: 10,000 steps of an MLP with SGD momentum keep the CPU allocator's statistics flat") {
  Generator gen(5);
  auto model = mlp({32, 64, 4}, &gen);
  SGD optimizer(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  const auto batches = test::synthetic_batches(8, {32, 32}, 4, /*seed=*/6);
  const SoakResult r = soak(*model, optimizer, batches, 10000, /*warm_up=*/100, Device::cpu());
  report(r);
  CHECK(r.at_end == r.after_warm_up);
  CHECK(r.at_end.raw_allocations > 0);  // the statistics are the CPU allocator's, and it was used
  CHECK(r.last_loss < 0.5 * r.first_loss);  // it trained
}

TEST_CASE("training soak: 10,000 steps of a small CNN with Adam keep the CPU allocator's statistics flat") {
  Generator gen(7);
  auto model = test::tiny_cnn(4, &gen);
  Adam optimizer(model->parameters(), {.lr = 3e-3});
  const auto batches = test::synthetic_batches(8, {16, 1, 8, 8}, 4, /*seed=*/8);
  const SoakResult r = soak(*model, optimizer, batches, 10000, /*warm_up=*/100, Device::cpu());
  report(r);
  CHECK(r.at_end == r.after_warm_up);
  CHECK(r.last_loss < 0.5 * r.first_loss);
}

TEST_CASE("training soak: a leak of one small tensor per hundred steps is caught") {
  Generator gen(5);
  auto model = mlp({32, 64, 4}, &gen);
  SGD optimizer(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  const auto batches = test::synthetic_batches(8, {32, 32}, 4, /*seed=*/6);
  std::vector<Tensor> leaked;
  const SoakResult r = soak(*model, optimizer, batches, 2000, /*warm_up=*/100, Device::cpu(),
                            [&](int step, const Tensor& loss) {
                              if (step % 100 == 0) leaked.push_back(loss);  // a 0-d tensor: one 512-byte block
                            });
  CHECK_FALSE(r.at_end == r.after_warm_up);
  CHECK(r.at_end.active_blocks - r.after_warm_up.active_blocks == 19);
  CHECK(r.at_end.allocated_bytes - r.after_warm_up.allocated_bytes == 19 * 512);
}

TEST_CASE("training soak: the cuda device's allocator stays flat too (a shorter run on the simulator)") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  Generator gen(9);
  auto model = mlp({32, 64, 4}, &gen);
  model->to(Device::cuda());
  SGD optimizer(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  const auto batches = test::to_device(test::synthetic_batches(8, {32, 32}, 4, /*seed=*/6), Device::cuda());
  const SoakResult r = soak(*model, optimizer, batches, 24, /*warm_up=*/8, Device::cuda());
  report(r);
  CHECK(r.at_end == r.after_warm_up);
  CHECK(r.at_end.raw_allocations > 0);
  CHECK(r.last_loss < r.first_loss);
}
