#include "nn/grad_scaler.h"

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"

namespace ember {

namespace {

void check_options(const GradScalerOptions& o) {
  // Written as !(ok) so that NaN fails every check.
  EMBER_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0 && std::isfinite(float(o.init_scale)),
              "GradScaler: option init_scale: expected a finite number > 0 (and finite as f32), got ", o.init_scale);
  EMBER_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1,
              "GradScaler: option growth_factor: expected a finite number > 1, got ", o.growth_factor);
  EMBER_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1,
              "GradScaler: option backoff_factor: expected a number in (0, 1), got ", o.backoff_factor);
  EMBER_CHECK(o.growth_interval >= 1, "GradScaler: option growth_interval: expected an integer >= 1, got ",
              o.growth_interval);
}

// Note [Scale arithmetic]: the scale is an f32 as in PyTorch (its _scale tensor), and
// _amp_update_scale_ computes scale * factor in double and stores it as f32; a growth that
// would overflow f32 is not applied.
float times(float scale, double factor) { return float(double(scale) * factor); }

// The gradients of one device: their contiguous f32/f64 forms for counting, the in-place
// targets, and the 1/scale operand per dtype.
struct DeviceGrads {
  Device device;
  std::vector<Tensor> counted;  // what count_nonfinite reads (the gradient itself when it can)
  std::vector<Tensor> targets;  // the gradients, multiplied in place
  std::vector<std::pair<DType, Tensor>> inv_scale;
  Tensor counts;                // (n, 3) i64
};

DeviceGrads& grads_of(std::vector<DeviceGrads>& all, Device device) {
  for (DeviceGrads& d : all)
    if (d.device == device) return d;
  all.emplace_back().device = device;
  return all.back();
}

const Tensor& inv_scale_for(DeviceGrads& d, DType dtype, double inv_scale) {
  for (const auto& [t, s] : d.inv_scale)
    if (t == dtype) return s;
  d.inv_scale.emplace_back(dtype, full({}, inv_scale, {.dtype = dtype, .device = d.device}));
  return d.inv_scale.back().second;
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  check_options(options_);
  scale_ = float(options_.init_scale);
}

float GradScaler::scale_value() const { return options_.enabled ? scale_ : 1.0f; }

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  EMBER_CHECK(loss.defined(), "GradScaler::scale: the loss is an undefined tensor");
  return mul(loss, double(scale_));
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled) return;
  const auto known = per_optimizer_.find(&optimizer);
  const Stage stage = known == per_optimizer_.end() ? Stage::ready : known->second.stage;
  EMBER_CHECK(stage != Stage::unscaled,
              "GradScaler::unscale_: unscale_() has already been called on this optimizer since the last update()");
  EMBER_CHECK(stage != Stage::stepped, "GradScaler::unscale_: unscale_() is being called after step()");

  autograd::NoGradGuard no_grad;
  // PyTorch multiplies by the f32 reciprocal of the f32 scale, computed in double.
  const double inv_scale = double(float(1.0 / double(scale_)));
  // Note [A failed unscale_ changes nothing]: as the optimizers' step() (Note [A failed step
  // changes nothing] in optim/optimizer.h), everything that allocates happens first: the
  // buffers, the counts (count_nonfinite allocates its partial tallies on cuda) and the 1/scale
  // operands; the in-place multiplications, which allocate nothing, come last. A throw (out of
  // memory) leaves every gradient as it was and this optimizer not unscaled. Counting before
  // dividing is also PyTorch's order (_amp_foreach_non_finite_check_and_unscale_).
  std::vector<DeviceGrads> devices;
  for (size_t g = 0; g < optimizer.num_groups(); ++g)
    for (const Tensor& param : optimizer.group_params(g)) {
      const Tensor grad = param.grad();
      if (!grad.defined() || grad.numel() == 0) continue;
      EMBER_CHECK(is_floating(grad.dtype()), "GradScaler::unscale_: expected floating-point gradients, got ",
                  dtype_name(grad.dtype()));
      DeviceGrads& d = grads_of(devices, grad.device());
      const bool direct = grad.dtype() == DType::f32 || grad.dtype() == DType::f64;
      d.counted.push_back(direct ? grad.contiguous() : grad.to(DType::f32));
      d.targets.push_back(grad);
      inv_scale_for(d, grad.dtype(), inv_scale);
    }
  for (DeviceGrads& d : devices) {
    d.counts = Tensor::empty({int64_t(d.counted.size()), 3}, {.dtype = DType::i64, .device = d.device});
    for (size_t i = 0; i < d.counted.size(); ++i)
      count_nonfinite_kernel(d.device, d.counted[i], d.counts.select(0, int64_t(i)));
  }
  for (DeviceGrads& d : devices)
    for (const Tensor& grad : d.targets) {
      binary_kernel(d.device, BinaryOp::mul, grad, inv_scale_for(d, grad.dtype(), inv_scale), grad);
      grad.bump_version();
    }

  // Recorded only now: an unscale_ that threw leaves nothing for step() or update() to trust.
  PerOptimizer& state = per_optimizer_[&optimizer];
  state.tally = {};
  for (DeviceGrads& d : devices) state.tally.counts.push_back(std::move(d.counts));
  state.stage = Stage::unscaled;
}

