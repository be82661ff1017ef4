#include "apps/bench/bench_kernels.h"

#include <ostream>

#include "apps/bench/bench_kernels_conv.h"
#include "apps/bench/bench_kernels_nn.h"
#include "apps/bench/peer_script.h"
#include "apps/bench/timing.h"
#include "core/parallel.h"

namespace ember::bench {

void bench_kernels(std::ostream& out, Device device) {
  const int threads = num_threads();
  out << "ember bench kernels on " << device << ": ms per call, median of 7 blocks after warm-up, " << threads
      << " CPU thread(s); PyTorch measured in the same run (" << peer_python() << ")\n\n" << std::flush;
  std::vector<KernelRow> rows = bench_kernels_conv(device);
  for (const KernelRow& r : bench_kernels_nn(threads, device)) rows.push_back(r);
  const std::vector<std::string> args = {"--threads", std::to_string(threads), "--device", device.is_cuda() ? "cuda" : "cpu"};
  auto torch = run_peer_script("torch_kernels.py", args);
  for (const auto& [name, ms] : run_peer_script("torch_kernels_nn.py", args)) torch[name] = ms;

  Table table({"kernel", "ember ms", "pytorch ms", "speedup"}, {40, 10, 11, 8});
  out << table.header() << "\n";
  int slower = 0, compared = 0;
  for (const KernelRow& r : rows) {
    auto it = torch.find(r.name);
    std::string peer = "n/a", ratio = "n/a";
    if (it != torch.end()) {
      peer = fixed(it->second, 4);
      ratio = fixed(it->second / r.ember_ms, 2) + "x";
      ++compared;
      if (r.ember_ms > it->second) ++slower;
    }
    out << table.row({r.name, fixed(r.ember_ms, 4), peer, ratio}) << "\n";
  }
  out << "\n" << compared << " rows compared; ember slower than PyTorch on " << slower
      << " (speedup = pytorch ms / ember ms; the machine is shared, so re-run before trusting a close call)\n";
}

}  // namespace ember::bench
