// ConvBn (nn/conv_bn.h): in eval mode without gradients a convolution with its batch norm folded
// in (Note [Folded batch norm]). Its output against the two modules run one after the other, its
// refresh after every kind of change to a source, the cases where it must not fold, and a whole
// SE-ResNeXt folded against unfolded.
#include <catch2/catch.hpp>

#include <memory>

#include "ember.h"
#include "ops/autocast.h"
#include "support/test_support.h"

using namespace ember;

namespace {

struct Pair {
  std::shared_ptr<Conv2d> conv;
  std::shared_ptr<BatchNorm2d> bn;
};

// A convolution and a batch norm in f64 with statistics and affine parameters far from the
// identity, so that a fold that dropped any of them would show.
Pair make_pair(Conv2dOptions o, bool affine, Generator& gen) {
  Pair p{std::make_shared<Conv2d>(o, &gen), std::make_shared<BatchNorm2d>(o.out, 1e-3, 0.1, affine)};
  p.conv->to(DType::f64);
  p.bn->to(DType::f64);
  autograd::NoGradGuard no_grad;
  const TensorOptions f64{.dtype = DType::f64};
  p.bn->running_mean().copy_(randn({o.out}, f64, &gen));
  p.bn->running_var().copy_(add(rand({o.out}, f64, &gen), 0.5));
  if (affine) {
    p.bn->weight().copy_(randn({o.out}, f64, &gen));
    p.bn->bias().copy_(randn({o.out}, f64, &gen));
  }
  return p;
}

// act(bn(conv(x))) by the modules themselves.
Tensor unfolded(const Pair& p, const Tensor& x, Activation act) { return activate((*p.bn)((*p.conv)(x)), act); }

}  // namespace

TEST_CASE("conv_bn: folded in eval mode it equals the convolution and batch norm one after the other") {
  Generator gen(3);
  struct Case {
    Conv2dOptions conv;
    bool affine;
    Activation act;
  };
  const Case cases[] = {
      {{.in = 8, .out = 6, .kernel = 1, .bias = false}, true, Activation::none},
      {{.in = 8, .out = 8, .kernel = 3, .stride = 2, .padding = 1, .groups = 4, .bias = false}, true, Activation::relu},
      {{.in = 3, .out = 5, .kernel = 3, .padding = 1, .bias = true}, true, Activation::relu},
      {{.in = 4, .out = 4, .kernel = 1, .bias = true}, false, Activation::none},
  };
  for (const Case& c : cases) {
    INFO("groups " << c.conv.groups << ", bias " << c.conv.bias << ", affine " << c.affine);
    const Pair p = make_pair(c.conv, c.affine, gen);
    p.conv->eval();
    p.bn->eval();
    ConvBn conv_bn(p.conv, p.bn);
    ReLU relu;
    const Tensor x = randn({2, c.conv.in, 9, 9}, {.dtype = DType::f64}, &gen);
    autograd::NoGradGuard no_grad;
    REQUIRE(conv_bn.folds());
    const Tensor y = c.act == Activation::relu ? conv_bn(x, relu, c.act) : conv_bn(x);
    CHECK_THAT(y, test::all_close(unfolded(p, x, c.act), 1e-12, 1e-12));
    CHECK(conv_bn.folds_built() == 1);
    // The statistics are used, not updated.
    CHECK(p.bn->state_dict().at("num_batches_tracked").item() == 0);
  }
}

TEST_CASE("conv_bn: the fold is rebuilt after every change to a source") {
  Generator gen(4);
  const Pair p = make_pair({.in = 4, .out = 6, .kernel = 3, .padding = 1, .bias = true}, true, gen);
  p.conv->eval();
  p.bn->eval();
  ConvBn conv_bn(p.conv, p.bn);
  const Tensor x = randn({1, 4, 5, 5}, {.dtype = DType::f64}, &gen);
  const TensorOptions f64{.dtype = DType::f64};
  int64_t builds = 0;
  auto check_fresh = [&](const char* change) {
    INFO("after " << change);
    autograd::NoGradGuard no_grad;
    CHECK_THAT(conv_bn(x), test::all_close(unfolded(p, x, Activation::none), 1e-12, 1e-12));
    CHECK(conv_bn.folds_built() == ++builds);  // rebuilt once, for this change
    CHECK_THAT(conv_bn(x), test::all_close(unfolded(p, x, Activation::none), 1e-12, 1e-12));
    CHECK(conv_bn.folds_built() == builds);    // and kept for the next call
  };
  check_fresh("nothing");
  {
    autograd::NoGradGuard no_grad;  // in-place writes to parameters
    p.bn->running_var().copy_(add(rand({6}, f64, &gen), 2.0));
    check_fresh("running_var.copy_");
    p.bn->running_mean().add_(ones({6}, f64));
    check_fresh("running_mean.add_");
    p.bn->weight().mul_(-2.0);
    check_fresh("weight.mul_");
    p.bn->bias().fill_(0.25);
    check_fresh("bias.fill_");
    p.conv->bias().fill_(-1.0);
    check_fresh("conv bias.fill_");
    p.conv->weight().add_(randn(p.conv->weight().shape(), f64, &gen));
    check_fresh("conv weight.add_");
  }
  // An optimizer step on the convolution's weight.
  sum((*p.conv)(x)).backward();
  SGD(p.conv->parameters(), {.lr = 0.5}).step();
  check_fresh("an SGD step");
  const Pair other = make_pair({.in = 4, .out = 6, .kernel = 3, .padding = 1, .bias = true}, true, gen);
  p.bn->load_state_dict(other.bn->state_dict());
  check_fresh("bn.load_state_dict");
  p.conv->load_state_dict(other.conv->state_dict());
  check_fresh("conv.load_state_dict");
  // Module::to swaps the storage inside the same handles: the fold follows the new dtype.
  p.conv->to(DType::f32);
  p.bn->to(DType::f32);
  const Tensor x32 = x.to(DType::f32);
  autograd::NoGradGuard no_grad;
  const Tensor y32 = conv_bn(x32);
  CHECK(y32.dtype() == DType::f32);
  CHECK_THAT(y32, test::all_close(unfolded(p, x32, Activation::none), 1e-5, 1e-5));
}

