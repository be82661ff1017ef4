// The NCCL backend (backends.h): the collectives of CUDA tensors, one communicator per device
// index over all ranks of the MPI job (Note [NCCL seam] in nccl_unavailable.cpp).
//
// Note [NCCL streams]: every ember kernel runs on the default stream (cuda/runtime.h), so the
// collectives do too: a collective is ordered after the kernels that produced its tensor and
// before those that read the result, with no host synchronisation. all_reduce_async's Work
// records an event after the collective; wait() makes the default stream wait on it (ordering
// only, a no-op on the same stream, kept so that a later move to side streams stays correct)
// and test() polls it. What needs host values first (the all-gather's row counts, the shape
// checks) travels over the MPI group on the CPU, never through a device-to-host copy.
//
// Note [NCCL ids]: rank 0 makes the communicator's unique id (ncclGetUniqueId), the MPI group
// broadcasts its 128 bytes as 16 i64, and every rank calls ncclCommInitRank on its device.
// Under mpirun each rank uses the device of its --device flag (cuda:<local rank> is the usual
// choice on a machine with one GPU per rank). A process not started by mpirun with several
// ranks is a world of one and needs no MPI at all, so a build without MPI still has the NCCL
// backend for one GPU (and a GPU machine without Open MPI can run its test).
//
// Not run on a GPU yet: this project's machines have none (see the README's GPU section); it
// compiles in the nvcc build (.ci/cuda-checks), and .ci/gpu-check runs its one-rank test.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/distributed/backends.h"
#include "ops/ops.h"

namespace ember::distributed::detail {
namespace {

#define EMBER_NCCL_CHECK(call)                                                                          \
  do {                                                                                                  \
    const ncclResult_t ember_nccl_status_ = (call);                                                     \
    EMBER_CHECK(ember_nccl_status_ == ncclSuccess, #call, " failed: ", ncclGetErrorString(ember_nccl_status_)); \
  } while (0)

#define EMBER_CUDART_CHECK(call)                                                                         \
  do {                                                                                                   \
    const cudaError_t ember_cudart_status_ = (call);                                                     \
    EMBER_CHECK(ember_cudart_status_ == cudaSuccess, #call, " failed: ", cudaGetErrorString(ember_cudart_status_)); \
  } while (0)

constexpr cudaStream_t kDefaultStream = nullptr;  // Note [NCCL streams]

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i64: return ncclInt64;
    default: break;
  }
  EMBER_CHECK(false, "distributed: no NCCL type for ", dtype_name(dtype));
  return ncclFloat32;
}

int64_t row_elems(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

// A byte offset into a contiguous tensor's storage.
void* at(const Tensor& t, int64_t elements) {
  return static_cast<char*>(t.raw_data()) + elements * int64_t(dtype_size(t.dtype()));
}

class NcclWork : public Work {
 public:
  explicit NcclWork(Tensor t) : tensor_(std::move(t)) {
    EMBER_CUDART_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    EMBER_CUDART_CHECK(cudaEventRecord(done_, kDefaultStream));
  }
  ~NcclWork() override { cudaEventDestroy(done_); }
  void wait() override { EMBER_CUDART_CHECK(cudaStreamWaitEvent(kDefaultStream, done_, 0)); }
  bool test() override {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) return false;
    EMBER_CUDART_CHECK(status);
    return true;
  }

 private:
  Tensor tensor_;  // kept alive until the collective is done with it
  cudaEvent_t done_ = nullptr;
};

class NcclProcessGroup : public ProcessGroup {
 public:
  explicit NcclProcessGroup(int device_index) : device_index_(device_index) {
    // Note [NCCL ids]; mpi_process_group() says what to install when the build lacks MPI.
    if (launched_world_size() > 1) mpi_ = mpi_process_group();
    EMBER_CUDART_CHECK(cudaSetDevice(device_index));
    ncclUniqueId id;
    static_assert(sizeof(id) % sizeof(int64_t) == 0);
    if (rank() == 0) EMBER_NCCL_CHECK(ncclGetUniqueId(&id));
    if (mpi_) {
      Tensor bytes = zeros({int64_t(sizeof(id) / sizeof(int64_t))}, {.dtype = DType::i64});
      if (rank() == 0) std::memcpy(bytes.raw_data(), &id, sizeof(id));
      mpi_->broadcast(bytes, 0);
      std::memcpy(&id, bytes.raw_data(), sizeof(id));
    }
    EMBER_NCCL_CHECK(ncclCommInitRank(&comm_, size(), id, rank()));
  }
  ~NcclProcessGroup() override { ncclCommDestroy(comm_); }

