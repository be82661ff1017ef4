// Progress of a long loop. When `interactive` (its stream is a terminal): one self-overwriting bar
// with speed and ETA; otherwise nothing per step (the caller prints one line per epoch).
//
//   Progress bar("epoch 1/3", batches, batch_size, std::cerr, Progress::stderr_is_terminal());
//   for (...) { ...; bar.update(i + 1, loss); }
//   bar.finish();
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace ember::apps {

class Progress {
 public:
  // `items_per_step` converts steps to images for the speed figure.
  Progress(std::string label, int64_t total_steps, int64_t items_per_step, std::ostream& out, bool interactive);
  void update(int64_t done_steps, double loss);
  void finish();  // clears the bar line
  double elapsed_seconds() const;

  static bool stderr_is_terminal();

 private:
  std::string label_;
  int64_t total_, items_per_step_;
  std::ostream& out_;
  bool interactive_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1m05s", "12.3s".
std::string format_duration(double seconds);

}  // namespace ember::apps
