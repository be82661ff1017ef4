#include "core/allocator.h"
#include "cuda/runtime.h"
#include "support/test_support.h"

using namespace ember;

TEST_CASE("pass-through allocator: stats follow allocations") {
  PassThroughAllocator a(std::make_unique<CpuRawAllocator>());
  {
    DataPtr p = a.allocate(1000);
    REQUIRE(p);
    CHECK(reinterpret_cast<uintptr_t>(p.get()) % 64 == 0);
    CHECK(a.stats().allocated_bytes == 1000);
    DataPtr q = a.allocate(0);
    CHECK_FALSE(q);
    CHECK(a.stats().active_blocks == 1);
  }
  CHECK(a.stats().allocated_bytes == 0);
  CHECK(a.stats().peak_allocated_bytes == 1000);
  CHECK(a.stats().raw_frees == 1);
}

TEST_CASE("pass-through allocator: a memory limit refuses what would pass it") {
  PassThroughAllocator a(std::make_unique<CpuRawAllocator>());
  a.set_memory_limit(1500);
  DataPtr p = a.allocate(1000);
  CHECK_THROWS_WITH(a.allocate(501), Catch::Equals("allocator: memory limit of 1.46 KiB on cpu reached: tried to allocate 501 bytes "
                                                  "with 1000 bytes allocated, 1000 bytes reserved, 0 bytes cached"));
  CHECK(a.stats().ooms == 1);
  p = DataPtr();
  CHECK(a.allocate(1500));
}

TEST_CASE("allocator_for: cuda is usable or a clear error") {
  if (cuda::is_available()) {
    DataPtr p = allocator_for(Device::cuda(0)).allocate(256);
    CHECK(p);
  } else {
    CHECK_THROWS_WITH(allocator_for(Device::cuda(0)), Catch::Contains("cuda:0 is not available"));
  }
}
