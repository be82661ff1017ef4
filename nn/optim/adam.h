// Adam and AdamW, exactly torch.optim.Adam's / AdamW's rules (with bias correction):
//   Adam:  g = grad + weight_decay * p          AdamW: p *= 1 - lr * weight_decay; g = grad
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g;   v_max = max(v_max, v) with amsgrad
//   p -= lr / (1 - beta1^t) * m / (sqrt(v or v_max) / sqrt(1 - beta2^t) + eps)
//
//   Adam opt(model->parameters(), {.lr = 1e-3});
//   AdamW optw(model->parameters(), {.lr = 1e-3, .weight_decay = 0.01});
#pragma once

#include "nn/optim/optimizer.h"

namespace ember {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam's default; AdamW users usually pass 1e-2 (PyTorch's)
  bool amsgrad = false;
};

class Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups);
  void step() override;

 protected:
  // AdamW: weight decay applied to the parameter directly instead of through the gradient.
  Adam(std::vector<ParamGroup<AdamOptions>> groups, bool decoupled_weight_decay);
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }

 private:
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options);
  explicit AdamW(std::vector<ParamGroup<AdamOptions>> groups);
};

}  // namespace ember
