#include "core/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace ember {

// Note [Segment sizes]
// ~~~~~~~~~~~~~~~~~~~~
// A segment is one raw allocation; blocks are pieces of it. Small requests (<= 1 MiB) share 2 MiB
// segments, so a thousand 4 KiB temporaries cost two raw calls, not a thousand. Medium requests
// (1 MiB .. 10 MiB) share 20 MiB segments for the same reason: activations of a few MiB are the
// common case in training and would otherwise each be a cudaMalloc. Requests of 10 MiB and more
// get a segment of their own, rounded up to 2 MiB so that similar sizes (a batch one row shorter)
// can reuse each other's segments. The constants are PyTorch's.
//
// Note [Splitting large blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A large-pool remainder of 1 MiB or less would be a block that no request can ever use: small
// requests never look in the large pool and large requests are bigger than it. It stays attached
// to the block it came from instead (so at most 1 MiB per block is wasted) and returns to the pool
// with it, where merging can make it useful again. Small-pool remainders of 512 bytes are already
// useful, so the small pool splits whenever the remainder is at least one unit.
//
// Note [Per-stream blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// On a GPU, freeing a block only means "no more work will be queued on it"; kernels queued earlier
// on its stream may still be reading it. Reusing it on the same stream is safe because the stream
// runs in order; reusing it on another stream would race with those kernels. So every block
// remembers the stream it was allocated for, blocks split from a segment inherit its stream, and
// the best-fit search only looks at blocks of the requesting stream. (Using a block on a second
// stream would need an event recorded at free time; ember does not do that yet.)
//
// Note [Retry after emptying the cache]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The raw allocator can fail while the cache holds plenty of memory that is the wrong size, in the
// wrong pool or on the wrong stream. Giving every wholly free segment back and asking once more
// turns that cached memory into room for the request; it is slow, so each time is counted in
// stats().retries, and a program that retries every step is telling its user to allocate less or
// call empty_cache() at a better moment. Split segments cannot be given back: part of them is live.
//
// Note [Recycling bookkeeping nodes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A cache hit must be cheaper than the system allocator it replaces, yet a naive hit allocates:
// a Block for the split remainder, a node of the live-block map, a node of the pool's set when
// the block comes back. Each of those is a malloc/free pair, which made a hit slower than glibc's
// malloc for small sizes. So retired Blocks and the node handles extracted from the set and the
// map are kept in spare lists and reused; in a steady state a hit allocates nothing.

namespace {

struct Pool;

// A piece of a segment: handed out (allocated) or cached in its pool. The blocks of one segment
// form a doubly linked list in address order; the first has prev == nullptr.
struct Block {
  char* ptr;
  size_t size;
  StreamId stream;
  Pool* pool;
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;

  bool is_whole_segment() const { return prev == nullptr && next == nullptr; }
};

// Best fit: order by stream, then size, then address, so that lower_bound({stream, size}) finds
// the smallest block of that stream that is big enough.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return std::less<const char*>()(a->ptr, b->ptr);
  }
};

using BlockSet = std::set<Block*, BlockOrder>;

struct Pool {
  bool is_small;
  BlockSet free_blocks;
};

void bump_peak(int64_t current, int64_t& peak) { peak = std::max(peak, current); }

}  // namespace

struct CachingAllocator::State {
  std::unique_ptr<RawAllocator> raw;
  mutable std::mutex mutex;
  Pool small_pool{true, {}};
  Pool large_pool{false, {}};
  using LiveMap = std::unordered_map<void*, Block*>;
  LiveMap live;  // allocated blocks by address
  AllocatorStats stats;
  size_t limit = 0;  // Note [Memory limit]; 0: none
  // Note [Recycling bookkeeping nodes]
  std::vector<Block*> spare_blocks;
  std::vector<BlockSet::node_type> spare_set_nodes;
  std::vector<LiveMap::node_type> spare_live_nodes;

  ~State() {
    for (Block* b : spare_blocks) delete b;
  }

  Block* new_block(char* ptr, size_t size, StreamId stream, Pool* pool) {
    if (spare_blocks.empty()) return new Block{ptr, size, stream, pool};
    Block* b = spare_blocks.back();
    spare_blocks.pop_back();
    *b = Block{ptr, size, stream, pool};
    return b;
  }
  void retire_block(Block* b) { spare_blocks.push_back(b); }

