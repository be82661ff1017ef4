// `ember bench losses`: the metric-learning losses in the form of pytorch-metric-learning's
// benchmark page, ember against the same formulas written plainly in PyTorch (eager, as PML
// computes them: whole B x B matrices) in the same run, alternating rounds (Note [Alternating
// rounds] in bench_kernels.h):
//   - ms per forward+backward and ember's peak extra MiB (the caching allocator's peak above
//     what was live before the call) for two profiles: standard (batch 512, dim 128, 4 per class;
//     ArcFace/ProxyAnchor 1,024 classes, cyclic labels) and large (dim 512, 16 per class, 10,000
//     classes);
//   - batch capacity: the largest batch (doubling from 512) whose forward+backward fits
//     --budget-mib of extra memory (ember: the allocator's memory limit, Note [Memory limit];
//     PyTorch: the peak resident set of a fresh process above its baseline) within --time-cap-s.
//
//   ember bench losses --budget-mib 256 --rounds 3
//   ember bench losses --no-capacity --profiles standard --losses arcface,supcon
//   ember bench losses --precision bf16 --no-capacity   // PML's BF16 table: bf16 embeddings
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/device.h"

namespace ember::bench {

struct BenchLossesOptions {
  Device device = Device::cpu();
  int rounds = 3;
  int64_t budget_mib = 256;   // extra memory a capacity run may use
  double time_cap_s = 5.0;    // longest forward+backward a capacity run may take
  int64_t max_batch = 65536;  // capacity search stops here
  bool capacity = true;
  std::vector<std::string> losses;    // the rows to time (names of apps/train/metric_losses.h); empty: all
  std::vector<std::string> profiles;  // "standard", "large"; empty: both
  std::string precision = "fp32";     // "bf16": the embeddings (and so the losses) in bf16, as PML's BF16 table
};

void bench_losses(std::ostream& out, std::ostream& log, const BenchLossesOptions& options = {});

}  // namespace ember::bench
