// Post-accumulate hooks and end-of-pass callbacks (autograd/hooks.h).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autograd/graph.h"
#include "autograd/hooks.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

TEST_CASE("a post-accumulate hook sees a shared leaf's whole gradient, once per pass") {
  Tensor w = tensor<double>({1, 2, 3}).requires_grad_();
  Tensor x = tensor<double>({4, 5, 6});
  std::vector<std::vector<double>> seen;
  auto handle = autograd::add_post_accumulate_hook(w, [&] { seen.push_back(w.grad().to_vector<double>()); });
  // w is used by three products, through two paths of different depths.
  Tensor loss = add(mul(w, x).sum(), mul(exp(mul(w, 0.0)), mul(w, x)).sum());
  loss.backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{8, 10, 12});  // d/dw = 2x (the exp factor is 1, its own term 0)
  handle.reset();
  w.zero_grad();
  mul(w, x).sum().backward();
  CHECK(seen.size() == 1);  // removed
}

TEST_CASE("hooks of leaves that receive no gradient run when the pass ends, before callbacks") {
  Tensor a = tensor<double>({1, 2}).requires_grad_();
  Tensor b = tensor<double>({3, 4}).requires_grad_();
  std::vector<std::string> order;
  auto ha = autograd::add_post_accumulate_hook(a, [&] {
    order.push_back("a");
    autograd::queue_callback([&] { order.push_back("end"); });
  });
  auto hb = autograd::add_post_accumulate_hook(b, [&] { order.push_back(b.grad().defined() ? "b" : "b-without-grad"); });
  // A node whose backward gives b no gradient (as an op does for an input it ignores).
  Tensor out = a.detach().clone();
  autograd::record("ignores_b", {a, b}, out, [](const Tensor& g) { return autograd::TensorList{g, Tensor()}; });
  out.sum().backward();
  CHECK(order == std::vector<std::string>{"a", "b-without-grad", "end"});
}

TEST_CASE("a hook on the root leaf runs, and queue_callback outside backward is an error") {
  Tensor w = tensor<double>({2}).requires_grad_();
  int calls = 0;
  auto handle = autograd::add_post_accumulate_hook(w, [&] { ++calls; });
  w.backward(tensor<double>({1}));
  CHECK(calls == 1);
  CHECK_THROWS_WITH(autograd::queue_callback([] {}), Contains("outside a backward pass"));
  CHECK_THROWS_WITH(autograd::add_post_accumulate_hook(mul(w, 2.0), [] {}), Contains("leaf tensor"));
}
