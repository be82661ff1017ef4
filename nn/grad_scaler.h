// GradScaler: dynamic loss scaling for mixed-precision training, with the semantics of PyTorch's
// torch.cuda.amp.GradScaler. The loss is multiplied by a large scale before backward so that
// small f16 gradients do not flush to zero; the gradients are divided by it again before the
// optimizer sees them; a step whose gradients hold Inf or NaN is skipped and the scale backs
// off, and after growth_interval good steps in a row the scale grows.
//
//   GradScaler scaler;                           // {.init_scale = 65536, .growth_interval = 2000}
//   for (const Batch& b : batches) {
//     opt.zero_grad();
//     Tensor loss = loss_of(b);
//     scaler.scale(loss).backward();             // grads are scale * d(loss)
//     scaler.unscale_(opt);                      // optional: to clip or inspect true grads
//     clip_grad_norm_(model->parameters(), 5.0);
//     bool stepped = scaler.step(opt);           // unscales if needed; skips on Inf/NaN
//     scaler.update();                           // back off or grow the scale
//     sched.step();                              // PyTorch's users step the schedule either way
//   }
//   ck.grad_scaler = scaler.state_dict();        // a training checkpoint's optional section
//   scaler.load_state_dict(ck.grad_scaler);
//
// A disabled scaler (.enabled = false) is a no-op with the same calls: scale() returns the loss,
// step() just steps, state_dict() is empty; a run can switch mixed precision off without
// changing its loop.
//
// Per optimizer and per iteration the calls go unscale_ (at most once), step (at most once),
// then update() once for all optimizers, which resets them. Calling unscale_ twice, unscale_
// after step, or step twice before update() is an Error naming the method, as in PyTorch.
//
// State dict (PyTorch's keys, 0-d tensors on the CPU):
//   scale           f32  the current scale
//   growth_tracker  i64  good steps in a row since the last growth or backoff, < growth_interval
//   growth_factor   f64, backoff_factor f64, growth_interval i64: the options that shape the
//                   future (init_scale does not: the scale has taken its place)
//
// Note [One read per step]: PyTorch keeps found_inf on the device and reads it once, in step().
// So does unscale_: every gradient is multiplied by 1/scale in place (a kernel, no read) and the
// count_nonfinite kernel (ops/nonfinite) writes its tally into one row of a per-device (n, 3)
// buffer (another kernel, no read). step() copies each buffer to the host once: one
// device-to-host read per step for a model on one device, however many parameters it has.
// update() reuses what step() read. The scale itself lives on the host (a float), so scale()
// and update() never synchronise either.
//
// The check counts the gradients before the division, as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ does (see Note [A failed unscale_ changes nothing]
// in grad_scaler.cpp for why the order also suits ember).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/tensor.h"
#include "nn/optim/optimizer.h"
#include "nn/state_dict.h"

namespace ember {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  int64_t growth_interval = 2000;  // >= 1
  bool enabled = true;
};

class GradScaler {
 public:
  // Invalid options are an Error naming the option, what was expected and what was given.
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (recorded by autograd); the loss itself when disabled.
  Tensor scale(const Tensor& loss) const;
  // Divides every gradient of `optimizer`'s parameters by the scale, in place, and records on
  // the device whether any is Inf or NaN (Note [One read per step]). Gradients may live on the
  // CPU or on a cuda device, and on several. An Error if called twice for `optimizer` since
  // the last update(), or after step().
  void unscale_(Optimizer& optimizer);
  // unscale_(optimizer) unless already done; then optimizer.step() unless a gradient was Inf
  // or NaN. Returns whether the optimizer stepped. An Error if called twice since update().
  bool step(Optimizer& optimizer);
  // After every iteration: on Inf/NaN (in any optimizer's gradients) scale *= backoff_factor
  // and the tracker restarts; otherwise the tracker counts the good step and, on reaching
  // growth_interval, scale *= growth_factor (when that stays finite) and restarts. An Error
  // when no unscale_ or step happened since the last update().
  void update();

  float scale_value() const;  // 1 when disabled, as PyTorch's get_scale()
  int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  StateDict state_dict() const;  // empty when disabled
  // Restores a state_dict() (a no-op when disabled, as in PyTorch); every problem (missing,
  // unexpected, wrong dtype, out-of-range entries) is reported at once. An empty state is an
  // Error: it was saved from a disabled scaler, or the checkpoint has no scaler section.
  void load_state_dict(const StateDict& state);

 private:
  enum class Stage { ready, unscaled, stepped };
  // Per-device tallies of one unscale_, kept on their devices until step() or update().
  struct PendingTally {
    std::vector<Tensor> counts;  // (n, 3) i64 each, one per device that holds gradients
    bool read = false;
    bool found_inf = false;
  };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    PendingTally tally;
  };
  // Reads the tallies (once) and returns whether one found an Inf or NaN.
  static bool found_inf(PendingTally& tally);

  GradScalerOptions options_;
  float scale_ = 0;
  int64_t growth_tracker_ = 0;
  std::map<const Optimizer*, PerOptimizer> per_optimizer_;  // cleared by update()
};

}  // namespace ember
