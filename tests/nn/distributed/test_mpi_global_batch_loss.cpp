// Metric losses over the global batch under `mpirun -np 2` (global_batch_loss.h): each of the
// eight losses on two ranks' uneven shards equals one process's loss on the concatenated batch,
// with the embeddings' gradients W times one process's (Note [Global batch gradients]) and a
// module loss's parameters getting one process's gradient; and DDP training through a
// global-batch loss ends with one process's parameters. Both ranks run every case in order.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "losses/losses.h"
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

// The global batch, known to both ranks: 9 rows of 4 in 3 classes; rank 0 owns rows [0, 4),
// rank 1 rows [4, 9), so the shards differ in size and classes span both.
constexpr int64_t kRows = 9, kDim = 4, kClasses = 3;
Tensor global_embeddings() {
  Generator gen(5);
  return randn({kRows, kDim}, {.dtype = DType::f64}, &gen);
}
Tensor global_labels() { return tensor<int64_t>({0, 1, 2, 0, 1, 2, 0, 1, 1}); }
std::pair<int64_t, int64_t> shard(int rank) { return rank == 0 ? std::pair{0, 4} : std::pair{4, 5}; }

struct NamedLoss {
  std::string name;
  EmbeddingLoss loss;
};

std::vector<NamedLoss> pair_losses() {
  return {
      {"ntxent", [](const Tensor& e, const Tensor& y) { return ntxent_loss(e, y); }},
      {"supcon", [](const Tensor& e, const Tensor& y) { return supcon_loss(e, y); }},
      {"contrastive", [](const Tensor& e, const Tensor& y) { return contrastive_loss(e, y, {.neg_margin = 1.5}); }},
      {"multi_similarity", [](const Tensor& e, const Tensor& y) { return multi_similarity_loss(e, y); }},
      {"triplet", [](const Tensor& e, const Tensor& y) { return triplet_margin_loss(e, y, {.margin = 0.5}); }},
      {"batch-hard triplet",
       [](const Tensor& e, const Tensor& y) { return triplet_margin_loss(e, y, batch_hard_miner(e, y), {.margin = 0.5}); }},
  };
}

}  // namespace

TEST_CASE("a pair loss over the global batch is one process's loss, with W times its embedding gradients") {
  auto group = world();
  const auto [begin, rows] = shard(group->rank());
  for (const NamedLoss& l : pair_losses()) {
    INFO(l.name);
    Tensor whole = global_embeddings().requires_grad_();
    Tensor expected = l.loss(whole, global_labels());
    expected.backward();
    REQUIRE(expected.item() > 0);  // a case where every pair is satisfied would prove little

    Tensor mine = global_embeddings().narrow(0, begin, rows).contiguous().requires_grad_();
    Tensor loss = global_batch_loss(group, mine, global_labels().narrow(0, begin, rows).contiguous(), l.loss);
    REQUIRE_THAT(loss, test::all_close(expected, 1e-12, 0));
    loss.backward();
    REQUIRE_THAT(mine.grad(), test::all_close(mul(whole.grad().narrow(0, begin, rows), 2.0), 1e-12, 1e-15));
  }
}

