// BatchShardSampler: this rank's slice of every batch another sampler makes, for data-parallel
// training whose loss needs the whole global batch together (metric losses over all ranks,
// nn/distributed/global_batch_loss.h). The inner sampler builds global batches of
// world_size * batch_size samples (a class-balanced batch, say); rank r takes samples
// [r * batch_size, (r + 1) * batch_size) of each, in order.
//
//   auto global = std::make_shared<ClassBalancedSampler>(labels,
//       ClassBalancedOptions{.per_class = 8, .batch_size = 2 * 32});   // 2 ranks x 32
//   auto mine = std::make_shared<BatchShardSampler>(global, BatchShardOptions{
//       .rank = group->rank(), .world_size = 2, .batch_size = 32});
//   DataLoader loader(data, {.batch_size = 32, .seed = 1, .sampler = mine});   // same seed everywhere
//
// Note [Shards of a batch]: a DistributedSampler deals one epoch's samples round-robin, which
// is right when any sample may go with any other. A class-balanced batch is a unit: its classes
// and their per_class samples are chosen together, so the ranks must split each batch rather
// than draw their own. Every rank draws the same inner order (the loaders share the seed), so
// after the gather step k's global batch is exactly the one-process run's batch k at batch
// size world_size * batch_size, and a checkpoint resumes at any rank count that splits it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "datasets/sampler.h"

namespace ember {

struct BatchShardOptions {
  int rank = 0;
  int world_size = 1;
  int64_t batch_size = 1;  // per rank; the inner sampler's batches are world_size times larger
};

class BatchShardSampler : public Sampler {
 public:
  // The inner sampler's length must be whole global batches. Bad options are errors naming the
  // option, what was expected and what was given.
  BatchShardSampler(std::shared_ptr<const Sampler> inner, BatchShardOptions options);

  int64_t length() const override { return inner_->length() / options_.world_size; }
  std::vector<int64_t> draw_order(Generator& gen) const override;

 private:
  std::shared_ptr<const Sampler> inner_;
  BatchShardOptions options_;
};

}  // namespace ember
