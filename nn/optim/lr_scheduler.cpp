#include "nn/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "ops/creation.h"

namespace ember {

LrScheduler::LrScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.num_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LrScheduler::apply() {
  for (size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_lr(g, lr_at(base_lrs_[g], t_));
}

void LrScheduler::step() {
  ++t_;
  apply();
}

StateDict LrScheduler::state_dict() const {
  return {{"last_step", tensor<int64_t>({t_}, Shape{})},
          {"base_lrs", tensor<double>(base_lrs_, {int64_t(base_lrs_.size())})}};
}

void LrScheduler::load_state_dict(const StateDict& state) {
  auto step = state.find("last_step"), bases = state.find("base_lrs");
  EMBER_CHECK(step != state.end() && bases != state.end() && state.size() == 2,
              "LrScheduler::load_state_dict: expected exactly the entries 'last_step' and 'base_lrs', got ",
              state.size(), " entries");
  EMBER_CHECK(step->second.dtype() == DType::i64 && step->second.numel() == 1,
              "LrScheduler::load_state_dict: 'last_step' must be one i64 value, got ",
              dtype_name(step->second.dtype()), " ", shape_str(step->second.shape()));
  EMBER_CHECK(bases->second.dtype() == DType::f64 && bases->second.shape() == Shape{int64_t(base_lrs_.size())},
              "LrScheduler::load_state_dict: 'base_lrs' must be f64 (", base_lrs_.size(), ") for ",
              base_lrs_.size(), " parameter groups, got ", dtype_name(bases->second.dtype()), " ",
              shape_str(bases->second.shape()));
  const auto last_step = int64_t(step->second.item());
  EMBER_CHECK(last_step >= 0, "LrScheduler::load_state_dict: 'last_step' must be non-negative, got ", last_step);
  const std::vector<double> base_lrs = bases->second.to_vector<double>();
  for (double lr : base_lrs)
    EMBER_CHECK(std::isfinite(lr) && lr >= 0, "LrScheduler::load_state_dict: 'base_lrs' must be finite and "
                "non-negative, got ", lr);
  t_ = last_step;
  base_lrs_ = base_lrs;
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LrScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size > 0, "StepLR: step_size must be > 0, got ", step_size);
  apply();
}

double StepLR::lr_at(double base, int64_t t) const { return base * std::pow(gamma_, double(t / step_size_)); }

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LrScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  EMBER_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
              "MultiStepLR: milestones must be in ascending order");
  apply();
}

double MultiStepLR::lr_at(double base, int64_t t) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), t) - milestones_.begin();
  return base * std::pow(gamma_, double(passed));
}

CosineWithWarmup::CosineWithWarmup(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr)
    : LrScheduler(optimizer), warmup_(warmup_steps), total_(total_steps), min_lr_(min_lr) {
  EMBER_CHECK(warmup_steps >= 0 && total_steps > warmup_steps,
              "CosineWithWarmup: expected 0 <= warmup_steps < total_steps, got warmup_steps ", warmup_steps,
              " and total_steps ", total_steps);
  apply();
}

double CosineWithWarmup::lr_at(double base, int64_t t) const {
  if (t < warmup_) return base * double(t + 1) / double(warmup_);
  const double progress = std::min(1.0, double(t - warmup_) / double(total_ - warmup_));
  return min_lr_ + (base - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace ember
