#include "core/caching_allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/error.h"
#include "support/test_support.h"

using namespace ember;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;
constexpr uint64_t GiB = 1024 * MiB;

// A RawAllocator that counts its calls, records the sizes asked for, checks that every free
// matches an allocation of the same size, and fails on demand.
class FakeRawAllocator final : public RawAllocator {
 public:
  void* allocate(size_t bytes) override {
    std::lock_guard lock(mutex_);
    ++allocate_calls;
    requested_sizes.push_back(bytes);
    if (fail_next > 0) { --fail_next; return nullptr; }
    if (fail_always) return nullptr;
    void* ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (ptr) outstanding_[ptr] = bytes;
    return ptr;
  }
  void deallocate(void* ptr, size_t bytes) override {
    std::lock_guard lock(mutex_);
    ++deallocate_calls;
    auto it = outstanding_.find(ptr);
    if (it == outstanding_.end() || it->second != bytes) ++bad_frees;
    else outstanding_.erase(it);
    std::free(ptr);
  }
  Device device() const override { return Device::cpu(); }
  size_t total_bytes() const override { return total; }

  size_t outstanding_bytes() const {
    std::lock_guard lock(mutex_);
    size_t sum = 0;
    for (const auto& [ptr, bytes] : outstanding_) sum += bytes;
    return sum;
  }

  int allocate_calls = 0, deallocate_calls = 0, bad_frees = 0;
  std::vector<size_t> requested_sizes;
  int fail_next = 0;       // fail this many calls from now on
  bool fail_always = false;
  size_t total = 24 * GiB;

 private:
  mutable std::mutex mutex_;
  std::map<void*, size_t> outstanding_;
};

// A caching allocator over a fake whose counters the test can read while the allocator lives.
struct Fixture {
  FakeRawAllocator* raw;
  CachingAllocator alloc;
  Fixture() : Fixture(std::make_unique<FakeRawAllocator>()) {}
  explicit Fixture(std::unique_ptr<FakeRawAllocator> r) : raw(r.get()), alloc(std::move(r)) {}
};

char* addr(const DataPtr& p) { return static_cast<char*>(p.get()); }

}  // namespace

TEST_CASE("caching allocator: a freed block is reused without a raw call") {
  Fixture f;
  void* first;
  {
    DataPtr p = f.alloc.allocate(4000);
    first = p.get();
  }
  DataPtr q = f.alloc.allocate(4000);
  CHECK(q.get() == first);
  CHECK(f.raw->allocate_calls == 1);
  CHECK(f.alloc.stats().raw_allocations == 1);
}

TEST_CASE("caching allocator: sizes are rounded to 512 bytes") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  Fixture f;
  DataPtr p = f.alloc.allocate(1);
  CHECK(f.alloc.stats().allocated_bytes == 512);
  DataPtr q = f.alloc.allocate(1000);
  CHECK(f.alloc.stats().allocated_bytes == 512 + 1024);
  CHECK(addr(q) - addr(p) == 512);  // the second block starts right after the rounded first
  CHECK(reinterpret_cast<uintptr_t>(q.get()) % 64 == 0);
}

