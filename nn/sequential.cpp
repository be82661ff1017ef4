#include "nn/sequential.h"

#include <string>

namespace ember {

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(std::move(m));
}

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(size()), std::move(module));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  const auto& children = named_children();
  for (size_t i = 0; i < children.size(); ++i) {
    Module& child = *children[i].second;
    if (fuse_activations_ && i + 2 < children.size() && child.fuses_activation_and_pool()) {
      Module& next = *children[i + 1].second;
      Module& after = *children[i + 2].second;
      const std::optional<Activation> act = next.as_activation();
      const std::optional<MaxPoolArgs> pool = after.as_max_pool();
      if (act && pool) {  // Note [Convolution, activation and max pool as one op] in ops/conv_pool.h
        y = child.call_activated_pooled(y, next, after, *act, *pool);
        i += 2;
        continue;
      }
    }
    if (fuse_activations_ && i + 1 < children.size() && child.fuses_activation()) {
      Module& next = *children[i + 1].second;
      if (const std::optional<Activation> act = next.as_activation()) {
        y = child.call_activated(y, next, *act);
        ++i;
        continue;
      }
    }
    y = child(y);
  }
  return y;
}

Module& Sequential::operator[](size_t index) const { return *ptr(index); }

std::shared_ptr<Module> Sequential::ptr(size_t index) const {
  EMBER_CHECK(index < size(), "Sequential: index ", index, " is out of range for ", size(), " modules");
  return named_children()[index].second;
}

}  // namespace ember
