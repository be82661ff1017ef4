// What an `ember train` command does differently when it is one rank of a data-parallel job
// (`mpirun -np N ember train ...`), in one place, so that each command reads the same alone and
// under mpirun:
//
//   DataParallelRun dp(c.group);                        // null group: one process, no-ops
//   options.sampler = dp.sampler(train_data->size());   // this rank's shard of every epoch
//   std::shared_ptr<Module> trained = dp.replicate(model);   // DistributedDataParallel
//   std::ostream& shown = dp.leads() ? out : dp.silent();    // rank 0 alone prints
//   dp.sum(values);                                     // evaluation sums over all ranks
//   Tensor loss = dp.loss_over_ranks(emb, y, metric);   // a metric loss of the global batch
//   dp.after_outputs([&] { write_epoch_outputs(...); });     // rank 0 writes, the rest wait
//
// Note [Training under mpirun]: every rank runs the same command with the same flags; rank and
// world size come from the MPI environment (process_group_from_environment). Each rank trains a
// DistributedDataParallel replica on its DistributedSampler shard: the permutation a
// one-process run draws with the same seed, dealt round-robin, so with --batch-size B per rank
// (as in PyTorch) the N ranks' step k together sees exactly the one-process run's batch k at
// batch size N * B, and the averaged gradients are that run's to rounding. Rank 0 alone prints,
// shows progress and writes the checkpoint, CSV and SVG; the other ranks wait at a barrier until
// it has, so a checkpoint is complete before any rank goes on or exits. The test set is split
// into contiguous shards whose sums are all-reduced. The epoch's train loss is the mean over
// every rank's images. An error on any rank stops the whole job (Note [Failing ranks],
// process_group.h): `ember` reports it and aborts the other ranks instead of leaving them waiting.
// A checkpoint is the model's own state (no "module." prefix), so it resumes alone or at any
// rank count: the loader's generator decides each epoch's permutation whatever the shards are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "datasets/sampler.h"
#include "nn/distributed/process_group.h"
#include "nn/module.h"

namespace ember::apps {

// The group of all ranks when this process was started by mpirun with more than one rank (MPI
// for a cpu device, NCCL for cuda); null otherwise.
std::shared_ptr<distributed::ProcessGroup> process_group_from_environment(Device device);

// The device this process trains on for --device `device`: under mpirun, "cuda" means this
// rank's own GPU (Note [One GPU per rank] in nn/distributed/process_group.h). The recipe and the
// checkpoint keep the flag as given, so a resumed job maps its ranks the same way.
Device training_device(const std::string& device);

class DataParallelRun {
 public:
  explicit DataParallelRun(std::shared_ptr<distributed::ProcessGroup> group) : group_(std::move(group)) {}

  bool distributed() const { return group_ != nullptr; }
  int rank() const { return group_ ? group_->rank() : 0; }
  int world_size() const { return group_ ? group_->size() : 1; }
  bool leads() const { return rank() == 0; }  // prints and writes the outputs

  // This rank's shard of a dataset of `num_samples` (shuffled by the loader's generator); null
  // for one process (the loader's own shuffle).
  std::shared_ptr<const Sampler> sampler(int64_t num_samples) const;
  // The module that trains: a DistributedDataParallel around `model` (whose parameters it then
  // shares), or `model` itself.
  std::shared_ptr<Module> replicate(std::shared_ptr<Module> model) const;
  // This rank's slice of every batch of `global`, whose batches are world_size() * batch_size
  // samples (Note [Shards of a batch], datasets/batch_shard_sampler.h); `global` itself for one
  // process.
  std::shared_ptr<const Sampler> batch_sampler(std::shared_ptr<const Sampler> global, int64_t batch_size) const;
  // A metric loss over every rank's batch together (nn/distributed/global_batch_loss.h); one
  // process: loss(embeddings, labels).
  Tensor loss_over_ranks(const Tensor& embeddings, const Tensor& labels,
                         const std::function<Tensor(const Tensor&, const Tensor&)>& loss) const;
  // Every rank's rows of `local` in rank order (an evaluation's shards joined); `local` itself for
  // one process.
  Tensor gather_rows(const Tensor& local) const;
  // [begin, end) of this rank's contiguous part of n items (the first n % size ranks one more).
  std::pair<int64_t, int64_t> shard_range(int64_t n) const;
  // The samples of shard_range(num_samples) in order (an evaluation's shard); null for one process.
  std::shared_ptr<const Sampler> evaluation_sampler(int64_t num_samples) const;
  // Before every rank evaluates its shard: rank 0's buffers everywhere, so every shard is scored by
  // the model the checkpoint saves (`trained` as replicate() returned it).
  void sync_buffers(Module& trained) const;
  // Sums each value over the ranks, in place (f64; one collective).
  void sum(std::vector<double>& values) const;
  // Runs `write` on rank 0, then every rank waits for it (Note [Training under mpirun]).
  void after_outputs(const std::function<void()>& write) const;
  // A stream that discards what it is given (the non-leading ranks' console).
  std::ostream& silent() const;

 private:
  std::shared_ptr<distributed::ProcessGroup> group_;
};

}  // namespace ember::apps
