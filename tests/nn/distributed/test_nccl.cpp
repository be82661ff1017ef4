// The NCCL backend with one rank (nccl_process_group.cpp), in builds that have it: the
// collectives return their input, their errors name the op, DistributedDataParallel over NCCL
// takes the step a plain model takes, and a metric loss over the global batch is the loss.
// More ranks need more GPUs than the project's machines have (README, GPU section). Skipped
// where no GPU is visible.
#include <catch2/catch.hpp>

#include "cuda/runtime.h"
#include "losses/losses.h"
#include "nn/distributed/distributed.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::distributed;
using Catch::Matchers::Contains;

TEST_CASE("nccl: one rank's collectives return their input and name the op in errors") {
  if (!cuda::is_available()) EMBER_SKIP("no GPU visible to this process");
  auto group = init_process_group(Device::cuda());
  REQUIRE(group->backend() == "nccl");
  REQUIRE(group->size() == 1);
  REQUIRE(group == init_process_group(Device::cuda()));  // made once
  const Tensor values = tensor<float>({1, -2, 3.5f, 4}, {2, 2}).to(Device::cuda());
  Tensor t = values.clone();
  group->all_reduce(t, ReduceOp::Sum);
  CHECK_THAT(t.cpu(), test::all_close(values.cpu(), 0, 0));
  group->all_reduce(t, ReduceOp::Average);
  CHECK_THAT(t.cpu(), test::all_close(values.cpu(), 0, 0));
  group->broadcast(t, 0);
  CHECK_THAT(t.cpu(), test::all_close(values.cpu(), 0, 0));
  std::vector<int64_t> sizes;
  Tensor gathered = group->all_gather(values, &sizes);
  CHECK(sizes == std::vector<int64_t>{2});
  CHECK_THAT(gathered.cpu(), test::all_close(values.cpu(), 0, 0));
  CHECK_THAT(group->reduce_scatter(values, {2}, ReduceOp::Sum).cpu(), test::all_close(values.cpu(), 0, 0));
  group->barrier();
  CHECK_THROWS_WITH(group->all_reduce(zeros({2}, {.dtype = DType::i64, .device = Device::cuda()}), ReduceOp::Average),
                    Contains("all_reduce: Average needs a floating tensor, got i64"));
  CHECK_THROWS_WITH(group->all_reduce(zeros({2})), Contains("the nccl group works on cuda:0 tensors, got one on cpu"));
}

TEST_CASE("nccl: DDP over one rank takes a plain model's step, and a global-batch loss is the loss") {
  if (!cuda::is_available()) EMBER_SKIP("no GPU visible to this process");
  auto group = init_process_group(Device::cuda());
  Generator data_gen(3);
  Tensor x = randn({8, 5}, {}, &data_gen).to(Device::cuda());
  Tensor labels = tensor<int64_t>({0, 1, 0, 1, 2, 2, 0, 1}).to(Device::cuda());
  auto make_model = [] {
    Generator gen(1);
    auto model = std::make_shared<Linear>(5, 4, true, &gen);
    model->to(Device::cuda());
    return model;
  };
  auto plain = make_model(), replica = make_model();
  DistributedDataParallel ddp(replica, group);
  SGD plain_opt(plain->parameters(), {.lr = 0.1});
  SGD opt(ddp.parameters(), {.lr = 0.1});
  auto ntxent = [](const Tensor& e, const Tensor& y) { return ntxent_loss(e, y, {.temperature = 0.5}); };
  Tensor expected = ntxent((*plain)(x), labels);
  expected.backward();
  plain_opt.step();
  Tensor loss = global_batch_loss(group, ddp(x), labels, ntxent);
  CHECK(loss.item() == Approx(expected.item()).epsilon(1e-6));
  loss.backward();
  opt.step();
  const auto want = plain->named_parameters(), got = replica->named_parameters();
  for (size_t k = 0; k < want.size(); ++k) {
    INFO(want[k].first);
    CHECK_THAT(got[k].second.cpu(), test::all_close(want[k].second.cpu(), 1e-5, 1e-6));
  }
}