  void add_free(Block* b) {
    if (spare_set_nodes.empty()) { b->pool->free_blocks.insert(b); return; }
    BlockSet::node_type node = std::move(spare_set_nodes.back());
    spare_set_nodes.pop_back();
    node.value() = b;
    b->pool->free_blocks.insert(std::move(node));
  }
  BlockSet::iterator remove_free(Pool& pool, BlockSet::iterator it) {
    auto next = std::next(it);
    spare_set_nodes.push_back(pool.free_blocks.extract(it));
    return next;
  }

  void add_live(Block* b) {
    if (spare_live_nodes.empty()) { live.emplace(b->ptr, b); return; }
    LiveMap::node_type node = std::move(spare_live_nodes.back());
    spare_live_nodes.pop_back();
    node.key() = b->ptr;
    node.mapped() = b;
    live.insert(std::move(node));
  }
  // The live block at `ptr`, no longer live; nullptr when there is none.
  Block* remove_live(void* ptr) {
    auto it = live.find(ptr);
    if (it == live.end()) return nullptr;
    Block* b = it->second;
    spare_live_nodes.push_back(live.extract(it));
    return b;
  }

  // The smallest free block of `pool` for `stream` with at least `size` bytes, taken out of the
  // pool; nullptr when there is none.
  Block* take_best_fit(Pool& pool, StreamId stream, size_t size) {
    Block key{nullptr, size, stream, &pool};
    auto it = pool.free_blocks.lower_bound(&key);
    if (it == pool.free_blocks.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    remove_free(pool, it);
    return block;
  }

  // A new segment of `bytes` from the raw allocator, emptying the cache and retrying once when
  // the first call fails (Note [Retry after emptying the cache]); nullptr when both fail.
  Block* new_segment(Pool& pool, StreamId stream, size_t bytes) {
    void* ptr = raw->allocate(bytes);
    if (!ptr) {
      release_cached_segments();
      ++stats.retries;
      ptr = raw->allocate(bytes);
      if (!ptr) return nullptr;
    }
    ++stats.raw_allocations;
    stats.reserved_bytes += int64_t(bytes);
    bump_peak(stats.reserved_bytes, stats.peak_reserved_bytes);
    return new_block(static_cast<char*>(ptr), bytes, stream, &pool);
  }

  // Cuts `block` down to `size` bytes when the policy says the remainder is worth keeping
  // separately (Note [Splitting large blocks]); the remainder goes back to the pool.
  void maybe_split(Block* block, size_t size) {
    const size_t remaining = block->size - size;
    const bool worth_it = block->pool->is_small ? remaining >= kMinBlockSize : remaining > kSmallSize;
    if (!worth_it) return;
    Block* rest = new_block(block->ptr + size, remaining, block->stream, block->pool);
    rest->prev = block;
    rest->next = block->next;
    if (block->next) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    add_free(rest);
  }

  // Absorbs `neighbour` into `block` when it is free. `neighbour` is either block->prev or
  // block->next; the merged block keeps the lower address.
  void merge_if_free(Block* block, Block* neighbour) {
    if (!neighbour || neighbour->allocated) return;
    // Out of the set before any size changes: the set is ordered by size.
    remove_free(*block->pool, block->pool->free_blocks.find(neighbour));
    if (neighbour == block->prev) {
      block->ptr = neighbour->ptr;
      block->prev = neighbour->prev;
      if (block->prev) block->prev->next = block;
    } else {
      block->next = neighbour->next;
      if (block->next) block->next->prev = block;
    }
    block->size += neighbour->size;
    retire_block(neighbour);
  }

  // Gives every wholly free segment of both pools back to the raw allocator.
  void release_cached_segments() {
    for (Pool* pool : {&small_pool, &large_pool}) {
      for (auto it = pool->free_blocks.begin(); it != pool->free_blocks.end();) {
        Block* block = *it;
        if (!block->is_whole_segment()) { ++it; continue; }
        it = remove_free(*pool, it);
        raw->deallocate(block->ptr, block->size);
        stats.reserved_bytes -= int64_t(block->size);
        ++stats.raw_frees;
        retire_block(block);
      }
    }
  }

  [[noreturn]] void throw_over_limit(size_t bytes, size_t rounded) {
    ++stats.ooms;
    throw OutOfMemory(detail::concat("allocator: memory limit of ", format_bytes(limit), " on ", raw->device(),
                                     " reached: tried to allocate ", format_bytes(bytes), " (", format_bytes(rounded),
                                     " rounded) with ", format_usage(stats)),
                      __FILE__, __LINE__);
  }

  [[noreturn]] void throw_out_of_memory(size_t bytes) {
    ++stats.ooms;
    const size_t total = raw->total_bytes();
    throw OutOfMemory(detail::concat("allocator: out of memory on ", raw->device(), ": tried to allocate ",
                                     format_bytes(bytes), "; ", format_usage(stats), ", device total ",
                                     total ? format_bytes(total) : "unknown"),
                      __FILE__, __LINE__);
  }
};

CachingAllocator::CachingAllocator(std::unique_ptr<RawAllocator> raw) : state_(std::make_unique<State>()) {
  EMBER_CHECK(raw != nullptr, "CachingAllocator: expected a raw allocator, got nullptr");
  state_->raw = std::move(raw);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(state_->mutex);
  state_->release_cached_segments();
  // Blocks still live (and the free pieces of their segments) are leaked on purpose: their memory
  // may still be in use by whoever forgot to free it.
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t CachingAllocator::segment_size(size_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return (rounded_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

DataPtr CachingAllocator::allocate(size_t bytes, StreamId stream) {
  if (bytes == 0) return {};
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  // A request this close to SIZE_MAX would wrap around when rounded; no device has it anyway.
  if (bytes > std::numeric_limits<size_t>::max() / 2) s.throw_out_of_memory(bytes);

  const size_t size = round_size(bytes);
  if (s.limit != 0 && uint64_t(s.stats.allocated_bytes) + size > s.limit) s.throw_over_limit(bytes, size);
  Pool& pool = size <= kSmallSize ? s.small_pool : s.large_pool;
  Block* block = s.take_best_fit(pool, stream, size);
  if (!block) block = s.new_segment(pool, stream, segment_size(size));
  if (!block) s.throw_out_of_memory(bytes);

  s.maybe_split(block, size);
  block->allocated = true;
  s.add_live(block);

  AllocatorStats& st = s.stats;
  st.allocated_bytes += int64_t(block->size);
  st.active_blocks += 1;
  bump_peak(st.allocated_bytes, st.peak_allocated_bytes);
  bump_peak(st.active_blocks, st.peak_active_blocks);
  return DataPtr(block->ptr, this);
}

void CachingAllocator::release(void* ptr) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  Block* block = s.remove_live(ptr);
  if (!block) {
    // Called from DataPtr's destructor: throwing is not an option, and continuing would corrupt
    // the pools. This is a bug in ember (a DataPtr handed to the wrong allocator), not user input.
    std::fprintf(stderr, "ember: internal error: caching allocator on %s asked to release %p, "
                 "which it did not allocate\n", s.raw->device().str().c_str(), ptr);
    std::abort();
  }
  block->allocated = false;
  s.stats.allocated_bytes -= int64_t(block->size);
  s.stats.active_blocks -= 1;
  s.merge_if_free(block, block->prev);
  s.merge_if_free(block, block->next);
  s.add_free(block);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(state_->mutex);
  AllocatorStats& s = state_->stats;
  s.peak_allocated_bytes = s.allocated_bytes;
  s.peak_reserved_bytes = s.reserved_bytes;
  s.peak_active_blocks = s.active_blocks;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(state_->mutex);
  state_->release_cached_segments();
}

Device CachingAllocator::device() const { return state_->raw->device(); }

std::string format_bytes(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;
  if (bytes < kKiB) return detail::concat(bytes, bytes == 1 ? " byte" : " bytes");
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  if (bytes < kMiB) os << double(bytes) / double(kKiB) << " KiB";
  else if (bytes < kGiB) os << double(bytes) / double(kMiB) << " MiB";
  else os << double(bytes) / double(kGiB) << " GiB";
  return os.str();
}

std::string format_usage(const AllocatorStats& stats) {
  const auto bytes = [](int64_t n) { return format_bytes(uint64_t(std::max<int64_t>(n, 0))); };
  return detail::concat(bytes(stats.allocated_bytes), " allocated, ", bytes(stats.reserved_bytes), " reserved, ",
                        bytes(stats.reserved_bytes - stats.allocated_bytes), " cached");
}

void CachingAllocator::set_memory_limit(size_t bytes) {
  std::lock_guard lock(state_->mutex);
  state_->limit = bytes;
}

size_t CachingAllocator::memory_limit() const {
  std::lock_guard lock(state_->mutex);
  return state_->limit;
}

}  // namespace ember
