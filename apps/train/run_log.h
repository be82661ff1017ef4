// What a training run records per epoch, and the files it writes from that: a CSV with one row
// per epoch and an SVG with the loss curves and the test scores (drawn by ember, no dependency).
//
//   RunLog log;
//   log.add({.epoch = 1, .train_loss = 0.21, .test_loss = 0.07, .scores = {{"test_accuracy", 0.978}}, .seconds = 41});
//   log.add({.epoch = 2, .train_loss = 0.12, .test_loss = 0.05, .scores = {{"test_accuracy", 0.984}}, .seconds = 40});
//   RunLog metric;  // a run without a test loss
//   metric.add({.epoch = 1, .train_loss = 0.9, .scores = {{"precision_at_1", 0.98}, {"map_at_r", 0.91}}});
//   log.write_csv("run.csv");
//   log.write_svg("curves.svg", "mnist_cnn on MNIST");
//   checkpoint.history = log.to_json().dump();  // and RunLog::from_json on resume
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace ember::apps {

struct EpochRecord {
  int epoch = 0;
  double train_loss = 0;
  std::optional<double> test_loss;  // a run without one (metric learning) leaves it out
  // Test scores in [0, 1], by CSV column name ("test_accuracy"); every record of a log has the
  // same names in the same order.
  std::vector<std::pair<std::string, double>> scores;
  double seconds = 0;
  double lr = 0;
};

class RunLog {
 public:
  // Records are one table: each has the first one's columns (test loss or not, the same score
  // names in the same order) and the epoch after the last one's; anything else is an Error.
  void add(const EpochRecord& r);
  const std::vector<EpochRecord>& records() const { return records_; }
  void clear() { records_.clear(); }
  // Columns: epoch, train_loss, test_loss (when the records have one), the scores, seconds, lr.
  // Both write atomically (a temporary file renamed into place); failures throw ember::Error.
  void write_csv(const std::string& path) const;
  void write_svg(const std::string& path, const std::string& title) const;
  std::string svg(const std::string& title) const;
  // The records as a JSON array, and back: a checkpoint keeps them (TrainingCheckpoint::history),
  // so that a resumed run writes the whole run's CSV and curves. Non-finite values (a diverged
  // loss) are kept as the strings "nan", "inf" and "-inf", which JSON lacks. A malformed history
  // is an Error naming `where` and the field.
  Json to_json() const;
  static RunLog from_json(const Json& history, const std::string& where);

 private:
  // Why `r` cannot follow the records, or "" when it can.
  std::string mismatch(const EpochRecord& r) const;

  std::vector<EpochRecord> records_;
};

}  // namespace ember::apps
