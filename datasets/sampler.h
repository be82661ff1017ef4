// Sampler: decides which samples an epoch of a DataLoader visits, in which order. The
// DataLoader asks it for a whole epoch's order at the start of each epoch, drawing from the
// loader's own generator, so a sampler resumes exactly as the loader does (Note [Epochs and
// resume] in datasets/data_loader.h): same generator state, same order.
//
//   struct EveryOther : Sampler {                    // a toy: the even samples, in order
//     int64_t n;
//     int64_t length() const override { return n / 2; }
//     std::vector<int64_t> draw_order(Generator&) const override { ... }
//   };
//   DataLoader loader(data, {.batch_size = 64, .sampler = std::make_shared<EveryOther>(...)});
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace ember {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Samples per epoch: the size of every order draw_order() returns.
  virtual int64_t length() const = 0;
  // One epoch's sample indices; advances `gen` by an amount that depends only on the sampler
  // (never on the numbers drawn), so that equal generator states give equal orders.
  virtual std::vector<int64_t> draw_order(Generator& gen) const = 0;
};

}  // namespace ember
