// `ember bench mnist`: one training epoch of mnist_cnn (SGD lr 0.01, cross-entropy, shuffled,
// last partial batch dropped) at each batch size, ember against PyTorch (same model, same
// initialisation scheme, same thread count) in the same run: seconds, speedup, and the test
// accuracy each framework reaches, in the form of the MacroTorch table. Each batch size runs once
// per precision (fp32, and bf16 autocast as `ember train --precision bf16` runs it), the
// precisions alternating in the same run; PyTorch's column is its fp32 epoch.
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
  std::vector<std::string> precisions = {"fp32", "bf16"};  // fp32, bf16, fp16
  int64_t max_batches = 0;  // > 0: time only this many batches of each epoch
  int rounds = 1;           // alternating rounds per (batch, precision); the fastest is kept
};

void bench_mnist(const BenchMnistOptions& options, std::ostream& out);

}  // namespace ember::bench
