// Uses the installed ember package: a tensor, an op, autograd. Exits non-zero on a wrong value.
#include <ember/ember.h>

#include <cmath>
#include <iostream>

int main() {
  using namespace ember;
  Tensor w = full({3, 2}, 0.5).requires_grad_();
  Tensor x = ones({4, 3});
  Tensor loss = matmul(x, w).sum();  // = 4 * 3 * 2 * 0.5 = 12
  loss.backward();
  const double g = w.grad().sum().item();  // every element of dloss/dw is 4
  std::cout << "consumer: loss " << loss.item() << ", sum of grad " << g << "\n";
  return std::fabs(loss.item() - 12.0) < 1e-6 && std::fabs(g - 24.0) < 1e-6 ? 0 : 1;
}