TEST_CASE("caching allocator: small and large pools take different segment sizes") {
  CHECK(CachingAllocator::segment_size(512) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(1 * MiB) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(1 * MiB + 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);
  CHECK(CachingAllocator::segment_size(11 * MiB + 512) == 12 * MiB);

  Fixture f;
  DataPtr small = f.alloc.allocate(1 * MiB);
  DataPtr large = f.alloc.allocate(3 * MiB);
  DataPtr huge = f.alloc.allocate(25 * MiB);  // too big for the 17 MiB left of the 20 MiB segment
  REQUIRE(f.raw->requested_sizes == std::vector<size_t>{2 * MiB, 20 * MiB, 26 * MiB});
  CHECK(f.alloc.stats().reserved_bytes == int64_t(48 * MiB));

  // A freed small block is not used for a large request, nor a large one for a small request.
  small.reset();
  DataPtr large2 = f.alloc.allocate(1 * MiB + 1);  // fits the 20 MiB segment's remainder
  CHECK(f.raw->allocate_calls == 3);
  CHECK(addr(large2) == addr(large) + 3 * MiB);
  large.reset();
  huge.reset();
  DataPtr small2 = f.alloc.allocate(1 * MiB);  // reuses the small segment, not the free large ones
  CHECK(f.raw->allocate_calls == 3);
}

TEST_CASE("caching allocator: two small allocations share one split segment") {
  Fixture f;
  DataPtr a = f.alloc.allocate(100 * KiB);
  DataPtr b = f.alloc.allocate(200 * KiB);
  CHECK(f.raw->allocate_calls == 1);
  CHECK(addr(b) == addr(a) + 100 * KiB);
  CHECK(f.alloc.stats().reserved_bytes == int64_t(2 * MiB));
  CHECK(f.alloc.stats().allocated_bytes == int64_t(300 * KiB));
}

TEST_CASE("caching allocator: a large block splits only when more than 1 MiB remains") {
  Fixture f;
  DataPtr a = f.alloc.allocate(19 * MiB);  // 20 MiB segment, 1 MiB left: not split
  CHECK(f.alloc.stats().allocated_bytes == int64_t(20 * MiB));
  DataPtr b = f.alloc.allocate(2 * MiB);   // 20 MiB segment, 18 MiB left: split
  CHECK(f.alloc.stats().allocated_bytes == int64_t(22 * MiB));
  CHECK(f.raw->allocate_calls == 2);
}

TEST_CASE("caching allocator: free neighbours merge back into the whole segment") {
  Fixture f;
  SECTION("large pool: the full segment size fits again") {
    char* base;
    {
      DataPtr a = f.alloc.allocate(5 * MiB);  // a 20 MiB segment: a, b and a 10 MiB remainder
      DataPtr b = f.alloc.allocate(5 * MiB);
      base = addr(a);
    }
    DataPtr whole = f.alloc.allocate(20 * MiB);  // only the merged segment can hold it
    CHECK(addr(whole) == base);
    CHECK(f.raw->allocate_calls == 1);
    CHECK(f.alloc.stats().allocated_bytes == int64_t(20 * MiB));
  }
  SECTION("small pool: freeing in the middle merges with both sides") {
    char* base;
    {
      DataPtr a = f.alloc.allocate(512 * KiB);  // a 2 MiB segment: a, b, c and a 512 KiB remainder
      DataPtr b = f.alloc.allocate(512 * KiB);
      DataPtr c = f.alloc.allocate(512 * KiB);
      base = addr(a);
      a.reset();
      c.reset();  // merges with the remainder
      b.reset();  // merges with a before it and c + remainder after it
    }
    DataPtr big = f.alloc.allocate(1 * MiB);  // the largest small request: needs a merged block
    DataPtr rest = f.alloc.allocate(1 * MiB);
    CHECK(addr(big) == base);
    CHECK(addr(rest) == base + 1 * MiB);
    CHECK(f.raw->allocate_calls == 1);
  }
}

TEST_CASE("caching allocator: blocks freed on one stream are reused on that stream only") {
  Fixture f;
  // Free on streams 1 and 3, then ask on stream 2: the best-fit search must skip blocks of the
  // streams on either side of it in the pool's (stream, size, address) order.
  void* freed_on_1 = f.alloc.allocate(4096, 1).get();
  void* freed_on_3 = f.alloc.allocate(4096, 3).get();
  REQUIRE(f.raw->allocate_calls == 2);
  DataPtr on_2 = f.alloc.allocate(4096, 2);
  CHECK(on_2.get() != freed_on_1);
  CHECK(on_2.get() != freed_on_3);
  CHECK(f.raw->allocate_calls == 3);
  DataPtr on_3 = f.alloc.allocate(4096, 3);
  DataPtr on_1 = f.alloc.allocate(4096, 1);
  CHECK(on_3.get() == freed_on_3);
  CHECK(on_1.get() == freed_on_1);
  CHECK(f.raw->allocate_calls == 3);
}

TEST_CASE("caching allocator: current and peak statistics") {
  Fixture f;
  {
    DataPtr a = f.alloc.allocate(1000);          // 1024
    DataPtr b = f.alloc.allocate(3 * MiB);       // 3 MiB of a 20 MiB segment
    AllocatorStats s = f.alloc.stats();
    CHECK(s.allocated_bytes == int64_t(1024 + 3 * MiB));
    CHECK(s.reserved_bytes == int64_t(22 * MiB));
    CHECK(s.active_blocks == 2);
    CHECK(s.raw_allocations == 2);
  }
  AllocatorStats s = f.alloc.stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.active_blocks == 0);
  CHECK(s.reserved_bytes == int64_t(22 * MiB));  // cached, not returned
  CHECK(s.peak_allocated_bytes == int64_t(1024 + 3 * MiB));
  CHECK(s.peak_active_blocks == 2);
  CHECK(s.peak_reserved_bytes == int64_t(22 * MiB));
  CHECK(s.raw_frees == 0);

  f.alloc.reset_peak_stats();
  s = f.alloc.stats();
  CHECK(s.peak_allocated_bytes == 0);
  CHECK(s.peak_active_blocks == 0);
  CHECK(s.peak_reserved_bytes == int64_t(22 * MiB));
}