TEST_CASE("a module loss over the global batch gives every rank one process's parameter gradient") {
  auto group = world();
  const auto [begin, rows] = shard(group->rank());
  auto check = [&](Module& reference, Module& replica, const EmbeddingLoss& ref_loss, const EmbeddingLoss& loss) {
    Tensor whole = global_embeddings().requires_grad_();
    Tensor expected = ref_loss(whole, global_labels());
    expected.backward();
    Tensor mine = global_embeddings().narrow(0, begin, rows).contiguous().requires_grad_();
    Tensor actual = global_batch_loss(group, mine, global_labels().narrow(0, begin, rows).contiguous(), loss);
    REQUIRE_THAT(actual, test::all_close(expected, 1e-12, 0));
    actual.backward();
    REQUIRE_THAT(mine.grad(), test::all_close(mul(whole.grad().narrow(0, begin, rows), 2.0), 1e-12, 1e-15));
    const Tensor expected_param = reference.parameters().at(0), param = replica.parameters().at(0);
    REQUIRE_THAT(param.grad(), test::all_close(expected_param.grad(), 1e-12, 1e-15));
  };
  SECTION("arcface") {
    Generator g1(3), g2(3);
    ArcFaceLoss reference(kClasses, kDim, {.margin_degrees = 10, .scale = 8}, &g1), replica(kClasses, kDim, {.margin_degrees = 10, .scale = 8}, &g2);
    reference.to(DType::f64);
    replica.to(DType::f64);
    check(reference, replica, [&](const Tensor& e, const Tensor& y) { return reference(e, y); },
          [&](const Tensor& e, const Tensor& y) { return replica(e, y); });
  }
  SECTION("proxy anchor") {
    Generator g1(4), g2(4);
    ProxyAnchorLoss reference(kClasses, kDim, {}, &g1), replica(kClasses, kDim, {}, &g2);
    reference.to(DType::f64);
    replica.to(DType::f64);
    check(reference, replica, [&](const Tensor& e, const Tensor& y) { return reference(e, y); },
          [&](const Tensor& e, const Tensor& y) { return replica(e, y); });
  }
}

TEST_CASE("DDP through a global-batch NT-Xent trains to one process's parameters on the global batch") {
  auto group = world();
  const auto [begin, rows] = shard(group->rank());
  Generator data_gen(8);
  Tensor inputs = randn({kRows, 6}, {.dtype = DType::f64}, &data_gen);
  auto make_model = [](uint64_t seed) {
    Generator gen(seed);
    auto model = std::make_shared<Linear>(6, kDim, true, &gen);
    model->to(DType::f64);
    return model;
  };
  auto reference = make_model(1);
  auto replica = make_model(1 + group->rank());  // rank 0's weights arrive by DDP's broadcast
  DistributedDataParallel ddp(replica, group);
  SGD reference_opt(reference->parameters(), {.lr = 0.5, .momentum = 0.9});
  SGD opt(ddp.parameters(), {.lr = 0.5, .momentum = 0.9});
  const EmbeddingLoss ntxent = [](const Tensor& e, const Tensor& y) { return ntxent_loss(e, y, {.temperature = 0.5}); };
  for (int step = 0; step < 4; ++step) {
    reference_opt.zero_grad();
    Tensor expected = ntxent((*reference)(inputs), global_labels());
    expected.backward();
    reference_opt.step();

    opt.zero_grad();
    Tensor loss = global_batch_loss(group, ddp(inputs.narrow(0, begin, rows).contiguous()),
                                    global_labels().narrow(0, begin, rows).contiguous(), ntxent);
    REQUIRE_THAT(loss, test::all_close(expected, 1e-12, 0));
    loss.backward();
    opt.step();
  }
  const auto expected = reference->named_parameters(), actual = replica->named_parameters();
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO(expected[k].first);
    REQUIRE_THAT(actual[k].second, test::all_close(expected[k].second, 1e-12, 1e-12));
  }
}

TEST_CASE("global_batch_loss refuses malformed input before any collective, naming the problem") {
  auto group = world();
  using Catch::Matchers::Contains;
  const EmbeddingLoss ntxent = [](const Tensor& e, const Tensor& y) { return ntxent_loss(e, y); };
  Tensor e = zeros({3, 2}), y = zeros({3}, {.dtype = DType::i64});
  CHECK_THROWS_WITH(global_batch_loss(nullptr, e, y, ntxent), Contains("expected a process group, got null"));
  CHECK_THROWS_WITH(global_batch_loss(group, e, y, nullptr), Contains("expected a loss function"));
  CHECK_THROWS_WITH(global_batch_loss(group, zeros({3}), y, ntxent), Contains("expected embeddings (B, D), got (3,)"));
  CHECK_THROWS_WITH(global_batch_loss(group, e, zeros({3}), ntxent), Contains("expected labels (B) i64, got (3,) f32"));
  CHECK_THROWS_WITH(global_batch_loss(group, e, zeros({2}, {.dtype = DType::i64}), ntxent),
                    Contains("expected one label per embedding, got 2 labels for 3 embeddings"));
  // Both ranks are still in step.
  Tensor t = ones({1});
  group->all_reduce(t);
  CHECK(t.item() == 2.0);
}
