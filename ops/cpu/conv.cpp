// Convolution on the CPU: im2col + GEMM (ops/cpu/gemm_typed.h), or a direct input gradient for
// grouped layers with few channels per group (Note [Conv algorithms]); f32, f64 and bf16 (Note
// [bf16 convolution]).
//
// One image's column matrix is col (Cin * kH * kW, Ho * Wo): row (c, kh, kw) holds the input
// pixels that kernel tap (kh, kw) of channel c reads for every output position. With groups it
// is (groups, patch, Ho * Wo) and every product below is one GEMM per (image, group):
//   forward       y[n, g]    (Cout/G, L)  = w[g] (Cout/G, patch) @ col[n, g] (patch, L)
//   input grad    dcol[n, g] (patch, L)   = w[g]^T @ dy[n, g],  then dx[n] = col2im(dcol[n])
//   weight grad   dw[g]      (Cout/G, patch) += dy[n, g] @ col[n, g]^T  (summed over n)
// where patch = Cin/G * kH * kW and L = Ho * Wo.
//
// Note [Batched over images and groups]: the (image, group) GEMMs form one strided batched
// GEMM. When there are at least as many of them as threads, each thread takes whole GEMMs
// (gemm() and the copy loops run inline inside a parallel_for), so a depthwise or grouped
// convolution does not wake the pool once per tiny product; when there are fewer, they run one
// after another and each GEMM splits its rows (and im2col its channels) across the threads.
// The forward also cuts each product into output-row slices when a small batch would give
// fewer than about four tasks per thread (slices write disjoint output columns).
//
// Note [Column slices]: forward and weight gradient never hold an image's whole column
// matrix. Each task builds the columns of a few output rows at a time, a slice of at most
// kSliceBytes (it stays in L2 between im2col writing it and the GEMM reading it), in a
// workspace from the caching allocator taken once per task. The input gradient needs whole
// images (col2im gathers from every kernel row): its column buffers are bounded by
// kColumnBudgetBytes, and the batch runs in chunks of as many images as fit (at least one).
// A 1x1, stride-1, unpadded convolution needs no columns at all: the input image already is
// its column matrix.
//
// Note [Conv algorithms]: three algorithms, chosen by shape and pass:
//   "1x1 gemm"     a 1x1, stride-1, unpadded convolution: the GEMMs above read the input image
//                  as the column matrix and the input gradient is written in place (no copies);
//   "direct"       the input gradient of a grouped layer with at most 4 input and 4 output
//                  channels per group and output rows of at least 16 (ops/cpu/conv_direct.cpp):
//                  its GEMM there has an inner dimension <= 4, and building, then col2im-ing, the
//                  columns costs more than the products. Measured (bench kernels, runs
//                  alternating with EMBER_CONV_ALGORITHM=gemm on 2 shared cores at load 20-60, so
//                  noisy): at 32 x 4, 56 x 56 from on par to 1.7x faster over four pairs of runs.
//                  Direct forward and weight gradients were slower there (about 1.8x and 2x), as
//                  was every direct pass at 32 x 8, 28 x 28, so those stay
//                  GEMMs, as do rows shorter than 16 (most of a vector idle);
//   "im2col+gemm"  everything else (forward and weight gradient on column slices; the input
//                  gradient as GEMM then col2im, named "gemm+col2im").
// EMBER_CONV_ALGORITHM=gemm turns "direct" off, to measure the two against each other.
//
// Note [col2im without atomics]: col2im gathers. Each input row (n, c, h) is produced by one
// task, which visits exactly the kernel rows kh whose output row oh = (h + pad - kh dilation) /
// stride is integral and in range, and adds the column entries that read each pixel of the row.
// No two tasks write the same memory, so the result is deterministic and needs no atomics
// (the CUDA kernel can use the same formulation with one thread per pixel).
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string_view>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "ops/kernels.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/gemm_typed.h"

