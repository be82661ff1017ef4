#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/graph.h"
#include "core/error.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

// A two-level model: a module with its own parameter and buffer plus a Sequential child.
class Block : public Module {
 public:
  Block() : Module("Block") {
    scale = register_parameter("scale", ones({3}));
    register_buffer("count", zeros({1}, {.dtype = DType::i64}));
    body = register_module("body", std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
                                       std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(),
                                       std::make_shared<Linear>(4, 2, /*bias=*/false)}));
  }
  Tensor forward(const Tensor& x) override { return (*body)(mul(x, scale)); }
  Tensor scale;
  std::shared_ptr<Sequential> body;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("module: recursive dotted names, counts and modes") {
  Block block;
  CHECK(names_of(block.named_parameters()) ==
        std::vector<std::string>{"scale", "body.0.weight", "body.0.bias", "body.2.weight"});
  CHECK(names_of(block.named_buffers()) == std::vector<std::string>{"count"});
  CHECK(block.num_parameters() == 3 + 12 + 4 + 8);
  for (const Tensor& p : block.parameters()) {
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
  std::vector<std::string> modules;
  for (auto& [name, m] : block.named_modules()) modules.push_back(name + ":" + m->type_name());
  CHECK(modules == std::vector<std::string>{":Block", "body:Sequential", "body.0:Linear", "body.1:ReLU", "body.2:Linear"});

  CHECK(block.is_training());
  block.eval();
  CHECK_FALSE(block.is_training());
  CHECK_FALSE(block.body->at<Linear>(0).is_training());
  block.train();
  CHECK(block.body->at<ReLU>(1).is_training());
  CHECK_THROWS_WITH(block.body->at<ReLU>(0), Contains("module 0 is a Linear"));
  CHECK_THROWS_WITH((*block.body)[7], Contains("index 7 is out of range for 3 modules"));
  CHECK_THROWS_WITH(block.register_parameter("scale", ones({1})), Contains("'scale' is already registered"));
  CHECK_THROWS_WITH(block.register_buffer("a.b", ones({1})), Contains("contain no '.'"));
}

TEST_CASE("module: Linear computes x W^T + b and backpropagates") {
  Linear fc(3, 2);
  {
    autograd::NoGradGuard no_grad;
    fc.weight().copy_(tensor<float>({1, 2, 3, -1, 0, 1}, {2, 3}));
    fc.bias().copy_(tensor<float>({0.5f, -0.5f}));
  }
  Tensor x = tensor<float>({1, 1, 1, 2, 0, -1}, {2, 3});
  Tensor y = fc(x);
  CHECK(y.shape() == Shape{2, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{6.5f, -0.5f, -0.5f, -3.5f});
  y.sum().backward();
  CHECK(fc.weight().grad().to_vector<float>() == std::vector<float>{3, 1, 0, 3, 1, 0});
  CHECK(fc.bias().grad().to_vector<float>() == std::vector<float>{2, 2});
  fc.zero_grad();
  CHECK_FALSE(fc.weight().grad().defined());
  CHECK_THROWS_WITH(fc(ones({2, 4})), Contains("Linear: expected input (..., 3), got shape (2, 4)"));
}

TEST_CASE("module: Linear init follows PyTorch's bounds and is reproducible for a generator") {
  Generator g1(11), g2(11);
  Linear a(50, 30, true, &g1), b(50, 30, true, &g2);
  const double bound = 1.0 / std::sqrt(50.0);
  CHECK(a.weight().max().item() <= bound);
  CHECK(a.weight().min().item() >= -bound);
  CHECK(a.weight().max().item() > 0.9 * bound);  // the range is used, not a narrower one
  CHECK(a.bias().max().item() <= bound);
  CHECK(a.weight().to_vector<float>() == b.weight().to_vector<float>());
  CHECK(a.bias().to_vector<float>() == b.bias().to_vector<float>());
}

TEST_CASE("module: mlp flattens and chains Linear and ReLU") {
  auto net = mlp({12, 5, 3});
  CHECK(net->size() == 4);  // Flatten, Linear, ReLU, Linear
  CHECK(net->at<Linear>(1).out_features() == 5);
  Tensor y = (*net)(randn({7, 3, 2, 2}));
  CHECK(y.shape() == Shape{7, 3});
  CHECK_THROWS_WITH(mlp({10}), Contains("at least two sizes"));
}

TEST_CASE("module: state_dict round trip copies values into the existing tensors") {
  Block a, b;
  const Tensor b_weight = b.body->at<Linear>(0).weight();
  b.load_state_dict(a.state_dict());
  CHECK(b_weight.to_vector<float>() == a.body->at<Linear>(0).weight().to_vector<float>());
  CHECK(b.body->at<Linear>(0).weight().shares_storage(b_weight));  // same handle (Note [Parameter identity])
  CHECK(b.state_dict().size() == 5);
}

TEST_CASE("module: strict load_state_dict reports every missing, unexpected and mismatched key at once") {
  Block block;
  StateDict sd = block.state_dict();
  sd.erase("body.0.bias");
  sd.erase("count");
  sd["body.9.weight"] = ones({2});
  sd["body.0.weight"] = ones({3, 4});
  try {
    block.load_state_dict(sd);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Contains("missing keys [body.0.bias, count]"));
    CHECK_THAT(msg, Contains("unexpected keys [body.9.weight]"));
    CHECK_THAT(msg, Contains("shape mismatches [body.0.weight: given (3, 4), module has (4, 3)]"));
  }
  // Non-strict: keys may be missing or extra, but shapes must still agree.
  CHECK_THROWS_WITH(block.load_state_dict(sd, false), Contains("shape mismatches"));
  sd.erase("body.0.weight");
  sd["scale"] = full({3}, 7.0);
  block.load_state_dict(sd, /*strict=*/false);
  CHECK(block.scale.to_vector<float>() == std::vector<float>{7, 7, 7});
}

TEST_CASE("module: summary lists the leaf layers with output shapes and parameter counts") {
  auto net = mlp({784, 32, 10});
  const std::string table = net->summary({2, 1, 28, 28});
  CHECK_THAT(table, Contains("Flatten"));
  CHECK_THAT(table, Contains("(2, 784)"));
  CHECK_THAT(table, Contains("(2, 32)"));
  CHECK_THAT(table, Contains("(2, 10)"));
  CHECK_THAT(table, Contains(std::to_string(784 * 32 + 32)));
  CHECK_THAT(table, Contains("Total parameters: " + std::to_string(784 * 32 + 32 + 32 * 10 + 10)));
  CHECK_FALSE(autograd::is_grad_enabled() == false);  // the guard was released
}

TEST_CASE("module: to(cpu) keeps the handles") {
  Linear fc(2, 2);
  const Tensor w = fc.weight();
  fc.to(Device::cpu());
  CHECK(fc.weight().shares_storage(w));
}

TEST_CASE("module: profile counts MACs of convolutions and linear layers, 0 for the rest") {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Conv2d>(Conv2dOptions{.in = 4, .out = 8, .kernel = 3, .stride = 2, .padding = 1,
                                                        .groups = 2}));
  net->push_back(std::make_shared<BatchNorm2d>(8));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<Flatten>());
  net->push_back(std::make_shared<Linear>(8 * 4 * 4, 5));
  net->push_back(std::make_shared<Linear>(5, 5));
  const Module::Profile p = net->profile({2, 4, 8, 8});
  REQUIRE(p.rows.size() == 6);
  // conv: N*Cout*Ho*Wo*(Cin/groups)*kh*kw = 2*8*4*4 * 2*3*3; linear: N*in*out.
  CHECK(p.rows[0].macs == 2 * 8 * 4 * 4 * 2 * 9);
  CHECK(p.rows[1].macs == 0);
  CHECK(p.rows[2].macs == 0);
  CHECK(p.rows[3].output_shape == Shape{2, 128});
  CHECK(p.rows[4].macs == 2 * 128 * 5);
  CHECK(p.rows[5].macs == 2 * 5 * 5);
  CHECK(p.total_macs == 4608 + 1280 + 50);
  CHECK(p.total_params == net->num_parameters());
  const std::string table = net->summary({2, 4, 8, 8});
  CHECK_THAT(table, Contains("Total MACs: 5,938 (0.00 GMAC)"));
  CHECK_THAT(table, Contains("batch norm, activations, pooling and element-wise ops count 0"));
}

