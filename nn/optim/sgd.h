// Stochastic gradient descent with momentum, exactly torch.optim.SGD's rule:
//   g = grad + weight_decay * p
//   buf = g (first step), else momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf          (when momentum != 0)
//   p -= lr * g
//
//   SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once

#include "nn/optim/optimizer.h"

namespace ember {

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public OptimizerWithOptions<SgdOptions> {
 public:
  SGD(std::vector<Tensor> params, SgdOptions options);
  explicit SGD(std::vector<ParamGroup<SgdOptions>> groups);
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
};

}  // namespace ember
