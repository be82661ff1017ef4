// Sequential runs a Linear or Conv2d followed by ReLU / Sigmoid / Tanh as one fused op (Note
// [Fused activations] in nn/module.h): same values and gradients as running the modules one by
// one, the same parameters and summary, and the fused op really is the one recorded.
#include <catch2/catch.hpp>

#include "autograd/graph.h"
#include "core/parallel.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

const char* recorded_op(const Tensor& y) { return y.autograd_meta()->grad_fn->name; }

// Output and parameter gradients of `net` on x, with fusion on or off.
std::pair<Tensor, std::vector<Tensor>> run(Sequential& net, const Tensor& x, bool fuse) {
  net.set_fuse_activations(fuse);
  net.zero_grad();
  Tensor y = net(x);
  sum(mul(y, y)).backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : net.parameters()) grads.push_back(p.grad());
  return {y.detach(), grads};
}

}  // namespace

TEST_CASE("sequential fusion: the MNIST CNN gives the unfused values and gradients") {
  Generator gen(7);
  auto net = mnist_cnn(&gen);
  const Tensor x = randn({3, 1, 28, 28}, {}, &gen);
  const auto [y_fused, g_fused] = run(*net, x, true);
  const auto [y_plain, g_plain] = run(*net, x, false);
  CHECK_THAT(y_fused, test::all_close(y_plain, 1e-5, 1e-6));
  REQUIRE(g_fused.size() == g_plain.size());
  for (size_t i = 0; i < g_fused.size(); ++i) {
    INFO("parameter " << i);
    CHECK_THAT(g_fused[i], test::all_close(g_plain[i], 1e-4, 1e-5));
  }
}

TEST_CASE("sequential fusion: every fusable pair runs as one op, the rest module by module") {
  auto net = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Linear>(4, 5), std::make_shared<Tanh>(), std::make_shared<Linear>(5, 3),
      std::make_shared<Sigmoid>()});
  const Tensor x = randn({2, 4});
  Tensor y = (*net)(x);
  CHECK(std::string(recorded_op(y)) == "linear_act");
  CHECK_THAT(y, test::all_close(sigmoid(linear(tanh(linear(x, net->at<Linear>(0).weight(), net->at<Linear>(0).bias())),
                                               net->at<Linear>(2).weight(), net->at<Linear>(2).bias())),
                                1e-6, 1e-6));
  net->set_fuse_activations(false);
  CHECK(std::string(recorded_op((*net)(x))) == "sigmoid");

  // An activation after a layer that cannot fuse runs on its own.
  Sequential pooled({std::make_shared<Flatten>(), std::make_shared<ReLU>()});
  const Tensor images = randn({2, 1, 2, 2}).requires_grad_();
  Tensor z = pooled(images);
  CHECK(std::string(recorded_op(z)) == "relu");
  CHECK(z.shape() == Shape{2, 4});
}

TEST_CASE("sequential fusion: Conv2d, an activation and MaxPool2d run as one op") {
  // Note [Convolution, activation and max pool as one op] in ops/conv_pool.h.
  Generator gen(11);
  auto conv = [&] {
    return std::make_shared<Conv2d>(Conv2dOptions{.in = 2, .out = 4, .kernel = 3, .padding = 1}, &gen);
  };
  Sequential net({conv(), std::make_shared<Tanh>(), std::make_shared<MaxPool2d>(2)});
  const Tensor x = randn({3, 2, 6, 6}, {}, &gen);
  CHECK(std::string(recorded_op(net(x))) == "conv2d_act_max_pool2d");
  const auto [y_fused, g_fused] = run(net, x, true);
  const auto [y_plain, g_plain] = run(net, x, false);
  CHECK(std::string(recorded_op(net(x))) == "max_pool2d");  // run() left fusion off
  CHECK_THAT(y_fused, test::all_close(y_plain, 0, 0));
  for (size_t i = 0; i < g_fused.size(); ++i) CHECK_THAT(g_fused[i], test::all_close(g_plain[i], 1e-5, 1e-6));
  // Another pool after the activation: the convolution fuses the activation only.
  Sequential averaged({conv(), std::make_shared<ReLU>(), std::make_shared<AvgPool2d>(2)});
  const Tensor pooled = averaged(x);
  CHECK(std::string(recorded_op(pooled)) == "avg_pool2d");
  CHECK(std::string(pooled.autograd_meta()->grad_fn->inputs.at(0).node->name) == "conv2d_act");
}

TEST_CASE("sequential fusion: summary still lists the activation modules with their shapes") {
  auto net = mnist_cnn();
  const std::string table = net->summary({2, 1, 28, 28});
  CHECK_THAT(table, Contains("ReLU"));
  CHECK_THAT(table, Contains("(2, 16, 28, 28)"));  // the first convolution's, which its fused op does not return
  CHECK_THAT(table, Contains("(2, 16, 14, 14)"));
  CHECK_THAT(table, Contains("(2, 128)"));
  // Names and parameters are the modules', so checkpoints do not change with fusion.
  CHECK(net->named_parameters().front().first == "0.weight");
}

TEST_CASE("sequential fusion: a training step needs no more memory than the unfused one") {
  // Deterministic sizes, not timings: the peak of the caching allocator over forward + backward.
  // The fused backward reuses the incoming gradient's buffer and drops its saved output before
  // its GEMMs (Note [Donated gradients] in ops/activation.h). One thread: with two, the GEMMs'
  // pack buffers (one per chunk of work items) overlap or not as the threads happen to be
  // scheduled, which moved the peak on a loaded machine.
  const int previous_threads = num_threads();
  set_num_threads(1);
  Allocator& memory = allocator_for(Device::cpu());
  auto peak_of_step = [&](bool fuse) {
    Generator gen(9);
    auto net = mnist_cnn(&gen);
    net->set_fuse_activations(fuse);
    const Tensor x = randn({64, 1, 28, 28}, {}, &gen);
    const Tensor target = randint(0, 10, {64}, {.dtype = DType::i64}, &gen);
    memory.reset_peak_stats();
    const int64_t before = memory.stats().allocated_bytes;
    cross_entropy((*net)(x), target).backward();
    return memory.stats().peak_allocated_bytes - before;
  };
  const int64_t unfused = peak_of_step(false), fused = peak_of_step(true);
  set_num_threads(previous_threads);
  INFO("fused peak " << fused << " B, unfused peak " << unfused << " B");
  // The pooled layers keep no activation output for the backward: at least the first
  // convolution's output (64 x 16 x 28 x 28 floats) less.
  CHECK(fused <= unfused - 64 * 16 * 28 * 28 * 4);
}

TEST_CASE("sequential fusion: BatchNorm2d + ReLU after a convolution runs as one batch_norm op") {
  Generator gen(10);
  Sequential net({std::make_shared<Conv2d>(Conv2dOptions{.in = 2, .out = 4, .kernel = 3, .padding = 1}, &gen),
                  std::make_shared<BatchNorm2d>(4), std::make_shared<ReLU>()});
  const Tensor x = randn({3, 2, 5, 5}, {}, &gen);
  Tensor y = net(x);
  CHECK(std::string(recorded_op(y)) == "batch_norm_act");
  const auto [y_fused, g_fused] = run(net, x, true);
  const auto [y_plain, g_plain] = run(net, x, false);
  CHECK_THAT(y_fused, test::all_close(y_plain, 1e-5, 1e-6));
  for (size_t i = 0; i < g_fused.size(); ++i) CHECK_THAT(g_fused[i], test::all_close(g_plain[i], 1e-4, 1e-5));
}
