// What the tests of the class-weight metric losses (ArcFace, ProxyAnchor: embeddings against a
// matrix of class weights) share: inputs, the loss with both gradients on a device, the tiles.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/allocator.h"
#include "core/parallel.h"
#include "metric_loss_testing.h"

namespace ember::test {

using metric_testing::f64_randn;
using metric_testing::labels_of;
using metric_testing::test_devices;
using metric_testing::TilesGuard;

// Rows of x (rows x cols, row-major, as f64) divided by max(their norm, 1e-12): PML's normalize.
inline std::vector<double> normalized_rows(const Tensor& x) { return metric_testing::normalized_rows(x).n; }

// A loss of (embeddings, weights), its value and both gradients computed on `device`, on the CPU.
struct LossAndGrads {
  Tensor loss, demb, dweights;
};
template <class LossFn>
LossAndGrads class_loss_and_grads(LossFn loss_fn, const Tensor& emb, const Tensor& weights, const Tensor& labels,
                                  Device device = Device::cpu()) {
  Tensor x = emb.to(device).detach().requires_grad_();
  Tensor w = weights.to(device).detach().requires_grad_();
  Tensor loss = loss_fn(x, labels.to(device), w);
  loss.backward();
  return {loss.cpu(), x.grad().cpu(), w.grad().cpu()};
}

// A class loss computes its gradient in the forward when one will be wanted (Note [Gradient in
// the forward] in ops/cpu/triplet_tiled.cpp): without a gradient its loss is the same bits, and
// a retained graph gives the same gradients to a second backward.
template <class LossFn>
void check_gradient_in_forward(LossFn loss_fn, const Tensor& emb, const Tensor& weights, const Tensor& labels) {
  Tensor x = emb.detach().requires_grad_();
  Tensor w = weights.detach().requires_grad_();
  const Tensor loss = loss_fn(x, labels, w);
  Tensor without;
  {
    autograd::NoGradGuard no_grad;
    without = loss_fn(x, labels, w);
  }
  CHECK(without.item() == loss.item());
  const Tensor tripled = mul(loss, 3.0);  // an upstream gradient of 3: a G scaled in place would show
  tripled.backward({}, /*retain_graph=*/true);
  const Tensor dx = x.grad().clone(), dw = w.grad().clone();
  tripled.backward();
  check_close(x.grad(), mul(dx, 2.0), 0, 0);
  check_close(w.grad(), mul(dw, 2.0), 0, 0);
}

// Tiles of any size, with blocks of whole rows or streamed, give the loss and gradients of one
// tile of 13 x 13 (the batches here are at most 13 on each side), to rounding.
template <class LossFn>
void check_tiles_equal_one_tile(LossFn loss_fn, const Tensor& emb, const Tensor& weights, const Tensor& labels) {
  TilesGuard guard;
  set_pair_tiles({.rows = 13, .cols = 13});
  const LossAndGrads whole = class_loss_and_grads(loss_fn, emb, weights, labels);
  for (PairTiles shape : {PairTiles{1, 1}, PairTiles{3, 5}, PairTiles{7, 4}, PairTiles{4, 64}})
    for (int64_t whole_rows : {PairTiles{}.whole_rows, int64_t(0)}) {  // blocks of whole rows, or tiles
      const PairTiles tiles{shape.rows, shape.cols, whole_rows};
      INFO("tiles " << tiles.rows << " x " << tiles.cols << (whole_rows > 0 ? ", whole rows" : ", streamed"));
      set_pair_tiles(tiles);
      const LossAndGrads streamed = class_loss_and_grads(loss_fn, emb, weights, labels);
      check_close(streamed.loss, whole.loss, 1e-12, 1e-12);
      check_close(streamed.demb, whole.demb, 1e-10, 1e-12);
      check_close(streamed.dweights, whole.dweights, 1e-10, 1e-12);
    }
}

// Only the gradients wanted are computed (a frozen W or frozen embeddings skip theirs): each
// alone is the same bits as with both, on every device, in blocks of whole rows and in streamed
// tiles; and on the CPU what the forward leaves allocated for the backward falls by at least twice
// the frozen input's size: its normalised copy, which normalize_rows keeps for its backward only
// when the input needs a gradient, and the skipped gradient, which a loss that still allocated
// (and computed) it would keep. (Not the peak: the pool threads' scratch makes it vary by a few
// hundred bytes from run to run.)
template <class LossFn>
void check_one_gradient_wanted(LossFn loss_fn, const Tensor& emb, const Tensor& weights, const Tensor& labels) {
  TilesGuard guard;
  Allocator& allocator = allocator_for(Device::cpu());
  for (const Device device : test_devices())
    for (const PairTiles tiles : {PairTiles{}, PairTiles{.whole_rows = 0}}) {
      INFO(device.str() << (tiles.whole_rows > 0 ? ", whole rows" : ", streamed"));
      set_pair_tiles(tiles);
      const LossAndGrads both = class_loss_and_grads(loss_fn, emb, weights, labels, device);
      // What the forward leaves allocated while its loss (and graph) lives, above what was before.
      auto forward_holds = [&](const Tensor& x, const Tensor& w) {
        const int64_t before = allocator.stats().allocated_bytes;
        const Tensor loss = loss_fn(x, labels.to(device), w);
        return allocator.stats().allocated_bytes - before;
      };
      const Tensor x_cpu = emb.detach().requires_grad_(), w_cpu = weights.detach().requires_grad_();
      const int64_t held_both = device.is_cpu() ? forward_holds(x_cpu, w_cpu) : 0;
      for (const bool frozen_weights : {true, false}) {
        INFO((frozen_weights ? "weights frozen" : "embeddings frozen"));
        Tensor x = emb.to(device).detach(), w = weights.to(device).detach();
        (frozen_weights ? x : w).requires_grad_();
        if (device.is_cpu()) {
          const Tensor& frozen = frozen_weights ? w : x;
          CHECK(forward_holds(x, w) <= held_both - 2 * int64_t(frozen.nbytes()));
        }
        loss_fn(x, labels.to(device), w).backward();
        const Tensor& wanted = frozen_weights ? x : w;
        check_close(wanted.grad().cpu(), frozen_weights ? both.demb : both.dweights, 0, 0);
      }
    }
}

// Blocks of whole rows weigh a row with vectorised loops (Note [One exp per logit] in
// ops/cpu/arcface.cpp) whose bodies only rows of at least 16 values enter; the streamed tiles fold
// and weigh with other code. Both, in f64 and f32, on rows long enough for the loops' bodies and
// tails, give the same loss and gradients, to rounding (NaNs where the other has them); and the
// whole rows give the same bits on one and on two threads.
template <class LossFn>
void check_whole_rows_equal_streamed(LossFn loss_fn, const Tensor& emb, const Tensor& weights, const Tensor& labels) {
  TilesGuard guard;
  const int threads = num_threads();
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(dtype_name(dtype));
    const double tolerance = dtype == DType::f64 ? 1e-10 : 2e-5;
    set_pair_tiles({});
    set_num_threads(1);
    const LossAndGrads one = class_loss_and_grads(loss_fn, emb.to(dtype), weights.to(dtype), labels);
    set_num_threads(2);
    const LossAndGrads whole = class_loss_and_grads(loss_fn, emb.to(dtype), weights.to(dtype), labels);
    set_num_threads(threads);
    check_close(whole.loss, one.loss, 0, 0);
    check_close(whole.demb, one.demb, 0, 0);
    check_close(whole.dweights, one.dweights, 0, 0);
    set_pair_tiles({.whole_rows = 0});
    const LossAndGrads streamed = class_loss_and_grads(loss_fn, emb.to(dtype), weights.to(dtype), labels);
    check_close(whole.loss, streamed.loss, tolerance, tolerance);
    check_close(whole.demb, streamed.demb, tolerance, tolerance);
    check_close(whole.dweights, streamed.dweights, tolerance, tolerance);
  }
}

}  // namespace ember::test