  std::string backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_index_); }
  int rank() const override { return mpi_ ? mpi_->rank() : 0; }
  int size() const override { return mpi_ ? mpi_->size() : 1; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check_collective_tensor("all_reduce", *this, t, /*in_place=*/true);
    const bool average = op == ReduceOp::Average;
    EMBER_CHECK(!average || t.dtype() != DType::i64, "all_reduce: Average needs a floating tensor, got i64");
    EMBER_NCCL_CHECK(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_type(t.dtype()),
                                   average ? ncclAvg : ncclSum, comm_, kDefaultStream));
    t.bump_version();
    return std::make_unique<NcclWork>(t);
  }

  void broadcast(const Tensor& t, int root) override {
    EMBER_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " is not a rank of this group (size ", size(), ")");
    check_collective_tensor("broadcast", *this, t, /*in_place=*/true);
    check_same_on_all_ranks("broadcast", t, false);
    EMBER_NCCL_CHECK(ncclBroadcast(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_type(t.dtype()), root, comm_,
                                   kDefaultStream));
    t.bump_version();
  }

  // Equal blocks: one ncclAllGather. Unequal: each rank broadcasts its block into its place, all
  // in one NCCL group call.
  Tensor all_gather(const Tensor& t, std::vector<int64_t>* dim0_sizes) override {
    check_collective_tensor("all_gather", *this, t, /*in_place=*/false);
    EMBER_CHECK(t.dim() >= 1, "all_gather: expected a tensor of at least one dimension, got a scalar");
    const std::vector<int64_t> sizes = shapes_on_all_ranks("all_gather", t, true);
    const int64_t row = row_elems(t);
    int64_t rows = 0;
    bool equal = true;
    for (int64_t s : sizes) {
      rows += s;
      equal = equal && s == sizes[0];
    }
    Shape shape = t.shape();
    shape[0] = rows;
    Tensor out = Tensor::empty(shape, t.options());
    const ncclDataType_t type = nccl_type(t.dtype());
    if (equal) {
      EMBER_NCCL_CHECK(ncclAllGather(t.raw_data(), out.raw_data(), size_t(sizes[0] * row), type, comm_, kDefaultStream));
    } else {
      EMBER_NCCL_CHECK(ncclGroupStart());
      int64_t offset = 0;
      for (int q = 0; q < size(); ++q) {
        EMBER_NCCL_CHECK(ncclBroadcast(q == rank() ? t.raw_data() : nullptr, at(out, offset), size_t(sizes[q] * row),
                                       type, q, comm_, kDefaultStream));
        offset += sizes[q] * row;
      }
      EMBER_NCCL_CHECK(ncclGroupEnd());
    }
    if (dim0_sizes) *dim0_sizes = sizes;
    return out;
  }

  // Equal blocks: one ncclReduceScatter. Unequal: a reduce of each block to its rank, grouped.
  Tensor reduce_scatter(const Tensor& t, const std::vector<int64_t>& dim0_sizes, ReduceOp op) override {
    check_collective_tensor("reduce_scatter", *this, t, /*in_place=*/false);
    EMBER_CHECK(int(dim0_sizes.size()) == size(), "reduce_scatter: expected ", size(), " block sizes (one per rank), got ",
                dim0_sizes.size());
    int64_t rows = 0;
    bool equal = true;
    for (int64_t s : dim0_sizes) {
      rows += s;
      equal = equal && s == dim0_sizes[0];
    }
    EMBER_CHECK(t.dim() >= 1 && t.size(0) == rows, "reduce_scatter: expected a tensor of ", rows,
                " rows (the sum of the block sizes), got shape ", shape_str(t.shape()));
    const bool average = op == ReduceOp::Average;
    EMBER_CHECK(!average || t.dtype() != DType::i64, "reduce_scatter: Average needs a floating tensor, got i64");
    check_same_on_all_ranks("reduce_scatter", t, false);
    const int64_t row = row_elems(t);
    Shape shape = t.shape();
    shape[0] = dim0_sizes[size_t(rank())];
    Tensor out = Tensor::empty(shape, t.options());
    const ncclDataType_t type = nccl_type(t.dtype());
    const ncclRedOp_t red = average ? ncclAvg : ncclSum;
    if (equal) {
      EMBER_NCCL_CHECK(ncclReduceScatter(t.raw_data(), out.raw_data(), size_t(dim0_sizes[0] * row), type, red, comm_,
                                         kDefaultStream));
    } else {
      EMBER_NCCL_CHECK(ncclGroupStart());
      int64_t offset = 0;
      for (int q = 0; q < size(); ++q) {
        EMBER_NCCL_CHECK(ncclReduce(at(t, offset), q == rank() ? out.raw_data() : nullptr,
                                    size_t(dim0_sizes[size_t(q)] * row), type, red, q, comm_, kDefaultStream));
        offset += dim0_sizes[size_t(q)] * row;
      }
      EMBER_NCCL_CHECK(ncclGroupEnd());
    }
    return out;
  }

  // Every rank's queued collectives done, then the MPI barrier.
  void barrier() override {
    EMBER_CUDART_CHECK(cudaStreamSynchronize(kDefaultStream));
    if (mpi_) mpi_->barrier();
  }

  [[noreturn]] void abort(const std::string& why) override {
    ncclCommAbort(comm_);
    if (mpi_) mpi_->abort(why);  // ends the job
    std::fprintf(stderr, "ember: rank 0 of 1: %s; aborting\n", why.c_str());
    std::abort();
  }

 protected:
  void check_same_on_all_ranks(const char* op, const Tensor& t, bool dim0_may_differ) override {
    shapes_on_all_ranks(op, t, dim0_may_differ);
  }

 private:
  // Every rank's (dtype, rank, shape), compared over the MPI group on the CPU (Note [NCCL
  // streams]); the same error on every rank. Returns each rank's size(0).
  std::vector<int64_t> shapes_on_all_ranks(const char* op, const Tensor& t, bool dim0_may_differ) {
    constexpr int64_t kMaxDims = 8, kFields = 2 + kMaxDims;
    EMBER_CHECK(t.dim() <= kMaxDims, op, ": at most ", kMaxDims, " dimensions, got ", t.dim());
    std::vector<int64_t> mine(size_t(kFields), -1);
    mine[0] = int64_t(t.dtype());
    mine[1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) mine[size_t(2 + d)] = t.size(d);
    if (!mpi_) return {t.dim() > 0 ? t.size(0) : 1};
    const Tensor all = mpi_->all_gather(tensor<int64_t>(mine, {1, kFields}));
    const int64_t* h = all.data<int64_t>();
    auto describe = [&](int r) {
      const int64_t* f = h + r * kFields;
      return shape_str(Shape(f + 2, f + 2 + f[1])) + " " + std::string(dtype_name(DType(f[0])));
    };
    std::vector<int64_t> dim0(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) {
      const int64_t* f = h + r * kFields;
      bool same = f[0] == h[0] && f[1] == h[1];
      for (int64_t d = dim0_may_differ ? 1 : 0; same && d < f[1]; ++d) same = f[2 + d] == h[2 + d];
      EMBER_CHECK(same, op, ": every rank must pass the same ",
                  dim0_may_differ ? "dtype and shape after dim 0" : "shape and dtype", "; rank 0 has ", describe(0),
                  ", rank ", r, " has ", describe(r));
      dim0[size_t(r)] = f[1] > 0 ? f[2] : 1;
    }
    return dim0;
  }

  std::shared_ptr<ProcessGroup> mpi_;  // null in a world of one (Note [NCCL ids])
  int device_index_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_built() { return true; }

std::shared_ptr<ProcessGroup> nccl_process_group(int device_index) {
  static std::mutex mutex;
  static std::map<int, std::shared_ptr<ProcessGroup>> groups;  // one per device index, made once
  std::lock_guard lock(mutex);
  std::shared_ptr<ProcessGroup>& group = groups[device_index];
  if (!group) group = std::make_shared<NcclProcessGroup>(device_index);
  return group;
}

}  // namespace ember::distributed::detail
