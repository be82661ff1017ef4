// ProcessGroup: the ranks of a data-parallel job and the collectives training needs, over an
// existing transport: MPI for CPU tensors, NCCL for CUDA tensors (its ids exchanged over MPI).
// Run the program under `mpirun -np N`; rank and world size come from the MPI environment.
//
//   auto group = distributed::init_process_group();           // the backend of Device::cpu()
//   Tensor g = ...;                                           // same shape on every rank
//   group->all_reduce(g, distributed::ReduceOp::Average);     // in place
//   group->broadcast(w, /*root=*/0);                          // in place: rank 0's values
//   Tensor all = group->all_gather(x);                        // (sum of x.size(0), ...) in rank order
//   group->barrier();
//
// Tensors must be contiguous, f32, f64 or i64, on the group's device, and (in place) must not
// require grad; each rank passes tensors of the same shape and dtype in the same order, as MPI
// requires (all_gather allows a different first dimension per rank). broadcast, all_gather,
// reduce_scatter and the blocking all_reduce check this across ranks (one small all-gather of
// the shapes) and throw the same error on every rank; all_reduce_async, the hot path of
// DistributedDataParallel, does not.
//
// A build without MPI still compiles all of this: available() is false and every entry point
// throws "ember was built without MPI; install libopenmpi-dev and reconfigure".
//
// Note [Failing ranks]: a collective waits for every rank, so a rank that fails must take the
// others down rather than leave them blocked. Once MPI is initialised by ember, an uncaught
// exception on any rank prints "rank R of N: ..." and calls MPI_Abort, which makes mpirun stop
// every rank; a rank that exits normally first waits (at most EMBER_DISTRIBUTED_EXIT_TIMEOUT
// seconds, default 600) for the others to exit too, then finalises MPI, or aborts the job with
// a message if they do not come (one of them is stuck, or returned early after an error while
// the rest wait in a collective). A rank that dies (a signal) is detected by mpirun itself.
// The exit wait is generous because a rank may legitimately arrive late (rank 0 writing a
// checkpoint); an app that catches an error and knows the job is lost calls abort() instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::distributed {

enum class ReduceOp { Sum, Average };

// An asynchronous collective in flight; its tensor holds the result after wait().
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // True when finished (then wait() returns at once). Also lets the transport make progress.
  virtual bool test() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual std::string backend() const = 0;  // "mpi", "nccl"
  virtual Device device() const = 0;        // where its tensors live
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Reduces `t` over all ranks, in place on each of them (Average: the sum divided by size();
  // floating dtypes only).
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
  // The same, returning at once; `t` must not be touched until wait(). No cross-rank check.
  virtual std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) = 0;
  // Overwrites `t` on every rank with root's values.
  virtual void broadcast(const Tensor& t, int root) = 0;
  // Every rank's `t` concatenated along dim 0 in rank order; the first dimension may differ
  // between ranks, the others may not. `dim0_sizes` (optional) receives each rank's size(0).
  virtual Tensor all_gather(const Tensor& t, std::vector<int64_t>* dim0_sizes = nullptr) = 0;
  // The inverse of all_gather's layout: `t` is (sum of dim0_sizes, ...) on every rank; each rank
  // receives its own block of rows, reduced over ranks: (dim0_sizes[rank()], ...).
  virtual Tensor reduce_scatter(const Tensor& t, const std::vector<int64_t>& dim0_sizes, ReduceOp op) = 0;
  virtual void barrier() = 0;
  // Prints "rank R of N: <why>" and stops every rank of the job (Note [Failing ranks]).
  [[noreturn]] virtual void abort(const std::string& why) = 0;

 protected:
  virtual void check_same_on_all_ranks(const char* op, const Tensor& t, bool dim0_may_differ) = 0;
};

// True when this build has a backend for `device`'s type (MPI for cpu, NCCL for cuda); says
// nothing about whether the program runs under mpirun.
bool available(Device device = Device::cpu());

// The group of all ranks for tensors on `device`, created (and the transport initialised) on
// first use, the same object afterwards. Throws, naming what to install, when the build lacks
// the backend.
std::shared_ptr<ProcessGroup> init_process_group(Device device = Device::cpu());

// The number of ranks of the job that started this process, from the launcher's environment
// (Open MPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE as MPICH and Slurm set it), without
// initialising MPI; 1 when the process was not started by mpirun. Programs that run the same
// way alone and under `mpirun -np N` (the `ember train` commands) create a group only when this
// is above 1.
int launched_world_size();

// This process's rank among the job's processes on its machine (Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID); 0 when none is set.
int launched_local_rank();

// Note [One GPU per rank]: the device a rank of a job trains on when the user asked for
// `device` ("cpu", "cuda" or "cuda:N"). "cuda" without an index means one GPU per rank on each
// machine, cuda(local_rank % device_count), as torchrun's LOCAL_RANK convention does, so that
// `mpirun -np 8 ember train ... --device cuda` spreads over eight GPUs (NCCL refuses two ranks
// on one GPU); an explicit index, or "cpu", is kept.
std::string device_for_local_rank(const std::string& device, int local_rank, int device_count);

// Note [Failing ranks] for programs that catch their errors: when this process is one rank of a
// running job (a group exists and the world has other ranks), prints "rank R of N: <why>" and
// stops every rank; otherwise returns, so the caller reports the error as a lone process would.
void abort_job_if_distributed(const std::string& why);

// Checks done by every backend before a collective: contiguous, a supported dtype, the group's
// device; `in_place` tensors must not require grad. `op` names the collective in the error.
void check_collective_tensor(const char* op, const ProcessGroup& group, const Tensor& t, bool in_place);

}  // namespace ember::distributed
