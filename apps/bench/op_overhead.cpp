#include "apps/bench/op_overhead.h"

#include "apps/bench/timing.h"
#include "ember.h"

namespace ember::bench {

// Note [Per-op overhead]: the cost an op pays whatever its size is timed on 1-element tensors,
// where the kernel is a handful of instructions: a plain add (argument checks, dispatch, output
// allocation, the kernel), the same add recording an autograd node (inputs that require grad),
// Tensor::empty alone, and an empty parallel_for (waking the pool, which a small op skips). A
// step's share is then estimated from the nodes its forward records (the difference of two
// consecutive losses' sequence numbers): each node was one recorded op and costs about one plain
// op again in backward. The fused ops (conv + bias + ReLU, linear + ReLU) keep that count low.
OpOverhead measure_op_overhead(int64_t batch) {
  OpOverhead r;
  TimingOptions tiny;
  tiny.warmup = 1000;
  tiny.iters = 10000;
  const Tensor a = randn({1}), b = randn({1});
  const Tensor ag = randn({1}).requires_grad_(), bg = randn({1}).requires_grad_();
  r.plain_us = 1e3 * median_ms([&] { (void)add(a, b); }, tiny);
  r.recorded_us = 1e3 * median_ms([&] { (void)add(ag, bg); }, tiny);
  r.allocation_us = 1e3 * median_ms([&] { (void)Tensor::empty({1}); }, tiny);
  r.pool_us = 1e3 * median_ms([&] { parallel_for(0, 2, 1, [](int64_t, int64_t) {}); }, tiny);

  Generator gen(7);
  auto model = mnist_cnn(&gen);
  SGD opt(model->parameters(), {.lr = 0.01});
  const Tensor x = randn({batch, 1, 28, 28}, {}, &gen);
  const Tensor y = randint(0, 10, {batch}, {.dtype = DType::i64}, &gen);
  uint64_t previous = 0, last = 0;
  auto step = [&] {
    const Tensor loss = cross_entropy((*model)(x), y);
    previous = last;
    last = loss.autograd_meta()->grad_fn->sequence;
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  TimingOptions steps;
  steps.warmup = 5;
  r.step_ms = median_ms(step, steps);
  r.recorded_ops = int64_t(last - previous);
  return r;
}

void report_op_overhead(std::ostream& out, int64_t batch) {
  const OpOverhead r = measure_op_overhead(batch);
  out << "\nper-op overhead (Note [Per-op overhead] in apps/bench/op_overhead.cpp; median of 7 blocks): an add of\n"
      << "1-element tensors " << fixed(r.plain_us, 2) << " us, recording its autograd node "
      << fixed(r.recorded_us, 2) << " us, Tensor::empty " << fixed(r.allocation_us, 2)
      << " us, an empty parallel_for " << fixed(r.pool_us, 2) << " us;\n"
      << "a batch-" << batch << " SGD step of mnist_cnn (random data): " << fixed(r.step_ms, 2) << " ms, "
      << r.recorded_ops << " recorded ops, so about " << fixed(r.step_overhead_us(), 1) << " us ("
      << fixed(100 * r.step_overhead_us() / (1e3 * r.step_ms), 2) << "% of the step) is per-op overhead\n";
}

}  // namespace ember::bench
