// The kernel profiler's recording and folding (profile.h). The coverage callbacks that feed it
// are profile_coverage.cpp, the source lines profile_symbolize.cpp, the table profile_report.cpp.
//
// Note [profile model]: `ember-simcc --profile` compiles the .cu files with clang's
// -fsanitize-coverage=bb,trace-pc-guard,trace-loads,trace-stores, so every basic block and
// every load and store of kernel code calls back into the runtime with the block's guard or
// the address, and __builtin_return_address gives the site. The executor tells which CUDA
// thread runs (current_thread()) and where blocks begin and end (block_begin/block_end, called
// by the fiber scheduler only: under EMBER_SIM_EXECUTION=threads nothing is recorded, since a
// block's threads would then record concurrently). A block's records are folded into its
// kernel's statistics when the block ends, so memory grows with one block's accesses only.
// What is modelled is what the code asks of the memory system, not what a GPU does with it:
// no L1/L2 caches, no timing, no instruction replay; a site is a source line (accesses of one
// kind on one line are summed). Profiling is on exactly when the program is instrumented (the
// coverage's guard initialisation calls turn_on()), so an ordinary build pays nothing.
//
// Note [warp requests]: a GPU issues one memory request per warp and instruction, for the
// lanes that are active. The fibers run each lane on its own, so the simulator reconstructs
// the requests: lane l's k-th execution of a site belongs to its warp's k-th request at that
// site. This is exact for convergent warps, where every active lane reaches the site the same
// number of times in the same order. A lane that skips an execution others make (a branch
// around the access inside a loop) shifts its later accesses into earlier requests; the counts
// of such sites are approximate, and the divergence table shows which sites those may be.
//
// Note [global transactions]: a request's transactions are the distinct 32-byte sectors its
// lanes' bytes fall in (the unit a GPU's L1 and L2 move), and its efficiency the bytes the
// lanes asked for over the bytes those sectors hold, as nvprof's gld_efficiency: 32 lanes
// reading consecutive floats touch 4 sectors (100%), a stride of two floats 8 sectors (50%).
// Lanes reading the same address each count their bytes, so a broadcast exceeds 100%.
//
// Note [bank conflicts]: shared memory has 32 banks of 4-byte words, word w in bank w % 32. A
// request needs as many passes as the largest number of distinct words any one bank must
// deliver (lanes reading the same word share it: a broadcast); its conflicts are that degree
// minus one. Accesses wider than 4 bytes count each 4-byte word they cover, so a warp reading
// consecutive float2 has degree 2, the two passes a GPU makes too. Addresses are the
// simulator's, so an array must have the alignment of its element type for the banks to match
// a GPU's (arrays of 4-byte or wider types always do).
//
// Note [memory spaces]: an address is global memory when it lies in a cudaMalloc'ed range
// (runtime_api.h's device_allocations(), read at each launch), and shared memory when it lies
// in the block's dynamic shared buffer or in the section `ember_sim_shared`, where
// `ember-simcc --profile` puts every static __shared__ variable (profile_shared.h; the linker
// publishes the section's bounds). Everything else is neither and is not counted: the thread's
// stack and registers spilled to it, thread-locals such as threadIdx, kernel arguments, and
// also __device__ and __constant__ variables (plain globals here), which a GPU would count as
// global or constant memory. Atomic read-modify-writes are not seen at all: clang's tracing
// covers plain loads and stores (a compare-and-swap loop's load shows).
//
// Note [divergence]: a warp runs a basic block once for all its active lanes, so in a block
// where the lanes of a warp ran a basic block n_min..n_max times, the warp ran it n_max times,
// n_max - n_min of them with inactive lanes (exact for convergent warps, Note [warp requests]).
// Lanes that have returned count as inactive. Coverage at the `bb` level puts one guard in
// each basic block (the `edge` default would add blocks on split edges). A block's line is
// that of its guard call, which the compiler gives the location of the block's first
// instruction. Under `ember-simcc --profile` kernels are noinline (profile_shared.h): inlined
// into the simulator's launch code, a block's first instruction can be the launch's own (a
// kernel argument's load sunk into a branch), and the block would show a line of dropin.h.
// Everything else is inlined as usual; an access or block inside an inlined function shows
// the innermost frame that is neither the simulator's nor a system header (profile_symbolize.h).
#include "cuda/sim/profile.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "cuda/sim/executor.h"
#include "cuda/sim/profile_symbolize.h"
#include "cuda/sim/runtime_api.h"

// Bounds of the static __shared__ variables of a program built by `ember-simcc --profile`
// (Note [memory spaces]); null in a program that has none.
extern "C" char __start_ember_sim_shared[] __attribute__((weak));
extern "C" char __stop_ember_sim_shared[] __attribute__((weak));

