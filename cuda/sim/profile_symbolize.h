// Source lines of code addresses, for the kernel profiler (profile.h): one symbolizer process
// (llvm-symbolizer-16, llvm-symbolizer or addr2line, the first on PATH) per object file.
//
//   std::vector<SourceLine> lines = symbolize(pcs);  // lines[i] is where pcs[i] is
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::sim::profile {

struct SourceLine {
  std::string file;  // "??" when unknown (no debug information, no symbolizer)
  unsigned line = 0;
};

// pcs are addresses of this process's code; of the inlined frames at each, the answer is the
// innermost one that is neither in the simulator's headers (cuda/sim/) nor in a system header
// (under /usr/), else the outermost one (the function the code was inlined into).
std::vector<SourceLine> symbolize(const std::vector<uintptr_t>& pcs);

}  // namespace ember::sim::profile
