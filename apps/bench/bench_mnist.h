// `ember bench mnist`: one training epoch of mnist_cnn (SGD lr 0.01, cross-entropy, shuffled,
// last partial batch dropped) at each batch size, ember against PyTorch (same model, same
// initialisation scheme, same thread count) in the same run: seconds, speedup, and the test
// accuracy each framework reaches, in the form of the MacroTorch table.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ember::bench {

struct BenchMnistOptions {
  std::string data = "data/mnist";
  std::vector<int64_t> batch_sizes = {32, 64, 128, 256, 512, 1024};
  bool with_pytorch = true;
};

void bench_mnist(const BenchMnistOptions& options, std::ostream& out);

}  // namespace ember::bench
