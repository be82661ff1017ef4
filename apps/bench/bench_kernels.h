// `ember bench kernels`: ms per call of the kernels that train convolutional networks, ember
// against PyTorch on this machine in the same run with the same thread count (median of blocks
// after warm-up), in the form of the MacroTorch table. PyTorch's column is "n/a" when
// /usr/bin/python3 (or $EMBER_PYTHON) has no torch.
#pragma once

#include <iosfwd>

namespace ember::bench {

void bench_kernels(std::ostream& out);

}  // namespace ember::bench