namespace ember::cpu {
namespace {

constexpr int64_t kColumnBudgetBytes = int64_t(64) << 20;  // input gradient: whole images
constexpr int64_t kSliceBytes = int64_t(512) << 10;        // forward, weight gradient: row slices
constexpr int64_t kElementsPerTask = 1 << 15;  // grain of the copy loops, in elements

// Runs body(i, workspace) for i in [0, count): whole items per thread when there are enough of
// them, else one after another so that the parallel loops inside body use the threads. Each
// task gets its own workspace of `workspace_bytes` bytes from the caching allocator (null when 0).
void for_each_item(int64_t count, int64_t workspace_bytes, const std::function<void(int64_t, std::byte*)>& body) {
  auto run = [&](int64_t b, int64_t e) {
    Tensor workspace = workspace_bytes ? Tensor::empty({workspace_bytes}, {.dtype = DType::u8}) : Tensor();
    std::byte* ws = workspace_bytes ? reinterpret_cast<std::byte*>(workspace.data<uint8_t>()) : nullptr;
    for (int64_t i = b; i < e; ++i) body(i, ws);
  };
  if (count >= num_threads() && count > 1) parallel_for(0, count, 1, run);
  else run(0, count);
}

// Bytes for `elements` values, rounded up to a cache line (workspace parts start aligned).
int64_t aligned_bytes(int64_t elements, size_t element_size) {
  return (elements * int64_t(element_size) + 63) / 64 * 64;
}

// x: (channels, H, W) of one image -> the columns of output rows [oh0, oh1) for channels
// [c0, c1): col ((c1 - c0) * kH * kW, (oh1 - oh0) * Wo), row (c - c0, kh, kw).
template <class T>
void im2col(const Conv2dGeometry& g, const T* x, T* col, int64_t c0, int64_t c1, int64_t oh0, int64_t oh1) {
  const int64_t H = g.in_h, W = g.in_w, Wo = g.out_w, sw = g.stride_w, width = (oh1 - oh0) * Wo;
  const int64_t taps = g.kernel_h * g.kernel_w;
  parallel_for(c0, c1, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, taps * width)),
               [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          T* row = col + (((c - c0) * g.kernel_h + kh) * g.kernel_w + kw) * width;
          const int64_t w_off = kw * g.dilation_w - g.pad_w;
          const Range ow = valid_outputs(w_off, sw, W, Wo);
          for (int64_t oh = oh0; oh < oh1; ++oh) {
            T* out = row + (oh - oh0) * Wo;
            const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
            if (ih < 0 || ih >= H) {
              std::fill(out, out + Wo, T(0));
              continue;
            }
            const T* in = x + (c * H + ih) * W + w_off;
            std::fill(out, out + ow.begin, T(0));
            if (sw == 1) std::copy(in + ow.begin, in + ow.end, out + ow.begin);
            else
              for (int64_t o = ow.begin; o < ow.end; ++o) out[o] = in[o * sw];
            std::fill(out + ow.end, out + Wo, T(0));
          }
        }
      }
    }
  });
}

// Output rows per column slice: at most kSliceBytes of columns (Note [Column slices]), and
// at most ceil(Ho / want_slices) rows so that small batches still make enough tasks.
int64_t slice_rows(const Conv2dGeometry& g, size_t element_size, int64_t want_slices = 1) {
  const int64_t all = std::max<int64_t>(g.out_h, 1);
  const int64_t row_bytes = g.patch_size() * g.out_w * int64_t(element_size);
  const int64_t cap = g.is_pointwise() ? all : std::max<int64_t>(1, kSliceBytes / std::max<int64_t>(row_bytes, 1));
  return std::clamp<int64_t>((all + want_slices - 1) / want_slices, 1, cap);
}

