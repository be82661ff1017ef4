#include "apps/bench/openmp_spin.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ember::bench {
namespace {
constexpr const char* kSpinCount = "10000";  // Note [OpenMP spinning in the benchmarks]
}  // namespace

const char* openmp_spin_setting() {
  static const std::string setting = [] {
    if (const char* policy = std::getenv("OMP_WAIT_POLICY")) return std::string("OMP_WAIT_POLICY=") + policy;
    if (const char* count = std::getenv("GOMP_SPINCOUNT")) return std::string("GOMP_SPINCOUNT=") + count;
    return std::string("libgomp's default spinning");
  }();
  return setting.c_str();
}

void bound_openmp_spinning(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  if (setenv("GOMP_SPINCOUNT", kSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // No /proc (or no exec): run on with the default, which the benchmark header then reports.
  unsetenv("GOMP_SPINCOUNT");
  std::perror("ember: could not re-execute with GOMP_SPINCOUNT set; OpenMP peers keep spinning");
}

}  // namespace ember::bench
