// DistributedSampler: this rank's shard of each epoch, for data-parallel training (one
// DataLoader per rank, nn/distributed/). It follows PyTorch's
// torch.utils.data.DistributedSampler(dataset, num_replicas, rank, shuffle, drop_last): every
// rank draws the same permutation of the N samples, pads it by repeating its start to a
// multiple of the world size R (or, with drop_last, cuts it down to one), and takes every R-th
// index starting at its rank. So the shards are disjoint, equally long (ceil(N / R) each, or
// floor with drop_last), and together cover every sample.
//
//   auto sampler = std::make_shared<DistributedSampler>(data->size(), DistributedSamplerOptions{
//       .rank = group->rank(), .world_size = group->size()});
//   DataLoader loader(data, {.batch_size = 64, .seed = 1, .sampler = sampler});   // per rank
//
// The permutation comes from the DataLoader's generator (datasets/sampler.h), so every rank
// must give its loader the same seed (PyTorch's sampler has its own seed for the same reason);
// a new epoch then draws a new permutation, as set_epoch() does in PyTorch, and a loader
// resumed from its DataLoaderState redraws the same one.
#pragma once

#include <cstdint>
#include <vector>

#include "datasets/sampler.h"

namespace ember {

struct DistributedSamplerOptions {
  int rank = 0;
  int world_size = 1;
  bool shuffle = true;     // false: the samples in order, then sharded
  bool drop_last = false;  // cut the tail instead of padding to a multiple of world_size
};

class DistributedSampler : public Sampler {
 public:
  // `num_samples`: the dataset's size. Bad options are errors naming the option.
  DistributedSampler(int64_t num_samples, DistributedSamplerOptions options);

  int64_t length() const override { return per_rank_; }
  std::vector<int64_t> draw_order(Generator& gen) const override;

 private:
  int64_t num_samples_;
  DistributedSamplerOptions options_;
  int64_t per_rank_;
};

}  // namespace ember