// The columns of image x (Cin, H, W), group grp, output rows [oh0, oh1): a (patch, (oh1 - oh0)
// * Wo) matrix with row stride ld, built in `workspace`, or the input itself for a pointwise
// convolution (whose output positions are its input positions).
template <class T>
std::pair<const T*, int64_t> columns(const Conv2dGeometry& g, const T* x, int64_t grp, T* workspace, int64_t oh0,
                                     int64_t oh1) {
  const int64_t cg = g.in_channels_per_group();
  if (g.is_pointwise()) return {x + grp * cg * g.in_plane() + oh0 * g.out_w, g.in_plane()};
  im2col(g, x, workspace, grp * cg, (grp + 1) * cg, oh0, oh1);
  return {workspace, (oh1 - oh0) * g.out_w};
}

// col rows (c, kh, kw) of one image -> dx rows r = c * H + h for r in [r0, r1) (see
// Note [col2im without atomics]). col is in acc_t<T>: a bf16 input gradient sums its kernel
// taps in an f32 row and rounds it once.
template <class T>
void col2im(const Conv2dGeometry& g, const acc_t<T>* col, T* dx, int64_t r0, int64_t r1) {
  using A = acc_t<T>;
  const int64_t H = g.in_h, W = g.in_w, Ho = g.out_h, Wo = g.out_w, sh = g.stride_h, sw = g.stride_w;
  Tensor row_buffer;
  if constexpr (!std::is_same_v<T, A>) row_buffer = Tensor::empty({W}, {.dtype = dtype_of<A>()});
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t c = r / H, ih = r % H;
    A* out;
    if constexpr (std::is_same_v<T, A>) out = dx + r * W;
    else out = row_buffer.data<A>();
    std::fill(out, out + W, A(0));
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const int64_t t = ih + g.pad_h - kh * g.dilation_h;
      if (t < 0 || t % sh != 0 || t / sh >= Ho) continue;
      const int64_t oh = t / sh;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const A* in = col + (((c * g.kernel_h + kh) * g.kernel_w + kw) * Ho + oh) * Wo;
        const int64_t w_off = kw * g.dilation_w - g.pad_w;
        const Range ow = valid_outputs(w_off, sw, W, Wo);
        A* o = out + w_off;
        if (sw == 1)
          for (int64_t i = ow.begin; i < ow.end; ++i) o[i] += in[i];
        else
          for (int64_t i = ow.begin; i < ow.end; ++i) o[i * sw] += in[i];
      }
    }
    if constexpr (!std::is_same_v<T, A>) store_rounded<T>(out, dx + r * W, W);
  }
}

// The input gradient's whole-image column buffers, of acc_t elements, in chunks of images that
// fit the budget (Note [Column slices]). With `in_place`, a pointwise convolution needs none.
template <class A>
struct ColumnChunks {
  int64_t per_image = 0;  // column elements per image (0: the GEMM writes dx in place)
  int64_t images = 1;     // images per chunk
  Tensor workspace;

  ColumnChunks(const Conv2dGeometry& g, bool in_place) {
    if (g.is_pointwise() && in_place) {
      images = std::max<int64_t>(g.batch, 1);
      return;
    }
    per_image = g.groups * g.patch_size() * g.out_plane();
    images = std::clamp<int64_t>(kColumnBudgetBytes / std::max<int64_t>(1, per_image * int64_t(sizeof(A))), 1,
                                 std::max<int64_t>(g.batch, 1));
    workspace = Tensor::empty({images * per_image}, {.dtype = dtype_of<A>()});
  }
  A* columns(int64_t i) const { return workspace.data<A>() + i * per_image; }
};

