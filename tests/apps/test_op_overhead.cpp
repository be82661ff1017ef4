// The per-op overhead paragraph of `ember bench mnist` (apps/bench/op_overhead.h): the nodes a
// step records, which its overhead estimate multiplies, must be the nodes of the step's graph
// (until 2026-12-03 linear recorded a view of its input that no node consumed).
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "apps/bench/op_overhead.h"
#include "ember.h"

using namespace ember;

namespace {

// The autograd nodes reachable from `t`, each counted once.
int64_t graph_nodes(const Tensor& t) {
  std::set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> todo{t.autograd_meta()->grad_fn.get()};
  while (!todo.empty()) {
    const autograd::Node* node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node).second) continue;
    for (const autograd::Edge& e : node->inputs) todo.push_back(e.node.get());
  }
  return int64_t(seen.size());
}

}  // namespace

TEST_CASE("bench mnist's per-op overhead counts the nodes of a step's graph and times every part", "[bench]") {
  const bench::OpOverhead r = bench::measure_op_overhead(4);
  Generator gen(3);
  auto model = mnist_cnn(&gen);
  const Tensor loss = cross_entropy((*model)(randn({4, 1, 28, 28}, {}, &gen)), zeros({4}, {.dtype = DType::i64}));
  CHECK(r.recorded_ops == graph_nodes(loss));
  CHECK(r.recorded_ops > 0);
  CHECK(r.plain_us > 0);
  CHECK(r.recorded_us > 0);
  CHECK(r.allocation_us > 0);
  CHECK(r.pool_us > 0);
  CHECK(r.step_ms > 0);
}

TEST_CASE("linear and conv2d on non-contiguous operands record one node each", "[bench]") {
  Generator gen(4);
  const Tensor x = randn({5, 3}, {}, &gen).requires_grad_(), w = randn({5, 4}, {}, &gen).requires_grad_();
  const Tensor xt = x.t(), wt = w.t();  // (3, 5) and (4, 5), neither contiguous
  const uint64_t before = wt.autograd_meta()->grad_fn->sequence;
  const Tensor y = linear(xt, wt, Tensor());
  CHECK(y.autograd_meta()->grad_fn->sequence == before + 1);
  const Tensor img = randn({1, 4, 6, 5}, {}, &gen).requires_grad_();
  const Tensor img_t = img.transpose(2, 3);  // (1, 4, 5, 6), not contiguous
  const Tensor k = randn({2, 4, 3, 3}, {}, &gen).requires_grad_();
  const uint64_t before_conv = img_t.autograd_meta()->grad_fn->sequence;
  const Tensor z = conv2d(img_t, k);
  CHECK(z.autograd_meta()->grad_fn->sequence == before_conv + 1);
}
