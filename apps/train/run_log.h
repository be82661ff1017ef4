// What a training run records per epoch, and the files it writes from that: a CSV with one row
// per epoch and an SVG with the loss and accuracy curves (drawn by ember, no dependency).
//
//   RunLog log;
//   log.add({.epoch = 1, .train_loss = 0.21, .test_loss = 0.07, .test_accuracy = 0.978, .seconds = 41});
//   log.write_csv("run.csv");
//   log.write_svg("curves.svg", "mnist_cnn on MNIST");
#pragma once

#include <string>
#include <vector>

namespace ember::apps {

struct EpochRecord {
  int epoch = 0;
  double train_loss = 0;
  double test_loss = 0;
  double test_accuracy = 0;  // in [0, 1]
  double seconds = 0;
  double lr = 0;
};

class RunLog {
 public:
  void add(const EpochRecord& r) { records_.push_back(r); }
  const std::vector<EpochRecord>& records() const { return records_; }
  void clear() { records_.clear(); }
  // Both write atomically (a temporary file renamed into place); failures throw ember::Error.
  void write_csv(const std::string& path) const;
  void write_svg(const std::string& path, const std::string& title) const;
  std::string svg(const std::string& title) const;

 private:
  std::vector<EpochRecord> records_;
};

}  // namespace ember::apps
