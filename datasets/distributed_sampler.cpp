// DistributedSampler (distributed_sampler.h), index for index PyTorch's.
#include "datasets/distributed_sampler.h"

#include <numeric>

#include "core/error.h"
#include "datasets/data_loader.h"

namespace ember {

DistributedSampler::DistributedSampler(int64_t num_samples, DistributedSamplerOptions options)
    : num_samples_(num_samples), options_(options) {
  const int64_t r = options.world_size;
  EMBER_CHECK(r >= 1, "DistributedSampler: world_size must be at least 1, got ", r);
  EMBER_CHECK(options.rank >= 0 && options.rank < r, "DistributedSampler: rank must be in [0, ", r, "), got ",
              options.rank);
  EMBER_CHECK(num_samples >= 1, "DistributedSampler: expected a dataset of at least one sample, got ", num_samples);
  EMBER_CHECK(!options.drop_last || num_samples >= r, "DistributedSampler: drop_last with ", num_samples,
              " samples leaves nothing for ", r, " ranks; expected at least one sample per rank");
  // PyTorch: drop_last and N % R != 0 -> ceil((N - R) / R) = floor(N / R); else ceil(N / R).
  per_rank_ = options.drop_last ? num_samples / r : (num_samples + r - 1) / r;
}

std::vector<int64_t> DistributedSampler::draw_order(Generator& gen) const {
  std::vector<int64_t> all;
  if (options_.shuffle) {
    all = random_permutation(num_samples_, gen);
  } else {
    all.resize(size_t(num_samples_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  const int64_t r = options_.world_size, total = per_rank_ * r;
  std::vector<int64_t> shard;
  shard.reserve(size_t(per_rank_));
  // Position i of the padded (or cut) list is all[i mod N]: padding repeats the start.
  for (int64_t i = options_.rank; i < total; i += r) shard.push_back(all[size_t(i % num_samples_)]);
  return shard;
}

}  // namespace ember
