// The runtime layer (cuda/runtime.h) over the simulator's device.
#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "cuda/runtime.h"
#include "support/test_support.h"

using Catch::Matchers::Contains;
namespace cuda = ember::cuda;

TEST_CASE("the simulator is one available device") {
  REQUIRE(cuda::backend_name() == "simulator");
  REQUIRE(cuda::is_available());
  REQUIRE(cuda::init());
  REQUIRE(cuda::device_count() == 1);
  const cuda::DeviceProperties p = cuda::device_properties(0);
  REQUIRE(p.name == "ember SIMT simulator");
  REQUIRE(p.warp_size == 32);
  REQUIRE(p.max_threads_per_block == 1024);
  REQUIRE(p.shared_per_block == 48 * 1024);
  REQUIRE(cuda::current_device() == 0);
  REQUIRE_THROWS_WITH(cuda::device_properties(1), Contains("expected a device index in [0, 1), got 1"));
}

TEST_CASE("memcpy round trip host -> device -> device -> host, memset") {
  std::vector<int> host(1000);
  for (int i = 0; i < 1000; ++i) host[i] = i * i;
  const size_t bytes = host.size() * sizeof(int);
  void* a = cuda::malloc_device(bytes);
  void* b = cuda::malloc_device(bytes);
  cuda::memcpy(a, host.data(), bytes, cuda::CopyKind::host_to_device);
  cuda::memcpy(b, a, bytes, cuda::CopyKind::device_to_device);
  std::vector<int> back(1000, -1);
  cuda::memcpy(back.data(), b, bytes, cuda::CopyKind::device_to_host);
  REQUIRE(back == host);

  const cuda::Stream s = cuda::create_stream();
  cuda::memset_async(b, 0, bytes / 2, s);
  cuda::memcpy_async(back.data(), b, bytes, cuda::CopyKind::device_to_host, s);
  cuda::synchronize(s);
  cuda::destroy_stream(s);
  for (int i = 0; i < 1000; ++i) REQUIRE(back[i] == (i < 500 ? 0 : i * i));
  cuda::free_device(a);
  cuda::free_device(b);
}

TEST_CASE("copies that touch host memory as device memory fail with the call and CUDA's message") {
  std::vector<float> host(16), other(16);
  REQUIRE_THROWS_WITH(cuda::memcpy(other.data(), host.data(), 64, cuda::CopyKind::host_to_device),
                      Contains("cudaMemcpy") && Contains("invalid argument") && Contains("runtime.cpp"));
  void* d = cuda::malloc_device(32);
  REQUIRE_THROWS_WITH(cuda::memcpy(host.data(), d, 64, cuda::CopyKind::device_to_host),  // past the end
                      Contains("cudaErrorInvalidValue"));
  REQUIRE_THROWS_WITH(cuda::free_device(host.data()), Contains("cudaFree"));
  cuda::free_device(d);
}

TEST_CASE("events time an interval") {
  cuda::Event start, end;
  start.record();
  end.record();
  end.synchronize();
  REQUIRE(end.elapsed_ms_since(start) >= 0.0f);
  cuda::Event unrecorded;
  REQUIRE_THROWS_WITH(unrecorded.elapsed_ms_since(start), Contains("cudaEventElapsedTime"));
}

TEST_CASE("init registers the cuda allocator") {
  REQUIRE(cuda::init());
  ember::Allocator& a = ember::allocator_for(ember::Device::cuda());
  REQUIRE(a.device() == ember::Device::cuda());
  ember::DataPtr p = a.allocate(4096);
  REQUIRE(p);
  std::vector<char> ones(4096, 1), back(4096, 0);
  cuda::memcpy(p.get(), ones.data(), 4096, cuda::CopyKind::host_to_device);
  cuda::memcpy(back.data(), p.get(), 4096, cuda::CopyKind::device_to_host);
  REQUIRE(back == ones);
}
