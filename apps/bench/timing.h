// Timing for benchmarks: warm up, then report the median of several timed blocks. Callers
// synchronise the device inside `fn` only where a block must end (never per op).
//
//   double ms = median_ms([&] { matmul(a, b); }, {.warmup = 2, .blocks = 7, .iters = 5});
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ember::bench {

struct TimingOptions {
  int warmup = 2;          // untimed calls before the first block ...
  double warmup_ms = 50;   // ... and at least this long: the first row of a run otherwise pays for
                           // first touches and clock ramp-up (it measured up to 1.7x slow)
  int blocks = 7;  // timed blocks; the median block is reported
  int iters = 0;   // calls per block; 0: enough for about 20 ms per block
  // Waits for queued device work (cuda::synchronize for GPU timings); called after the warm-up
  // and at the end of every block, never per call.
  std::function<void()> sync;
};

// Milliseconds per call of fn: the median over blocks of (block time / calls in the block).
inline double median_ms(const std::function<void()>& fn, TimingOptions opt = {}) {
  using clock = std::chrono::steady_clock;
  auto sync = [&] { if (opt.sync) opt.sync(); };
  const auto warm_start = clock::now();
  auto warm_ms = [&] { return std::chrono::duration<double, std::milli>(clock::now() - warm_start).count(); };
  for (int i = 0; i < opt.warmup; ++i) fn();
  sync();
  while (warm_ms() < opt.warmup_ms) {
    fn();
    sync();
  }
  int iters = opt.iters;
  if (iters <= 0) {  // calibrate on one call
    const auto t0 = clock::now();
    fn();
    sync();
    const double one = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    iters = std::clamp(int(20.0 / std::max(one, 1e-3)), 1, 10000);
  }
  std::vector<double> per_call;
  for (int b = 0; b < opt.blocks; ++b) {
    const auto t0 = clock::now();
    for (int i = 0; i < iters; ++i) fn();
    sync();
    per_call.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count() / iters);
  }
  std::nth_element(per_call.begin(), per_call.begin() + per_call.size() / 2, per_call.end());
  return per_call[per_call.size() / 2];
}

// A fixed-width text table: header once, then rows of cells.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<int> widths)
      : header_(std::move(header)), widths_(std::move(widths)) {}
  std::string header() const { return row(header_) + "\n" + std::string(size_t(total()), '-'); }
  std::string row(const std::vector<std::string>& cells) const {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      const int w = i < widths_.size() ? widths_[i] : 12;
      std::string c = cells[i];
      if (int(c.size()) < w) c = (i == 0 ? c + std::string(size_t(w) - c.size(), ' ') : std::string(size_t(w) - c.size(), ' ') + c);
      line += (i ? "  " : "") + c;
    }
    return line;
  }

 private:
  int total() const {
    int t = 0;
    for (int w : widths_) t += w + 2;
    return t - 2;
  }
  std::vector<std::string> header_;
  std::vector<int> widths_;
};

// "12.34" with the given decimals.
inline std::string fixed(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace ember::bench
