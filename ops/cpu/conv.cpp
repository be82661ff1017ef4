// Convolution on the CPU: im2col + GEMM (ops/cpu/gemm_typed.h), or direct kernels for grouped
// layers with few channels per group (Note [Conv algorithms]); f32, f64 and bf16 (Note [bf16
// convolution]), and f16 on the padded grid (Note [f16 on the grid] in conv_grid_tiles_avx512.h).
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
// fewer than about four tasks per thread (slices write disjoint output columns), unless the
// product has the rows to split itself (Note [Slices for threads]).
//
// Note [Slices for threads]: a slice is a GEMM of its own, which packs all of the group's weights
// again and multiplies them by fewer columns. At batch 1 SE-ResNeXt-50's 7 x 7 layers were cut
// into 7 one-row slices of 7 columns (up to 2048 x 1024 weights packed 7 times, every tile a
// narrow one; perf: narrow_tile_kernel<7> 10% and transpose_rows 14% of the batch-1 forward).
// With at least kRowsToSplit output channels per thread the GEMM splits its own rows over the
// threads (Note [GEMM threads]), so the slices are only cut for layers with fewer.
//
// Note [Column slices]: forward and weight gradient never hold an image's whole column
// matrix. Each task builds the columns of a few output rows at a time, a slice of at most
// kSliceBytes (it stays in L2 between im2col writing it and the GEMM reading it), in a
// workspace from the caching allocator taken once per task. The input gradient needs a whole
// group's columns (col2im gathers from every kernel row): one (image, group) per task, folded
// at once (Note [Input gradient per group]).
// A 1x1, stride-1, unpadded convolution needs no columns at all: the input image already is
// its column matrix.
//
// Note [Conv algorithms]: the algorithms, chosen by shape and pass:
//   "1x1 gemm"     a 1x1, stride-1, unpadded convolution: the GEMMs above read the input image
//                  as the column matrix and the input gradient is written in place (no copies);
//   "padded grid"  the f32, bf16 and f16 passes of a stride-1 layer on AVX-512 (Note [Direct
//                  forward on a padded grid], Note [Weight gradient on a padded grid]): the
//                  forward with 8, 16, 24 or 32 output channels per group, the input gradient
//                  (the forward of the transposed problem, Note [Direct input gradient as a
//                  forward]) with 8 to 32 input channels per group (a multiple of 8), the weight gradient with 4 to
//                  32 output channels per group (a multiple of 4); grouped or not (an ungrouped
//                  weight gradient up to 64 channels, a multiple of 8 with a block of 8 per thread,
//                  its tasks, Note [Grid tasks]; else im2col + GEMM keeps every thread busy). Ungrouped
//                  layers joined on 2026-12-03 (Zen 4, 2 threads, conv2probe, alternated with the
//                  grid off for them): MNIST's 1 -> 16 at 28 x 28 (n 128) forward 0.32-0.34 vs
//                  0.68-0.69 ms, weight gradient 0.38-0.41 vs 1.12-1.16; its 16 -> 32 at 14 x 14
//                  forward 1.41-1.45 vs 2.37-2.40, input gradient 1.42-1.48 vs 2.70-3.24,
//                  weight gradient 2.33-2.38 vs 2.74-2.81; n 8, 32 -> 32 at 64 x 64 forward 3.29
//                  vs 5.50-5.71, input gradient 3.25-3.35 vs 5.99-6.16, weight gradient
//                  4.75-5.08 vs 5.90-6.02; 256 -> 32 at 14 x 14 forward 1.29-1.36 vs 2.48-2.53,
//                  weight gradient 2.20-2.41 vs 3.14-3.24. Against the row kernels below
//                  and im2col + GEMM at SE-ResNeXt's grouped layers (bench kernels, batch 8, 2
//                  threads, best of 3, two alternated runs of each build on shared cores):
//                  forward 1.4x at 28 x 28, 1.6x at 14 x 14, 2.3x at 7 x 7; input gradient 1.5x,
//                  1.7x, 2.3x; weight gradient, in its first form (4 x 6 tiles), 1.1x at 56 x 56
//                  (4 channels per group), even at 28 x 28, 1.5x at 14 x 14 and 1.2x at 7 x 7
//                  (there over im2col + GEMM), and its 8 x 3 tiles 1.3-1.4x faster again at
//                  28 x 28 and below (one thread);
//                  and, grouped, the thin groups (Note [Thin groups on the grid]: 1 or 2 channels
//                  per group, and 4 at a stride) and strided layers (Note [Strided grid]: every
//                  pass; the input gradient as phase forwards, Note [Strided input gradient as
//                  phase forwards]). Against the algorithms before (2026-12-03, Zen 4, 2 threads,
//                  conv2probe, two alternated runs, ms): the small SE-ResNeXt's grouped layers at
//                  n 64, depthwise 32 at 32 x 32 forward 1.0-1.4 vs 7.5-8.5, input gradient
//                  1.1-1.6 vs 2.5-2.8, weight gradient 2.2-2.9 vs 18.8-24.7; 2 per group at
//                  stride 2 from 32 x 32 1.9-2.2 vs 6.4-7.5, 1.7-2.2 vs 6.7-11.9, 2.0 vs
//                  13.8-15.0; 4 per group at stride 2 from 16 x 16 1.8-1.9 vs 4.3-8.2, 1.2-1.4 vs
//                  4.3-4.7, 1.6 vs 6.5-7.3; SE-ResNeXt-50's stride-2 grouped layers at n 8 (8,
//                  16 and 32 per group from 56, 28 and 14): forward 4.0-4.1 vs 7.3-9.0, 3.4 vs
//                  6.9-7.0, 2.7-3.0 vs 3.5-5.0; input gradient 3.6-4.0 vs 11.0-13.7, 3.1-3.4 vs
//                  8.7, 4.4-7.2 vs 5.3-6.1 (six pairs: even); weight gradient 4.3 vs 9.5-10.2,
//                  3.6-4.0 vs 7.1-7.5, 3.1-3.3 vs 5.8;
//   "direct"       the f32 forward of the other grouped layers with 4, 8, 16 or 32 output
//                  channels per group and row stride 1, on AVX-512 (Note [Direct grouped
//                  forward]): SE-ResNeXt's first stage (4 channels per group) and vertical
//                  strides. At SE-ResNeXt's four grouped layers, one thread, min of 4 alternated
//                  rounds under a CI build's load: 56 x 56 3.2x, 28 x 28 2.6x, 14 x 14 1.14x,
//                  7 x 7 1.1x faster than im2col + GEMM. Its input gradient, where the stride is
//                  1, is the same kernel on the transposed problem: 2.9x, 2.7x, 1.6x, 1.03x over
//                  the previous algorithms there; the weight gradient (Note [Direct grouped
//                  weight gradient]) of a vertical stride, rows of at least 16 and 3-wide
//                  kernels: 4.4x at 56 x 56, 1.6x at 28 x 28 (1.05x at 14 x 14 and 0.4x at
//                  7 x 7, which keep im2col + GEMM);
//   "direct"       (scalar, ops/cpu/conv_direct.cpp) the input gradient of the other grouped
//                  layers with at most 4 input and 4 output channels per group (a stride of 2,
//                  2 channels per group, f64) and output rows of at least 16:
//                  its GEMM there has an inner dimension <= 4, and building, then col2im-ing, the
//                  columns costs more than the products. Measured (bench kernels, runs
//                  alternating with EMBER_CONV_ALGORITHM=gemm on 2 shared cores at load 20-60, so
//                  noisy): at 32 x 4, 56 x 56 from on par to 1.7x faster over four pairs of runs.
//                  Scalar direct forward and weight gradients were slower there (about 1.8x and
//                  2x), as was every scalar direct pass at 32 x 8, 28 x 28, so those stay
//                  GEMMs, as do rows shorter than 16 (most of a vector idle);
//   "im2col+gemm"  everything else (forward and weight gradient on column slices; the input
//                  gradient as GEMM then col2im, named "gemm+col2im").
// EMBER_CONV_ALGORITHM=gemm turns "padded grid" and "direct" off, to measure them against
// im2col + GEMM.
//
// Note [col2im without atomics]: each input plane (n, c) is produced by one task, which adds
// the column rows (c, kh, kw) into it in (kh, kw) order, every output row y adding into input
// row y stride + kh dilation - pad: the mirror of im2col, with no division per pixel. Every
// pixel sums its taps in the same (kh, kw) order as a per-pixel gather would (the CUDA kernel
// gathers, one thread per pixel). No two tasks write the same memory, so the result is
// deterministic and needs no atomics.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "ops/conv_weight_pack.h"
#include "ops/kernels.h"
#include "ops/cpu/conv_choice.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_planes_avx512.h"
#include "ops/cpu/gemm_prepacked.h"
#include "ops/cpu/gemm_typed.h"

