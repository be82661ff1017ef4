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
  for (const auto& [name, child] : named_children()) y = (*child)(y);
  return y;
}

Module& Sequential::operator[](size_t index) const { return *ptr(index); }

std::shared_ptr<Module> Sequential::ptr(size_t index) const {
  EMBER_CHECK(index < size(), "Sequential: index ", index, " is out of range for ", size(), " modules");
  return named_children()[index].second;
}

}  // namespace ember
