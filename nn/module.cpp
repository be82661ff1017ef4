#include "nn/module.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/creation.h"

namespace ember {

namespace {

// Output shapes recorded by Module::operator() while summary() runs its forward pass.
thread_local std::map<const Module*, Shape>* summary_recorder = nullptr;

template <class Fn>
void visit(const Module& m, const std::string& prefix, const Fn& fn) {
  fn(m, prefix);
  for (const auto& [name, child] : m.named_children()) visit(*child, prefix + name + ".", fn);
}

}  // namespace

Tensor Module::operator()(const Tensor& x) {
  Tensor y = forward(x);
  if (summary_recorder) (*summary_recorder)[this] = y.shape();
  return y;
}

Tensor Module::call_activated(const Tensor& x, Module& activation_module, Activation act) {
  Tensor y = forward_activated(x, act);
  if (summary_recorder) (*summary_recorder)[this] = (*summary_recorder)[&activation_module] = y.shape();
  return y;
}

void Module::check_new_name(const std::string& name) const {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_,
              ": a parameter, buffer or submodule name must be non-empty and contain no '.', got '", name, "'");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  EMBER_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), type_name_, ": the name '", name,
              "' is already registered");
}

Tensor& Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(name);
  EMBER_CHECK(value.defined(), type_name_, ": register_parameter('", name, "') got an undefined tensor");
  Tensor p = value.is_leaf() ? value : value.detach();
  p.requires_grad_(true);
  parameters_.emplace_back(name, p);
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  EMBER_CHECK(value.defined(), type_name_, ": register_buffer('", name, "') got an undefined tensor");
  buffers_.emplace_back(name, value.detach());
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name(name);
  EMBER_CHECK(child != nullptr, type_name_, ": register_module('", name, "') got a null module");
  children_.emplace_back(name, std::move(child));
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  visit(*this, "", [&](const Module& m, const std::string& prefix) {
    for (const auto& [name, p] : m.parameters_) out.emplace_back(prefix + name, p);
  });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  visit(*this, "", [&](const Module& m, const std::string& prefix) {
    for (const auto& [name, b] : m.buffers_) out.emplace_back(prefix + name, b);
  });
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  visit(*this, "", [&](const Module& m, const std::string& prefix) {
    out.emplace_back(prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1), const_cast<Module*>(&m));
  });
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

namespace {
// See Note [Parameter identity]: the handle stays, its storage moves.
void move_in_place(const Tensor& t, Device device) {
  if (t.device() == device) return;
  Tensor moved = t.detach().to(device);
  TensorImpl& impl = t.impl();
  impl.storage = moved.impl().storage;
  impl.strides = moved.strides();
  impl.offset = moved.offset();
  if (Tensor g = t.grad(); g.defined()) t.set_grad(g.to(device));
}
}  // namespace

void Module::to(Device device) {
  autograd::NoGradGuard no_grad;
  visit(*this, "", [&](const Module& m, const std::string&) {
    for (const auto& [name, p] : m.parameters_) move_in_place(p, device);
    for (const auto& [name, b] : m.buffers_) move_in_place(b, device);
  });
}

void Module::zero_grad() {
  for (const auto& [name, p] : named_parameters()) p.zero_grad();
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [name, p] : named_parameters()) out[name] = p;
  for (const auto& [name, b] : named_buffers()) out[name] = b;
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched, wrong_dtype;
  for (const auto& [name, t] : own) {
    auto it = state.find(name);
    if (it == state.end()) missing.push_back(name);
    else if (it->second.shape() != t.shape())
      mismatched.push_back(name + ": given " + shape_str(it->second.shape()) + ", module has " + shape_str(t.shape()));
    else if (it->second.dtype() != t.dtype())
      wrong_dtype.push_back(name + ": given dtype " + std::string(dtype_name(it->second.dtype())) + ", module has " +
                           std::string(dtype_name(t.dtype())));
  }
  for (const auto& [name, t] : state)
    if (!own.count(name)) unexpected.push_back(name);
  auto list = [](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return "[" + s + "]";
  };
  const bool key_problems = strict && (!missing.empty() || !unexpected.empty());
  if (key_problems || !mismatched.empty() || !wrong_dtype.empty()) {
    std::string msg = "load_state_dict: the state does not match the " + type_name_ + " module:";
    if (strict && !missing.empty()) msg += " missing keys " + list(missing) + ";";
    if (strict && !unexpected.empty()) msg += " unexpected keys " + list(unexpected) + ";";
    if (!mismatched.empty()) msg += " shape mismatches " + list(mismatched) + ";";
    if (!wrong_dtype.empty()) msg += " dtype mismatches " + list(wrong_dtype) + ";";
    msg.pop_back();
    EMBER_FAIL(msg);
  }
  autograd::NoGradGuard no_grad;
  for (const auto& [name, t] : own) {
    auto it = state.find(name);
    if (it == state.end()) continue;
    Tensor dst = t;
    dst.copy_(it->second.to(t.device()));
  }
}

std::string Module::summary(const Shape& input_shape) {
  std::map<const Module*, Shape> shapes;
  {
    const std::vector<Tensor> params = parameters();
    const Device device = params.empty() ? Device::cpu() : params.front().device();
    autograd::NoGradGuard no_grad;
    summary_recorder = &shapes;
    try {
      (*this)(zeros(input_shape, {.dtype = DType::f32, .device = device}));
    } catch (...) {
      summary_recorder = nullptr;
      throw;
    }
    summary_recorder = nullptr;
  }
  struct Row { std::string name, type, shape, params; };
  std::vector<Row> rows;
  for (auto& [name, m] : named_modules()) {
    if (!m->named_children().empty()) continue;  // containers: only their leaves are rows
    auto it = shapes.find(m);
    rows.push_back({name.empty() ? "(root)" : name, m->type_name(),
                    it == shapes.end() ? "(not called)" : shape_str(it->second), std::to_string(m->num_parameters())});
  }
  Row header{"Layer", "Type", "Output shape", "Params"};
  size_t w[4] = {header.name.size(), header.type.size(), header.shape.size(), header.params.size()};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.type.size());
    w[2] = std::max(w[2], r.shape.size());
    w[3] = std::max(w[3], r.params.size());
  }
  std::ostringstream os;
  auto line = [&](const Row& r) {
    os << std::left << std::setw(int(w[0])) << r.name << "  " << std::setw(int(w[1])) << r.type << "  "
       << std::setw(int(w[2])) << r.shape << "  " << std::right << std::setw(int(w[3])) << r.params << "\n";
  };
  const std::string rule(w[0] + w[1] + w[2] + w[3] + 6, '-');
  os << type_name_ << " summary for input " << shape_str(input_shape) << "\n" << rule << "\n";
  line(header);
  os << rule << "\n";
  for (const Row& r : rows) line(r);
  os << rule << "\n";
  os << "Total parameters: " << num_parameters() << "\n";
  return os.str();
}

}  // namespace ember
