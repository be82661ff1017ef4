// Synchronized batch norm under `mpirun -np 2` (sync_batch_norm.h): two ranks' uneven batches
// normalised together equal one BatchNorm on the concatenated batch (outputs, gradients of the
// input and parameters, running statistics, a channel far from zero, a fused ReLU), and a
// converted model trained under DDP ends with one process's parameters. Both ranks run every
// case in the same order.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "nn/distributed/distributed.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::distributed;

namespace {

std::shared_ptr<ProcessGroup> world() {
  auto group = init_process_group();
  REQUIRE(group->size() == 2);  // run under mpirun -np 2
  return group;
}

// Rank 0 owns rows [0, 3) of the 7-row global batch, rank 1 rows [3, 7).
std::pair<int64_t, int64_t> shard(int rank) { return rank == 0 ? std::pair{0, 3} : std::pair{3, 4}; }

// (7, 3, 2, 2) f64; channel 0 sits near 1000 with a spread of 1, where E[x^2] - E[x]^2 would lose
// digits.
Tensor global_inputs() {
  Generator gen(2);
  Tensor x = randn({7, 3, 2, 2}, {.dtype = DType::f64}, &gen);
  Tensor offset = tensor<double>({1000.0, 0.0, -3.0}).reshape({1, 3, 1, 1});
  return add(x, offset);
}

std::shared_ptr<BatchNorm2d> make_bn() {
  auto bn = std::make_shared<BatchNorm2d>(3);
  bn->to(DType::f64);
  {
    autograd::NoGradGuard no_grad;
    bn->weight().copy_(tensor<double>({1.5, -0.5, 2.0}));
    bn->bias().copy_(tensor<double>({0.1, 0.2, -0.3}));
  }
  return bn;
}

Tensor summed_over_ranks(ProcessGroup& group, const Tensor& t) {
  Tensor s = t.detach().clone();
  group.all_reduce(s);
  return s;
}

}  // namespace

TEST_CASE("synchronised batch norm on two ranks' uneven batches is one BatchNorm on the concatenated batch") {
  auto group = world();
  const auto [begin, rows] = shard(group->rank());
  const Activation act = GENERATE(Activation::none, Activation::relu);
  INFO("activation " << int(act));
  Generator wgen(4);
  const Tensor loss_weights = randn({7, 3, 2, 2}, {.dtype = DType::f64}, &wgen);

  auto reference = make_bn();
  Tensor whole = global_inputs().requires_grad_();
  Tensor expected = reference->forward_activated(whole, act);
  sum(mul(expected, loss_weights)).backward();

  auto bn = make_bn();
  REQUIRE(convert_sync_batchnorm(*bn, group) == 1);
  REQUIRE(bn->synchronised());
  Tensor mine = global_inputs().narrow(0, begin, rows).contiguous().requires_grad_();
  Tensor y = bn->forward_activated(mine, act);
  REQUIRE_THAT(y, test::all_close(expected.narrow(0, begin, rows), 1e-12, 1e-12));
  // Each rank's loss is its rows' share of the one-process loss; their sum is that loss.
  sum(mul(y, loss_weights.narrow(0, begin, rows))).backward();
  REQUIRE_THAT(mine.grad(), test::all_close(whole.grad().narrow(0, begin, rows), 1e-9, 1e-12));
  REQUIRE_THAT(summed_over_ranks(*group, bn->weight().grad()), test::all_close(reference->weight().grad(), 1e-12, 1e-12));
  REQUIRE_THAT(summed_over_ranks(*group, bn->bias().grad()), test::all_close(reference->bias().grad(), 1e-12, 1e-12));
  // The job's statistics in every rank's running buffers (unbiased variance over all 28 values).
  REQUIRE_THAT(bn->running_mean(), test::all_close(reference->running_mean(), 1e-12, 1e-12));
  REQUIRE_THAT(bn->running_var(), test::all_close(reference->running_var(), 1e-12, 1e-12));

  // Evaluation normalises with the running statistics, with no collective.
  bn->eval();
  reference->eval();
  autograd::NoGradGuard no_grad;
  REQUIRE_THAT((*bn)(mine.detach()), test::all_close((*reference)(whole.detach()).narrow(0, begin, rows), 1e-12, 1e-12));
}

TEST_CASE("a model with synchronised batch norm under DDP trains to one process's parameters on the global batch") {
  auto group = world();
  const auto [begin, rows] = shard(group->rank());
  Generator data_gen(6);
  Tensor inputs = randn({7, 2, 4, 4}, {.dtype = DType::f64}, &data_gen);
  Tensor targets = randn({7, 3}, {.dtype = DType::f64}, &data_gen);
  auto make_model = [](uint64_t seed) {
    Generator gen(seed);
    auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
        std::make_shared<Conv2d>(Conv2dOptions{.in = 2, .out = 4, .padding = 1, .bias = false}, &gen),
        std::make_shared<BatchNorm2d>(4), std::make_shared<ReLU>(), std::make_shared<Flatten>(),
        std::make_shared<Linear>(64, 3, true, &gen)});
    model->to(DType::f64);
    return model;
  };
  auto reference = make_model(1);
  auto replica = make_model(1 + group->rank());  // rank 0's weights arrive by DDP's broadcast
  REQUIRE(convert_sync_batchnorm(*replica, group) == 1);
  DistributedDataParallel ddp(replica, group);
  SGD reference_opt(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  SGD opt(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
  // One process minimises the sum of squares over all 7 rows; each rank its rows' share of that
  // sum, times the world size that DDP's average divides by.
  for (int step = 0; step < 3; ++step) {
    reference_opt.zero_grad();
    sum(square(sub((*reference)(inputs), targets))).backward();
    reference_opt.step();

    opt.zero_grad();
    Tensor out = ddp(inputs.narrow(0, begin, rows).contiguous());
    mul(sum(square(sub(out, targets.narrow(0, begin, rows)))), 2.0).backward();
    opt.step();
  }
  const auto expected = reference->state_dict();
  for (const auto& [name, t] : replica->state_dict()) {
    INFO(name);
    if (name.find("num_batches_tracked") != std::string::npos) continue;
    REQUIRE_THAT(t, test::all_close(expected.at(name), 1e-10, 1e-12));
  }
}
