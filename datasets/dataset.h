// Dataset: what a DataLoader reads. A data set has size() samples; get(i, rng) returns sample i
// as an (input, target) pair of CPU tensors without the batch dimension. The loader stacks the
// samples of a batch along a new first dim, so every sample of a batch must have the same shapes.
//
//   struct Squares : Dataset {                        // a toy: input i*i, target i
//     int64_t size() const override { return 100; }
//     Sample get(int64_t i, Generator&) const override { ... }
//   };
//   DataLoader loader(std::make_shared<Squares>(), {.batch_size = 10});
//
// `rng` is the sample's own Philox stream (Note [Per-sample randomness] in
// datasets/data_loader.h): a data set that augments (datasets/image_folder.h) draws from it
// only, so a sample's augmentation does not depend on which worker thread built it or when.
// get() is called concurrently from the loader's worker threads: it must not mutate shared state
// without its own synchronisation.
#pragma once

#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"

namespace ember {

struct Sample {
  Tensor input;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Sample get(int64_t index, Generator& rng) const = 0;
};

}  // namespace ember
