#include "ops/conv_pool.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/conv.h"
#include "ops/pool.h"
#include "ops/reduced_precision.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

Tensor conv2d_max_pool2d(const Tensor& x, const Tensor& w, const Tensor& b, IntPair stride, IntPair padding,
                         IntPair dilation, int64_t groups, Activation act, const MaxPoolArgs& pool) {
  EMBER_CHECK(x.defined() && w.defined(), "conv2d_max_pool2d: expected defined input and weight");
  if (autocast_dtype() && (x.dtype() == DType::f32 || w.dtype() == DType::f32))  // as conv2d does
    return conv2d_max_pool2d(autocast_low(x), autocast_low(w), autocast_low(b), stride, padding, dilation, groups,
                             act, pool);
  const IntPair pool_stride = pool.stride.value_or(pool.kernel);
  const bool overlapping = pool_stride.h < pool.kernel.h || pool_stride.w < pool.kernel.w;
  // A reduced-precision input without a native kernel (f16 on the CPU) has its convolution in f32
  // and rounded (conv2d's fallback), so the three ops run the activation's backward in f32.
  const bool widened = is_reduced_float(x.dtype()) && !native_reduced_gemm(x);
  if (overlapping || widened || !needs_grad({x, w, b}))
    return max_pool2d(conv2d(x, w, b, stride, padding, dilation, groups, act), pool.kernel, pool.stride,
                      pool.padding);
  Tensor y;
  ValuesIndices maxima;
  {
    const autograd::NoGradGuard untracked;  // recorded below as one node
    y = conv2d(x, w, b, stride, padding, dilation, groups, act);
    maxima = max_pool2d_with_positions(y, pool.kernel, pool.stride, pool.padding);
  }
  const Shape ys = y.shape();
  y = Tensor();  // Note [Convolution, activation and max pool as one op]: not kept
  const bool nx = needs_grad(x), nw = needs_grad(w), nb = needs_grad(b);
  const Tensor activated = act != Activation::none ? maxima.values : Tensor();  // what the backward reads
  record("conv2d_act_max_pool2d", {x, w, b}, maxima.values,
         [sx = save(nw ? x : Tensor()), sw = save(nx ? w : Tensor()), sm = save(activated), sp = save(maxima.indices),
          act, pool, ys, xs = x.shape(), ws = w.shape(), stride, padding, dilation, groups, nx, nw,
          nb](Tensor dm) mutable -> TensorList {
           const char* op = "conv2d_max_pool2d";
           Tensor pooled = act != Activation::none ? sm.take(op) : Tensor();
           auto [dmasked, db] = bias_activation_backward(std::move(dm), pooled, act, 1, nb);
           pooled = Tensor();
           const Tensor dz =
               max_pool2d_backward_from_positions(dmasked, sp.take(op), ys, pool.kernel, pool.stride, pool.padding);
           dmasked = Tensor();
           return {nx ? conv2d_input_grad(dz, sw.get(op), xs, stride, padding, dilation, groups) : Tensor(),
                   nw ? conv2d_weight_grad(sx.get(op), dz, ws, stride, padding, dilation, groups) : Tensor(), db};
         });
  return maxima.values;
}

}  // namespace ember