TEST_CASE("caching allocator: a raw failure empties the cache and retries once") {
  Fixture f;
  f.alloc.allocate(4096, 1).reset();  // a cached 2 MiB segment on stream 1
  REQUIRE(f.alloc.stats().reserved_bytes == int64_t(2 * MiB));
  f.raw->fail_next = 1;
  DataPtr p = f.alloc.allocate(4096, 2);  // stream 2 cannot use it: raw call, fails, retry
  CHECK(p);
  AllocatorStats s = f.alloc.stats();
  CHECK(s.retries == 1);
  CHECK(s.ooms == 0);
  CHECK(s.raw_frees == 1);  // the stream-1 segment went back before the retry
  CHECK(s.reserved_bytes == int64_t(2 * MiB));
  CHECK(f.raw->allocate_calls == 3);
  CHECK(f.raw->outstanding_bytes() == 2 * MiB);
}

TEST_CASE("caching allocator: out of memory throws with the request and the statistics") {
  Fixture f;
  DataPtr live = f.alloc.allocate(1 * MiB);
  f.raw->fail_always = true;
  try {
    f.alloc.allocate(size_t(1.5 * double(GiB)));
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    CHECK(std::string(e.what()) ==
          "allocator: out of memory on cpu: tried to allocate 1.50 GiB; 1.00 MiB allocated, "
          "2.00 MiB reserved, 1.00 MiB cached, device total 24.00 GiB");
  }
  AllocatorStats s = f.alloc.stats();
  CHECK(s.ooms == 1);
  CHECK(s.retries == 1);
  CHECK(s.allocated_bytes == int64_t(1 * MiB));

  // A device whose capacity is unknown says so; an absurd size is refused without wrapping.
  f.raw->total = 0;
  CHECK_THROWS_WITH(f.alloc.allocate(size_t(-1)), Catch::Contains("device total unknown"));
  CHECK(f.alloc.stats().ooms == 2);

  // The allocator still works once the memory is there again.
  f.raw->fail_always = false;
  DataPtr again = f.alloc.allocate(3 * MiB);
  CHECK(again);
}

TEST_CASE("caching allocator: a memory limit refuses what would pass it, and freeing lets work go on") {
  Fixture f;
  f.alloc.set_memory_limit(3 * MiB);
  CHECK(f.alloc.memory_limit() == 3 * MiB);
  DataPtr a = f.alloc.allocate(2 * MiB);
  const int64_t raw_calls = f.raw->allocate_calls;
  try {
    f.alloc.allocate(1 * MiB + 1);  // rounds to 1 MiB + 512: 3 MiB + 512 would be handed out
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    CHECK(std::string(e.what()) ==
          "allocator: memory limit of 3.00 MiB on cpu reached: tried to allocate 1.00 MiB (1.00 MiB rounded) "
          "with 2.00 MiB allocated, 20.00 MiB reserved, 18.00 MiB cached");
  }
  CHECK(f.raw->allocate_calls == raw_calls);  // refused before any raw call
  CHECK(f.alloc.stats().ooms == 1);
  DataPtr b = f.alloc.allocate(1 * MiB);  // exactly at the limit is allowed
  CHECK(f.alloc.stats().allocated_bytes == int64_t(3 * MiB));
  b = DataPtr();
  a = DataPtr();
  DataPtr c = f.alloc.allocate(3 * MiB);  // after freeing, the budget is there again
  CHECK(c);
  f.alloc.set_memory_limit(0);            // no limit
  DataPtr d = f.alloc.allocate(8 * MiB);
  CHECK(d);
}