namespace ember {

// Note [Conv weight packs]: a forward packs its weights into the GEMM's micro-panels on every
// call, once per call for all images (Note [Prepacked A] in gemm_packed.cpp) or per GEMM. For
// inference at batch 1 that is a transposing pass over every weight of the network per image,
// about a tenth of a batch-1 se_resnext50_32x4d forward's CPU time (perf, Zen 5). A caller that
// runs many forwards with the same weights (the folded eval-mode layers of nn/conv_bn.h) keeps
// them packed in a Conv2dWeightPack, rebuilt when the weights change (ops/conv_weight_pack.h).
// The micro-kernels read the same panels either way, so the bits do not change. It costs a
// second copy of the packed layers' weights for as long as the caller keeps the pack.
struct Conv2dWeightPack::Panels {
  std::vector<cpu::PackedA> groups;  // op(A) = w[grp] of the forward's GEMMs, one per group
};

}  // namespace ember

namespace ember::cpu {
namespace {

constexpr int64_t kSliceBytes = int64_t(512) << 10;        // forward, weight gradient: row slices
constexpr int64_t kRowsToSplit = 128;  // output channels per thread for the GEMM to split itself
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
// [c0, c1): col ((c1 - c0) * kH * kW, (oh1 - oh0) * Wo), row (c - c0, kh, kw), rows ldc apart
// (0: packed, ldc = (oh1 - oh0) * Wo).
template <class T>
void im2col(const Conv2dGeometry& g, const T* x, T* col, int64_t c0, int64_t c1, int64_t oh0, int64_t oh1,
            int64_t ldc = 0) {
  const int64_t H = g.in_h, W = g.in_w, Wo = g.out_w, sw = g.stride_w, width = (oh1 - oh0) * Wo;
  const int64_t ld = ldc ? ldc : width, taps = g.kernel_h * g.kernel_w;
  parallel_for(c0, c1, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, taps * width)),
               [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      if constexpr (std::is_same_v<T, float> && kConvPlanesAvx512) {
        if (sw == 1) {  // Note [im2col rows in registers]
          im2col_plane_avx512(g, x + c * H * W, col + (c - c0) * taps * ld, oh0, oh1, ld);
          continue;
        }
      }
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          T* row = col + (((c - c0) * g.kernel_h + kh) * g.kernel_w + kw) * ld;
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

// Every group's weights as op(A) of the GEMMs of a pass, op(A) = w[grp] (M, K) or its transpose,
// packed once per call where the f32 GEMM is ember's, or the bf16 GEMM multiplies pairs, and
// more than one GEMM multiplies them (Note [Prepacked A] in gemm_packed.cpp), or (f32) once for
// many calls where the caller keeps a pack (Note [Conv weight packs]); f64 and single GEMMs call
// gemm_typed.
template <class T>
class GroupWeights {
 public:
  GroupWeights(const Tensor& w, bool trans, int64_t groups, int64_t M, int64_t K, int64_t gemms_per_group,
               Conv2dWeightPack* pack = nullptr)
      : w_(w.data<T>()), trans_(trans), rows_(trans ? K : M), depth_(trans ? M : K), group_(M * K) {
    if constexpr (std::is_same_v<T, float>) {
      if (!f32_gemm_is_ember() || depth_ == 0) return;
      auto build = [&] {
        auto panels = std::make_shared<Conv2dWeightPack::Panels>();
        for (int64_t grp = 0; grp < groups; ++grp)
          panels->groups.push_back(pack_a(trans, rows_, depth_, w_ + grp * group_, K));
        return std::shared_ptr<const Conv2dWeightPack::Panels>(std::move(panels));
      };
      if (pack && !trans) panels_ = pack->panels_for(w, groups, build);
      else if (gemms_per_group > 1) panels_ = build();
    } else if constexpr (is_bf16_v<T>) {
      // Where the bf16 GEMM multiplies pairs (pack_a_bf16 gives no panels elsewhere). A pack is
      // not kept across calls: under autocast the bf16 weights are a new tensor every step.
      if (depth_ == 0 || gemms_per_group < 2) return;
      auto panels = std::make_shared<Conv2dWeightPack::Panels>();
      for (int64_t grp = 0; grp < groups; ++grp) {
        panels->groups.push_back(pack_a_bf16(trans, rows_, depth_, bf16_bits(w_ + grp * group_), K));
        if (!panels->groups.back().panels.defined()) return;
      }
      panels_ = std::move(panels);
    }
  }
  // C (rows, N) = act(op(w[grp]) B + beta C + bias), B (depth, N) row-major.
  void gemm(int64_t grp, int64_t N, const T* B, int64_t ldb, acc_t<T> beta, acc_t<T>* C, int64_t ldc,
            Activation act = Activation::none, GemmBias<acc_t<T>> bias = {}) const {
    if constexpr (std::is_same_v<T, float>) {
      if (panels_) return gemm_packed_a(panels_->groups[size_t(grp)], false, N, B, ldb, beta, C, ldc, act, bias);
    } else if constexpr (is_bf16_v<T>) {
      if (panels_)
        return gemm_packed_a_bf16(panels_->groups[size_t(grp)], false, N, bf16_bits(B), ldb, beta, C, ldc, act, bias);
    }
    const int64_t lda = trans_ ? rows_ : depth_;
    gemm_typed<T>(trans_, false, rows_, N, depth_, w_ + grp * group_, lda, B, ldb, beta, C, ldc, act, bias);
  }

 private:
  const T* w_;
  bool trans_;
  int64_t rows_, depth_, group_;
  std::shared_ptr<const Conv2dWeightPack::Panels> panels_;  // null: gemm_typed packs per GEMM
};

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

// The columns of channels [c0, c1) of one image, col rows (c - c0, kh, kw) -> dx planes c of that
// image (Note [col2im without atomics]). col is in acc_t<T>: a bf16 input gradient sums its
// kernel taps in an f32 plane and rounds it once. Parallel over channels (inline in a task).
template <class T>
void col2im(const Conv2dGeometry& g, const acc_t<T>* col, T* dx, int64_t c0, int64_t c1) {
  using A = acc_t<T>;
  const int64_t H = g.in_h, W = g.in_w, Ho = g.out_h, Wo = g.out_w, sw = g.stride_w, plane = H * W;
  const int64_t taps = g.kernel_h * g.kernel_w;
  const int64_t grain = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, taps * Ho * Wo));
  parallel_for(c0, c1, grain, [&](int64_t cb, int64_t ce) {
    Tensor plane_buffer;
    if constexpr (!std::is_same_v<T, A>) plane_buffer = Tensor::empty({plane}, {.dtype = dtype_of<A>()});
    for (int64_t c = cb; c < ce; ++c) {
      A* out;
      if constexpr (std::is_same_v<T, A>) out = dx + c * plane;
      else out = plane_buffer.data<A>();
      const A* col_c = col + (c - c0) * taps * Ho * Wo;
      if constexpr (std::is_same_v<A, float> && kConvPlanesAvx512) {
        if (sw == 1) {  // Note [col2im in registers]
          col2im_plane_avx512(g, col_c, out);
          if constexpr (!std::is_same_v<T, A>) store_rounded<T>(out, dx + c * plane, plane);
          continue;
        }
      }
      std::fill(out, out + plane, A(0));
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        const int64_t h_off = kh * g.dilation_h - g.pad_h;
        const Range oh = valid_outputs(h_off, g.stride_h, H, Ho);
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          const A* in = col_c + (kh * g.kernel_w + kw) * Ho * Wo;
          const int64_t w_off = kw * g.dilation_w - g.pad_w;
          const Range ow = valid_outputs(w_off, sw, W, Wo);
          for (int64_t y = oh.begin; y < oh.end; ++y) {
            A* o = out + (y * g.stride_h + h_off) * W + w_off;
            const A* src = in + y * Wo;
            if (sw == 1)
              for (int64_t i = ow.begin; i < ow.end; ++i) o[i] += src[i];
            else
              for (int64_t i = ow.begin; i < ow.end; ++i) o[i * sw] += src[i];
          }
        }
      }
      if constexpr (!std::is_same_v<T, A>) store_rounded<T>(out, dx + c * plane, plane);
    }
  });
}

