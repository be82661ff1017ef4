// The callbacks of clang's sanitizer coverage, which `ember-simcc --profile` compiles into the
// .cu files (-fsanitize-coverage=bb,trace-pc-guard,trace-loads,trace-stores): each hands the
// kernel profiler (profile.h) the basic block or the access and the site's pc, the call's
// return address minus one (inside the call instruction, so it symbolizes to the site's line).
// Linked only into programs that are instrumented: ember_simrt is a static library, and
// `ember-simcc --profile` pulls this object in by its anchor (-Wl,-u,ember_sim_profile_coverage),
// because clang links its sanitizer runtime first, whose weak definitions of these callbacks
// would otherwise satisfy the references; the strong ones here replace them. The profiler
// returns at once when no kernel block is being recorded.
#include <cstdint>

#include "cuda/sim/profile.h"

#define EMBER_SITE_PC (reinterpret_cast<uintptr_t>(__builtin_return_address(0)) - 1)

extern "C" {

int ember_sim_profile_coverage = 0;  // the anchor

// Numbers the guards of a module 1, 2, ... (unique across modules) and turns profiling on.
void __sanitizer_cov_trace_pc_guard_init(uint32_t* start, uint32_t* stop) {
  static uint32_t next = 0;
  if (start == stop || *start != 0) return;  // every translation unit of a module calls this
  for (uint32_t* guard = start; guard < stop; ++guard) *guard = ++next;
  ember::sim::profile::turn_on();
}

void __sanitizer_cov_trace_pc_guard(uint32_t* guard) {
  ember::sim::profile::record_basic_block(*guard, EMBER_SITE_PC);
}

void __sanitizer_cov_load1(uint8_t* p) { ember::sim::profile::record_access(p, 1, false, EMBER_SITE_PC); }
void __sanitizer_cov_load2(uint16_t* p) { ember::sim::profile::record_access(p, 2, false, EMBER_SITE_PC); }
void __sanitizer_cov_load4(uint32_t* p) { ember::sim::profile::record_access(p, 4, false, EMBER_SITE_PC); }
void __sanitizer_cov_load8(uint64_t* p) { ember::sim::profile::record_access(p, 8, false, EMBER_SITE_PC); }
void __sanitizer_cov_load16(__int128* p) { ember::sim::profile::record_access(p, 16, false, EMBER_SITE_PC); }
void __sanitizer_cov_store1(uint8_t* p) { ember::sim::profile::record_access(p, 1, true, EMBER_SITE_PC); }
void __sanitizer_cov_store2(uint16_t* p) { ember::sim::profile::record_access(p, 2, true, EMBER_SITE_PC); }
void __sanitizer_cov_store4(uint32_t* p) { ember::sim::profile::record_access(p, 4, true, EMBER_SITE_PC); }
void __sanitizer_cov_store8(uint64_t* p) { ember::sim::profile::record_access(p, 8, true, EMBER_SITE_PC); }
void __sanitizer_cov_store16(__int128* p) { ember::sim::profile::record_access(p, 16, true, EMBER_SITE_PC); }

}  // extern "C"
