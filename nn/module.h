// Module: the base of every layer and model. A module owns named parameters (leaf tensors
// that require grad), buffers (state that is saved but not trained, e.g. running means) and
// submodules; everything is reachable recursively under dotted names.
//
//   auto model = std::make_shared<Sequential>();
//   model->push_back(std::make_shared<Linear>(784, 128));
//   model->push_back(std::make_shared<ReLU>());
//   Tensor logits = (*model)(x);
//   for (auto& [name, p] : model->named_parameters()) ...   // "0.weight", "0.bias", ...
//   model->load_state_dict(load_tensors("mlp.safetensors"));
//   std::cout << model->summary({1, 784});
//
// Note [Parameter identity]: optimizers hold Tensor handles to the parameters, so nothing
// here replaces a parameter's handle: to(Device) swaps the storage inside the existing
// TensorImpl and load_state_dict copies values into it. An optimizer built before either
// call keeps updating the right tensors.
//
// Note [Fused activations]: a layer that can apply an activation in its own epilogue (Linear,
// Conv2d, BatchNorm: see ops/activation.h) says so with fuses_activation(), and a module that is nothing
// but an activation (ReLU, Sigmoid, Tanh) names it with as_activation(). A container that runs
// such a pair in sequence calls the layer's forward_activated() once instead of both modules.
// A layer that can also take a max pool after its activation into one op (Conv2d: Note
// [Convolution, activation and max pool as one op] in ops/conv_pool.h) says so with
// fuses_activation_and_pool(), and a max pool names its window with as_max_pool().
// The modules, their names, parameters and checkpoints stay as the user wrote them; only the
// kernels that run change (and Sequential can turn it off).
//
// Note [Counting MACs]: profile() and summary() count multiply-accumulates per layer from the
// output shape each call produced: conv N*Cout*Ho*Wo*(Cin/groups)*kh*kw, linear N*in*out (each
// layer overrides macs()). Batch norm, activations, pooling and element-wise ops count 0, as
// torchvision's and ptflops' counters do: they are a few percent of a CNN's arithmetic and
// memory-bound anyway. A module called several times in one forward counts every call.
//
// Note [Summary runs the model]: the shapes come from one real forward pass at the given input
// shape (zeros, NoGradGuard, every module in eval mode so that batch norm's running statistics
// stay untouched; the train/eval flags are restored afterwards). A shape-only pass would need a
// second forward for every module; the real one costs one inference (se_resnext101_32x4d at
// 224x224, batch 1, ~8 GMAC: 2.5 s with construction in its test on the 2-core CPU machine).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/state_dict.h"
#include "ops/activation.h"
#include "ops/pool.h"

namespace ember {

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  // Runs forward; containers call their children through this so that summary() sees them.
  Tensor operator()(const Tensor& x);

  // ---- activation fusion (Note [Fused activations]) --------------------------------------------
  virtual bool fuses_activation() const { return false; }
  virtual std::optional<Activation> as_activation() const { return std::nullopt; }
  // forward(x) followed by `act`; layers that fuse override it to do both in one kernel.
  virtual Tensor forward_activated(const Tensor& x, Activation act) { return activate(forward(x), act); }
  // Runs forward_activated on behalf of this module and `activation_module` (which summary()
  // then shows with the same output shape), like operator() does for one module.
  Tensor call_activated(const Tensor& x, Module& activation_module, Activation act);
  // ---- activation and max pool fusion (Note [Convolution, activation and max pool as one op] in
  // ops/conv_pool.h): a max pool names its window with as_max_pool(); a layer that runs itself,
  // an activation and such a pool as one op says so with fuses_activation_and_pool().
  virtual std::optional<MaxPoolArgs> as_max_pool() const { return std::nullopt; }
  virtual bool fuses_activation_and_pool() const { return false; }
  // forward_activated(x, act) followed by max_pool2d with `pool`; fusing layers override it.
  virtual Tensor forward_activated_pooled(const Tensor& x, Activation act, const MaxPoolArgs& pool);
  // Runs forward_activated_pooled on behalf of this module, `activation_module` and `pool_module`
  // (while summary() or profile() records, the three one by one, so that each shows its shape).
  Tensor call_activated_pooled(const Tensor& x, Module& activation_module, Module& pool_module, Activation act,
                               const MaxPoolArgs& pool);
  // Tells summary() that this module produced `output_shape` in a call whose arithmetic another
  // module's kernel did (a batch norm folded into its convolution: Note [Folded batch norm] in
  // nn/conv_bn.h). Nothing runs.
  void record_fused_call(const Shape& output_shape);

  // Multiply-accumulates of one call that produced `output_shape` (Note [Counting MACs]);
  // 0 unless the layer overrides it.
  virtual int64_t macs(const Shape& output_shape) const { return 0; }

  // "Linear", "Sequential", ...: the class name shown by summary().
  const std::string& type_name() const { return type_name_; }

  // ---- registration (in constructors) --------------------------------------------------------
  // Makes `value` a leaf that requires grad and registers it; returns the stored handle.
  Tensor& register_parameter(const std::string& name, Tensor value);
  Tensor& register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // ---- traversal (recursive, in registration order, names dotted) ---------------------------
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  // This module (name "") and every descendant, parents before children.
  std::vector<std::pair<std::string, Module*>> named_modules();
  int64_t num_parameters() const;  // elements, not tensors

  // ---- mode and placement ---------------------------------------------------------------------
  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void to(Device device);  // moves parameters (with their grads) and buffers in place
  // Converts the floating parameters (with their grads) and buffers in place, e.g. to f64 for a
  // gradient check of a whole block; integer buffers (num_batches_tracked) keep their dtype.
  void to(DType dtype);
  void zero_grad();        // drops every parameter's gradient

  // ---- state -----------------------------------------------------------------------------------
  StateDict state_dict() const;  // parameters and buffers (shared with the module, not copied)
  // Copies values into the existing tensors (converting device, not dtype). With `strict`,
  // missing keys, unexpected keys and shape mismatches are all reported in one Error; without
  // it, only the keys present in both with equal shapes are loaded (shape mismatches still
  // throw: they are never what the caller meant).
  void load_state_dict(const StateDict& state, bool strict = true);

  // One row per leaf module for an input of `input_shape`: its output shape (of its last call),
  // parameters and MACs (Note [Counting MACs]), plus the totals. Runs one forward pass (Note
  // [Summary runs the model]).
  struct ProfileRow {
    std::string name, type;
    std::optional<Shape> output_shape;  // empty when the forward pass did not call it
    int64_t params = 0, macs = 0;
  };
  struct Profile {
    std::vector<ProfileRow> rows;
    int64_t total_params = 0, total_macs = 0;
  };
  Profile profile(const Shape& input_shape);
  // profile() as a table, with the totals and a line saying what the MAC count leaves out.
  std::string summary(const Shape& input_shape);

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> child);

 private:
  void check_new_name(const std::string& name) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace ember
