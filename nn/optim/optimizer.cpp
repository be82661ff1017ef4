#include "nn/optim/optimizer.h"

#include <cmath>

#include <set>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/creation.h"

namespace ember {

std::pair<std::vector<Tensor>, std::vector<Tensor>> split_weight_decay(const Module& module) {
  std::pair<std::vector<Tensor>, std::vector<Tensor>> out;
  for (const Tensor& p : module.parameters()) (p.dim() >= 2 ? out.first : out.second).push_back(p);
  return out;
}

void Optimizer::zero_grad() {
  for (size_t g = 0; g < num_groups(); ++g)
    for (const Tensor& p : group_params(g)) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < num_groups(); ++g) set_lr(g, lr);
}

size_t Optimizer::total_params() const {
  size_t n = 0;
  for (size_t g = 0; g < num_groups(); ++g) n += group_params(g).size();
  return n;
}

Optimizer::ParamState& Optimizer::state_of(size_t index) {
  if (state_.size() < total_params()) state_.resize(total_params());
  return state_.at(index);
}

void Optimizer::check_fusable(const char* optimizer, const Tensor& param, const Tensor& grad) {
  EMBER_CHECK(param.dtype() == DType::f32 || param.dtype() == DType::f64, optimizer,
              ": expected f32 or f64 parameters, got ", dtype_name(param.dtype()));
  EMBER_CHECK(param.is_contiguous(), optimizer, ": expected contiguous parameters, got strides ",
              shape_str(param.strides()));
  EMBER_CHECK(grad.shape() == param.shape() && grad.dtype() == param.dtype() && grad.device() == param.device(),
              optimizer, ": gradient (", dtype_name(grad.dtype()), " ", shape_str(grad.shape()),
              ") does not match its parameter (", dtype_name(param.dtype()), " ", shape_str(param.shape()), ")");
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  size_t index = 0;
  for (size_t g = 0; g < num_groups(); ++g) {
    const std::string group = "param_groups." + std::to_string(g) + ".";
    out[group + "lr"] = tensor<double>({lr(g)}, Shape{});
    out[group + "num_params"] = tensor<int64_t>({int64_t(group_params(g).size())}, Shape{});
    for (size_t k = 0; k < group_params(g).size(); ++k, ++index) {
      if (index >= state_.size() || state_[index].step == 0) continue;
      const std::string prefix = "state." + std::to_string(index) + ".";
      out[prefix + "step"] = tensor<int64_t>({state_[index].step}, Shape{});
      for (const auto& [name, buffer] : state_[index].buffers) out[prefix + name] = buffer;
    }
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  std::vector<std::string> problems;
  std::set<std::string> used;
  auto scalar = [&](const std::string& key, DType dtype) -> const Tensor* {
    auto it = state.find(key);
    if (it == state.end()) {
      problems.push_back("missing '" + key + "'");
      return nullptr;
    }
    used.insert(key);
    if (it->second.numel() != 1 || it->second.dtype() != dtype) {
      problems.push_back("'" + key + "' must be one " + std::string(dtype_name(dtype)) + " value, got " +
                         std::string(dtype_name(it->second.dtype())) + " " + shape_str(it->second.shape()));
      return nullptr;
    }
    return &it->second;
  };
  std::vector<double> lrs(num_groups());
  std::vector<ParamState> loaded(total_params());
  const std::vector<std::string> names = buffer_names();
  size_t index = 0;
  for (size_t g = 0; g < num_groups(); ++g) {
    const std::string group = "param_groups." + std::to_string(g) + ".";
    if (const Tensor* lr_t = scalar(group + "lr", DType::f64)) {
      lrs[g] = lr_t->item();
      if (!std::isfinite(lrs[g]) || lrs[g] < 0)
        problems.push_back("'" + group + "lr' must be a finite non-negative number, got " + std::to_string(lrs[g]));
    }
    if (const Tensor* n = scalar(group + "num_params", DType::i64); n && int64_t(n->item()) != int64_t(group_params(g).size()))
      problems.push_back("group " + std::to_string(g) + " has " + std::to_string(int64_t(n->item())) +
                         " parameters in the state but " + std::to_string(group_params(g).size()) + " here");
    for (const Tensor& param : group_params(g)) {
      const std::string prefix = "state." + std::to_string(index) + ".";
      ParamState& ps = loaded[index++];
      if (!state.count(prefix + "step")) continue;  // never updated
      if (const Tensor* s = scalar(prefix + "step", DType::i64)) {
        ps.step = int64_t(s->item());
        if (ps.step < 0) problems.push_back("'" + prefix + "step' must be non-negative, got " + std::to_string(ps.step));
      }
      for (const std::string& name : names) {
        auto it = state.find(prefix + name);
        if (it == state.end()) continue;  // optional buffers (momentum 0, amsgrad off)
        used.insert(it->first);
        if (it->second.dtype() != param.dtype()) {
          problems.push_back("'" + it->first + "' has dtype " + std::string(dtype_name(it->second.dtype())) +
                             ", parameter " + std::to_string(index - 1) + " has " +
                             std::string(dtype_name(param.dtype())));
          continue;
        }
        if (it->second.shape() != param.shape()) {
          problems.push_back("'" + it->first + "' has shape " + shape_str(it->second.shape()) + ", parameter " +
                             std::to_string(index - 1) + " has " + shape_str(param.shape()));
          continue;
        }
        Tensor buffer = empty(param.shape(), {.dtype = param.dtype(), .device = param.device()});
        buffer.copy_(it->second.to(param.device()));
        ps.buffers[name] = buffer;
      }
    }
  }
  for (const auto& [key, t] : state)
    if (!used.count(key)) problems.push_back("unexpected '" + key + "'");
  if (!problems.empty()) {
    std::string msg = "Optimizer::load_state_dict: the state does not fit this optimizer:";
    for (const auto& p : problems) msg += "\n  " + p;
    EMBER_FAIL(msg);
  }
  for (size_t g = 0; g < num_groups(); ++g) set_lr(g, lrs[g]);
  state_ = std::move(loaded);
}

}  // namespace ember