TEST_CASE("module: a module called twice counts both calls' MACs") {
  class Twice : public Module {
   public:
    Twice() : Module("Twice") { fc = register_module("fc", std::make_shared<Linear>(3, 3)); }
    Tensor forward(const Tensor& x) override { return (*fc)((*fc)(x)); }
    std::shared_ptr<Linear> fc;
  };
  Twice net;
  CHECK(net.profile({4, 3}).total_macs == 2 * 4 * 3 * 3);
}

TEST_CASE("module: summary runs in eval mode and leaves the modes and running statistics as they were") {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Linear>(3, 4));
  net->push_back(std::make_shared<BatchNorm1d>(4));
  net->at<Linear>(0).bias().detach().fill_(1.0);
  net->at<BatchNorm1d>(1).eval();  // mixed modes: the container trains, the batch norm does not
  net->summary({2, 3});
  CHECK(net->is_training());
  CHECK_FALSE(net->at<BatchNorm1d>(1).is_training());
  net->at<BatchNorm1d>(1).train();
  net->summary({2, 3});
  CHECK(net->at<BatchNorm1d>(1).is_training());
  // In training mode the forward would have moved the running mean towards the bias (1).
  CHECK(sum(abs(net->at<BatchNorm1d>(1).running_mean())).item() == 0);
}