bool GradScaler::found_inf(PendingTally& tally) {
  if (!tally.read) {
    // Note [One read per step] (grad_scaler.h): one copy per device, here and nowhere else.
    bool found = false;
    for (const Tensor& counts : tally.counts) {
      const Tensor host = counts.cpu();
      const int64_t* v = host.data<int64_t>();
      for (int64_t i = 0; i < host.shape()[0]; ++i) found = found || v[3 * i] + v[3 * i + 1] > 0;
    }
    tally.counts.clear();  // back to the allocator
    tally.found_inf = found;
    tally.read = true;
  }
  return tally.found_inf;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  const auto it = per_optimizer_.find(&optimizer);
  EMBER_CHECK(it == per_optimizer_.end() || it->second.stage != Stage::stepped,
              "GradScaler::step: step() has already been called since the last update()");
  if (it == per_optimizer_.end()) unscale_(optimizer);
  PerOptimizer& state = per_optimizer_.at(&optimizer);
  const bool skip = found_inf(state.tally);
  if (!skip) optimizer.step();
  state.stage = Stage::stepped;
  return !skip;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  EMBER_CHECK(!per_optimizer_.empty(),
              "GradScaler::update: no inf checks were recorded prior to update() (call unscale_() or step() first)");
  bool found = false;
  for (auto& [opt, state] : per_optimizer_) found = found_inf(state.tally) || found;
  if (found) {
    scale_ = times(scale_, options_.backoff_factor);
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    const float grown = times(scale_, options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  per_optimizer_.clear();
}

StateDict GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {
      {"scale", tensor<float>({scale_}, Shape{})},
      {"growth_tracker", tensor<int64_t>({growth_tracker_}, Shape{})},
      {"growth_factor", tensor<double>({options_.growth_factor}, Shape{})},
      {"backoff_factor", tensor<double>({options_.backoff_factor}, Shape{})},
      {"growth_interval", tensor<int64_t>({options_.growth_interval}, Shape{})},
  };
}

void GradScaler::load_state_dict(const StateDict& state) {
  if (!options_.enabled) return;
  EMBER_CHECK(!state.empty(),
              "GradScaler::load_state_dict: the state is empty; it was saved from a disabled GradScaler, or the "
              "checkpoint has no grad_scaler section");
  std::vector<std::string> problems;
  std::set<std::string> used;
  auto value = [&](const std::string& key, DType dtype) -> std::optional<double> {
    auto it = state.find(key);
    if (it == state.end()) {
      problems.push_back("missing '" + key + "'");
      return std::nullopt;
    }
    used.insert(key);
    if (it->second.numel() != 1 || it->second.dtype() != dtype) {
      problems.push_back("'" + key + "' must be one " + std::string(dtype_name(dtype)) + " value, got " +
                         std::string(dtype_name(it->second.dtype())) + " " + shape_str(it->second.shape()));
      return std::nullopt;
    }
    return it->second.item();
  };
  const auto scale = value("scale", DType::f32);
  const auto tracker = value("growth_tracker", DType::i64);
  const auto growth = value("growth_factor", DType::f64);
  const auto backoff = value("backoff_factor", DType::f64);
  const auto interval = value("growth_interval", DType::i64);
  for (const auto& [key, t] : state)
    if (!used.count(key)) problems.push_back("unexpected '" + key + "'");

  GradScalerOptions loaded = options_;
  if (scale && !(std::isfinite(*scale) && *scale > 0))
    problems.push_back("'scale' must be a finite number > 0, got " + std::to_string(*scale));
  if (growth && !(std::isfinite(*growth) && *growth > 1))
    problems.push_back("'growth_factor' must be a finite number > 1, got " + std::to_string(*growth));
  if (backoff && !(*backoff > 0 && *backoff < 1))
    problems.push_back("'backoff_factor' must be in (0, 1), got " + std::to_string(*backoff));
  if (interval && *interval < 1)
    problems.push_back("'growth_interval' must be >= 1, got " + std::to_string(int64_t(*interval)));
  if (tracker && interval && !(*tracker >= 0 && *tracker < *interval))
    problems.push_back("'growth_tracker' must be in [0, growth_interval = " + std::to_string(int64_t(*interval)) +
                       "), got " + std::to_string(int64_t(*tracker)));
  if (!problems.empty()) {
    std::string msg = "GradScaler::load_state_dict: the state does not fit a GradScaler:";
    for (const auto& p : problems) msg += "\n  " + p;
    EMBER_FAIL(msg);
  }
  // As PyTorch: the saved options replace the constructor's; the saved scale replaces init_scale.
  loaded.growth_factor = *growth;
  loaded.backoff_factor = *backoff;
  loaded.growth_interval = int64_t(*interval);
  options_ = loaded;
  scale_ = float(*scale);
  growth_tracker_ = int64_t(*tracker);
  per_optimizer_.clear();
}

}  // namespace ember
