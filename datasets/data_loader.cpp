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

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Philox blocks each sample's stream may use before it would reach the next sample's; an
// augmentation draws a few dozen words (RandomResizedCrop's 10 attempts, a flip).
constexpr uint64_t kBlocksPerSample = uint64_t(1) << 20;

// The shape of `t` with `rows` prepended.
Shape stacked_shape(int64_t rows, const Tensor& t) {
  Shape shape{rows};
  shape.insert(shape.end(), t.shape().begin(), t.shape().end());
  return shape;
}

}  // namespace

Generator sample_generator(uint64_t seed, int64_t epoch, int64_t position) {
  // A key per (seed, epoch) and a counter range per position: distinct streams for every draw.
  Generator gen(splitmix64(seed ^ splitmix64(uint64_t(epoch))));
  gen.set_state(gen.seed(), uint64_t(position) * kBlocksPerSample);
  return gen;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> data, DataLoaderOptions options)
    : data_(std::move(data)), options_(std::move(options)), gen_(options_.seed) {
  EMBER_CHECK(data_ != nullptr, "DataLoader: got a null dataset");
  EMBER_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be > 0, got ", options_.batch_size);
  EMBER_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be >= 0, got ", options_.prefetch);
  EMBER_CHECK(options_.workers >= 1, "DataLoader: workers must be >= 1, got ", options_.workers);
}

DataLoader::~DataLoader() { stop_workers(); }

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
  stop_workers();
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
  Batch batch;
  // Copies one sample's tensor into row `row` of the batch tensor `out`, allocated from the
  // first sample's shape; every later sample must match it.
  auto place = [&](Tensor& out, const Tensor& value, int64_t row, int64_t index, const char* role) {
    EMBER_CHECK(value.defined() && value.is_cpu(), "DataLoader: sample ", index, "'s ", role,
                " must be a defined CPU tensor");
    if (row == 0) out = Tensor::empty(stacked_shape(count, value), {.dtype = value.dtype()});
    const Shape first(out.shape().begin() + 1, out.shape().end());
    EMBER_CHECK(value.shape() == first && value.dtype() == out.dtype(), "DataLoader: sample ", index, " (row ", row,
                " of batch ", batch_index, ") has ", role, " ", shape_str(value.shape()), " ", dtype_name(value.dtype()),
                ", but the batch's first sample has ", shape_str(first), " ", dtype_name(out.dtype()),
                "; the samples of a batch must have equal shapes (resize or crop images to one size)");
    const Tensor dense = value.contiguous();
    std::memcpy(static_cast<uint8_t*>(out.raw_data()) + size_t(row) * dense.nbytes(), dense.raw_data(), dense.nbytes());
  };
  for (int64_t row = 0; row < count; ++row) {
    const int64_t position = start + row, index = order_[size_t(position)];
    Generator rng = sample_generator(gen_.seed(), epoch_, position);
    const Sample sample = data_->get(index, rng);
    place(batch.inputs, sample.input, row, index, "input");
    place(batch.targets, sample.target, row, index, "target");
  }
  if (options_.transform) options_.transform(batch);
  return batch;
}

void DataLoader::work() {
  for (;;) {
    int64_t b = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || next_claim_ >= size() || next_claim_ < cursor_ + options_.prefetch; });
      if (stop_ || next_claim_ >= size()) return;
      b = next_claim_++;
    }
    Slot slot;
    try {
      slot.batch = assemble(b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (stop_) return;
    ready_.emplace(b, std::move(slot));
    changed_.notify_all();
  }
}

void DataLoader::start_workers() {
  stop_ = false;
  next_claim_ = cursor_;
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { work(); });
}

void DataLoader::stop_workers() {
  if (workers_.empty()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  ready_.clear();
  stop_ = false;
}

std::optional<Batch> DataLoader::next() {
  if (epoch_ == 0 || (cursor_ == size() && end_reported_)) start_epoch();
  if (cursor_ == size()) {
    stop_workers();
    end_reported_ = true;
    return std::nullopt;
  }
  if (options_.prefetch == 0) {
    Batch batch = assemble(cursor_);
    ++cursor_;
    return batch;
  }
  if (workers_.empty()) start_workers();
  Slot slot;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return ready_.count(cursor_) > 0; });
    auto it = ready_.find(cursor_);
    slot = std::move(it->second);
    ready_.erase(it);
    if (!slot.error) ++cursor_;  // lets the workers claim one more batch
  }
  changed_.notify_all();
  if (slot.error) {
    stop_workers();  // the batch is assembled again by the next call
    std::rethrow_exception(slot.error);
  }
  return std::move(slot.batch);
}

DataLoaderState DataLoader::state() const {
  return {gen_.seed(), epoch_ == 0 ? gen_.offset() : epoch_offset_, epoch_, cursor_};
}

void DataLoader::set_state(const DataLoaderState& s) {
  EMBER_CHECK(s.epoch >= 0 && s.batch >= 0 && s.batch <= size() && (s.epoch > 0 || s.batch == 0),
              "DataLoader::set_state: batch ", s.batch, " of epoch ", s.epoch, " does not exist (", size(),
              " batches per epoch)");
  stop_workers();
  gen_.set_state(s.seed, s.offset);
  epoch_ = s.epoch;
  cursor_ = s.batch;
  end_reported_ = false;
  if (epoch_ > 0) draw_order();  // advances the generator exactly as the original draw did
}

}  // namespace ember
