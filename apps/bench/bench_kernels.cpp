#include "apps/bench/bench_kernels.h"

#include <algorithm>
#include <functional>
#include <map>
#include <ostream>

#include "apps/bench/bench_kernels_conv.h"
#include "apps/bench/bench_kernels_nn.h"
#include "apps/bench/bench_kernels_seresnext.h"
#include "apps/bench/peer_script.h"
#include "apps/bench/timing.h"
#include "core/parallel.h"

namespace ember::bench {

namespace {

// Keeps the smaller time of each row (Note [Alternating rounds]).
void keep_best(std::map<std::string, double>& best, const std::string& name, double ms) {
  auto [it, inserted] = best.try_emplace(name, ms);
  if (!inserted) it->second = std::min(it->second, ms);
}

}  // namespace

void bench_kernels(std::ostream& out, std::ostream& log, const BenchKernelsOptions& options) {
  const Device device = options.device;
  const int threads = num_threads(), rounds = std::max(options.rounds, 1);
  out << "ember bench kernels on " << device << ": ms per call, median of 7 blocks after warm-up, best of " << rounds
      << " alternating round(s), " << threads << " CPU thread(s); PyTorch measured in the same run ("
      << peer_python() << ")\n\n" << std::flush;
  const std::vector<std::string> args = {"--threads", std::to_string(threads), "--device", device.is_cuda() ? "cuda" : "cpu"};
  // Each set of rows: ember's timings and the PyTorch script that times the same rows.
  struct RowSet {
    const char* name;
    std::function<std::vector<KernelRow>()> ember;
    const char* script;
  };
  const RowSet sets[] = {
      {"conv", [&] { return bench_kernels_conv(device); }, "torch_kernels.py"},
      {"nn", [&] { return bench_kernels_nn(threads, device); }, "torch_kernels_nn.py"},
      {"seresnext", [&] { return bench_kernels_seresnext(device); }, "torch_kernels_seresnext.py"},
  };
  auto selected = [&](const RowSet& set) { return options.only.empty() || options.only == set.name; };
  std::vector<KernelRow> rows;  // ember's, in table order, each with its best time
  std::map<std::string, double> torch;
  for (int round = 1; round <= rounds; ++round) {
    log << "bench kernels: round " << round << "/" << rounds << ": ember" << std::flush;
    std::vector<KernelRow> measured;
    for (const RowSet& set : sets)
      if (selected(set))
        for (KernelRow& r : set.ember()) measured.push_back(std::move(r));
    if (rows.empty()) rows = measured;
    for (size_t i = 0; i < rows.size(); ++i) rows[i].ember_ms = std::min(rows[i].ember_ms, measured[i].ember_ms);
    log << ", pytorch\n" << std::flush;
    for (const RowSet& set : sets)
      if (selected(set))
        for (const auto& [name, ms] : run_peer_script(set.script, args)) keep_best(torch, name, ms);
  }

  Table table({"kernel", "ember ms", "pytorch ms", "speedup", "algorithm"}, {50, 10, 11, 8, 14});
  out << "peer: " << peer_identity() << "\n" << table.header() << "\n";
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
    out << table.row({r.name, fixed(r.ember_ms, 4), peer, ratio, r.algorithm}) << "\n";
  }
  out << "\n" << compared << " rows compared; ember slower than PyTorch on " << slower
      << " (speedup = pytorch ms / ember ms; the machine is shared, so re-run before trusting a close call)\n";
}

}  // namespace ember::bench
