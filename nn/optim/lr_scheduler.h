// Learning-rate schedules. A schedule counts calls of step(): call it once per optimizer step
// or once per epoch, whichever unit its parameters are in. Each sets every group's lr from
// that group's base lr (its lr when the schedule was built) as a closed-form function of the
// count t, so a restored count gives exactly the same lrs.
//
//   SGD opt(model->parameters(), {.lr = 0.1});
//   CosineWithWarmup sched(opt, /*warmup_steps=*/100, /*total_steps=*/5000);
//   for (...) { ...; opt.step(); sched.step(); }
#pragma once

#include <vector>

#include "nn/optim/optimizer.h"
#include "nn/state_dict.h"

namespace ember {

class LrScheduler {
 public:
  explicit LrScheduler(Optimizer& optimizer);
  virtual ~LrScheduler() = default;

  void step();  // t += 1, then set the lrs for t
  int64_t last_step() const { return t_; }
  // lr of a group with base lr `base` after t steps.
  virtual double lr_at(double base, int64_t t) const = 0;

  // {"last_step": 0-d i64, "base_lrs": (groups) f64}; loading also sets the optimizer's lrs.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

 protected:
  void apply();  // derived constructors call this once their parameters are set

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t t_ = 0;
};

// base * gamma^floor(t / step_size)
class StepLR : public LrScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(double base, int64_t t) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// base * gamma^(number of milestones <= t); milestones ascending.
class MultiStepLR : public LrScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  double lr_at(double base, int64_t t) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// Linear warmup to the base lr, then cosine decay to min_lr:
//   t <  warmup:  base * (t + 1) / warmup        (the first step already trains)
//   t >= warmup:  min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2,
//                 p = min(1, (t - warmup) / (total - warmup))
class CosineWithWarmup : public LrScheduler {
 public:
  CosineWithWarmup(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0);
  double lr_at(double base, int64_t t) const override;

 private:
  int64_t warmup_, total_;
  double min_lr_;
};

}  // namespace ember