namespace ember::sim::profile {
namespace {

constexpr unsigned kWarpSize = 32, kSectorBytes = 32, kBanks = 32, kBankBytes = 4;

enum class Space : uint8_t { global, shared };

Kind kind_of(Space space, bool store) {
  if (space == Space::global) return store ? Kind::global_store : Kind::global_load;
  return store ? Kind::shared_store : Kind::shared_load;
}

struct MemoryTotals {
  Kind kind = Kind::global_load;
  uint64_t requests = 0, sectors = 0, bytes = 0, conflicts = 0;
};

struct BranchTotals {
  uint64_t divergent = 0, executions = 0;
};

struct KernelTotals {
  uint64_t launches = 0, blocks = 0;
  std::map<uintptr_t, MemoryTotals> memory;  // by site (pc << 1 | space)
  std::map<uint32_t, BranchTotals> branches;  // by coverage guard
  std::map<std::pair<std::string, unsigned>, uint64_t> barriers;
};

// One access of the running block: `order` is k << 10 | tid for the thread's k-th execution of
// the site (tid < 1024), so sorting by it groups each warp's k-th request (Note [warp requests]).
struct Event {
  uint64_t order;
  uintptr_t address;
};

struct SiteRecord {
  unsigned bytes = 0;
  bool store = false;
  std::vector<uint32_t> executions;  // per thread of the block
  std::vector<Event> events;
};

struct State {
  bool on = false;
  std::map<std::string, KernelTotals> kernels;
  std::vector<uintptr_t> guard_pcs;  // by guard
  // The running block.
  KernelTotals* kernel = nullptr;
  unsigned nthreads = 0;
  uintptr_t dynamic_begin = 0, dynamic_end = 0;
  std::vector<std::pair<uintptr_t, size_t>> device;  // the launch's cudaMalloc ranges
  std::unordered_map<uintptr_t, SiteRecord> sites;
  std::vector<std::vector<uint32_t>> guard_counts;  // by guard: executions per thread
  std::vector<uint32_t> touched_guards;
};

State& state() {
  static State* s = new State;  // leaked: the report runs at exit, after static destruction
  return *s;
}

// Set while a block runs under fibers on the launching thread; the callbacks' fast exit.
std::atomic<bool> g_recording{false};

bool in_device_memory(const std::vector<std::pair<uintptr_t, size_t>>& ranges, uintptr_t a) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), a, [](uintptr_t x, const auto& r) { return x < r.first; });
  if (it == ranges.begin()) return false;
  --it;
  return a < it->first + it->second;
}

bool in_static_shared(uintptr_t a) {
  return a >= reinterpret_cast<uintptr_t>(__start_ember_sim_shared) &&
         a < reinterpret_cast<uintptr_t>(__stop_ember_sim_shared);
}

// Largest number of distinct words one bank holds among `words` (sorted, distinct).
uint64_t bank_degree(const std::vector<uintptr_t>& words) {
  std::array<uint64_t, kBanks> per_bank{};
  for (uintptr_t w : words) ++per_bank[w % kBanks];
  return *std::max_element(per_bank.begin(), per_bank.end());
}

void fold_site(SiteRecord& r, Space space, MemoryTotals& t) {
  std::sort(r.events.begin(), r.events.end(), [](const Event& a, const Event& b) { return a.order < b.order; });
  const unsigned unit = space == Space::global ? kSectorBytes : kBankBytes;
  std::vector<uintptr_t> units;  // the request's sectors (global) or words (shared)
  for (size_t i = 0; i < r.events.size();) {
    const uint64_t request = r.events[i].order >> 5;  // k and warp
    units.clear();
    for (; i < r.events.size() && r.events[i].order >> 5 == request; ++i) {
      const uintptr_t a = r.events[i].address;
      for (uintptr_t u = a / unit; u <= (a + r.bytes - 1) / unit; ++u) units.push_back(u);
      t.bytes += r.bytes;
    }
    std::sort(units.begin(), units.end());
    units.erase(std::unique(units.begin(), units.end()), units.end());
    ++t.requests;
    if (space == Space::global) t.sectors += units.size();
    else t.conflicts += bank_degree(units) - 1;
  }
}

void fold_guard(std::vector<uint32_t>& counts, unsigned nthreads, BranchTotals& b) {
  for (unsigned first = 0; first < nthreads; first += kWarpSize) {
    const auto [lo, hi] = std::minmax_element(counts.begin() + first,
                                              counts.begin() + std::min(nthreads, first + kWarpSize));
    b.divergent += *hi - *lo;
    b.executions += *hi;
  }
  counts.clear();
}

void print_at_exit() {
  std::ostringstream os;
  print(os, kernels());
  if (execution() == Execution::threads)
    os << "ember-simcc --profile: kernels run as OS threads (EMBER_SIM_EXECUTION=threads, ThreadSanitizer) are "
          "not profiled; the fibers (the default) are\n";
  std::fputs(os.str().c_str(), stderr);
}

}  // namespace

bool enabled() { return state().on; }

void turn_on() {
  State& s = state();
  if (s.on) return;
  s.on = true;
  std::atexit(&print_at_exit);
}

