// The `<<<>>>` launch of unmodified .cu files on the simulator (see dropin.h).
#include "cuda/sim/dropin.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "cuda/launch_limits.h"

namespace ember::sim::dropin {

void run_launch(const Config& config, std::string_view name, const void* kernel, KernelBody body) {
  const LaunchSpec spec{name, kernel, config.grid, config.block, config.shared_bytes};
  try {
    ember::cuda::detail::check_launch_shape(name, config.grid, config.block, config.shared_bytes);
    // Over the shared-memory limit, launch() refuses before running anything, with the message.
    if (config.shared_bytes > max_dynamic_shared_bytes(kernel)) launch(spec, body);
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "ember simulator: %s (a GPU refuses this launch too; here cudaGetLastError() returns "
                 "cudaErrorInvalidConfiguration)\n", e.what());
    record_error(cudaErrorInvalidConfiguration);
    return;
  }
  try {
    launch(spec, body);
  } catch (const ember::Error& e) {
    // Note [kernel misuse ends the program]: on a GPU these hang or compute garbage; there is
    // no error code a program would check for them, so the simulator stops it with the reason.
    std::fflush(stdout);
    std::fprintf(stderr, "ember simulator: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(EXIT_FAILURE);
  }
}

}  // namespace ember::sim::dropin
