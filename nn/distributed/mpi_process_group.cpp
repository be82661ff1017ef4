// The MPI backend (backends.h): the world communicator of the job that mpirun started.
//
// Note [MPI threads]: MPI is initialised with MPI_THREAD_SERIALIZED and every call is made
// under one mutex. Collectives come from the training thread, but DistributedDataParallel's
// hooks run on whatever thread runs backward and a caller may use another; serialising them
// is all MPI then needs (ember's worker pools never call MPI).
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "nn/distributed/backends.h"
#include "ops/ops.h"

namespace ember::distributed::detail {
namespace {

std::mutex g_mpi;  // Note [MPI threads]
bool g_owns_mpi = false;  // initialised by ember (then also finalised by it)
int g_rank = 0, g_size = 1;

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    default: break;
  }
  EMBER_CHECK(false, "distributed: no MPI type for ", dtype_name(dtype));
  return MPI_DATATYPE_NULL;
}

int mpi_count(const char* op, int64_t n) {
  EMBER_CHECK(n <= INT_MAX, op, ": ", n, " elements is more than one MPI call takes (", INT_MAX, ")");
  return int(n);
}

[[noreturn]] void abort_job(const std::string& why) {
  std::fprintf(stderr, "ember: rank %d of %d: %s; aborting all ranks\n", g_rank, g_size, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
}

// Note [Failing ranks] in process_group.h: an uncaught exception aborts the job.
void abort_on_terminate() {
  std::string why = "terminating";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      why = std::string("uncaught exception: ") + ex.what();
    } catch (...) {
      why = "uncaught exception of unknown type";
    }
  }
  abort_job(why);
}

double exit_timeout_seconds() {
  const char* v = std::getenv("EMBER_DISTRIBUTED_EXIT_TIMEOUT");
  return v && *v ? std::atof(v) : 600.0;
}

// Note [Failing ranks]: finalise only once every rank is exiting too.
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  const double timeout = exit_timeout_seconds();
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (std::chrono::steady_clock::now() > deadline)
      abort_job("exiting, but the other ranks did not also exit within " + std::to_string(int(timeout)) +
                " s (EMBER_DISTRIBUTED_EXIT_TIMEOUT): one of them failed or is waiting in a collective");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  MPI_Finalize();
}

void init_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    g_owns_mpi = true;
    EMBER_CHECK(provided >= MPI_THREAD_SERIALIZED, "distributed: this MPI library provides thread level ",
                provided, ", ember needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED, ")");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_owns_mpi) {
    std::set_terminate(abort_on_terminate);
    std::atexit(finalize_at_exit);
  }
}

class MpiWork : public Work {
 public:
  MpiWork(Tensor t, MPI_Request request, bool average, int size)
      : tensor_(std::move(t)), request_(request), average_(average), size_(size) {}
  ~MpiWork() override {
    if (!finished_) wait();  // the buffer must outlive the transfer
  }
  void wait() override {
    if (finished_) return;
    {
      std::lock_guard lock(g_mpi);
      MPI_Wait(&request_, MPI_STATUS_IGNORE);
    }
    finish();
  }
  bool test() override {
    if (finished_) return true;
    int done = 0;
    {
      std::lock_guard lock(g_mpi);
      MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    }
    if (done) finish();
    return finished_;
  }

 private:
  void finish() {
    finished_ = true;
    if (average_) tensor_.mul_(1.0 / size_);
    tensor_.bump_version();
  }
  Tensor tensor_;
  MPI_Request request_;
  bool average_;
  int size_;
  bool finished_ = false;
};