// Note [bf16 convolution]: T is f32, f64 or bf16 (Note [Native bf16 GEMM ops] in
// ops/cpu/gemm_typed.h). A bf16 convolution builds its columns in bf16 (half the traffic of
// f32 columns), and every GEMM accumulates in f32: the forward into a per-task f32 slice that is
// rounded into y while it is still in L2, the input gradient into f32 columns that col2im sums
// in f32, the weight gradient into f32 accumulators summed over images and rounded once. The
// "direct" input gradient is f32/f64 only: bf16 takes gemm+col2im. A bf16 layer that suits the
// padded grid runs there instead, widened into the grid's f32 workspace or multiplied in bf16
// pairs (Note [bf16 on the grid] in conv_grid_tiles_avx512.h, Note [bf16 pairs on the grid] in
// conv_grid_avx512.cpp).
template <class T>
void forward_typed(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                   const Tensor& y, Conv2dWeightPack* pack) {
  using A = acc_t<T>;
  constexpr bool in_place = std::is_same_v<T, A>;  // the GEMM writes y itself
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const T* xp = x.data<T>();
  const BiasFor<T> bias(b);
  T* yp = y.data<T>();
  // Tasks are (image, group, row slice): slices write disjoint output columns.
  const int64_t images_groups = std::max<int64_t>(g.batch * G, 1);
  const bool gemm_splits = M >= kRowsToSplit * num_threads();  // Note [Slices for threads]
  const int64_t want_slices = gemm_splits ? 1 : (4 * num_threads() + images_groups - 1) / images_groups;
  const int64_t rows = slice_rows(g, sizeof(T), want_slices);
  const int64_t slices = (g.out_h + rows - 1) / rows;
  const int64_t col_bytes = g.is_pointwise() ? 0 : aligned_bytes(K * rows * g.out_w, sizeof(T));
  const int64_t acc_bytes = in_place ? 0 : aligned_bytes(M * rows * g.out_w, sizeof(A));
  const GroupWeights<T> weights(w, false, G, M, K, g.batch * slices, pack);
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
    weights.gemm(grp, width, col, ld, A(0), c, ldc, act, {row_bias, nullptr});
    if constexpr (!in_place)
      for (int64_t m = 0; m < M; ++m) store_rounded<T>(c + m * width, out + m * L, width);
  });
}

