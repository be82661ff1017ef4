// BatchShardSampler (batch_shard_sampler.h).
#include "datasets/batch_shard_sampler.h"

#include <utility>

#include "core/error.h"

namespace ember {

BatchShardSampler::BatchShardSampler(std::shared_ptr<const Sampler> inner, BatchShardOptions options)
    : inner_(std::move(inner)), options_(options) {
  EMBER_CHECK(inner_ != nullptr, "BatchShardSampler: expected an inner sampler, got null");
  EMBER_CHECK(options_.world_size >= 1, "BatchShardSampler: world_size must be >= 1, got ", options_.world_size);
  EMBER_CHECK(options_.rank >= 0 && options_.rank < options_.world_size, "BatchShardSampler: rank must be in [0, ",
              options_.world_size, "), got ", options_.rank);
  EMBER_CHECK(options_.batch_size >= 1, "BatchShardSampler: batch_size must be >= 1, got ", options_.batch_size);
  const int64_t global = options_.batch_size * options_.world_size;
  EMBER_CHECK(inner_->length() % global == 0, "BatchShardSampler: the inner sampler's ", inner_->length(),
              " samples per epoch are not whole global batches of ", options_.world_size, " x ", options_.batch_size,
              " = ", global);
}

std::vector<int64_t> BatchShardSampler::draw_order(Generator& gen) const {
  const std::vector<int64_t> all = inner_->draw_order(gen);
  const int64_t batch = options_.batch_size, global = batch * options_.world_size;
  std::vector<int64_t> mine;
  mine.reserve(all.size() / size_t(options_.world_size));
  for (size_t start = 0; start + size_t(global) <= all.size(); start += size_t(global)) {
    const auto first = all.begin() + std::ptrdiff_t(start + size_t(options_.rank * batch));
    mine.insert(mine.end(), first, first + batch);
  }
  return mine;
}

}  // namespace ember
