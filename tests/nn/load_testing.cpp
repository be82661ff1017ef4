#include "load_testing.h"

#include <cstring>

namespace ember::test {

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.cpu().contiguous(), cb = b.cpu().contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

StateDict snapshot(const StateDict& state) {
  autograd::NoGradGuard no_grad;
  StateDict copy;
  for (const auto& [name, t] : state) copy[name] = t.detach().cpu().clone();
  return copy;
}

std::string first_difference(const StateDict& actual, const StateDict& expected) {
  for (const auto& [name, t] : expected) {
    auto it = actual.find(name);
    if (it == actual.end()) return name + " (missing)";
    if (!bitwise_equal(it->second, t)) return name;
  }
  for (const auto& [name, t] : actual)
    if (!expected.count(name)) return name + " (unexpected)";
  return "";
}

std::vector<SyntheticBatch> synthetic_batches(int count, const Shape& input_shape, int64_t classes, uint64_t seed) {
  autograd::NoGradGuard no_grad;
  Generator gen(seed);
  int64_t features = 1;
  for (size_t d = 1; d < input_shape.size(); ++d) features *= input_shape[d];
  const Tensor projection = randn({features, classes}, {}, &gen);
  std::vector<SyntheticBatch> batches;
  for (int i = 0; i < count; ++i) {
    Tensor x = randn(input_shape, {}, &gen);
    Tensor y = matmul(x.reshape({input_shape[0], features}), projection).argmax(1);
    batches.push_back({x, y});
  }
  return batches;
}

std::vector<SyntheticBatch> to_device(const std::vector<SyntheticBatch>& batches, Device device) {
  std::vector<SyntheticBatch> out;
  for (const SyntheticBatch& b : batches) out.push_back({b.x.to(device), b.y.to(device)});
  return out;
}

std::shared_ptr<Sequential> tiny_cnn(int64_t classes, Generator* gen) {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Conv2d>(Conv2dOptions{.in = 1, .out = 4, .kernel = 3, .padding = 1}, gen));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<MaxPool2d>(2));
  net->push_back(std::make_shared<Flatten>());
  net->push_back(std::make_shared<Linear>(64, classes, true, gen));
  return net;
}

Tensor train_step(Module& model, Optimizer& optimizer, const SyntheticBatch& batch) {
  optimizer.zero_grad();
  Tensor loss = cross_entropy(model(batch.x), batch.y);
  loss.backward();
  optimizer.step();
  return loss.detach();
}

}  // namespace ember::test
