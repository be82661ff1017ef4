#include "apps/bench/openmp_spin.h"

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ember::bench {
namespace {
constexpr const char* kSpinCount = "10000";  // Note [OpenMP spinning in the benchmarks]

// Whether /proc/self/exe is the program argv[0] names, so that executing it with argv runs this
// program again: not so under a loader (`ld.so ./ember bench ...`), where it is the loader.
bool exe_is_argv0(const char* argv0) {
  if (!std::strchr(argv0, '/')) return true;  // found on PATH: the kernel ran that file itself
  char self[PATH_MAX], named[PATH_MAX];
  return realpath("/proc/self/exe", self) && realpath(argv0, named) && std::strcmp(self, named) == 0;
}
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
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY") || !exe_is_argv0(argv[0])) return;
  if (setenv("GOMP_SPINCOUNT", kSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // No /proc (or no exec): run on with the default, which the benchmark header then reports.
  unsetenv("GOMP_SPINCOUNT");
  std::perror("ember: could not re-execute with GOMP_SPINCOUNT set; OpenMP peers keep spinning");
}

}  // namespace ember::bench
