#include "apps/bench/onednn_peer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "apps/bench/openmp_spin.h"
#include "ember.h"

#ifdef EMBER_HAVE_ONEDNN
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_version.h>
#endif

namespace ember::bench::onednn {

#ifdef EMBER_HAVE_ONEDNN

namespace {

using dnnl::memory;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::dims dims_of(const Shape& shape) { return memory::dims(shape.begin(), shape.end()); }

// The largest |got - want| over the largest |want|, both read as f32.
double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::f32).contiguous(), w = want.to(DType::f32).contiguous();
  const float* gp = g.data<float>();
  const float* wp = w.data<float>();
  double error = 0, scale = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    error = std::max(error, double(std::fabs(gp[i] - wp[i])));
    scale = std::max(scale, double(std::fabs(wp[i])));
  }
  return scale > 0 ? error / scale : error;
}

// oneDNN memory over an ember tensor's own buffer: NCHW, OIHW, or GOIHW for grouped weights
// (ember's (Cout, Cin / G, kH, kW) read with the groups split out).
memory user_memory(const Tensor& t, const memory::dims& dims, memory::data_type type) {
  const memory::format_tag tag = dims.size() == 5 ? memory::format_tag::goihw : memory::format_tag::abcd;
  return memory(memory::desc(dims, type, tag), cpu_engine(), t.raw_data());
}

// The values of t in the primitive's layout (Note [oneDNN peer layouts]).
memory reordered_in(const Tensor& t, const memory::dims& dims, memory::data_type type, const memory::desc& layout,
                    dnnl::stream& stream) {
  memory user = user_memory(t, dims, type);
  memory inner(layout, cpu_engine());
  dnnl::reorder(user, inner).execute(stream, user, inner);
  stream.wait();
  return inner;
}

// oneDNN's result in `inner`, read back into an ember tensor of `shape`.
Tensor read_back(memory inner, const Shape& shape, DType dtype, const memory::dims& dims,
                 memory::data_type type, dnnl::stream& stream) {
  Tensor out = Tensor::empty(shape, {.dtype = dtype});
  memory user = user_memory(out, dims, type);
  dnnl::reorder(inner, user).execute(stream, inner, user);
  stream.wait();
  return out;
}

}  // namespace

bool available() { return true; }

std::string identity() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (OpenMP runtime, " + openmp_spin_setting() + ", formats of its choice)";
}

