// The ResNet family (nn/models/resnet.h): parameter counts against the published figures, the
// MAC count of SE-ResNeXt-101 against a hand derivation, training of the small member, an f64
// gradient check of one SE bottleneck, stable state_dict names, and the model zoo.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "cuda/runtime.h"
#include "nn/models.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

TEST_CASE("resnet: parameter counts at 1000 classes match the reference models") {
  // torchvision / NVIDIA DeepLearningExamples: resnet50 25,557,032; resnext50_32x4d 25,028,904;
  // se-resnext101-32x4d 45,251,128 (the figure).
  CHECK(resnet50(1000)->num_parameters() == 25'557'032);
  CHECK(resnext50_32x4d(1000)->num_parameters() == 25'028'904);
  CHECK(se_resnext101_32x4d(1000)->num_parameters() == 45'251'128);
  // se_resnext50_32x4d = resnext50_32x4d + one SE per block. An SE on C channels has
  // C*16 + 16 + 16*C + C = 33 C + 16 parameters; the blocks have C = 256 (3), 512 (4),
  // 1024 (6), 2048 (3): 33 * (768 + 2048 + 6144 + 6144) + 16 * 16 = 498,432 + 256 = 498,688.
  CHECK(se_resnext50_32x4d(1000)->num_parameters() == 25'028'904 + 498'688);
  // The classifier is the only part that depends on the class count: 2049 parameters a class.
  CHECK(resnet50(10)->num_parameters() == 25'557'032 - 990 * 2049);
}

TEST_CASE("resnet: se_resnext101_32x4d at 224x224 costs 7,971,037,184 MACs") {
  // By hand (MACs = N*Cout*Ho*Wo*(Cin/groups)*kh*kw per conv, N*in*out per linear; batch 1):
  //   stem 7x7/2, 3 -> 64, 112x112:                     112^2 * 64 * 3 * 49 = 118,013,952
  //   Stage s = 0..3 has width w = 128 * 2^s (output 2w) and output size Ho = 56 / 2^s, so two
  //   numbers recur (Ho^2 * w^2 does not depend on s):
  //     A = a 1x1 conv between w and 2w channels at the output size = Ho^2 * w * 2w
  //       = 56^2 * 128 * 256                                            = 102,760,448
  //     B = the grouped 3x3 conv, w channels, w/32 per group = Ho^2 * w * (w/32) * 9
  //       = 56^2 * 128 * 4 * 9                                          =  14,450,688
  //   stage 1 (3 blocks, 56x56, input 64 channels): first conv1 56^2*128*64 = A/4, two more
  //     conv1 2A, three conv3 3A, three conv2 3B, downsample 56^2*256*64 = A/2  -> 5.75 A + 3 B
  //   stages 2..4 (n = 4, 23, 3 blocks; input 2w/2 = w channels at twice the size): the first
  //     conv1 (w -> w at 2Ho) = 4 * Ho^2 * w^2 = 2A; n - 1 more conv1 and n conv3, (2n - 1) A;
  //     n conv2, n B; downsample (w -> 2w at Ho) = A                         -> (2n + 2) A + n B
  //     = 10 A + 4 B, 48 A + 23 B, 8 A + 3 B
  //   blocks: 71.75 A + 33 B = 7,373,062,144 + 476,872,704                 = 7,849,934,848
  //   SE: 2 linears of C*16 per block, C = 256 (3), 512 (4), 1024 (23), 2048 (3):
  //     32 * (768 + 2048 + 23,552 + 6144)                                 =     1,040,384
  //   head fc 2048 -> 1000                                                 =     2,048,000
  //   total                                                               = 7,971,037,184 (~8.0 GMAC)
  auto net = se_resnext101_32x4d(1000);
  const Module::Profile profile = net->profile({1, 3, 224, 224});
  CHECK(profile.total_params == 45'251'128);
  CHECK(profile.total_macs == 7'971'037'184);
  // Per layer: the stem conv and the head.
  int64_t stem_macs = -1, fc_macs = -1;
  for (const Module::ProfileRow& row : profile.rows) {
    if (row.name == "stem.conv") stem_macs = row.macs;
    if (row.name == "head.fc") fc_macs = row.macs;
    if (row.name == "layers.3.2.conv3") CHECK(row.output_shape == Shape{1, 2048, 7, 7});
  }
  CHECK(stem_macs == 118'013'952);
  CHECK(fc_macs == 2'048'000);
}

TEST_CASE("resnet: the small CIFAR member trains: forward and backward give finite values") {
  Generator gen(5);
  auto net = se_resnext_cifar(10, 11, 32, &gen);
  CHECK(net->num_parameters() == 152'730);  // the figure of its header comment
  const Tensor x = randn({4, 3, 32, 32}, {}, &gen);
  const Tensor y = (*net)(x);
  REQUIRE(y.shape() == Shape{4, 10});
  CHECK(std::isfinite(sum(abs(y)).item()));
  mean(mul(y, y)).backward();
  for (const auto& [name, p] : net->named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    const double g = sum(abs(p.grad())).item();
    CHECK(std::isfinite(g));
  }
  // Batch norm's running statistics moved (the model was in training mode).
  const Tensor running_mean = net->state_dict().at("stem.bn.running_mean");
  CHECK(sum(abs(running_mean)).item() > 0);
  // Deeper and wider variants, and bad flags.
  CHECK((*se_resnext_cifar(100, 20, 16, &gen))(randn({2, 3, 32, 32}, {}, &gen)).shape() == Shape{2, 100});
  CHECK_THAT(test::error_of([] { se_resnext_cifar(10, 12); }), Contains("depth must be 9n + 2"));
  CHECK_THAT(test::error_of([] { se_resnext_cifar(10, 11, 12); }), Contains("multiple of 8"));
}

TEST_CASE("resnet: f64 gradient check of an SE bottleneck with stride 2 and a downsample") {
  Generator gen(11);
  Bottleneck block({.in = 4, .width = 8, .expansion = 2, .cardinality = 2, .stride = 2, .se_squeeze = 3}, &gen);
  block.to(DType::f64);
  {  // Non-trivial batch norm affine parameters, so their gradients are not all alike.
    autograd::NoGradGuard no_grad;
    for (const auto& [name, p] : block.named_parameters()) {
      if (name.find("bn") == std::string::npos && name.find("downsample.1") == std::string::npos) continue;
      const double base = name.find("weight") != std::string::npos ? 1.0 : 0.0;
      Tensor t = p;
      t.copy_(add(mul(randn(p.shape(), {.dtype = DType::f64}, &gen), 0.2), base));
    }
  }
  const Tensor x = randn({2, 4, 6, 6}, {.dtype = DType::f64}, &gen);
  const std::vector<Tensor> params = block.parameters();
  autograd::TensorList inputs{x};
  inputs.insert(inputs.end(), params.begin(), params.end());
  // gradcheck differentiates detach()ed aliases of its inputs: same storage (so its in-place
  // perturbations reach the block's parameters) but their own autograd records. Pointing each
  // parameter's record at its alias's makes backward accumulate where gradcheck reads.
  auto fn = [&](const autograd::TensorList& in) {
    for (size_t i = 0; i < params.size(); ++i) params[i].impl().autograd = in[i + 1].impl().autograd;
    return block(in[0]);
  };
  test::require_gradcheck(fn, inputs);
  CHECK(block(x).shape() == Shape{2, 16, 3, 3});
}

TEST_CASE("resnet: an SE bottleneck on the cuda device (simulator or GPU) matches the CPU") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  const BottleneckOptions options{.in = 8, .width = 16, .expansion = 2, .cardinality = 4, .stride = 2, .se_squeeze = 4};
  Generator gen_cpu(4), gen_cuda(4);
  Bottleneck cpu_block(options, &gen_cpu), cuda_block(options, &gen_cuda);
  cuda_block.to(Device::cuda());
  Generator gen(9);
  const Tensor x = randn({2, 8, 8, 8}, {}, &gen);
  const Tensor x_cpu = x.detach().requires_grad_(true), x_cuda = x.to(Device::cuda()).requires_grad_(true);
  const Tensor y_cpu = cpu_block(x_cpu), y_cuda = cuda_block(x_cuda);
  REQUIRE(y_cuda.device().is_cuda());
  CHECK_THAT(y_cuda.to(Device::cpu()), test::all_close(y_cpu, 1e-4, 1e-5));
  sum(mul(y_cpu, y_cpu)).backward();
  sum(mul(y_cuda, y_cuda)).backward();
  CHECK_THAT(x_cuda.grad().to(Device::cpu()), test::all_close(x_cpu.grad(), 1e-3, 1e-4));
  const auto p_cpu = cpu_block.named_parameters(), p_cuda = cuda_block.named_parameters();
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    INFO(p_cpu[i].first);
    CHECK_THAT(p_cuda[i].second.grad().to(Device::cpu()), test::all_close(p_cpu[i].second.grad(), 1e-3, 1e-4));
  }
}

TEST_CASE("resnet: state_dict names are stable") {
  auto net = se_resnext_cifar(10, 11, 32);
  std::vector<std::string> names;
  for (const auto& [name, t] : net->state_dict()) names.push_back(name);
  // The first block of the first stage, with its SE and downsample (32 -> 64 channels).
  for (const char* expected :
       {"stem.conv.weight", "stem.bn.weight", "stem.bn.bias", "stem.bn.running_mean", "stem.bn.running_var",
        "stem.bn.num_batches_tracked", "layers.0.0.conv1.weight", "layers.0.0.bn1.weight", "layers.0.0.conv2.weight",
        "layers.0.0.bn2.running_var", "layers.0.0.conv3.weight", "layers.0.0.bn3.bias", "layers.0.0.se.squeeze.weight",
        "layers.0.0.se.squeeze.bias", "layers.0.0.se.expand.weight", "layers.0.0.se.expand.bias",
        "layers.0.0.downsample.0.weight", "layers.0.0.downsample.1.weight", "layers.2.0.downsample.1.running_mean",
        "head.fc.weight", "head.fc.bias"}) {
    INFO(expected);
    CHECK(std::count(names.begin(), names.end(), expected) == 1);
  }
  // Parameters in registration order: stem, then the blocks, then the head.
  const auto params = net->named_parameters();
  CHECK(params.front().first == "stem.conv.weight");
  CHECK(params[3].first == "layers.0.0.conv1.weight");
  CHECK(params.back().first == "head.fc.bias");
  // Three buffers per batch norm: the stem's, three per block and the downsample's (every
  // stage's first block changes the channels): 1 + 3 * (3 + 1) = 13.
  CHECK(names.size() == params.size() + 13 * 3);
  // No bias on any convolution, none in the downsample either.
  for (const auto& [name, p] : params)
    if (name.find("conv") != std::string::npos || name.find("downsample.0") != std::string::npos)
      CHECK(name.find("bias") == std::string::npos);
}

TEST_CASE("resnet: initialisation follows NVIDIA (Kaiming-normal fan-out convs, BN 1 and 0)") {
  Generator gen(2);
  auto net = se_resnext50_32x4d(1000, &gen);
  const StateDict state = net->state_dict();
  // conv2 of stage 3: (1024, 32, 3, 3), fan-out 1024 * 9, std sqrt(2 / 9216).
  const Tensor w = state.at("layers.3.0.conv2.weight").to(DType::f64);
  const double std_dev = std::sqrt(mean(mul(w, w)).item());
  CHECK(std_dev == Approx(std::sqrt(2.0 / 9216)).epsilon(0.02));
  CHECK(sum(abs(sub(state.at("layers.2.5.bn3.weight"), 1.0))).item() == 0);
  CHECK(sum(abs(state.at("layers.2.5.bn3.bias"))).item() == 0);
}

TEST_CASE("model zoo: every model builds by name and runs at its default input size") {
  for (const ModelEntry& entry : model_zoo()) {
    if (entry.image_size > 64) continue;  // the ImageNet models are covered above
    INFO(entry.name);
    Generator gen(1);
    auto net = entry.build(entry.classes, &gen);
    const Tensor y = (*net)(zeros(entry.input_shape(2, entry.image_size)));
    CHECK(y.shape() == Shape{2, entry.classes});
  }
  CHECK(find_model("se_resnext101_32x4d").build(7, nullptr)->num_parameters() == 45'251'128 - 993 * 2049);
  CHECK_THAT(test::error_of([] { find_model("resnet18"); }),
             Contains("unknown model 'resnet18' (known: mlp, mnist_cnn, lenet5, mnist_embedding_net, resnet50"));
}
