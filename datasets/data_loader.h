// DataLoader: shuffled mini-batches of a Dataset (datasets/dataset.h), assembled by worker threads.
//
//   auto data = std::make_shared<MnistDataset>("/work/data/mnist", true);
//   DataLoader loader(data, {.batch_size = 64, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (auto& [x, y] : loader) train_step(x, y);   // one epoch per range-for
//   // or: while (auto batch = loader.next()) ...;     // nullopt ends the epoch
//   DataLoaderState saved = loader.state();            // resume mid-epoch with set_state
//
//   auto images = std::make_shared<ImageFolder>("photos/train", ...);   // decodes per sample
//   DataLoader decoded(images, {.batch_size = 32, .prefetch = 4, .workers = 4});
//
// Note [Epochs and resume]: each epoch's order is a Fisher-Yates permutation drawn from the
// loader's own Philox generator, so it depends only on (seed, generator offset at the start of
// the epoch). state() records that offset, the epoch count and the batches already handed out;
// set_state() redraws the same permutation and continues with the next batch, so a resumed
// run sees exactly the batches an uninterrupted one would.
//
// With `sampler` set, the sampler draws each epoch's order (of sampler->length() samples) from
// the same generator instead of the shuffle, and resumes the same way (datasets/sampler.h).
//
// Note [Per-sample randomness]: a data set that augments draws from the Generator get() is
// given, which is keyed by (seed, epoch, position of the sample in the epoch's order) alone
// (sample_generator below), never by a generator shared between threads. So a batch's values
// do not depend on the number of workers, on which worker built it, or on prefetching, and a
// resumed run (which knows seed, epoch and position from its DataLoaderState) recomputes the
// same augmentations bitwise. Keying by the position rather than the sample index gives a
// sample that a sampler draws twice in one epoch two different augmentations. These streams
// are separate from the loader's generator: drawing them never moves the order's offset.
//
// Note [Prefetch]: with prefetch > 0, `workers` threads assemble the next batches of the epoch
// (get() per sample, copied into one contiguous tensor per batch, then `transform`) while the
// caller trains. Workers claim batches in order, and at most `prefetch` batches past the last
// one returned are claimed (being built or waiting) at any time; next() returns them in order.
// So prefetch >= workers keeps every worker busy. The workers live for one epoch; they are
// stopped and joined on epoch end, set_state, and destruction; an exception thrown while
// assembling a batch is rethrown by the next() that would have returned that batch.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "datasets/dataset.h"
#include "datasets/sampler.h"
#include "datasets/tensor_dataset.h"

namespace ember {

struct Batch {
  Tensor inputs;   // (B, ...) the samples' inputs stacked
  Tensor targets;  // (B, ...) their targets stacked
};

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  uint64_t seed = 0;
  int prefetch = 2;        // batches assembled ahead; 0: on the caller's thread
  int workers = 1;         // threads assembling batches when prefetch > 0 (Note [Prefetch])
  // Applied to every batch after it is gathered (on the worker thread when prefetching).
  std::function<void(Batch&)> transform;
  // Draws each epoch's order instead of `shuffle` (e.g. ClassBalancedSampler); null: all samples.
  std::shared_ptr<const Sampler> sampler;
};

struct DataLoaderState {
  uint64_t seed = 0;
  uint64_t offset = 0;   // generator offset at the start of the current epoch
  int64_t epoch = 0;     // epochs started
  int64_t batch = 0;     // batches of the current epoch already returned
};

// A random permutation of 0..n-1 (Fisher-Yates on Philox words); advances `gen`.
std::vector<int64_t> random_permutation(int64_t n, Generator& gen);

// The stream a sample's get() draws from (Note [Per-sample randomness]): a function of the
// loader's seed, the epoch (1 for the first) and the sample's position in that epoch's order.
Generator sample_generator(uint64_t seed, int64_t epoch, int64_t position);

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> data, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t size() const;  // batches per epoch
  int64_t epoch() const { return epoch_; }
  const Dataset& dataset() const { return *data_; }

  // The next batch of the current epoch; nullopt once it is exhausted, after which the next
  // call starts a new epoch.
  std::optional<Batch> next();

  class Iterator {
   public:
    using difference_type = std::ptrdiff_t;
    using value_type = Batch;
    explicit Iterator(DataLoader* loader) : loader_(loader) { ++*this; }
    Batch& operator*() { return *current_; }
    Iterator& operator++() {
      current_ = loader_->next();
      return *this;
    }
    bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

   private:
    DataLoader* loader_;
    std::optional<Batch> current_;
  };
  // The rest of the current epoch, or a new epoch when none is under way.
  Iterator begin();
  std::default_sentinel_t end() { return {}; }

  DataLoaderState state() const;
  void set_state(const DataLoaderState& state);

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  void start_epoch();
  void draw_order();
  Batch assemble(int64_t batch_index) const;
  void start_workers();
  void stop_workers();
  void work();  // one worker thread's loop

  std::shared_ptr<const Dataset> data_;
  DataLoaderOptions options_;
  Generator gen_;
  std::vector<int64_t> order_;
  uint64_t epoch_offset_ = 0;
  int64_t epoch_ = 0;
  int64_t cursor_ = 0;          // batches returned in this epoch (written under mutex_)
  bool end_reported_ = false;   // next() already returned nullopt for this epoch

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, Slot> ready_;  // assembled batches of this epoch by index, not yet returned
  int64_t next_claim_ = 0;         // the next batch a worker will assemble
  bool stop_ = false;
};

}  // namespace ember