TEST_CASE("caching allocator: empty_cache returns whole free segments only") {
  Fixture f;
  DataPtr keep = f.alloc.allocate(4096);            // keeps its small segment split and live
  f.alloc.allocate(4096, 1).reset();                // a free small segment
  f.alloc.allocate(12 * MiB).reset();               // a free large segment
  REQUIRE(f.alloc.stats().reserved_bytes == int64_t(2 * MiB + 2 * MiB + 12 * MiB));
  f.alloc.empty_cache();
  AllocatorStats s = f.alloc.stats();
  CHECK(s.raw_frees == 2);
  CHECK(s.reserved_bytes == int64_t(2 * MiB));
  CHECK(s.allocated_bytes == 4096);
  CHECK(f.raw->outstanding_bytes() == 2 * MiB);
  CHECK(f.raw->bad_frees == 0);
}

TEST_CASE("caching allocator: nothing leaks after all frees and empty_cache") {
  Fixture f;
  {
    std::vector<DataPtr> ptrs;
    for (size_t bytes : {1ul, 700ul, 64 * KiB, 1 * MiB, 1 * MiB + 1, 5 * MiB, 30 * MiB})
      for (StreamId stream : {0, 3}) ptrs.push_back(f.alloc.allocate(bytes, stream));
  }
  f.alloc.empty_cache();
  CHECK(f.raw->outstanding_bytes() == 0);
  CHECK(f.raw->bad_frees == 0);
  CHECK(f.raw->deallocate_calls == f.raw->allocate_calls);
  AllocatorStats s = f.alloc.stats();
  CHECK(s.reserved_bytes == 0);
  CHECK(s.raw_frees == s.raw_allocations);
}

TEST_CASE("caching allocator: zero bytes gives an empty pointer and touches nothing") {
  Fixture f;
  DataPtr p = f.alloc.allocate(0);
  CHECK_FALSE(p);
  CHECK(f.raw->allocate_calls == 0);
  CHECK(f.alloc.stats().active_blocks == 0);
}

TEST_CASE("caching allocator: make_allocator caches unless EMBER_NO_CACHING=1") {
  std::unique_ptr<Allocator> a = make_allocator(std::make_unique<CpuRawAllocator>());
  const bool caching = dynamic_cast<CachingAllocator*>(a.get()) != nullptr;
  CHECK(caching == !caching_disabled());
}

TEST_CASE("caching allocator: sizes print in human units") {
  CHECK(format_bytes(0) == "0 bytes");
  CHECK(format_bytes(1023) == "1023 bytes");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(2 * MiB) == "2.00 MiB");
  CHECK(format_bytes(24 * GiB) == "24.00 GiB");
}