// Note [bf16 convolution]: T is f32, f64 or bf16 (Note [Native bf16 GEMM ops] in
// ops/cpu/gemm_typed.h). A bf16 convolution builds its columns in bf16 (half the traffic of
// f32 columns), and every GEMM accumulates in f32: the forward into a per-task f32 slice that is
// rounded into y while it is still in L2, the input gradient into f32 columns that col2im sums
// in f32, the weight gradient into f32 accumulators summed over images and rounded once. The
// "direct" input gradient is f32/f64 only: bf16 takes gemm+col2im.
template <class T>
void forward_typed(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                   const Tensor& y) {
  using A = acc_t<T>;
  constexpr bool in_place = std::is_same_v<T, A>;  // the GEMM writes y itself
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const BiasFor<T> bias(b);
  T* yp = y.data<T>();
  // Tasks are (image, group, row slice): slices write disjoint output columns.
  const int64_t images_groups = std::max<int64_t>(g.batch * G, 1);
  const int64_t rows = slice_rows(g, sizeof(T), (4 * num_threads() + images_groups - 1) / images_groups);
  const int64_t slices = (g.out_h + rows - 1) / rows;
  const int64_t col_bytes = g.is_pointwise() ? 0 : aligned_bytes(K * rows * g.out_w, sizeof(T));
  const int64_t acc_bytes = in_place ? 0 : aligned_bytes(M * rows * g.out_w, sizeof(A));
  for_each_item(g.batch * G * slices, col_bytes + acc_bytes, [&](int64_t item, std::byte* ws) {
    const int64_t n = item / (G * slices), grp = item / slices % G, oh0 = item % slices * rows;
    const int64_t oh1 = std::min(g.out_h, oh0 + rows), width = (oh1 - oh0) * g.out_w;
    T* out = yp + (n * g.out_channels + grp * M) * L + oh0 * g.out_w;
    A* c;
    int64_t ldc;
    if constexpr (in_place) c = out, ldc = L;
    else c = reinterpret_cast<A*>(ws + col_bytes), ldc = width;
    const auto [col, ld] =
        columns(g, xp + n * g.in_channels * g.in_plane(), grp, reinterpret_cast<T*>(ws), oh0, oh1);
    const A* row_bias = bias.data() ? bias.data() + grp * M : nullptr;  // added in the GEMM's epilogue
    gemm_typed<T>(false, false, M, width, K, wp + grp * M * K, K, col, ld, A(0), c, ldc, act, {row_bias, nullptr});
    if constexpr (!in_place)
      for (int64_t m = 0; m < M; ++m) store_rounded<T>(c + m * width, out + m * L, width);
  });
}

template <class T>
void input_grad_typed(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  using A = acc_t<T>;
  constexpr bool in_place = std::is_same_v<T, A>;
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const T* dyp = dy.data<T>();
  const T* wp = w.data<T>();
  T* dxp = dx.data<T>();
  const int64_t image = g.in_channels * g.in_plane();
  ColumnChunks<A> cols(g, in_place);
  for (int64_t n0 = 0; n0 < g.batch; n0 += cols.images) {
    const int64_t count = std::min(cols.images, g.batch - n0);
    for_each_item(count * G, 0, [&](int64_t item, std::byte*) {
      const int64_t i = item / G, grp = item % G, n = n0 + i;
      A* dcol = cols.per_image ? cols.columns(i) : nullptr;
      if constexpr (in_place)
        if (!dcol) dcol = dxp + n * image;  // pointwise: dx is the column matrix
      gemm_typed<T>(true, false, K, L, M, wp + grp * M * K, K, dyp + (n * g.out_channels + grp * M) * L, L, A(0),
                    dcol + grp * K * L, L);
    });
    if (!cols.per_image) continue;
    const int64_t rows = g.in_channels * g.in_h;
    const int64_t grain = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, g.kernel_h * g.kernel_w * g.in_w));
    parallel_for(0, count * rows, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e;) {
        const int64_t i = r / rows, r0 = r % rows, r1 = std::min(rows, r0 + (e - r));
        col2im<T>(g, cols.columns(i), dxp + (n0 + i) * image, r0, r1);
        r += r1 - r0;
      }
    });
  }
}

