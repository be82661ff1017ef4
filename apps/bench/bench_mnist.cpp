#include "apps/bench/bench_mnist.h"

#include <chrono>
#include <map>
#include <ostream>
#include <sstream>

#include "apps/bench/peer_script.h"
#include "apps/bench/timing.h"
#include "datasets/data_loader.h"
#include "datasets/tensor_dataset.h"
#include "ember.h"

namespace ember::bench {
namespace {

struct EpochResult {
  double seconds = 0;
  double accuracy = 0;
  double peak_mib = 0;  // the CPU allocator's peak during the epoch (ember only)
};

double accuracy(Module& model, const TensorDataset& test) {
  autograd::NoGradGuard no_grad;
  int64_t correct = 0;
  for (int64_t start = 0; start < test.size(); start += 1000) {
    const int64_t len = std::min<int64_t>(1000, test.size() - start);
    Tensor logits = model(test.inputs().narrow(0, start, len));
    correct += int64_t(sum(eq(argmax(logits, 1), test.targets().narrow(0, start, len)).to(DType::i64)).item());
  }
  return double(correct) / double(test.size());
}

EpochResult ember_epoch(const std::shared_ptr<MnistDataset>& train, const TensorDataset& test, int64_t batch) {
  manual_seed(0);
  auto model = mnist_cnn();
  SGD opt(model->parameters(), {.lr = 0.01});
  DataLoaderOptions loader_options;
  loader_options.batch_size = batch;
  loader_options.drop_last = true;
  DataLoader loader(train, loader_options);
  Allocator& memory = allocator_for(Device::cpu());
  memory.reset_peak_stats();
  const int64_t before = memory.stats().allocated_bytes;
  const auto start = std::chrono::steady_clock::now();
  for (auto& [x, y] : loader) {
    Tensor loss = cross_entropy((*model)(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double peak_mib = double(memory.stats().peak_allocated_bytes - before) / (1 << 20);
  return {seconds, accuracy(*model, test), peak_mib};
}

}  // namespace

void bench_mnist(const BenchMnistOptions& o, std::ostream& out) {
  auto train = std::make_shared<MnistDataset>(o.data, true);
  MnistDataset test(o.data, false);
  out << "ember bench mnist: one epoch of mnist_cnn (SGD lr 0.01, cross-entropy, shuffled, drop last), "
      << num_threads() << " thread(s); PyTorch " << (o.with_pytorch ? "measured in the same run" : "skipped") << "\n\n";
  Table table({"batch", "ember s", "pytorch s", "speedup", "ember acc", "pytorch acc", "ember peak MiB"},
              {6, 9, 10, 8, 10, 12, 14});
  out << table.header() << "\n" << std::flush;
  std::vector<std::pair<int64_t, EpochResult>> ours;
  for (int64_t b : o.batch_sizes) ours.emplace_back(b, ember_epoch(train, test, b));

  std::map<int64_t, EpochResult> peer;
  if (o.with_pytorch) {
    std::ostringstream sizes;
    for (size_t i = 0; i < o.batch_sizes.size(); ++i) sizes << (i ? "," : "") << o.batch_sizes[i];
    // run_peer_script keys rows by everything before the last field: "batch seconds".
    for (const auto& [key, acc] : run_peer_script("torch_mnist.py", {"--data", o.data, "--threads",
                                                                     std::to_string(num_threads()), "--batch-sizes",
                                                                     sizes.str()})) {
      std::istringstream fields(key);
      int64_t b = 0;
      double s = 0;
      if (fields >> b >> s) peer[b] = {s, acc};
    }
  }
  for (const auto& [b, r] : ours) {
    auto it = peer.find(b);
    const bool have = it != peer.end();
    out << table.row({std::to_string(b), fixed(r.seconds, 2), have ? fixed(it->second.seconds, 2) : "n/a",
                      have ? fixed(it->second.seconds / r.seconds, 2) + "x" : "n/a", fixed(100 * r.accuracy, 2) + "%",
                      have ? fixed(100 * it->second.accuracy, 2) + "%" : "n/a", fixed(r.peak_mib, 1)})
        << "\n";
  }
  out << "\nspeedup = pytorch seconds / ember seconds (training epoch only; accuracy on the 10k test images after it);\n"
         "peak MiB = the caching allocator's peak allocated bytes during the epoch, above what was live before it\n";
}

}  // namespace ember::bench
