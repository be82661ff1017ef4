#include "datasets/data_loader.h"

#include <cstring>
#include <numeric>

#include "core/error.h"

namespace ember {

std::vector<int64_t> random_permutation(int64_t n, Generator& gen) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (n < 2) return order;
  // Two 64-bit draws per Philox block; the modulo bias of a 64-bit draw is below 2^-40 for
  // any data set that fits in memory.
  const uint64_t first = gen.reserve(uint64_t(n + 1) / 2);
  for (int64_t i = n - 1, k = 0; i > 0; --i, ++k) {
    const auto w = gen.block(first + uint64_t(k) / 2);
    const uint64_t r = k % 2 == 0 ? (uint64_t(w[1]) << 32 | w[0]) : (uint64_t(w[3]) << 32 | w[2]);
    std::swap(order[size_t(i)], order[size_t(r % uint64_t(i + 1))]);
  }
  return order;
}

DataLoader::DataLoader(std::shared_ptr<const TensorDataset> data, DataLoaderOptions options)
    : data_(std::move(data)), options_(std::move(options)), gen_(options_.seed) {
  EMBER_CHECK(data_ != nullptr, "DataLoader: got a null dataset");
  EMBER_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be > 0, got ", options_.batch_size);
  EMBER_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be >= 0, got ", options_.prefetch);
}

DataLoader::~DataLoader() { stop_worker(); }

int64_t DataLoader::size() const {
  const int64_t n = options_.sampler ? options_.sampler->length() : data_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::draw_order() {
  epoch_offset_ = gen_.offset();
  if (options_.sampler) {
    order_ = options_.sampler->draw_order(gen_);
    EMBER_CHECK(int64_t(order_.size()) == options_.sampler->length(), "DataLoader: the sampler drew ",
                order_.size(), " indices, but its length() is ", options_.sampler->length());
    for (int64_t i : order_)
      EMBER_CHECK(i >= 0 && i < data_->size(), "DataLoader: the sampler drew sample ", i, ", outside the ",
                  data_->size(), " samples of the dataset");
  } else if (options_.shuffle) {
    order_ = random_permutation(data_->size(), gen_);
  } else {
    order_.resize(size_t(data_->size()));
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
}

void DataLoader::start_epoch() {
  stop_worker();
  draw_order();
  ++epoch_;
  cursor_ = 0;
  end_reported_ = false;
}

DataLoader::Iterator DataLoader::begin() {
  if (epoch_ == 0 || cursor_ == size()) start_epoch();
  return Iterator(this);
}

Batch DataLoader::assemble(int64_t batch_index) const {
  const int64_t start = batch_index * options_.batch_size;
  const int64_t count = std::min(options_.batch_size, int64_t(order_.size()) - start);
  auto gather = [&](const Tensor& rows) {
    Shape shape = rows.shape();
    shape[0] = count;
    Tensor out = Tensor::empty(shape, {.dtype = rows.dtype()});
    const size_t row_bytes = rows.size(0) == 0 ? 0 : rows.nbytes() / size_t(rows.size(0));
    const auto* src = static_cast<const uint8_t*>(rows.raw_data());
    auto* dst = static_cast<uint8_t*>(out.raw_data());
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(dst + size_t(i) * row_bytes, src + size_t(order_[size_t(start + i)]) * row_bytes, row_bytes);
    return out;
  };
  Batch batch{gather(data_->inputs()), gather(data_->targets())};
  if (options_.transform) options_.transform(batch);
  return batch;
}

void DataLoader::start_worker() {
  stop_ = false;
  worker_ = std::thread([this, first = cursor_] {
    for (int64_t b = first; b < size(); ++b) {
      Slot slot;
      try {
        slot.batch = assemble(b);
      } catch (...) {
        slot.error = std::current_exception();
      }
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || int64_t(queue_.size()) < options_.prefetch; });
      if (stop_) return;
      const bool failed = slot.error != nullptr;
      queue_.push_back(std::move(slot));
      changed_.notify_all();
      if (failed) return;
    }
  });
}

void DataLoader::stop_worker() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
  queue_.clear();
  stop_ = false;
}

std::optional<Batch> DataLoader::next() {
  if (epoch_ == 0 || (cursor_ == size() && end_reported_)) start_epoch();
  if (cursor_ == size()) {
    stop_worker();
    end_reported_ = true;
    return std::nullopt;
  }
  if (options_.prefetch == 0) return assemble(cursor_++);
  if (!worker_.joinable()) start_worker();
  Slot slot;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty(); });
    slot = std::move(queue_.front());
    queue_.pop_front();
  }
  changed_.notify_all();
  if (slot.error) {
    stop_worker();  // the worker has exited; join it so the loader can be reused or destroyed
    std::rethrow_exception(slot.error);
  }
  ++cursor_;
  return std::move(slot.batch);
}

DataLoaderState DataLoader::state() const {
  return {gen_.seed(), epoch_ == 0 ? gen_.offset() : epoch_offset_, epoch_, cursor_};
}

void DataLoader::set_state(const DataLoaderState& s) {
  EMBER_CHECK(s.epoch >= 0 && s.batch >= 0 && s.batch <= size() && (s.epoch > 0 || s.batch == 0),
              "DataLoader::set_state: batch ", s.batch, " of epoch ", s.epoch, " does not exist (", size(),
              " batches per epoch)");
  stop_worker();
  gen_.set_state(s.seed, s.offset);
  epoch_ = s.epoch;
  cursor_ = s.batch;
  end_reported_ = false;
  if (epoch_ > 0) draw_order();  // advances the generator exactly as the original draw did
}

}  // namespace ember