// Note [Weight gradient partials]: dw sums over the images. The images are dealt round-robin
// to `parts` accumulators (dw itself when it is of the accumulating type, and zeroed buffers),
// and each (part, group) pair is one task that alone writes its rows, so threads never write the
// same memory; the buffers are summed into dw at the end (rounded once for bf16). There are about
// four tasks per thread (parts = 1 once the groups alone provide them), so that a thread whose
// core is busy just takes fewer.
template <class T>
void weight_grad_typed(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  using A = acc_t<T>;
  constexpr bool in_place = std::is_same_v<T, A>;  // dw is accumulator 0
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const T* xp = x.data<T>();
  const T* dyp = dy.data<T>();
  T* dwp = dw.data<T>();
  const int64_t weights = dw.numel();
  const int64_t parts = std::clamp<int64_t>((4 * num_threads() + G - 1) / G, 1, std::max<int64_t>(g.batch, 1));
  const int64_t buffers = parts - (in_place ? 1 : 0);
  Tensor partials = buffers ? Tensor::empty({buffers * weights}, {.dtype = dtype_of<A>()}) : Tensor();
  A* pp = buffers ? partials.data<A>() : nullptr;
  if (buffers) std::fill(pp, pp + buffers * weights, A(0));
  auto accumulator = [&](int64_t part) -> A* {
    if constexpr (in_place) return part == 0 ? dwp : pp + (part - 1) * weights;
    else return pp + part * weights;
  };
  if constexpr (in_place) std::fill(dwp, dwp + weights, T(0));

  const int64_t rows = slice_rows(g, sizeof(T));
  const int64_t workspace = g.is_pointwise() ? 0 : aligned_bytes(K * rows * g.out_w, sizeof(T));
  for_each_item(parts * G, workspace, [&](int64_t item, std::byte* ws) {
    const int64_t part = item / G, grp = item % G;
    A* acc = accumulator(part) + grp * M * K;
    for (int64_t n = part; n < g.batch; n += parts) {
      const T* dy_n = dyp + (n * g.out_channels + grp * M) * L;
      for (int64_t oh0 = 0; oh0 < g.out_h; oh0 += rows) {
        const int64_t oh1 = std::min(g.out_h, oh0 + rows);
        const auto [col, ld] =
            columns(g, xp + n * g.in_channels * g.in_plane(), grp, reinterpret_cast<T*>(ws), oh0, oh1);
        gemm_typed<T>(false, true, M, K, (oh1 - oh0) * g.out_w, dy_n + oh0 * g.out_w, L, col, ld, A(1), acc, K);
      }
    }
  });
  if (parts == 1 && in_place) return;
  parallel_for(0, weights, kElementsPerTask, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      A sum = accumulator(0)[j];
      for (int64_t part = 1; part < parts; ++part) sum += accumulator(part)[j];
      dwp[j] = T(sum);
    }
  });
}

}  // namespace

namespace {
bool use_direct(const Conv2dGeometry& g, ConvPass pass) {
  static const bool gemm_only = [] {
    const char* v = std::getenv("EMBER_CONV_ALGORITHM");
    return v && std::string_view(v) == "gemm";
  }();
  return !gemm_only && pass == ConvPass::input_grad && conv2d_direct_suits(g);
}
}  // namespace

const char* conv2d_algorithm(const Conv2dGeometry& g, ConvPass pass) {
  if (g.is_pointwise()) return "1x1 gemm";
  if (use_direct(g, pass)) return "direct";
  return pass == ConvPass::input_grad ? "gemm+col2im" : "im2col+gemm";
}

void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                    const Tensor& y) {
  dispatch_gemm(x.dtype(), "conv2d", [&]<class T>(TypeTag<T>) { forward_typed<T>(g, x, w, b, act, y); });
}
void conv2d_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  dispatch_gemm(dy.dtype(), "conv2d_input_grad", [&]<class T>(TypeTag<T>) {
    if constexpr (!is_bf16_v<T>) {  // Note [bf16 convolution]
      if (use_direct(g, ConvPass::input_grad)) return conv2d_direct_input_grad<T>(g, dy, w, dx);
    }
    input_grad_typed<T>(g, dy, w, dx);
  });
}
void conv2d_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  dispatch_gemm(x.dtype(), "conv2d_weight_grad", [&]<class T>(TypeTag<T>) { weight_grad_typed<T>(g, x, dy, dw); });
}

}  // namespace ember::cpu
