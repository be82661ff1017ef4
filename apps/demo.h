// `ember demo`: fits a small two-layer network to y = tanh(3x) - x^2 with hand-written SGD on ember's
// autograd, printing the loss as it falls. The smallest end-to-end use of the library.
#pragma once

#include <cstdint>
#include <iosfwd>

namespace ember::apps {

struct DemoOptions {
  int steps = 1000;
  int hidden = 64;
  double lr = 0.1;
  uint64_t seed = 0;
};

// Returns the final loss.
double run_demo(const DemoOptions& options, std::ostream& out);

}  // namespace ember::apps
