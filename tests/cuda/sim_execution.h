// Runs a test's body under each of the simulator's execution modes, fibers and OS threads (OS
// threads only where fibers are unavailable, e.g. under ThreadSanitizer), restoring the mode
// afterwards, so both modes are held to the same results and the same error messages.
//
//   for_each_sim_execution([&] { REQUIRE_THROWS_WITH(tk::early_return_then_syncthreads(p), ...); });
#pragma once

#include <vector>

#include "cuda/sim/executor.h"
#include "support/test_support.h"

namespace ember::testing {

class SimExecutionGuard {
 public:
  explicit SimExecutionGuard(sim::Execution mode) : before_(sim::execution()) { sim::set_execution(mode); }
  ~SimExecutionGuard() { sim::set_execution(before_); }
  SimExecutionGuard(const SimExecutionGuard&) = delete;
  SimExecutionGuard& operator=(const SimExecutionGuard&) = delete;

 private:
  sim::Execution before_;
};

inline std::vector<sim::Execution> sim_executions() {
  if (!sim::fibers_available()) return {sim::Execution::threads};
  return {sim::Execution::fibers, sim::Execution::threads};
}

template <class Body>
void for_each_sim_execution(Body body) {
  for (sim::Execution mode : sim_executions()) {
    INFO("simulator running CUDA threads as " << (mode == sim::Execution::fibers ? "fibers" : "OS threads"));
    SimExecutionGuard guard(mode);
    body();
  }
}

}  // namespace ember::testing