void block_begin(const LaunchSpec& spec, uint64_t block_index, const void* dynamic_shared) {
  State& s = state();
  if (!s.on) return;
  KernelTotals& k = s.kernels[std::string(spec.kernel_name)];
  if (block_index == 0) {
    ++k.launches;
    s.device = device_allocations();
  }
  ++k.blocks;
  s.kernel = &k;
  s.nthreads = spec.block.x * spec.block.y * spec.block.z;
  s.dynamic_begin = reinterpret_cast<uintptr_t>(dynamic_shared);
  s.dynamic_end = s.dynamic_begin + spec.dynamic_shared_bytes;
  g_recording.store(true, std::memory_order_relaxed);
}

void block_end() {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  g_recording.store(false, std::memory_order_relaxed);
  State& s = state();
  for (auto& [key, record] : s.sites) {
    const auto space = Space(key & 1);
    MemoryTotals& t = s.kernel->memory[key];
    t.kind = kind_of(space, record.store);
    fold_site(record, space, t);
  }
  s.sites.clear();
  for (uint32_t guard : s.touched_guards) fold_guard(s.guard_counts[guard], s.nthreads, s.kernel->branches[guard]);
  s.touched_guards.clear();
}

void barrier_completed(const std::source_location& where) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  ++state().kernel->barriers[{where.file_name(), where.line()}];
}

void record_access(const void* address, unsigned bytes, bool store, uintptr_t pc) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  const std::optional<ThreadPlace> thread = current_thread();
  if (!thread) return;  // host code of the launching thread
  State& s = state();
  const auto a = reinterpret_cast<uintptr_t>(address);
  Space space;
  if (in_static_shared(a) || (a >= s.dynamic_begin && a < s.dynamic_end)) space = Space::shared;
  else if (in_device_memory(s.device, a)) space = Space::global;
  else return;  // Note [memory spaces]
  SiteRecord& r = s.sites[pc << 1 | uintptr_t(space)];
  if (r.executions.empty()) {
    r.executions.assign(s.nthreads, 0);
    r.bytes = bytes;
    r.store = store;
  }
  r.events.push_back({uint64_t(r.executions[thread->tid]++) << 10 | thread->tid, a});
}

void record_basic_block(uint32_t guard, uintptr_t pc) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  const std::optional<ThreadPlace> thread = current_thread();
  if (!thread) return;
  State& s = state();
  if (guard >= s.guard_counts.size()) {
    s.guard_counts.resize(guard + 1);
    s.guard_pcs.resize(guard + 1);
  }
  s.guard_pcs[guard] = pc;
  std::vector<uint32_t>& counts = s.guard_counts[guard];
  if (counts.empty()) {
    counts.assign(s.nthreads, 0);
    s.touched_guards.push_back(guard);
  }
  ++counts[thread->tid];
}

void reset() {
  State& s = state();
  s.kernels.clear();
}

std::vector<KernelProfile> kernels() {
  const State& s = state();
  // Every pc to symbolize, in one symbolizer run.
  std::vector<uintptr_t> pcs;
  for (const auto& [name, k] : s.kernels) {
    for (const auto& [key, t] : k.memory) pcs.push_back(key >> 1);
    for (const auto& [guard, b] : k.branches)
      if (b.divergent > 0) pcs.push_back(s.guard_pcs[guard]);
  }
  std::sort(pcs.begin(), pcs.end());
  pcs.erase(std::unique(pcs.begin(), pcs.end()), pcs.end());
  const std::vector<SourceLine> lines = symbolize(pcs);
  const auto line_of = [&](uintptr_t pc) -> const SourceLine& {
    return lines[size_t(std::lower_bound(pcs.begin(), pcs.end(), pc) - pcs.begin())];
  };

  std::vector<KernelProfile> out;
  for (const auto& [name, k] : s.kernels) {
    KernelProfile p{name, k.launches, k.blocks, {}, {}, {}};
    std::map<std::tuple<std::string, unsigned, Kind>, MemorySite> memory;
    for (const auto& [key, t] : k.memory) {
      const SourceLine& where = line_of(key >> 1);
      MemorySite& m = memory[{where.file, where.line, t.kind}];
      m.file = where.file, m.line = where.line, m.kind = t.kind;
      m.requests += t.requests, m.sectors += t.sectors, m.bytes += t.bytes, m.bank_conflicts += t.conflicts;
    }
    for (auto& [key, m] : memory) p.memory.push_back(std::move(m));
    std::map<std::pair<std::string, unsigned>, BranchSite> branches;
    for (const auto& [guard, b] : k.branches) {
      if (b.divergent == 0) continue;
      const SourceLine& where = line_of(s.guard_pcs[guard]);
      BranchSite& site = branches[{where.file, where.line}];
      site.file = where.file, site.line = where.line;
      site.divergent += b.divergent, site.executions += b.executions;
    }
    for (auto& [key, b] : branches) p.divergent.push_back(std::move(b));
    for (const auto& [where, count] : k.barriers) p.barriers.push_back({where.first, where.second, count});
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ember::sim::profile
