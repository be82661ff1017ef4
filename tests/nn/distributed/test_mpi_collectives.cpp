// The MPI backend under `mpirun -np 2` (tests/nn/distributed/CMakeLists.txt): collectives
// against hand-computed results, mismatches reported on every rank, the differentiable
// all_gather against one process, and two DDP ranks against one process on the global batch.
// Both ranks run every case in the same order.
#include <catch2/catch.hpp>

#include "nn/distributed/distributed.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::distributed;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<ProcessGroup> world() {
  auto group = init_process_group();
  REQUIRE(group->size() == 2);  // run under mpirun -np 2
  return group;
}

}  // namespace

TEST_CASE("all_reduce, broadcast, all_gather, reduce_scatter and barrier give hand-computed results") {
  auto group = world();
  const int r = group->rank();
  REQUIRE(group->backend() == "mpi");

  Tensor f = full({3}, r + 1.0);
  group->all_reduce(f, ReduceOp::Sum);
  CHECK(f.to_vector<float>() == std::vector<float>{3, 3, 3});

  Tensor d = full({2}, r + 1.0, {.dtype = DType::f64});
  group->all_reduce(d, ReduceOp::Average);
  CHECK(d.to_vector<double>() == std::vector<double>{1.5, 1.5});

  Tensor i = tensor<int64_t>({r, 10 * r + (int64_t(1) << 40)});
  auto work = group->all_reduce_async(i, ReduceOp::Sum);
  work->wait();
  CHECK(work->test());
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 10 + (int64_t(2) << 40)});

  Tensor b = full({2, 2}, double(r));
  group->broadcast(b, /*root=*/1);
  CHECK(b.to_vector<float>() == std::vector<float>{1, 1, 1, 1});

  // Rank r contributes r + 1 rows of 10 r + row.
  Tensor mine = add(arange(double(r + 1)).reshape({r + 1, 1}).expand({r + 1, 2}), 10.0 * r).contiguous();
  std::vector<int64_t> sizes;
  Tensor gathered = group->all_gather(mine, &sizes);
  CHECK(sizes == std::vector<int64_t>{1, 2});
  CHECK(gathered.shape() == Shape{3, 2});
  CHECK(gathered.to_vector<float>() == std::vector<float>{0, 0, 10, 10, 11, 11});

  // Rows reduced over ranks (arange(6) * 1 + arange(6) * 2), rank 0 gets row 0, rank 1 rows 1-2.
  Tensor scattered = group->reduce_scatter(mul(arange(6.0).reshape({3, 2}), r + 1.0), {1, 2}, ReduceOp::Sum);
  if (r == 0) CHECK(scattered.to_vector<float>() == std::vector<float>{0, 3});
  else CHECK(scattered.to_vector<float>() == std::vector<float>{6, 9, 12, 15});
  group->barrier();
}

TEST_CASE("collectives that ranks call with different shapes fail on every rank with the same message") {
  auto group = world();
  const int r = group->rank();
  CHECK_THROWS_WITH(group->broadcast(zeros({2 + r}), 0),
                    Contains("broadcast: every rank must pass the same shape and dtype; rank 0 has (2,) f32, rank 1 has (3,) f32"));
  CHECK_THROWS_WITH(group->all_gather(zeros({2, 1 + r})),
                    Contains("all_gather: every rank must pass the same dtype and shape after dim 0"));
  CHECK_THROWS_WITH(group->all_reduce(zeros({2}, {.dtype = DType::i64}), ReduceOp::Average),
                    Contains("all_reduce: Average needs a floating tensor, got i64"));
  // The ranks are still in step.
  Tensor t = ones({1});
  group->all_reduce(t);
  CHECK(t.item() == 2.0);
}

TEST_CASE("the differentiable all_gather's gradient equals one process's on the concatenated batch") {
  auto group = world();
  const int r = group->rank();
  // All of both ranks' inputs, known to each: rank 0 owns row 0, rank 1 rows 1-2.
  Tensor all_rows = mul(arange(9.0, {.dtype = DType::f64}).reshape({3, 3}), 0.25);
  Tensor x = all_rows.narrow(0, r == 0 ? 0 : 1, r + 1).contiguous().requires_grad_();
  // Each rank's loss weighs the global batch differently: loss_q = sum(y * (q + 1) * w).
  Tensor w = add(arange(9.0, {.dtype = DType::f64}).reshape({3, 3}), 1.0);
  Tensor y = all_gather(group, x);
  REQUIRE_THAT(y, test::all_close(all_rows, 0, 0));
  mul(y, mul(w, r + 1.0)).sum().backward();

  // One process: the sum of both ranks' losses on the concatenated batch.
  Tensor whole = all_rows.clone().requires_grad_();
  add(mul(whole, w).sum(), mul(whole, mul(w, 2.0)).sum()).backward();
  REQUIRE_THAT(x.grad(), test::all_close(whole.grad().narrow(0, r == 0 ? 0 : 1, r + 1), 1e-15, 0));
}

TEST_CASE("two DDP ranks train to the parameters of one process on the global batch") {
  auto group = world();
  const int r = group->rank();
  const double cap_mib = GENERATE(25.0, 1e-9);  // one bucket; one per parameter
  const int64_t batch = 4, features = 5, steps = 4;
  Generator data_gen(11);
  Tensor inputs = randn({2 * batch, features}, {.dtype = DType::f64}, &data_gen);
  Tensor targets = randn({2 * batch, 2}, {.dtype = DType::f64}, &data_gen);
  auto make_model = [&](uint64_t seed) {
    Generator gen(seed);
    auto model = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
        std::make_shared<Linear>(features, 8, true, &gen), std::make_shared<Tanh>(),
        std::make_shared<Linear>(8, 2, true, &gen)});
    model->to(DType::f64);
    return model;
  };
  auto reference = make_model(1);
  auto replica = make_model(1 + r);  // differs on rank 1 until DDP broadcasts rank 0's
  DistributedDataParallel ddp(replica, group, {.bucket_cap_mib = cap_mib});
  SGD reference_opt(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  SGD opt(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto mse = [](const Tensor& out, const Tensor& target) { return mean(square(sub(out, target))); };
  for (int64_t step = 0; step < steps; ++step) {
    reference_opt.zero_grad();
    mse((*reference)(inputs), targets).backward();
    reference_opt.step();

    opt.zero_grad();
    mse(ddp(inputs.narrow(0, r * batch, batch)), targets.narrow(0, r * batch, batch)).backward();
    opt.step();
  }
  const auto expected = reference->named_parameters(), actual = replica->named_parameters();
  REQUIRE(expected.size() == actual.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO(expected[k].first << " (bucket cap " << cap_mib << " MiB)");
    REQUIRE_THAT(actual[k].second, test::all_close(expected[k].second, 1e-12, 1e-12));
    // The replicas agree bitwise: both ranks add the same two gradients (a + b == b + a).
    Tensor both = group->all_gather(actual[k].second.detach().reshape({1, -1}).contiguous());
    REQUIRE_THAT(both.select(0, 1), test::all_close(both.select(0, 0), 0, 0));
  }
}
