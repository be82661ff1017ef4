// The simulator's kernel profiler: per kernel, from a build instrumented with clang's
// sanitizer coverage (what `ember-simcc --profile` compiles), the global-memory transactions
// and coalescing efficiency of each load/store site, the shared-memory bank conflicts of each
// site, the divergent branches and the barriers, with source lines. The model and its limits
// are Note [profile model] in profile.cpp; cuda/README.md shows a table.
//
//   ember-simcc --profile -O1 foo.cu -o foo && ./foo     # prints a table per kernel at exit
//
//   for (const ember::sim::profile::KernelProfile& k : ember::sim::profile::kernels())
//     for (const auto& site : k.memory) ...                // what a test checks exactly
//
// In a program that is not instrumented, profiling is off: enabled() is false, nothing is
// recorded and nothing is printed.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

namespace ember::sim {
struct LaunchSpec;
}

namespace ember::sim::profile {

enum class Kind : uint8_t { global_load, global_store, shared_load, shared_store };
std::string_view kind_name(Kind kind);  // "global load", ...

// One source line's accesses of one kind, summed over the kernel's launches.
struct MemorySite {
  std::string file;  // as the debug information names it
  unsigned line = 0;
  Kind kind = Kind::global_load;
  uint64_t requests = 0;        // warp-wide requests (Note [warp requests])
  uint64_t sectors = 0;         // global: 32-byte sectors the requests touched
  uint64_t bytes = 0;           // bytes the active lanes asked for
  uint64_t bank_conflicts = 0;  // shared: sum over requests of (degree - 1) (Note [bank conflicts])
  double sectors_per_request() const { return requests ? double(sectors) / double(requests) : 0.0; }
  double efficiency() const { return sectors ? double(bytes) / double(sectors * 32) : 0.0; }  // global
  double conflicts_per_request() const { return requests ? double(bank_conflicts) / double(requests) : 0.0; }
};

// A basic block some warp ran with inactive lanes (Note [divergence]).
struct BranchSite {
  std::string file;
  unsigned line = 0;
  uint64_t divergent = 0;   // warp executions with inactive lanes
  uint64_t executions = 0;  // warp executions
};

struct BarrierSite {
  std::string file;
  unsigned line = 0;
  uint64_t count = 0;  // completed barriers, all blocks together
};

struct KernelProfile {
  std::string name;
  uint64_t launches = 0, blocks = 0;
  std::vector<MemorySite> memory;      // by file and line
  std::vector<BranchSite> divergent;   // only sites with divergent > 0
  std::vector<BarrierSite> barriers;
};

// Whether this program is instrumented (then profiling is on from start-up).
bool enabled();
// The statistics so far, symbolized (one symbolizer run per call), kernels by name. Call it,
// and reset(), between launches (launches are synchronous: not from another host thread while
// one runs).
std::vector<KernelProfile> kernels();
// The table `ember-simcc --profile` prints at exit.
void print(std::ostream& os, const std::vector<KernelProfile>& profiles);
// Forgets everything recorded so far.
void reset();

// ---- hooks: the executor (fiber execution) and the coverage callbacks call these -----------
void block_begin(const LaunchSpec& spec, uint64_t block_index, const void* dynamic_shared);
void block_end();
void barrier_completed(const std::source_location& where);
void record_access(const void* address, unsigned bytes, bool store, uintptr_t pc);
void record_basic_block(uint32_t guard, uintptr_t pc);
void turn_on();  // the instrumented program's start-up (coverage's guard initialisation)

}  // namespace ember::sim::profile