class MpiProcessGroup : public ProcessGroup {
 public:
  std::string backend() const override { return "mpi"; }
  Device device() const override { return Device::cpu(); }
  int rank() const override { return g_rank; }
  int size() const override { return g_size; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check_collective_tensor("all_reduce", *this, t, /*in_place=*/true);
    const bool average = op == ReduceOp::Average;
    EMBER_CHECK(!average || t.dtype() != DType::i64, "all_reduce: Average needs a floating tensor, got i64");
    MPI_Request request;
    {
      std::lock_guard lock(g_mpi);
      MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), mpi_count("all_reduce", t.numel()), mpi_type(t.dtype()),
                     MPI_SUM, MPI_COMM_WORLD, &request);
    }
    return std::make_unique<MpiWork>(t, request, average, g_size);
  }

  void broadcast(const Tensor& t, int root) override {
    EMBER_CHECK(root >= 0 && root < g_size, "broadcast: root ", root, " is not a rank of this group (size ", g_size, ")");
    check_collective_tensor("broadcast", *this, t, /*in_place=*/true);
    check_same_on_all_ranks("broadcast", t, false);
    std::lock_guard lock(g_mpi);
    MPI_Bcast(t.raw_data(), mpi_count("broadcast", t.numel()), mpi_type(t.dtype()), root, MPI_COMM_WORLD);
    t.bump_version();
  }

  Tensor all_gather(const Tensor& t, std::vector<int64_t>* dim0_sizes) override {
    check_collective_tensor("all_gather", *this, t, /*in_place=*/false);
    EMBER_CHECK(t.dim() >= 1, "all_gather: expected a tensor of at least one dimension, got a scalar");
    const std::vector<int64_t> sizes = check_same_on_all_ranks_impl("all_gather", t, true);
    std::vector<int> counts(g_size), displs(g_size);
    int64_t rows = 0;
    for (int r = 0; r < g_size; ++r) {
      counts[r] = mpi_count("all_gather", sizes[r] * row_elems(t));
      displs[r] = mpi_count("all_gather", rows * row_elems(t));
      rows += sizes[r];
    }
    Shape shape = t.shape();
    shape[0] = rows;
    Tensor out = Tensor::empty(shape, t.options());
    {
      std::lock_guard lock(g_mpi);
      MPI_Allgatherv(t.raw_data(), counts[g_rank], mpi_type(t.dtype()), out.raw_data(), counts.data(),
                     displs.data(), mpi_type(t.dtype()), MPI_COMM_WORLD);
    }
    if (dim0_sizes) *dim0_sizes = sizes;
    return out;
  }

  Tensor reduce_scatter(const Tensor& t, const std::vector<int64_t>& dim0_sizes, ReduceOp op) override {
    check_collective_tensor("reduce_scatter", *this, t, /*in_place=*/false);
    EMBER_CHECK(int(dim0_sizes.size()) == g_size, "reduce_scatter: expected ", g_size, " block sizes (one per rank), got ",
                dim0_sizes.size());
    int64_t rows = 0;
    for (int64_t s : dim0_sizes) rows += s;
    EMBER_CHECK(t.dim() >= 1 && t.size(0) == rows, "reduce_scatter: expected a tensor of ", rows,
                " rows (the sum of the block sizes), got shape ", shape_str(t.shape()));
    const bool average = op == ReduceOp::Average;
    EMBER_CHECK(!average || t.dtype() != DType::i64, "reduce_scatter: Average needs a floating tensor, got i64");
    check_same_on_all_ranks("reduce_scatter", t, false);
    std::vector<int> counts(g_size);
    for (int r = 0; r < g_size; ++r) counts[r] = mpi_count("reduce_scatter", dim0_sizes[r] * row_elems(t));
    Shape shape = t.shape();
    shape[0] = dim0_sizes[g_rank];
    Tensor out = Tensor::empty(shape, t.options());
    {
      std::lock_guard lock(g_mpi);
      MPI_Reduce_scatter(t.raw_data(), out.raw_data(), counts.data(), mpi_type(t.dtype()), MPI_SUM, MPI_COMM_WORLD);
    }
    if (average) out.mul_(1.0 / g_size);
    return out;
  }

  void barrier() override {
    std::lock_guard lock(g_mpi);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  [[noreturn]] void abort(const std::string& why) override { abort_job(why); }

 protected:
  void check_same_on_all_ranks(const char* op, const Tensor& t, bool dim0_may_differ) override {
    check_same_on_all_ranks_impl(op, t, dim0_may_differ);
  }

 private:
  static int64_t row_elems(const Tensor& t) {
    int64_t n = 1;
    for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
    return n;
  }

  // Every rank's (dtype, rank of the tensor, shape) gathered, so that every rank sees the same
  // mismatch and throws the same error (none is left waiting in the next collective).
  // Returns each rank's size(0).
  std::vector<int64_t> check_same_on_all_ranks_impl(const char* op, const Tensor& t, bool dim0_may_differ) {
    constexpr int kMaxDims = 8;
    EMBER_CHECK(t.dim() <= kMaxDims, op, ": at most ", kMaxDims, " dimensions, got ", t.dim());
    constexpr int kFields = 2 + kMaxDims;
    std::vector<int64_t> mine(kFields, -1), all(size_t(kFields) * g_size);
    mine[0] = int64_t(t.dtype());
    mine[1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) mine[2 + d] = t.size(d);
    {
      std::lock_guard lock(g_mpi);
      MPI_Allgather(mine.data(), kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, MPI_COMM_WORLD);
    }
    auto describe = [&](int r) {
      const int64_t* h = &all[size_t(r) * kFields];
      return shape_str(Shape(h + 2, h + 2 + h[1])) + " " + std::string(dtype_name(DType(h[0])));
    };
    std::vector<int64_t> dim0(g_size);
    for (int r = 0; r < g_size; ++r) {
      const int64_t* h = &all[size_t(r) * kFields];
      const int64_t* h0 = &all[0];
      bool same = h[0] == h0[0] && h[1] == h0[1];
      for (int64_t d = dim0_may_differ ? 1 : 0; same && d < h[1]; ++d) same = h[2 + d] == h0[2 + d];
      EMBER_CHECK(same, op, ": every rank must pass the same ", dim0_may_differ ? "dtype and shape after dim 0" : "shape and dtype",
                  "; rank 0 has ", describe(0), ", rank ", r, " has ", describe(r));
      dim0[r] = h[1] > 0 ? h[2] : 1;
    }
    return dim0;
  }
};

}  // namespace

bool mpi_built() { return true; }

std::shared_ptr<ProcessGroup> mpi_process_group() {
  static std::once_flag once;
  static std::shared_ptr<ProcessGroup> world;
  std::call_once(once, [] {
    init_mpi();
    world = std::make_shared<MpiProcessGroup>();
  });
  return world;
}

void mpi_abort_if_running(const std::string& why) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && g_size > 1) abort_job(why);
}

}  // namespace ember::distributed::detail
