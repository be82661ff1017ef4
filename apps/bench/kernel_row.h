// One row of `ember bench kernels`: an op on fixed shapes, timed by ember (here), by the
// PyTorch script of the same rows (apps/bench/torch_kernels*.py) in the same run, and for CPU
// convolutions by oneDNN right after ember (apps/bench/onednn_peer.h) where it is built in.
#pragma once

#include <string>

namespace ember::bench {

struct KernelRow {
  std::string name;  // shared with the Python script, e.g. "softmax_fwd 8x10x28x28"
  double ember_ms;   // median milliseconds per call
  std::string algorithm = {};  // the algorithm ember's CPU kernel chose, where it chooses one
  double onednn_ms = -1;       // the same pass in oneDNN; -1: not timed
  std::string onednn_implementation = {};  // what oneDNN ran (Note [oneDNN's algorithm])
};

}  // namespace ember::bench
