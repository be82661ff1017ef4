// The NCCL backend of a build without it (backends.h). Note [NCCL seam]: the NCCL backend is a
// second ProcessGroup (nccl_process_group.cpp) over ncclComm_t, created from an id that rank
// 0 makes with ncclGetUniqueId and broadcasts over mpi_process_group(); its collectives run
// on the tensors' CUDA stream and its Work waits on an event, so DistributedDataParallel uses
// it unchanged. CMake selects that file when the CUDA backend is real and nccl.h and libnccl
// are found (EMBER_NCCL=AUTO; they are, under /usr/local/cuda, on the
// project's machines), and this one otherwise.
#include "core/error.h"
#include "nn/distributed/backends.h"

namespace ember::distributed::detail {

bool nccl_built() { return false; }

std::shared_ptr<ProcessGroup> nccl_process_group(int) {
  EMBER_CHECK(false, "distributed: ember was built without NCCL, so CUDA tensors cannot be trained "
              "data-parallel; use CPU tensors (the MPI backend), or build with a real CUDA backend and NCCL's "
              "nccl.h and libnccl (-DEMBER_CUDA=ON -DEMBER_NCCL=ON)");
  return nullptr;
}

}  // namespace ember::distributed::detail
