// `ember bench kernels`: ms per call of the kernels that train convolutional networks, ember
// against PyTorch on this machine in the same run with the same thread count (median of blocks
// after warm-up), in the form of the MacroTorch table. PyTorch's column is "n/a" when
// /usr/bin/python3 (or $EMBER_PYTHON) has no torch. With device cuda both sides run on the GPU
// (PyTorch CUDA) and blocks end with a device synchronisation.
#pragma once

#include <iosfwd>

#include "core/device.h"

namespace ember::bench {

void bench_kernels(std::ostream& out, Device device = Device::cpu());

}  // namespace ember::bench
