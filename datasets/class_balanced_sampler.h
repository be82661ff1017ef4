// ClassBalancedSampler: batches of `per_class` samples from each of batch_size / per_class
// classes, the sampling metric-learning losses need (every anchor has positives in its batch).
// It follows pytorch-metric-learning's MPerClassSampler(labels, m, batch_size): for each
// batch, shuffle the classes and take the first batch_size / m; from each, m samples without
// replacement (with replacement when the class has fewer than m).
//
//   std::vector<int64_t> labels = ...;                     // one class id per sample
//   auto sampler = std::make_shared<ClassBalancedSampler>(labels,
//       ClassBalancedOptions{.per_class = 4, .batch_size = 64});   // 16 classes x 4 per batch
//   DataLoader loader(data, {.batch_size = 64, .seed = 1, .sampler = sampler});
//
// An epoch is `length` samples (default: the dataset size), rounded down to whole batches, so
// it sees about as many images as a pass over the data. Everything random comes from the
// DataLoader's generator (a fixed number of draws per epoch), so orders are deterministic from
// the seed and a resumed loader continues bitwise (datasets/sampler.h).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "datasets/sampler.h"

namespace ember {

struct ClassBalancedOptions {
  int64_t per_class = 4;   // m: samples of each class in a batch
  int64_t batch_size = 64; // a multiple of per_class, at most classes x per_class
  int64_t length = 0;      // samples per epoch before rounding down to batches; 0: the dataset size
};

class ClassBalancedSampler : public Sampler {
 public:
  // `labels`: one class id per sample (any integers). Bad options are errors that name the
  // option, what was expected and what was given.
  ClassBalancedSampler(const std::vector<int64_t>& labels, ClassBalancedOptions options);
  // The same from a (N) i64 label tensor on the CPU.
  ClassBalancedSampler(const Tensor& labels, ClassBalancedOptions options);

  int64_t length() const override { return batches_ * options_.batch_size; }
  std::vector<int64_t> draw_order(Generator& gen) const override;

  int64_t num_classes() const { return int64_t(classes_.size()); }
  int64_t classes_per_batch() const { return options_.batch_size / options_.per_class; }

 private:
  ClassBalancedOptions options_;
  std::vector<std::vector<int64_t>> classes_;  // sample indices of each class, classes in id order
  int64_t batches_ = 0;
};

// The labels of a (N) i64 CPU tensor as a vector.
std::vector<int64_t> labels_as_vector(const Tensor& labels);

}  // namespace ember