// Note [Input gradient per group]: each task is one (image, group). Its GEMM writes the group's
// columns (patch x L, in acc_t) into the task's workspace and col2im folds them into the
// group's input channels at once, while they are still in L2. Writing every image's columns
// first and folding them afterwards had sent them through memory: at SE-ResNeXt's 512 channels
// in 32 groups, 14 x 14, batch 8, the 29 MiB of columns made col2im 65% of the pass (perf).
template <class T>
void input_grad_typed(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  using A = acc_t<T>;
  // A pointwise convolution's columns are dx itself, when dx holds acc_t values.
  const bool in_place = std::is_same_v<T, A> && g.is_pointwise();
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const int64_t cg = g.in_channels_per_group(), image = g.in_channels * g.in_plane();
  const T* dyp = dy.data<T>();
  T* dxp = dx.data<T>();
  const GroupWeights<T> weights(w, true, G, M, K, g.batch);  // op(A) = w[grp]^T (K, M)
  for_each_item(g.batch * G, in_place ? 0 : aligned_bytes(K * L, sizeof(A)), [&](int64_t item, std::byte* ws) {
    const int64_t n = item / G, grp = item % G;
    A* dcol = reinterpret_cast<A*>(ws);
    if constexpr (std::is_same_v<T, A>)
      if (in_place) dcol = dxp + n * image + grp * cg * g.in_plane();
    weights.gemm(grp, L, dyp + (n * g.out_channels + grp * M) * L, L, A(0), dcol, L);
    if (in_place) return;
    // A bf16 pointwise layer's f32 columns are dx's planes already: rounded straight into dx, not
    // zeroed and added through col2im (which took 5% of a bf16 se_resnext_cifar training step).
    if (g.is_pointwise()) return store_rounded<T>(dcol, dxp + n * image + grp * cg * g.in_plane(), cg * g.in_plane());
    col2im<T>(g, dcol, dxp + n * image, grp * cg, (grp + 1) * cg);
  });
}