void sgemm(int64_t M, int64_t N, int64_t K, const float* a, const float* b, float* c, int threads) {
  omp_set_num_threads(threads);
  dnnl_sgemm('N', 'N', M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
}

ConvRun conv_pass(const Conv2dGeometry& g, cpu::ConvPass pass, DType dtype, int threads) {
  if (dtype != DType::f32 && dtype != DType::bf16) return {};
  omp_set_num_threads(threads);
  const memory::data_type type = dtype == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const Shape x_shape{g.batch, g.in_channels, g.in_h, g.in_w};
  const Shape w_shape{g.out_channels, g.in_channels_per_group(), g.kernel_h, g.kernel_w};
  const Shape y_shape{g.batch, g.out_channels, g.out_h, g.out_w};
  const memory::dims x_dims = dims_of(x_shape), y_dims = dims_of(y_shape);
  const memory::dims w_dims = g.groups == 1 ? dims_of(w_shape)
                                            : memory::dims{g.groups, g.out_channels_per_group(),
                                                           g.in_channels_per_group(), g.kernel_h, g.kernel_w};
  const memory::dims strides{g.stride_h, g.stride_w}, dilates{g.dilation_h - 1, g.dilation_w - 1};
  const memory::dims pad_l{g.pad_h, g.pad_w};
  // The right padding that gives PyTorch's output size (the window may not reach the far edge).
  const memory::dims pad_r{(g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1 - g.in_h - g.pad_h,
                           (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1 - g.in_w - g.pad_w};
  auto any = [&](const memory::dims& dims) { return memory::desc(dims, type, memory::format_tag::any); };
  const dnnl::algorithm algorithm = dnnl::algorithm::convolution_auto;

  auto stream = std::make_shared<dnnl::stream>(cpu_engine());
  const dnnl::convolution_forward::primitive_desc forward(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, any(x_dims), any(w_dims),
                                      any(y_dims), strides, dilates, pad_l, pad_r),
      cpu_engine());
  const Tensor x = randn(x_shape).to(dtype), w = randn(w_shape).to(dtype), dy = randn(y_shape).to(dtype);
  const IntPair stride{g.stride_h, g.stride_w}, pad{g.pad_h, g.pad_w}, dilation{g.dilation_h, g.dilation_w};

  // Each pass: its primitive and oneDNN's name for it, its inputs in the primitive's layouts, its
  // output buffer, and ember's result to check against.
  std::shared_ptr<dnnl::primitive> primitive;
  std::string implementation;
  std::vector<std::pair<int, memory>> args;
  memory result;
  Tensor want;
  Shape result_shape;
  memory::dims result_dims;
  try {
    switch (pass) {
      case cpu::ConvPass::forward: {
        primitive = std::make_shared<dnnl::convolution_forward>(forward);
        implementation = forward.impl_info_str();
        args = {{DNNL_ARG_SRC, reordered_in(x, x_dims, type, forward.src_desc(), *stream)},
                {DNNL_ARG_WEIGHTS, reordered_in(w, w_dims, type, forward.weights_desc(), *stream)}};
        result = memory(forward.dst_desc(), cpu_engine());
        args.emplace_back(DNNL_ARG_DST, result);
        want = conv2d(x, w, {}, stride, pad, dilation, g.groups);
        result_shape = y_shape, result_dims = y_dims;
        break;
      }
      case cpu::ConvPass::input_grad: {
        const dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(algorithm, any(x_dims), any(w_dims), any(y_dims), strides, dilates,
                                                  pad_l, pad_r),
            cpu_engine(), forward);
        primitive = std::make_shared<dnnl::convolution_backward_data>(pd);
        implementation = pd.impl_info_str();
        args = {{DNNL_ARG_DIFF_DST, reordered_in(dy, y_dims, type, pd.diff_dst_desc(), *stream)},
                {DNNL_ARG_WEIGHTS, reordered_in(w, w_dims, type, pd.weights_desc(), *stream)}};
        result = memory(pd.diff_src_desc(), cpu_engine());
        args.emplace_back(DNNL_ARG_DIFF_SRC, result);
        want = conv2d_input_grad(dy, w, x_shape, stride, pad, dilation, g.groups);
        result_shape = x_shape, result_dims = x_dims;
        break;
      }
      case cpu::ConvPass::weight_grad: {
        const dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(algorithm, any(x_dims), any(w_dims), any(y_dims), strides,
                                                     dilates, pad_l, pad_r),
            cpu_engine(), forward);
        primitive = std::make_shared<dnnl::convolution_backward_weights>(pd);
        implementation = pd.impl_info_str();
        args = {{DNNL_ARG_SRC, reordered_in(x, x_dims, type, pd.src_desc(), *stream)},
                {DNNL_ARG_DIFF_DST, reordered_in(dy, y_dims, type, pd.diff_dst_desc(), *stream)}};
        result = memory(pd.diff_weights_desc(), cpu_engine());
        args.emplace_back(DNNL_ARG_DIFF_WEIGHTS, result);
        want = conv2d_weight_grad(x, dy, w_shape, stride, pad, dilation, g.groups);
        result_shape = w_shape, result_dims = w_dims;
        break;
      }
    }
  } catch (const dnnl::error&) {
    return {};  // no implementation of this pass for this shape and type
  }
  auto arg_map = std::make_shared<std::unordered_map<int, memory>>(args.begin(), args.end());
  auto call = [primitive, arg_map, stream, threads] {
    omp_set_num_threads(threads);
    primitive->execute(*stream, *arg_map);
    stream->wait();
  };
  call();
  const double error = relative_error(read_back(result, result_shape, dtype, result_dims, type, *stream), want);
  return {call, error, implementation};
}

#else  // no oneDNN in this build

bool available() { return false; }
std::string identity() { return "oneDNN not built in (install libdnnl-dev and reconfigure)"; }
void sgemm(int64_t, int64_t, int64_t, const float*, const float*, float*, int) {}
ConvRun conv_pass(const Conv2dGeometry&, cpu::ConvPass, DType, int) { return {}; }

#endif

ConvTiming conv_pass_timing(const Conv2dGeometry& g, cpu::ConvPass pass, DType dtype, int threads,
                            const TimingOptions& timing) {
  const ConvRun run = conv_pass(g, pass, dtype, threads);
  if (!run.call) return {};
  const double tolerance = dtype == DType::bf16 ? 3e-2 : 1e-3;
  static const char* const names[] = {"forward", "input gradient", "weight gradient"};
  EMBER_CHECK(run.max_error <= tolerance, "bench: oneDNN's convolution ", names[int(pass)], " differs from ember's by ",
              run.max_error, " of the largest value (tolerance ", tolerance, ") for x (", g.batch, ", ",
              g.in_channels, ", ", g.in_h, ", ", g.in_w, "), ", g.out_channels, " output channels, groups ",
              g.groups);
  return {median_ms(run.call, timing), run.implementation};
}

}  // namespace ember::bench::onednn
