// Sequential: children applied in order, named "0", "1", ...
// A layer followed by an activation module it can fuse (Linear, Conv2d or BatchNorm, then ReLU,
// Sigmoid or Tanh) runs as one fused op (Note [Fused activations] in nn/module.h);
// set_fuse_activations(false) runs every module on its own, for comparisons and teaching.
//
//   auto net = std::make_shared<Sequential>();
//   net->push_back(std::make_shared<Linear>(4, 8));
//   net->push_back(std::make_shared<ReLU>());
//   Tensor y = (*net)(x);
//   Linear& first = net->at<Linear>(0);
#pragma once

#include <memory>
#include <vector>

#include "core/error.h"
#include "nn/module.h"

namespace ember {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);

  Sequential& push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  void set_fuse_activations(bool on) { fuse_activations_ = on; }
  bool fuse_activations() const { return fuse_activations_; }

  size_t size() const { return named_children().size(); }
  Module& operator[](size_t index) const;
  std::shared_ptr<Module> ptr(size_t index) const;
  // The child at `index` as a concrete type; an Error if it is another type.
  template <class M>
  M& at(size_t index) const {
    M* m = dynamic_cast<M*>(&(*this)[index]);
    EMBER_CHECK(m != nullptr, "Sequential::at: module ", index, " is a ", (*this)[index].type_name(),
                ", not the requested type");
    return *m;
  }

 private:
  bool fuse_activations_ = true;
};

}  // namespace ember
