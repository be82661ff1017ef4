// Runs a peer framework's benchmark script (PyTorch via Debian's python3-torch) in the same
// session and reads its `name milliseconds` lines. A missing interpreter, script or torch gives
// an empty map, which the tables print as "n/a".
//
//   auto torch_ms = run_peer_script("torch_kernels_nn.py", {"2"});   // {"softmax_fwd 8x10": 0.0029, ...}
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ember::bench {

// The interpreter: $EMBER_PYTHON, else /usr/bin/python3 (Debian's, which has torch).
std::string peer_python();
// Absolute path of a script in apps/bench/ of the source tree this binary was built from.
std::string peer_script_path(const std::string& script);
// Runs the script with args; each stdout line "name ms" (name may contain spaces; the value is
// the last field) becomes an entry. Lines that do not parse are ignored.
std::map<std::string, double> run_peer_script(const std::string& script, const std::vector<std::string>& args);

// One line naming the PyTorch peer and the BLAS its process mapped (torch_blas.py), e.g.
// "PyTorch 1.13.0a0, BLAS openblas-pthread/libblas.so.3, ..., oneDNN": Debian's PyTorch uses the
// reference BLAS unless OpenBLAS is installed, which changes every matmul-bound row.
std::string peer_identity();

}  // namespace ember::bench
