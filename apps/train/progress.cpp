#include "apps/train/progress.h"

#include <unistd.h>

#include <cstdio>
#include <ostream>

namespace ember::apps {

std::string format_duration(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  return buf;
}

bool Progress::stderr_is_terminal() { return isatty(STDERR_FILENO) != 0; }

Progress::Progress(std::string label, int64_t total_steps, int64_t items_per_step, std::ostream& out, bool interactive)
    : label_(std::move(label)), total_(total_steps), items_per_step_(items_per_step), out_(out),
      interactive_(interactive), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done, double loss) {
  if (!interactive_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;  // ~10 redraws a second
  last_draw_ = now;
  const double elapsed = elapsed_seconds();
  const double rate = elapsed > 0 ? double(done * items_per_step_) / elapsed : 0;
  const double eta = done > 0 ? elapsed * double(total_ - done) / double(done) : 0;
  constexpr int kWidth = 28;
  const int filled = total_ > 0 ? int(kWidth * done / total_) : kWidth;
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  char line[256];
  std::snprintf(line, sizeof line, "\r%s [%s] %lld/%lld  loss %.4f  %.0f img/s  ETA %s   ", label_.c_str(), bar.c_str(),
                static_cast<long long>(done), static_cast<long long>(total_), loss, rate, format_duration(eta).c_str());
  out_ << line << std::flush;
}

void Progress::finish() {
  if (interactive_) out_ << "\r" << std::string(110, ' ') << "\r" << std::flush;
}

}  // namespace ember::apps