// Note [Weight gradient over all images]: an ungrouped layer whose weights outweigh an image's
// data, M K > (M + K) L (SE-ResNeXt-50's 1x1 layers at 14 x 14 and 7 x 7: up to 2048 x 1024
// weights for 49 pixels), spent its weight gradient moving dw rather than multiplying: a GEMM
// per image reads and writes all of dw for L multiply-adds per weight, and Note [Weight
// gradient partials] adds a zeroed buffer per part and a pass that sums them (perf, one
// SE-ResNeXt-50 training step at batch 8: memset and that sum 5.4% of the step). Instead the
// images' dy rows and columns are gathered side by side, (M, n L) and (K, n L), and one GEMM
// reduces over all of them: dw is written once per chunk of images (as many as fit kGatherBytes
// of gathered values, at least one; beta 0 on the first, so dw needs no zeroing), the copies
// move (M + K) L values per image instead of 2 M K, and the GEMM splits its own rows and columns
// over the threads. Its K blocking does not depend on the thread count, so this path's bits do
// not either (which algorithm a layer takes can: Note [Grid tasks]).
// Measured (2026-12-06, Zen 5, 2 threads, an idle machine, trainprobe alternated with the build
// before): an SE-ResNeXt-50 training step at batch 8, 0.99-1.08 s against 1.11-1.21 s.
constexpr int64_t kGatherBytes = int64_t(16) << 20;

