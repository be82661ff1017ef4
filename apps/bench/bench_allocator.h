// `ember bench allocator`: what the caching allocator saves on each allocation, against the
// pass-through allocator that calls the system every time (both over CpuRawAllocator).
//
//   bench_allocator(std::cout);   // prints one row per size: median ns per allocate+free pair
#pragma once

#include <iosfwd>

namespace ember {

void bench_allocator(std::ostream& out);

}  // namespace ember
