// Fuzz target for a checkpoint's run history (apps/train/run_log.h, RunLog::from_json: what a
// resumed `ember train` reads back from TrainingCheckpoint::history). The input is the history's
// JSON text. Any input either loads or throws ember::Error, and what loads survives the writer:
// to_json of the result reads back to the same records (NaN equal to NaN), and the curves draw.
// Another exception, a crash, a leak or a sanitizer report is a finding. Built as a corpus
// replay test and a libFuzzer binary (Note [Fuzzing] in CMakeLists.txt).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "apps/train/run_log.h"
#include "core/error.h"
#include "core/json.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_run_log: %s\n", what);
  std::abort();
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same(const ember::apps::EpochRecord& a, const ember::apps::EpochRecord& b) {
  if (a.epoch != b.epoch || !same(a.train_loss, b.train_loss) || !same(a.seconds, b.seconds) || !same(a.lr, b.lr) ||
      a.test_loss.has_value() != b.test_loss.has_value() || a.scores.size() != b.scores.size())
    return false;
  if (a.test_loss && !same(*a.test_loss, *b.test_loss)) return false;
  for (size_t i = 0; i < a.scores.size(); ++i)
    if (a.scores[i].first != b.scores[i].first || !same(a.scores[i].second, b.scores[i].second)) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ember::apps::RunLog;
  RunLog log;
  try {
    log = RunLog::from_json(ember::Json::parse({reinterpret_cast<const char*>(data), size}, "fuzz input"),
                            "fuzz history");
  } catch (const ember::Error&) {
    return 0;  // the contract: a malformed history is an ember::Error
  }
  const RunLog back = RunLog::from_json(ember::Json::parse(log.to_json().dump(), "fuzz round trip"), "fuzz round trip");
  if (back.records().size() != log.records().size()) finding("to_json of a loaded history reads back another length");
  for (size_t i = 0; i < log.records().size(); ++i)
    if (!same(log.records()[i], back.records()[i])) finding("to_json of a loaded history reads back different");
  if (log.svg("fuzz").find("</svg>") == std::string::npos) finding("the curves of a loaded history are not an SVG");
  return 0;
}
