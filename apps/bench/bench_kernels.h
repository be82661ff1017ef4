// `ember bench kernels`: ms per call of the kernels that train convolutional networks, ember
// against PyTorch on this machine in the same run with the same thread count (median of blocks
// after warm-up), in the form of the MacroTorch table. PyTorch's column is "n/a" when
// /usr/bin/python3 (or $EMBER_PYTHON) has no torch. With device cuda both sides run on the GPU
// (PyTorch CUDA) and blocks end with a device synchronisation.
//
// Note [Alternating rounds]: the machines are shared, so a burst of load while one framework's
// rows run would decide a close row. The two frameworks run one after the other `rounds`
// times, alternately, and each row reports each framework's best round; progress goes to `log`.
#pragma once

#include <iosfwd>
#include <string>

#include "core/device.h"

namespace ember::bench {

struct BenchKernelsOptions {
  Device device = Device::cpu();
  int rounds = 5;
  std::string only;  // run only this set of rows: "conv", "nn" or "seresnext"; empty: all
};

void bench_kernels(std::ostream& out, std::ostream& log, const BenchKernelsOptions& options = {});

}  // namespace ember::bench