// Random allocations and frees over two streams, checking after every step that the statistics
// add up and that no two live blocks overlap; every block carries a tag that must survive.
TEST_CASE("caching allocator: randomized stress keeps the invariants") {
  Fixture f;
  std::mt19937_64 rng(1234);
  struct Live { DataPtr ptr; size_t bytes; uint64_t tag; };
  std::vector<Live> live;
  std::map<char*, char*> ranges;  // begin -> end of every live block's rounded extent
  int64_t requested_rounded = 0;  // sum of round_size over live blocks
  int64_t live_large = 0;         // live large-pool blocks: each may carry an unsplit remainder

  auto random_size = [&]() -> size_t {
    const int kind = int(rng() % 100);
    if (kind < 70) return 1 + rng() % (64 * KiB);
    if (kind < 95) return 1 + rng() % (2 * MiB);
    return 1 + rng() % (24 * MiB);
  };
  // Tag one byte every 512 bytes and the last byte. Blocks start 512-byte aligned within their
  // segment, so if two blocks ever overlapped, the younger one's first byte would overwrite a tag
  // of the older one. Each tag depends on the block's random value and on its offset.
  auto tag_at = [](const Live& l, size_t off) { return char(l.tag + off * 7); };
  auto for_each_slot = [](const Live& l, auto&& fn) {
    for (size_t off = 0; off < l.bytes; off += 512) fn(off);
    if ((l.bytes - 1) % 512 != 0) fn(l.bytes - 1);
  };
  auto write_tags = [&](const Live& l) {
    for_each_slot(l, [&](size_t off) { addr(l.ptr)[off] = tag_at(l, off); });
  };
  auto tags_intact = [&](const Live& l) {
    bool ok = true;
    for_each_slot(l, [&](size_t off) { ok = ok && addr(l.ptr)[off] == tag_at(l, off); });
    return ok;
  };

  for (int step = 0; step < 3000; ++step) {
    const bool do_alloc = live.empty() || (live.size() < 200 && rng() % 100 < 55);
    if (do_alloc) {
      const size_t bytes = random_size();
      Live l{f.alloc.allocate(bytes, rng() % 2), bytes, rng()};
      REQUIRE(l.ptr);
      char* begin = addr(l.ptr);
      char* end = begin + CachingAllocator::round_size(bytes);
      auto next = ranges.lower_bound(begin);
      REQUIRE((next == ranges.end() || next->first >= end));
      REQUIRE((next == ranges.begin() || std::prev(next)->second <= begin));
      ranges.emplace(begin, end);
      requested_rounded += int64_t(CachingAllocator::round_size(bytes));
      live_large += CachingAllocator::round_size(bytes) > CachingAllocator::kSmallSize;
      write_tags(l);
      live.push_back(std::move(l));
    } else {
      const size_t i = rng() % live.size();
      REQUIRE(tags_intact(live[i]));
      ranges.erase(addr(live[i].ptr));
      requested_rounded -= int64_t(CachingAllocator::round_size(live[i].bytes));
      live_large -= CachingAllocator::round_size(live[i].bytes) > CachingAllocator::kSmallSize;
      std::swap(live[i], live.back());
      live.pop_back();
    }
    if (step % 500 == 499) f.alloc.empty_cache();
    const AllocatorStats s = f.alloc.stats();
    // Small blocks are exactly their rounded size; a large block may keep a remainder <= 1 MiB
    // (Note [Splitting large blocks]).
    REQUIRE(s.allocated_bytes >= requested_rounded);
    REQUIRE(s.allocated_bytes <= requested_rounded + live_large * int64_t(MiB));
    REQUIRE(s.active_blocks == int64_t(live.size()));
    REQUIRE(s.allocated_bytes <= s.reserved_bytes);
    REQUIRE(s.reserved_bytes == int64_t(f.raw->outstanding_bytes()));
  }
  for (const Live& l : live) REQUIRE(tags_intact(l));
  live.clear();
  CHECK(f.alloc.stats().allocated_bytes == 0);
  f.alloc.empty_cache();
  CHECK(f.alloc.stats().reserved_bytes == 0);
  CHECK(f.raw->outstanding_bytes() == 0);
  CHECK(f.raw->bad_frees == 0);
}

TEST_CASE("caching allocator: concurrent allocations from several threads") {
  Fixture f;
  std::vector<std::thread> threads;
  std::atomic<int> corrupted{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 500; ++i) {
        const size_t bytes = 1 + rng() % (256 * KiB);
        DataPtr p = f.alloc.allocate(bytes);
        std::memset(p.get(), t + 1, bytes);
        const char* c = addr(p);
        if (c[0] != char(t + 1) || c[bytes - 1] != char(t + 1)) ++corrupted;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(corrupted == 0);
  CHECK(f.alloc.stats().allocated_bytes == 0);
  f.alloc.empty_cache();
  CHECK(f.raw->outstanding_bytes() == 0);
}
