// The table `ember-simcc --profile` prints at exit (profile.h): per kernel, its memory sites,
// divergent branches and barriers. Files are shown by their base name.
#include <cstdio>
#include <ostream>
#include <string>

#include "cuda/sim/profile.h"

namespace ember::sim::profile {
namespace {

std::string site(const std::string& file, unsigned line) {
  const size_t slash = file.rfind('/');
  return (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" + std::to_string(line);
}

template <class... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

bool is_global(Kind k) { return k == Kind::global_load || k == Kind::global_store; }

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::global_load: return "global load";
    case Kind::global_store: return "global store";
    case Kind::shared_load: return "shared load";
    case Kind::shared_store: return "shared store";
  }
  return "?";
}

void print(std::ostream& os, const std::vector<KernelProfile>& profiles) {
  for (const KernelProfile& k : profiles) {
    os << format("ember-simcc --profile: kernel %s: %llu launch%s, %llu block%s\n", k.name.c_str(),
                 (unsigned long long)k.launches, k.launches == 1 ? "" : "es", (unsigned long long)k.blocks,
                 k.blocks == 1 ? "" : "s");
    if (!k.memory.empty()) {
      os << format("  %-28s %-12s %10s %12s %11s %14s\n", "site", "kind", "requests", "sectors/req", "efficiency",
                   "conflicts/req");
      for (const MemorySite& m : k.memory) {
        const bool global = is_global(m.kind);
        os << format("  %-28s %-12s %10llu %12s %11s %14s\n", site(m.file, m.line).c_str(),
                     std::string(kind_name(m.kind)).c_str(), (unsigned long long)m.requests,
                     global ? format("%.2f", m.sectors_per_request()).c_str() : "-",
                     global ? format("%.1f%%", 100 * m.efficiency()).c_str() : "-",
                     global ? "-" : format("%.2f", m.conflicts_per_request()).c_str());
      }
    }
    if (!k.divergent.empty()) {
      os << "  divergent branches (warp executions with inactive lanes / warp executions):\n";
      for (const BranchSite& b : k.divergent)
        os << format("  %-28s %10llu / %llu\n", site(b.file, b.line).c_str(), (unsigned long long)b.divergent,
                     (unsigned long long)b.executions);
    }
    if (!k.barriers.empty()) {
      os << "  barriers (__syncthreads completed per block):\n";
      for (const BarrierSite& b : k.barriers)
        os << format("  %-28s %10.2f\n", site(b.file, b.line).c_str(), double(b.count) / double(k.blocks));
    }
  }
}

}  // namespace ember::sim::profile
