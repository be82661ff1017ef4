#include "nn/layers.h"

#include <cmath>

#include "core/error.h"
#include "nn/init.h"
#include "ops/ops.h"

namespace ember {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator* gen)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  EMBER_CHECK(in_features > 0 && out_features > 0, "Linear: expected positive in_features and out_features, got ",
              in_features, " and ", out_features);
  weight_ = register_parameter("weight", empty({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", empty({out_features}));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight_, std::sqrt(5.0), init::FanMode::fan_in, "leaky_relu", gen);
  if (bias_.defined()) {
    const double bound = 1.0 / std::sqrt(double(in_features_));
    init::uniform_(bias_, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) { return forward_activated(x, Activation::none); }

Tensor Linear::forward_activated(const Tensor& x, Activation act) {
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "Linear: expected input (..., ", in_features_,
              "), got shape ", shape_str(x.shape()));
  return linear(x, weight_, bias_, act);  // bias and activation fused into the GEMM
}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim_, end_dim_); }

}  // namespace ember
