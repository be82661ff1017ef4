#include "apps/bench/bench_kernels.h"

#include <algorithm>
#include <functional>
#include <map>
#include <ostream>

#include "apps/bench/bench_kernels_conv.h"
#include "apps/bench/bench_kernels_nn.h"
#include "apps/bench/bench_kernels_seresnext.h"
#include "apps/bench/onednn_peer.h"
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
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].ember_ms = std::min(rows[i].ember_ms, measured[i].ember_ms);
      if (measured[i].onednn_ms >= 0 && (rows[i].onednn_ms < 0 || measured[i].onednn_ms <= rows[i].onednn_ms)) {
        rows[i].onednn_ms = measured[i].onednn_ms;  // the best round's time and what it ran
        rows[i].onednn_implementation = measured[i].onednn_implementation;
      }
    }
    log << ", pytorch\n" << std::flush;
    for (const RowSet& set : sets)
      if (selected(set))
        for (const auto& [name, ms] : run_peer_script(set.script, args)) keep_best(torch, name, ms);
  }

  // oneDNN's columns where it is built in and timed a row (CPU convolutions).
  const bool with_onednn = std::any_of(rows.begin(), rows.end(), [](const KernelRow& r) { return r.onednn_ms >= 0; });
  std::vector<std::string> columns{"kernel", "ember ms", "pytorch ms", "speedup", "algorithm"};
  std::vector<int> widths{50, 10, 11, 8, 14};
  if (with_onednn) {
    columns.insert(columns.end(), {"onednn ms", "vs onednn", "onednn impl"});
    widths.insert(widths.end(), {10, 10, 28});
  }
  Table table(columns, widths);
  out << "peer: " << peer_identity() << "\n";
  if (with_onednn) out << "peer: " << onednn::identity() << ", timed right after ember's row\n";
  out << table.header() << "\n";
  int slower = 0, compared = 0, onednn_slower = 0, onednn_compared = 0;
  for (const KernelRow& r : rows) {
    auto it = torch.find(r.name);
    std::string peer = "n/a", ratio = "n/a";
    if (it != torch.end()) {
      peer = fixed(it->second, 4);
      ratio = fixed(it->second / r.ember_ms, 2) + "x";
      ++compared;
      if (r.ember_ms > it->second) ++slower;
    }
    std::vector<std::string> cells{r.name, fixed(r.ember_ms, 4), peer, ratio, r.algorithm};
    if (with_onednn) {
      cells.push_back(r.onednn_ms >= 0 ? fixed(r.onednn_ms, 4) : "n/a");
      cells.push_back(r.onednn_ms >= 0 ? fixed(r.onednn_ms / r.ember_ms, 2) + "x" : "n/a");
      cells.push_back(r.onednn_ms >= 0 ? r.onednn_implementation : "");
      if (r.onednn_ms >= 0) {
        ++onednn_compared;
        if (r.ember_ms > r.onednn_ms) ++onednn_slower;
      }
    }
    out << table.row(cells) << "\n";
  }
  out << "\n" << compared << " rows compared; ember slower than PyTorch on " << slower
      << " (speedup = pytorch ms / ember ms; the machine is shared, so re-run before trusting a close call)\n";
  if (with_onednn)
    out << onednn_compared << " rows compared with oneDNN; ember slower on " << onednn_slower
        << " (vs onednn = onednn ms / ember ms; oneDNN runs in its own blocked layouts, reordered outside the timing"
           " (Note [oneDNN peer layouts]), and its forward rows leave out the bias; onednn impl: what oneDNN's"
           " convolution_auto chose, jit_wino_4x3 being Winograd F(4x4, 3x3), where PyTorch asks oneDNN for direct"
           " convolutions (Note [oneDNN's algorithm]))\n";
}

}  // namespace ember::bench
