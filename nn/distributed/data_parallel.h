// DistributedDataParallel: one model replica per rank, each trained on its own shard of the
// batch, kept identical by averaging gradients over the ranks during backward, as PyTorch's
// torch.nn.parallel.DistributedDataParallel does.
//
//   auto group = distributed::init_process_group();                  // under mpirun -np N
//   auto ddp = std::make_shared<distributed::DistributedDataParallel>(model, group);
//   SGD opt(ddp->parameters(), {.lr = 0.1});
//   for (auto& [x, y] : loader) {                                    // this rank's shard
//     opt.zero_grad();
//     cross_entropy((*ddp)(x), y).backward();                        // gradients averaged here
//     opt.step();                                                    // same update everywhere
//   }
//   { auto guard = ddp->no_sync(); loss1.backward(); }               // accumulate locally...
//   loss2.backward();                                                // ...then synchronise all
//
// At construction rank 0's parameters and buffers are broadcast to every rank; before each
// forward in training mode its buffers are broadcast again (batch-norm statistics), unless
// options.broadcast_buffers is off. The wrapped module is the child "module", so state-dict
// keys gain a "module." prefix, as PyTorch's do.
//
// Note [Gradient buckets]: the parameters are grouped, in reverse order of parameters() (about
// the order backward produces their gradients), into buckets of at most bucket_cap_mib (one
// dtype each). A post-accumulate hook on every parameter (autograd/hooks.h) counts the bucket's
// gradients; when a bucket is complete, and every bucket before it has been launched (so that
// all ranks start the same collectives in the same order), its gradients are copied into one
// flat buffer and its all-reduce (average) is started asynchronously. A callback at the end of
// the backward pass launches the buckets still waiting (a parameter the graph did not reach
// contributes zeros, so ranks that skip a branch still match), waits for all of them and
// copies the averages back into the parameters' .grad(), before backward() returns, i.e.
// before the optimizer step.
//
// Note [Overlap on MPI]: the all-reduces are MPI_Iallreduce, waited for at the end of the
// pass. OpenMPI moves a nonblocking collective forward only inside MPI calls (it starts no
// progress thread by default), so each later hook also tests the buckets in flight; the
// overlap with the rest of backward is therefore partial on CPUs. A NCCL group progresses on
// its own stream.
//
// A backward pass that throws leaves its buckets half-synchronised on this rank while the
// others wait: the job cannot continue, as in PyTorch (Note [Failing ranks]).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/hooks.h"
#include "nn/distributed/process_group.h"
#include "nn/module.h"

namespace ember::distributed {

// What the gradient synchronisation cost so far: the backward passes that synchronised, and the
// time the end of those passes spent launching the last buckets, waiting for every all-reduce
// and copying the averages back (the communication not hidden behind the rest of backward).
struct DdpStats {
  int64_t synchronised_passes = 0;
  double exposed_seconds = 0;
};

struct DdpOptions {
  double bucket_cap_mib = 25.0;  // Note [Gradient buckets]
  bool broadcast_buffers = true;  // rank 0's buffers to all before each training forward
};

class DistributedDataParallel : public Module {
 public:
  // `group` null: init_process_group() of the module's device.
  explicit DistributedDataParallel(std::shared_ptr<Module> module, std::shared_ptr<ProcessGroup> group = nullptr,
                                   DdpOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& x) override;

  Module& module() { return *module_; }
  ProcessGroup& group() { return *group_; }

  // While a guard lives, backward only accumulates into .grad() locally (no communication);
  // the first backward after it synchronises everything accumulated.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.no_sync_) { ddp.no_sync_ = true; }
    ~NoSyncGuard() { ddp_.no_sync_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  const DdpStats& stats() const { return stats_; }
  // Rank 0's buffers (batch-norm statistics) to every rank, as each training forward does;
  // before an evaluation that every rank runs on its own shard.
  void sync_buffers();

  // The parameter names of each bucket, in launch order (Note [Gradient buckets]).
  std::vector<std::vector<std::string>> bucket_layout() const;

 private:
  struct Bucket;
  void build_buckets(double cap_mib);
  void gradient_ready(size_t param);
  void launch_ready_buckets();
  void launch(Bucket& bucket);
  void finish_pass();

  std::shared_ptr<Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DdpOptions options_;
  std::vector<std::pair<std::string, Tensor>> params_;  // those that require grad
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;                        // by parameter
  std::vector<char> ready_;                              // by parameter, this pass
  std::vector<autograd::HookHandle> hooks_;
  size_t next_launch_ = 0;
  bool pass_active_ = false;
  bool no_sync_ = false;
  DdpStats stats_;
};

}  // namespace ember::distributed
