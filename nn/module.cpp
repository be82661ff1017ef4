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

// What Module::operator() records while profile() runs its forward pass.
struct CallRecord {
  Shape output_shape;  // of the last call
  int64_t macs = 0;    // of all calls
};
thread_local std::map<const Module*, CallRecord>* summary_recorder = nullptr;

void record_call(const Module& m, const Shape& output_shape) {
  CallRecord& r = (*summary_recorder)[&m];
  r.output_shape = output_shape;
  r.macs += m.macs(output_shape);
}

template <class Fn>
void visit(const Module& m, const std::string& prefix, const Fn& fn) {
  fn(m, prefix);
  for (const auto& [name, child] : m.named_children()) visit(*child, prefix + name + ".", fn);
}

}  // namespace

Tensor Module::operator()(const Tensor& x) {
  Tensor y = forward(x);
  if (summary_recorder) record_call(*this, y.shape());
  return y;
}

Tensor Module::call_activated(const Tensor& x, Module& activation_module, Activation act) {
  Tensor y = forward_activated(x, act);
  record_fused_call(y.shape());
  activation_module.record_fused_call(y.shape());
  return y;
}

Tensor Module::forward_activated_pooled(const Tensor& x, Activation act, const MaxPoolArgs& pool) {
  return max_pool2d(forward_activated(x, act), pool.kernel, pool.stride, pool.padding);
}

Tensor Module::call_activated_pooled(const Tensor& x, Module& activation_module, Module& pool_module, Activation act,
                                     const MaxPoolArgs& pool) {
  if (summary_recorder) return pool_module(call_activated(x, activation_module, act));
  return forward_activated_pooled(x, act, pool);
}

void Module::record_fused_call(const Shape& output_shape) {
  if (summary_recorder) record_call(*this, output_shape);
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

namespace {
// See Note [Parameter identity]: the handle stays, its storage and dtype change.
void convert_in_place(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype || !is_floating(t.dtype())) return;
  Tensor converted = t.detach().to(dtype);
  TensorImpl& impl = t.impl();
  impl.storage = converted.impl().storage;
  impl.strides = converted.strides();
  impl.offset = converted.offset();
  impl.dtype = dtype;
  if (Tensor g = t.grad(); g.defined()) t.set_grad(g.to(dtype));
}
}  // namespace

void Module::to(DType dtype) {
  EMBER_CHECK(is_floating(dtype), type_name_, ".to: expected a floating dtype, got ", dtype_name(dtype));
  autograd::NoGradGuard no_grad;
  visit(*this, "", [&](const Module& m, const std::string&) {
    for (const auto& [name, p] : m.parameters_) convert_in_place(p, dtype);
    for (const auto& [name, b] : m.buffers_) convert_in_place(b, dtype);
  });
}

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

Module::Profile Module::profile(const Shape& input_shape) {
  std::map<const Module*, CallRecord> calls;
  {
    const std::vector<Tensor> params = parameters();
    const Device device = params.empty() ? Device::cpu() : params.front().device();
    // Note [Summary runs the model]: eval mode for the pass, then every module's own flag back.
    std::vector<std::pair<Module*, bool>> modes;
    for (auto& [name, m] : named_modules()) modes.emplace_back(m, m->training_);
    auto restore = [&] {
      summary_recorder = nullptr;
      for (auto& [m, training] : modes) m->training_ = training;
    };
    eval();
    autograd::NoGradGuard no_grad;
    summary_recorder = &calls;
    try {
      (*this)(zeros(input_shape, {.dtype = DType::f32, .device = device}));
    } catch (...) {
      restore();
      throw;
    }
    restore();
  }
  Profile profile;
  for (auto& [name, m] : named_modules()) {
    if (!m->named_children().empty()) continue;  // containers: only their leaves are rows
    ProfileRow row{name.empty() ? "(root)" : name, m->type_name(), std::nullopt, m->num_parameters(), 0};
    if (auto it = calls.find(m); it != calls.end()) {
      row.output_shape = it->second.output_shape;
      row.macs = it->second.macs;
    }
    profile.total_macs += row.macs;
    profile.rows.push_back(std::move(row));
  }
  profile.total_params = num_parameters();
  return profile;
}

namespace {
// 8030000000 -> "8,030,000,000".
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}
}  // namespace

std::string Module::summary(const Shape& input_shape) {
  const Profile profile = this->profile(input_shape);
  struct Cells { std::string name, type, shape, params, macs; };
  std::vector<Cells> rows;
  for (const ProfileRow& r : profile.rows)
    rows.push_back({r.name, r.type, r.output_shape ? shape_str(*r.output_shape) : "(not called)",
                    std::to_string(r.params), with_commas(r.macs)});
  const Cells header{"Layer", "Type", "Output shape", "Params", "MACs"};
  size_t w[5] = {header.name.size(), header.type.size(), header.shape.size(), header.params.size(),
                 header.macs.size()};
  for (const Cells& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.type.size());
    w[2] = std::max(w[2], r.shape.size());
    w[3] = std::max(w[3], r.params.size());
    w[4] = std::max(w[4], r.macs.size());
  }
  std::ostringstream os;
  auto line = [&](const Cells& r) {
    os << std::left << std::setw(int(w[0])) << r.name << "  " << std::setw(int(w[1])) << r.type << "  "
       << std::setw(int(w[2])) << r.shape << "  " << std::right << std::setw(int(w[3])) << r.params << "  "
       << std::setw(int(w[4])) << r.macs << "\n";
  };
  const std::string rule(w[0] + w[1] + w[2] + w[3] + w[4] + 8, '-');
  os << type_name_ << " summary for input " << shape_str(input_shape) << "\n" << rule << "\n";
  line(header);
  os << rule << "\n";
  for (const Cells& r : rows) line(r);
  os << rule << "\n";
  os << "Total parameters: " << profile.total_params << "\n";
  os << "Total MACs: " << with_commas(profile.total_macs) << " (" << std::fixed << std::setprecision(2)
     << double(profile.total_macs) / 1e9 << " GMAC)\n";
  os << "MACs count convolutions and linear layers only; batch norm, activations, pooling and element-wise ops "
        "count 0.\n";
  return os.str();
}

}  // namespace ember
