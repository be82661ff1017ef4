#include "nn/conv_layers.h"

#include <cmath>

#include "nn/init.h"
#include "ops/ops.h"

namespace ember {

Conv2d::Conv2d(Conv2dOptions o, Generator* gen) : Module("Conv2d"), options_(o) {
  EMBER_CHECK(o.in > 0 && o.out > 0 && o.groups > 0, "Conv2d: expected positive in, out and groups, got ", o.in, ", ",
              o.out, ", ", o.groups);
  EMBER_CHECK(o.in % o.groups == 0 && o.out % o.groups == 0, "Conv2d: groups ", o.groups,
              " must divide both in (", o.in, ") and out (", o.out, ")");
  weight_ = register_parameter("weight", empty({o.out, o.in / o.groups, o.kernel.h, o.kernel.w}));
  if (o.bias) bias_ = register_parameter("bias", empty({o.out}));
  reset_parameters(gen);
}

void Conv2d::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight_, std::sqrt(5.0), init::FanMode::fan_in, "leaky_relu", gen);
  if (bias_.defined()) {
    const double fan_in = double(weight_.size(1) * weight_.size(2) * weight_.size(3));
    const double bound = 1.0 / std::sqrt(fan_in);
    init::uniform_(bias_, -bound, bound, gen);
  }
}

Tensor Conv2d::forward(const Tensor& x) { return forward_activated(x, Activation::none); }

Tensor Conv2d::forward_activated(const Tensor& x, Activation act) {
  const Conv2dOptions& o = options_;
  return conv2d(x, weight_, bias_, o.stride, o.padding, o.dilation, o.groups, act);
}

Tensor Conv2d::forward_activated_pooled(const Tensor& x, Activation act, const MaxPoolArgs& pool) {
  const Conv2dOptions& o = options_;
  return conv2d_max_pool2d(x, weight_, bias_, o.stride, o.padding, o.dilation, o.groups, act, pool);
}

int64_t Conv2d::macs(const Shape& output_shape) const {
  const int64_t per_output = (options_.in / options_.groups) * options_.kernel.h * options_.kernel.w;
  return numel_of(output_shape) * per_output;
}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_, stride_, padding_); }
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, kernel_, stride_, padding_); }
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size_); }

}  // namespace ember
