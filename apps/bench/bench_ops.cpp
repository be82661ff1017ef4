#include "apps/bench/bench_ops.h"

#include <cstring>
#include <ostream>
#include <thread>

#include "apps/bench/bench_gemm_cpu.h"
#include "apps/bench/onednn_peer.h"
#include "apps/bench/machine_peak.h"
#include "ops/cpu/gemm_packed.h"
#include "ops/kernels.h"
#include "apps/bench/timing.h"
#include "ember.h"

namespace ember::bench {

namespace {

// max_pool2d's CPU passes as training runs them (u8 window offsets, Note [Max pool window
// offsets]) against the memcpy bandwidth: 2x2 stride 2 on MNIST's first pool and a 64 MiB
// input, and the ResNet stem's 3x3 stride 2 with padding 1 at batch 8 (Note [Max pool by lanes]).
void bench_max_pool(std::ostream& out, Table& table, int threads, double bandwidth) {
  struct Case {
    Shape shape;
    int64_t kernel, stride, pad;
  };
  for (const Case& c : {Case{{128, 16, 28, 28}, 2, 2, 0}, Case{{256, 64, 32, 32}, 2, 2, 0},
                        Case{{8, 64, 112, 112}, 3, 2, 1}}) {
    const Shape& shape = c.shape;
    const Pool2dGeometry g = pool2d_geometry(shape, c.kernel, c.stride, c.pad, "max_pool2d");
    const Shape out_shape{shape[0], shape[1], g.out_h, g.out_w};
    const Tensor x = randn(shape), dy = randn(out_shape), dx = Tensor::empty(shape), y = Tensor::empty(out_shape);
    const Tensor offsets = Tensor::empty(out_shape, {.dtype = DType::u8});
    const double in = double(x.numel()), outs = double(y.numel());
    const double forward_ms = median_ms([&] { cpu::max_pool2d_forward(g, x, y, offsets); });
    const double backward_ms = median_ms([&] { cpu::max_pool2d_backward(g, dy, offsets, dx); });
    const double bytes = 4 * in + 5 * outs;  // each pass: the input plane, the output and its offsets
    std::string size;
    for (int64_t d : shape) {
      if (!size.empty()) size += 'x';
      size += std::to_string(d);
    }
    const std::string window = c.kernel == 2 ? std::string() : detail::concat(" ", c.kernel, "x", c.kernel);
    for (auto [pass, ms] : {std::pair{"fwd", forward_ms}, std::pair{"bwd", backward_ms}}) {
      const std::string name = detail::concat("max_pool", window, " ", pass);
      const double gbps = bytes / (ms * 1e6);
      out << table.row({name, size, std::to_string(threads), fixed(ms, 3), fixed(gbps, 1) + " GB/s",
                        fixed(bandwidth, 1) + " GB/s", fixed(100 * gbps / bandwidth, 1) + "%"})
          << "\n";
    }
  }
}

}  // namespace

void bench_ops(std::ostream& out) {
  const int max_threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<int> thread_counts = {1};
  if (max_threads >= 2) thread_counts.push_back(2);
  const int previous_threads = num_threads();

  out << "ember bench ops: median of 7 blocks after warm-up; f32 unless a row says bf16; peaks measured in this run\n"
      << "cpu: " << cpu_identity() << "; bf16 GEMM: " << bf16_gemm_form()
      << " (Note [Widened bf16 GEMM]; EMBER_BF16_GEMM=amx|dot|widened)\n\n";
  Table table({"op", "size", "threads", "ms", "rate", "peak", "% of peak", "vs ember"}, {16, 14, 7, 10, 16, 16, 9, 8});
  out << table.header() << "\n";
  for (int threads : thread_counts) {
    set_num_threads(threads);
    const double fma_peak = measure_fma_gflops(threads), bf16_peak = bf16_gemm_peak_gflops(threads, fma_peak);
    const double bandwidth = measure_memcpy_gbps(threads);
    bench_gemm_cpu(out, table, threads, fma_peak, bf16_peak);
    for (int64_t n : {256, 512, 1024, 2048}) {
      Tensor a = randn({n, n}), b = randn({n, n});
      const double ms = median_ms([&] { matmul(a, b); });
      const double gflops = 2.0 * double(n) * double(n) * double(n) / (ms * 1e6);
      out << table.row({"matmul", std::to_string(n) + "^3", std::to_string(threads), fixed(ms, 3),
                        fixed(gflops, 1) + " GFLOP/s", fixed(fma_peak, 1) + " GFLOP/s",
                        fixed(100 * gflops / fma_peak, 1) + "%"})
          << "\n";
    }
    for (const char* name : {"add", "mul"}) {
      for (int64_t n : {int64_t(1) << 20, int64_t(1) << 24}) {
        Tensor a = randn({n}), b = randn({n});
        const bool is_add = std::strcmp(name, "add") == 0;
        const double ms = median_ms([&] { is_add ? add(a, b) : mul(a, b); });
        const double gbps = 3.0 * double(n) * 4.0 / (ms * 1e6);  // two reads, one write
        out << table.row({name, std::to_string(n >> 20) + "M", std::to_string(threads), fixed(ms, 3),
                          fixed(gbps, 1) + " GB/s", fixed(bandwidth, 1) + " GB/s",
                          fixed(100 * gbps / bandwidth, 1) + "%"})
            << "\n";
      }
    }
    bench_max_pool(out, table, threads, bandwidth);
  }
  set_num_threads(previous_threads);
  out << "\ngemm ember / gemm eigen: cpu::gemm (ember's packed GEMM) and Eigen on the same f32 operands, timed\n"
         "      in alternating blocks; MxNxK is C (M, N) = A (M, K) B (K, N); matmul: the op, allocation included.\n";
  out << "gemm bf16 / gemm bf16xf32: cpu::gemm_bf16 on the same values, A and B bf16 / A bf16 and B f32\n"
         "      (rounded while packed), f32 C, in the same alternating blocks; vs ember: gemm ember's ms / theirs;\n"
         "      their peak is that of the form running: AMX TDPBF16PS's, measured; vdpbf16ps's, the FMA's times\n"
         "      its measured rate against vfmadd (Note [bf16 peak]); the FMA's for the widened form.\n";
  out << "gemm onednn: " << onednn::identity()
      << (onednn::available() ? ": dnnl_sgemm on the same f32 operands, in the same alternating blocks; vs ember as\n"
                                      "      above (below 1: slower than ember's f32 GEMM).\n" : "\n");
  out << "peak: matmul against the FMA peak (all threads running independent FMA chains);\n"
         "      add/mul against memcpy bandwidth of a 64 MiB buffer (read + write counted): the 1M rows\n"
         "      (12 MiB in all) largely fit in the caches, so they can exceed the DRAM figure;\n"
         "      max_pool fwd/bwd: the 2x2 stride-2 CPU kernels with u8 window offsets (as training saves\n"
         "      them), counting 4 bytes per input and 5 per output each way, against the same bandwidth;\n"
         "      max_pool 3x3: the ResNet stem's 3x3 stride-2 windows with padding 1, counted the same way.\n";
}

}  // namespace ember::bench
