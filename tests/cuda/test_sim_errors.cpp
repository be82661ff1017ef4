// What the simulator must refuse or report, as a GPU would (or should have).
#include <string>
#include <vector>

#include "device_buffer.h"
#include "sim_execution.h"
#include "sample_kernels.h"
#include "support/test_support.h"

namespace tk = ember::test_kernels;
using Catch::Matchers::Contains;
using ember::testing::DeviceBuffer;
using ember::testing::for_each_sim_execution;

TEST_CASE("more than 1024 threads per block is a launch error naming the kernel") {
  for_each_sim_execution([&] {
    DeviceBuffer<float> x(std::vector<float>(2048, 1.0f)), y(std::vector<float>(2048, 0.0f));
    REQUIRE_THROWS_WITH(tk::saxpy(2048, 1.0f, x.get(), y.get(), 1, 1025),
                        Contains("saxpy_kernel") && Contains("expected 1 to 1024 threads per block, got 1025"));
    REQUIRE_THROWS_WITH(tk::saxpy(2048, 1.0f, x.get(), y.get(), 0, 32), Contains("expected a grid of 1 to"));
    // The limit itself is fine. (1024 OS threads take seconds to start under ThreadSanitizer,
    // which gcc announces with __SANITIZE_THREAD__; there the largest block is checked at 256.)
  #if defined(__SANITIZE_THREAD__)
    const unsigned largest = 256;
  #else
    const unsigned largest = 1024;
  #endif
    tk::saxpy(2048, 1.0f, x.get(), y.get(), 2, largest);
    REQUIRE(y.download() == std::vector<float>(2048, 1.0f));
  });
}

TEST_CASE("dynamic shared memory over the limit is a launch error") {
  for_each_sim_execution([&] {
    DeviceBuffer<int> out(1);
    REQUIRE_THROWS_WITH(tk::fill_shared(300 * 1024, out.get()),
                        Contains("fill_shared_kernel") && Contains("bytes of dynamic shared memory") &&
                            Contains("got 307200"));
    REQUIRE_THROWS_WITH(tk::allow_fill_shared(300 * 1024), Contains("cudaFuncSetAttribute"));
  });
}

TEST_CASE("__syncthreads after an early return is an error, not a hang") {
  for_each_sim_execution([&] {
    DeviceBuffer<float> out(64);
    REQUIRE_THROWS_WITH(tk::early_return_then_syncthreads(out.get()),
                        Contains("early_return_kernel") && Contains("__syncthreads") && Contains("exited"));
  });
}

TEST_CASE("__syncthreads in divergent branches is an error naming both lines") {
  for_each_sim_execution([&] {
    DeviceBuffer<float> out(64);
    REQUIRE_THROWS_WITH(tk::syncthreads_in_branches(out.get()),
                        Contains("divergent __syncthreads") && Contains("sample_kernels.cu"));
  });
}

TEST_CASE("warp operations whose mask lanes do not all take part are errors") {
  for_each_sim_execution([&] {
    DeviceBuffer<float> out(64);
    REQUIRE_THROWS_WITH(tk::shuffle_after_lanes_exited(out.get()),
                        Contains("__shfl_down_sync") && Contains("exited"));
    REQUIRE_THROWS_WITH(tk::shuffle_in_partial_warp(out.get()),
                        Contains("__shfl_xor_sync") && Contains("do not exist") && Contains("48 threads"));
    REQUIRE_THROWS_WITH(tk::shuffle_reads_outside_mask(out.get()),
                        Contains("lane 15") && Contains("reads lane 16") && Contains("0xffff"));
  });
}

TEST_CASE("__trap() fails the launch naming the thread") {
  for_each_sim_execution([&] {
    DeviceBuffer<float> out(32);
    REQUIRE_THROWS_WITH(tk::trap_in_thread_3(out.get()),
                        Contains("trap_kernel") && Contains("thread (3,0,0)") && Contains("__trap() called"));
  });
}

TEST_CASE("the simulator keeps working after a failed launch") {
  for_each_sim_execution([&] {
    DeviceBuffer<float> out(64);
    for (int i = 0; i < 3; ++i) REQUIRE_THROWS(tk::early_return_then_syncthreads(out.get()));
    DeviceBuffer<float> x(std::vector<float>(100, 2.0f)), y(std::vector<float>(100, 1.0f));
    tk::saxpy(100, 0.5f, x.get(), y.get(), 1, 64);
    REQUIRE(y.download() == std::vector<float>(100, 2.0f));
  });
}
