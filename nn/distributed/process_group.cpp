// Backend choice and the checks every backend shares (process_group.h).
#include "nn/distributed/process_group.h"

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "autograd/graph.h"
#include "core/error.h"
#include "nn/distributed/backends.h"

namespace ember::distributed {

void ProcessGroup::all_reduce(const Tensor& t, ReduceOp op) {
  check_collective_tensor("all_reduce", *this, t, /*in_place=*/true);
  check_same_on_all_ranks("all_reduce", t, /*dim0_may_differ=*/false);
  all_reduce_async(t, op)->wait();
}

bool available(Device device) { return device.is_cpu() ? detail::mpi_built() : detail::nccl_built(); }

std::shared_ptr<ProcessGroup> init_process_group(Device device) {
  return device.is_cpu() ? detail::mpi_process_group() : detail::nccl_process_group(device.index);
}

namespace {
// The first of `names` set in the environment, as an integer of at least `minimum`; `fallback`
// when none is set.
int launcher_variable(std::initializer_list<const char*> names, long minimum, const char* what, int fallback) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    char* rest = nullptr;
    const long n = std::strtol(value, &rest, 10);
    EMBER_CHECK(*rest == '\0' && n >= minimum, "distributed: ", name, "='", value, "' in the environment is not ",
                what);
    return int(n);
  }
  return fallback;
}
}  // namespace

int launched_world_size() {
  return launcher_variable({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1,
                           "a world size (expected a positive integer)", 1);
}

int launched_local_rank() {
  return launcher_variable({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, 0,
                           "a local rank (expected an integer of at least 0)", 0);
}

std::string device_for_local_rank(const std::string& device, int local_rank, int device_count) {
  if (device != "cuda") return device;
  EMBER_CHECK(device_count > 0, "distributed: --device cuda on local rank ", local_rank,
              ": this machine has no CUDA device");
  return "cuda:" + std::to_string(local_rank % device_count);
}

void abort_job_if_distributed(const std::string& why) { detail::mpi_abort_if_running(why); }

void check_collective_tensor(const char* op, const ProcessGroup& group, const Tensor& t, bool in_place) {
  EMBER_CHECK(t.defined(), op, ": expected a tensor, got an undefined one");
  EMBER_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::i64, op,
              ": expected a f32, f64 or i64 tensor, got ", dtype_name(t.dtype()));
  EMBER_CHECK(t.is_contiguous(), op, ": expected a contiguous tensor, got shape ", shape_str(t.shape()),
              " with strides ", shape_str(t.strides()), " (call .contiguous() first)");
  EMBER_CHECK(t.device() == group.device(), op, ": the ", group.backend(), " group works on ", group.device().str(),
              " tensors, got one on ", t.device().str());
  if (in_place) autograd::check_inplace(t, op);
}

}  // namespace ember::distributed
