#include "nn/models/mnist.h"

#include "core/error.h"
#include "nn/conv_layers.h"
#include "nn/layers.h"

namespace ember {

std::shared_ptr<Sequential> mlp(const std::vector<int64_t>& sizes, Generator* gen) {
  EMBER_CHECK(sizes.size() >= 2, "mlp: expected at least two sizes (input and output), got ", sizes.size());
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Flatten>());
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    net->push_back(std::make_shared<Linear>(sizes[i], sizes[i + 1], true, gen));
    if (i + 2 < sizes.size()) net->push_back(std::make_shared<ReLU>());
  }
  return net;
}

namespace {

// mnist_cnn up to its hidden layer: (N, 1, 28, 28) -> (N, 128) after ReLU.
std::shared_ptr<Sequential> mnist_cnn_trunk(Generator* gen) {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Conv2d>(Conv2dOptions{.in = 1, .out = 16, .kernel = 3, .padding = 1}, gen));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<MaxPool2d>(2));
  net->push_back(std::make_shared<Conv2d>(Conv2dOptions{.in = 16, .out = 32, .kernel = 3, .padding = 1}, gen));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<MaxPool2d>(2));
  net->push_back(std::make_shared<Flatten>());
  net->push_back(std::make_shared<Linear>(32 * 7 * 7, 128, true, gen));
  net->push_back(std::make_shared<ReLU>());
  return net;
}

}  // namespace

std::shared_ptr<Sequential> mnist_cnn(Generator* gen) {
  auto net = mnist_cnn_trunk(gen);
  net->push_back(std::make_shared<Linear>(128, 10, true, gen));
  return net;
}

std::shared_ptr<Sequential> mnist_embedding_net(int64_t dim, Generator* gen) {
  EMBER_CHECK(dim >= 1, "mnist_embedding_net: the embedding size must be at least 1, got ", dim);
  auto net = mnist_cnn_trunk(gen);
  net->push_back(std::make_shared<Linear>(128, dim, true, gen));
  return net;
}

std::shared_ptr<Sequential> lenet5(Generator* gen) {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Conv2d>(Conv2dOptions{.in = 1, .out = 6, .kernel = 5, .padding = 2}, gen));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<MaxPool2d>(2));
  net->push_back(std::make_shared<Conv2d>(Conv2dOptions{.in = 6, .out = 16, .kernel = 5}, gen));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<MaxPool2d>(2));
  net->push_back(std::make_shared<Flatten>());
  net->push_back(std::make_shared<Linear>(16 * 5 * 5, 120, true, gen));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<Linear>(120, 84, true, gen));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<Linear>(84, 10, true, gen));
  return net;
}

std::shared_ptr<Sequential> make_mnist_model(const std::string& name, Generator* gen) {
  if (name == "mnist_cnn") return mnist_cnn(gen);
  if (name == "lenet5") return lenet5(gen);
  if (name == "mlp") return mlp({784, 256, 128, 10}, gen);
  EMBER_FAIL("make_mnist_model: unknown model '", name, "' (expected mnist_cnn, lenet5 or mlp)");
}

}  // namespace ember