TEST_CASE("conv_bn: bf16 convolution weights with f32 batch norm fold in f32 and round once") {
  Generator gen(8);
  Pair p = make_pair({.in = 16, .out = 24, .kernel = 1, .bias = false}, true, gen);
  p.conv->to(DType::bf16);  // the 16-bit layout of Note [16-bit batch norm]: the batch norm stays f32
  p.bn->to(DType::f32);
  p.conv->eval();
  p.bn->eval();
  ConvBn conv_bn(p.conv, p.bn);
  const Tensor x = randn({2, 16, 5, 5}, {}, &gen).to(DType::bf16);
  autograd::NoGradGuard no_grad;
  const Tensor y = conv_bn(x);
  CHECK(y.dtype() == DType::bf16);
  CHECK(conv_bn.folds_built() == 1);
  // bf16 keeps 8 bits: the folded weights round once, the unfused output once.
  CHECK_THAT(y.to(DType::f32), test::all_close(unfolded(p, x, Activation::none).to(DType::f32), 3e-2, 3e-2));
}

TEST_CASE("conv_bn: training or eval mode with gradients on runs the modules themselves") {
  Generator gen(5);
  const Pair p = make_pair({.in = 3, .out = 4, .kernel = 3, .padding = 1, .bias = false}, true, gen);
  ConvBn conv_bn(p.conv, p.bn);
  const Tensor x = randn({2, 3, 6, 6}, {.dtype = DType::f64}, &gen);
  // Training: batch statistics, and the running ones move.
  REQUIRE_FALSE(conv_bn.folds());
  const Tensor before = p.bn->running_mean().clone();
  conv_bn(x);
  CHECK(p.bn->state_dict().at("num_batches_tracked").item() == 1);
  CHECK(max(abs(sub(p.bn->running_mean(), before))).item() > 0);
  // Eval mode with gradients on: the gradient must reach the weights through the modules.
  p.conv->eval();
  p.bn->eval();
  REQUIRE_FALSE(conv_bn.folds());
  sum(conv_bn(x)).backward();
  REQUIRE(p.conv->weight().grad().defined());
  REQUIRE(p.bn->weight().grad().defined());
  CHECK(sum(abs(p.conv->weight().grad())).item() > 0);
  {
    autograd::NoGradGuard no_grad;
    CHECK(conv_bn.folds());
    // Under autocast batch norm may widen what the convolution rounds (Note [Folded batch norm]).
    const AutocastGuard autocast(DType::bf16);
    CHECK_FALSE(conv_bn.folds());
  }
  CHECK(conv_bn.folds_built() == 0);
  // A pair that does not match is refused at construction.
  CHECK_THAT(test::error_of([&] { ConvBn(p.conv, std::make_shared<BatchNorm2d>(5)); }),
             Catch::Contains("4 output channels but the batch norm normalises 5"));
}

TEST_CASE("conv_bn: se_resnext_cifar in eval mode gives the same logits folded and unfolded") {
  Generator gen(6);
  auto net = se_resnext_cifar(10, 11, 32, &gen);
  const Tensor x = randn({3, 3, 32, 32}, {}, &gen);
  for (int step = 0; step < 2; ++step) (*net)(x);  // training steps: running statistics away from 0 and 1
  net->eval();
  const Tensor unfolded_logits = (*net)(x).detach();  // gradients on: the modules one by one
  Allocator& cpu = allocator_for(Device::cpu());
  int64_t conv_weight_bytes = 0;
  for (const auto& [name, p] : net->named_parameters())
    if (p.dim() == 4) conv_weight_bytes += int64_t(p.nbytes());
  autograd::NoGradGuard no_grad;
  const int64_t before = cpu.stats().allocated_bytes;
  const Tensor folded_logits = (*net)(x);
  CHECK_THAT(folded_logits, test::all_close(unfolded_logits, 1e-4, 1e-4));
  // The folds happened: their weights (and packs) stay allocated for the next call.
  CHECK(cpu.stats().allocated_bytes - before - int64_t(folded_logits.nbytes()) >= conv_weight_bytes);
  {  // a training call drops them again
    net->train();
    (*net)(x);
    net->eval();
  }
  CHECK(cpu.stats().allocated_bytes - before - int64_t(folded_logits.nbytes()) < conv_weight_bytes);
  // summary() still shows every batch norm and activation with its output shape.
  for (const auto& row : net->profile({1, 3, 32, 32}).rows) {
    INFO(row.name);
    CHECK(row.output_shape.has_value());
  }
}
