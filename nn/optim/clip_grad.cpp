#include "nn/optim/clip_grad.h"

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/ops.h"

namespace ember {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  EMBER_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  EMBER_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be > 0, got ", norm_type);
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> grads, norms;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    norms.push_back(norm(g.to(DType::f64), norm_type));
  }
  if (grads.empty()) return 0.0;
  // One host read for the whole set (the norm of the per-tensor norms is the total norm).
  const double total = norm(stack(norms), norm_type).item();
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (Tensor& g : grads) g.mul_(coef);
  return total;
}

}  // namespace ember
