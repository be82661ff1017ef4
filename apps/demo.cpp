#include "apps/demo.h"

#include <cmath>
#include <ostream>

#include "apps/bench/timing.h"
#include "ember.h"

namespace ember::apps {

double run_demo(const DemoOptions& o, std::ostream& out) {
  manual_seed(o.seed);
  const int64_t n = 256;
  Tensor x = linspace(-1.0, 1.0, n).reshape({n, 1});
  Tensor y = sub(tanh(mul(x, 3.0)), square(x));

  // Parameters of y_hat = tanh(x W1 + b1) W2 + b2, initialised like PyTorch's Linear.
  const double bound1 = 1.0, bound2 = 1.0 / std::sqrt(double(o.hidden));
  Tensor w1 = uniform({1, o.hidden}, -bound1, bound1).requires_grad_();
  Tensor b1 = uniform({o.hidden}, -bound1, bound1).requires_grad_();
  Tensor w2 = uniform({o.hidden, 1}, -bound2, bound2).requires_grad_();
  Tensor b2 = uniform({1}, -bound2, bound2).requires_grad_();
  std::vector<Tensor> params = {w1, b1, w2, b2};

  out << "ember demo: fitting y = tanh(3x) - x^2 with a " << o.hidden << "-unit tanh network, SGD lr " << o.lr
      << "\n";
  double loss_value = 0;
  for (int step = 0; step <= o.steps; ++step) {
    Tensor pred = add(matmul(tanh(add(matmul(x, w1), b1)), w2), b2);
    Tensor loss = mean(square(sub(pred, y)));
    loss_value = loss.item();
    if (step % (o.steps / 10 > 0 ? o.steps / 10 : 1) == 0)
      out << "  step " << step << "  loss " << bench::fixed(loss_value, 6) << "\n";
    if (step == o.steps) break;
    for (Tensor& p : params) p.zero_grad();
    loss.backward();
    autograd::NoGradGuard no_grad;
    for (Tensor& p : params) p.add_(p.grad(), -o.lr);
  }
  return loss_value;
}

}  // namespace ember::apps