bool gathers_images(const Conv2dGeometry& g) {
  const int64_t M = g.out_channels, K = g.patch_size(), L = g.out_plane();
  return g.groups == 1 && g.batch > 1 && M * K > (M + K) * L;
}

// dw is in acc_t<T>: f32 for bf16, whose result the caller rounds once.
template <class T>
void weight_grad_over_images(const Conv2dGeometry& g, const T* xp, const T* dyp, acc_t<T>* dwp) {
  const int64_t M = g.out_channels, K = g.patch_size(), L = g.out_plane(), image = g.in_channels * g.in_plane();
  const int64_t per_image = (M + K) * L;
  const int64_t chunk = std::clamp<int64_t>(kGatherBytes / int64_t(sizeof(T)) / per_image, 1, g.batch);
  const Tensor gathered = Tensor::empty({chunk * per_image}, {.dtype = dtype_of<T>()});
  T* dy_rows = gathered.data<T>();  // (M, width)
  T* col = dy_rows + chunk * M * L;  // (K, width)
  for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
    const int64_t images = std::min(chunk, g.batch - n0), width = images * L;
    parallel_for(0, images * M, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, L)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const int64_t j = r / M, m = r % M;
                     std::copy_n(dyp + ((n0 + j) * M + m) * L, L, dy_rows + m * width + j * L);
                   }
                 });
    for (int64_t j = 0; j < images; ++j)
      im2col(g, xp + (n0 + j) * image, col + j * L, 0, g.in_channels, 0, g.out_h, width);
    gemm_typed<T>(false, true, M, K, width, dy_rows, width, col, width, acc_t<T>(n0 == 0 ? 0 : 1), dwp, K);
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
  if (gathers_images(g)) {
    if constexpr (in_place) {
      return weight_grad_over_images(g, xp, dyp, dwp);
    } else {  // bf16: summed in f32, rounded once (the partials' sum below was 5% of a bf16 step)
      const Tensor sums = Tensor::empty({dw.numel()}, {.dtype = dtype_of<A>()});
      weight_grad_over_images(g, xp, dyp, sums.data<A>());
      return store_rounded_parallel<T>(sums.data<A>(), dwp, dw.numel());
    }
  }
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
// out = the f32 pass on widened copies, rounded once: an f16 pass off the grid (Note [f16 on the
// grid] in conv_grid_tiles_avx512.h). pass(out32) runs it.
template <class Pass>
void widened_f16_pass(const Tensor& out, Pass&& pass) {
  const Tensor out32 = Tensor::empty(out.shape(), {.dtype = DType::f32});
  pass(out32);
  copy(out32, out);
}
}  // namespace

