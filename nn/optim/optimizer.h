// Optimizer: the base of SGD, Adam and AdamW. Parameters come in groups, each with its own
// options (e.g. no weight decay for biases and norm weights); per-parameter state (momentum
// buffers, Adam moments, step counts) is saved and restored through a StateDict.
//
//   auto [decay, no_decay] = split_weight_decay(*model);       // dim >= 2 vs biases/norms
//   SGD opt({{decay, {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4}},
//            {no_decay, {.lr = 0.1, .momentum = 0.9}}});
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//   StateDict saved = opt.state_dict();   // "state.3.momentum_buffer", "param_groups.0.lr", ...
//
// State dict layout (the parameter index i counts across all groups, in order):
//   state.<i>.step              0-d i64, updates applied to parameter i
//   state.<i>.<buffer>          the optimizer's buffers for parameter i (shape of parameter i)
//   param_groups.<g>.lr         0-d f64, the group's current learning rate (schedules change it)
//   param_groups.<g>.num_params 0-d i64, checked on load
//
// Note [Fused updates]: step() applies each optimizer's rule as one device kernel per parameter
// (sgd_step_kernel, adam_step_kernel in ops/kernels.h; the rules themselves in
// ops/optim_rules.h, shared by the CPU loop and the CUDA kernel) instead of a chain of tensor
// ops: PyTorch's rules written as tensor ops allocate and traverse memory five to ten times per
// parameter, which on the MNIST benchmark's small models costs more than the backward pass.
// The rules compute PyTorch's expressions in the same order and precision (scalars rounded to
// the parameter's dtype first), so results agree with torch.optim to within rounding.
//
// Note [A failed step changes nothing]: step() can fail half-way: the allocator's memory limit
// (or the device) runs out while the first step creates the optimizer's buffers or makes a
// gradient contiguous. Had it updated parameters as it went, the parameters before the failing
// one would have taken the step and the rest not, and the model would be silently corrupt for a
// program that catches OutOfMemory and goes on. So step() does everything that allocates or
// checks first, and applies the updates (kernels that allocate nothing) only after all of that
// succeeded: a step that throws leaves every parameter, step count and buffer value as it was
// (a buffer created for a parameter that was never updated is zeros or is overwritten by the
// parameter's first update). tests/nn/test_oom_recovery.cpp checks it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "nn/state_dict.h"

namespace ember {

template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

// Parameters with at least 2 dims (weights) and the rest (biases, norm scales and shifts),
// the usual split into a weight-decay group and a no-decay group.
std::pair<std::vector<Tensor>, std::vector<Tensor>> split_weight_decay(const Module& module);

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  virtual void step() = 0;
  void zero_grad();  // drops the gradients of every parameter

  virtual size_t num_groups() const = 0;
  virtual const std::vector<Tensor>& group_params(size_t group) const = 0;
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  void set_lr(double lr);  // every group

  StateDict state_dict() const;
  // Restores a state_dict() of an optimizer built over parameters of the same shapes and
  // grouping; every mismatch (groups, shapes, unknown or missing entries) is reported at once.
  void load_state_dict(const StateDict& state);

 protected:
  struct ParamState {
    int64_t step = 0;
    std::map<std::string, Tensor> buffers;  // created on the parameter's first update
  };
  // The buffer names this optimizer keeps (for validating loaded state).
  virtual std::vector<std::string> buffer_names() const = 0;
  // Per parameter, across groups in order; sized on the first step().
  ParamState& state_of(size_t index);
  std::vector<ParamState> state_;

  // The checks every fused update does: CPU, f32/f64, grad of the parameter's shape.
  static void check_fusable(const char* optimizer, const Tensor& param, const Tensor& grad);

 private:
  size_t total_params() const;
};

// Options-typed groups on top of Optimizer.
template <class Options>
class OptimizerWithOptions : public Optimizer {
 public:
  explicit OptimizerWithOptions(std::vector<ParamGroup<Options>> groups) : groups_(std::move(groups)) {}

  size_t num_groups() const override { return groups_.size(); }
  const std::vector<Tensor>& group_params(size_t group) const override { return groups_.at(group).params; }
  double lr(size_t group = 0) const override { return groups_.at(group).options.lr; }
  void set_lr(size_t group, double lr) override { groups_.at(group).options.lr = lr; }
  using Optimizer::set_lr;

  std::vector<ParamGroup<Options>>& param_groups() { return groups_; }
  const std::vector<ParamGroup<Options>>& param_groups() const { return groups_; }

 protected:
  std::vector<ParamGroup<Options>> groups_;
};

}  // namespace ember
