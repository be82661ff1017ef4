// The sample kernels on the simulator, each against a CPU loop.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "device_buffer.h"
#include "sim_execution.h"
#include "sample_kernels.h"
#include "support/test_support.h"

namespace tk = ember::test_kernels;
using ember::testing::DeviceBuffer;
using ember::testing::for_each_sim_execution;

namespace {
std::vector<float> ramp(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * float((i * 37) % 101 - 50);
  return v;
}
}  // namespace

TEST_CASE("saxpy with a grid-stride loop covers every item exactly once") {
  for_each_sim_execution([&] {
    // 2 blocks of 96 threads (3 warps each) for 1000 items: each thread loops several times.
    const int n = 1000;
    const std::vector<float> x = ramp(n, 0.5f), y = ramp(n, -0.25f);
    DeviceBuffer<float> dx(x), dy(y);
    tk::saxpy(n, 3.0f, dx.get(), dy.get(), 2, 96);
    const std::vector<float> out = dy.download();
    for (int i = 0; i < n; ++i) REQUIRE(out[i] == 3.0f * x[i] + y[i]);  // exact: same float ops
  });
}

TEST_CASE("block reduction with static shared memory, __syncthreads and warp shuffles") {
  for_each_sim_execution([&] {
    const int n = 5000, blocks = 3;
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = float(i % 17);  // small integers: float sums are exact
    DeviceBuffer<float> dx(x), sums(blocks);
    tk::block_sums(dx.get(), n, sums.get(), blocks);
    const std::vector<float> got = sums.download();
    for (int b = 0; b < blocks; ++b) {
      double expected = 0;
      for (int i = b * 256; i < n; i += 256 * blocks)
        for (int t = 0; t < 256 && i + t < n; ++t) expected += x[i + t];
      REQUIRE(got[b] == float(expected));
    }
    // The same kernel again: static shared memory is reused across launches.
    tk::block_sums(dx.get(), n, sums.get(), blocks);
    REQUIRE(sums.download() == got);
  });
}

TEST_CASE("tiled transpose through dynamic shared memory, ragged edges") {
  for_each_sim_execution([&] {
    for (auto [rows, cols] : {std::pair{45, 70}, std::pair{32, 32}, std::pair{1, 33}}) {
      const std::vector<float> x = ramp(rows * cols, 1.0f);
      DeviceBuffer<float> dx(x), dy(size_t(rows) * cols);
      tk::transpose(dx.get(), dy.get(), rows, cols);
      const std::vector<float> y = dy.download();
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) REQUIRE(y[c * rows + r] == x[r * cols + c]);
    }
  });
}

TEST_CASE("atomics: counting, integer and float max, compare-and-swap") {
  for_each_sim_execution([&] {
    const int n = 777, classes = 7;
    std::vector<int> labels(n);
    std::vector<float> values(n);
    for (int i = 0; i < n; ++i) {
      labels[i] = (i * 5) % classes;
      values[i] = std::sin(float(i)) * 100.0f;
    }
    DeviceBuffer<int> dl(labels), counts(std::vector<int>(classes, 0)), max_label(std::vector<int>{-1}),
        first(std::vector<int>{-1});
    DeviceBuffer<float> dv(values), max_value(std::vector<float>{-std::numeric_limits<float>::infinity()});
    tk::atomics(dl.get(), dv.get(), n, counts.get(), max_label.get(), max_value.get(), first.get());
    std::vector<int> expected(classes, 0);
    for (int l : labels) ++expected[l];
    REQUIRE(counts.download() == expected);
    REQUIRE(max_label.download()[0] == classes - 1);
    REQUIRE(max_value.download()[0] == *std::max_element(values.begin(), values.end()));
    const int f = first.download()[0];
    REQUIRE((f >= 0 && f < n));
  });
}

TEST_CASE("ballot, any and all per warp") {
  for_each_sim_execution([&] {
    const int threads = 96;  // warps: mixed, all positive, none positive
    std::vector<float> x(threads);
    for (int i = 0; i < 32; ++i) x[i] = i % 3 == 0 ? 1.0f : -1.0f;
    for (int i = 32; i < 64; ++i) x[i] = 2.0f;
    for (int i = 64; i < 96; ++i) x[i] = -2.0f;
    DeviceBuffer<float> dx(x);
    DeviceBuffer<int> positives(3), any(3), all(3);
    tk::ballot(dx.get(), threads, positives.get(), any.get(), all.get());
    REQUIRE(positives.download() == std::vector<int>{11, 32, 0});
    REQUIRE(any.download() == std::vector<int>{1, 1, 0});
    REQUIRE(all.download() == std::vector<int>{0, 1, 0});
  });
}

TEST_CASE("shuffle variants follow CUDA's lane rules, including width") {
  for_each_sim_execution([&] {
    DeviceBuffer<int> out(32 * 4);
    tk::shuffles(out.get());
    const std::vector<int> got = out.download();
    for (int lane = 0; lane < 32; ++lane) {
      INFO("lane " << lane);
      REQUIRE(got[4 * lane + 0] == (lane % 8 >= 3 ? lane - 3 : lane));    // up 3 within 8
      REQUIRE(got[4 * lane + 1] == (lane % 16 + 5 < 16 ? lane + 5 : lane));  // down 5 within 16
      REQUIRE(got[4 * lane + 2] == (lane ^ 1));                           // butterfly
      REQUIRE(got[4 * lane + 3] == (lane / 8) * 8 + 7);                   // broadcast lane 7 of each 8
    }
  });
}

TEST_CASE("dynamic shared memory up to the limit, and beyond it after opting in") {
  for_each_sim_execution([&] {
    DeviceBuffer<int> out(1);
    tk::fill_shared(48 * 1024, out.get());
    REQUIRE(out.download()[0] == 48 * 1024);
    tk::allow_fill_shared(100 * 1024);
    tk::fill_shared(100 * 1024, out.get());
    REQUIRE(out.download()[0] == 100 * 1024);
  });
}