void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                    const Tensor& y, Conv2dWeightPack* pack) {
  if (use_direct_forward(g, x.dtype(), act)) return conv2d_direct_forward(g, x, w, b, act, y);
  if (x.dtype() == DType::f16)
    return widened_f16_pass(y, [&](const Tensor& y32) {
      conv2d_forward(g, widened_to_f32(x), widened_to_f32(w), widened_to_f32(b), act, y32, nullptr);
    });
  dispatch_gemm(x.dtype(), "conv2d", [&]<class T>(TypeTag<T>) { forward_typed<T>(g, x, w, b, act, y, pack); });
}
// Note [Non-finite values on the grid]: the padded grid multiplies values that im2col + GEMM never
// pairs: the weight gradient sums dy * x over every grid position, where dy is 0 at the columns
// it throws away but x holds real input values, and the input gradient as a forward (the row
// kernel too) multiplies dy's zero padding by the weights. Where those x values or weights are
// infinite or NaN, 0 * inf turned weights that im2col + GEMM computes finite into NaN. So these
// passes run only on finite x (weight gradient) or finite weights (input gradient), checked in
// one streaming pass (all_finite); anything else takes im2col + GEMM and gets its values. The
// forward is unaffected: it never keeps a thrown-away output, and its padding taps multiply
// zeros by the weights as im2col + GEMM does.
void conv2d_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const bool as_forward = use_direct_input_grad(g, dy.dtype()), on_grid = use_grid_input_grad(g, dy.dtype());
  if ((as_forward || on_grid) && all_finite(w)) {
    if (as_forward) return conv2d_direct_input_grad_as_forward(g, dy, w, dx);
    return conv2d_grid_input_grad(g, dy, w, dx);
  }
  if (dy.dtype() == DType::f16)
    return widened_f16_pass(dx, [&](const Tensor& dx32) {
      conv2d_input_grad(g, widened_to_f32(dy), widened_to_f32(w), dx32);
    });
  dispatch_gemm(dy.dtype(), "conv2d_input_grad", [&]<class T>(TypeTag<T>) {
    if constexpr (!is_bf16_v<T>) {  // Note [bf16 convolution]
      if (use_direct(g, ConvPass::input_grad)) return conv2d_direct_input_grad<T>(g, dy, w, dx);
    }
    input_grad_typed<T>(g, dy, w, dx);
  });
}
void conv2d_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  if (use_grid_weight_grad(g, x.dtype()) && all_finite(x)) return conv2d_grid_weight_grad(g, x, dy, dw);
  if (x.dtype() == DType::f16)
    return widened_f16_pass(dw, [&](const Tensor& dw32) {
      conv2d_weight_grad(g, widened_to_f32(x), widened_to_f32(dy), dw32);
    });
  if (use_direct_weight_grad(g, x.dtype())) return conv2d_direct_weight_grad(g, x, dy, dw);
  dispatch_gemm(x.dtype(), "conv2d_weight_grad", [&]<class T>(TypeTag<T>) { weight_grad_typed<T>(g, x, dy, dw); });
}

}  // namespace ember::cpu
