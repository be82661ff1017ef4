// The MPI backend of a build without MPI (backends.h): every entry point says how to get it.
#include "core/error.h"
#include "nn/distributed/backends.h"

namespace ember::distributed::detail {

bool mpi_built() { return false; }

std::shared_ptr<ProcessGroup> mpi_process_group() {
  EMBER_CHECK(false, "distributed: ember was built without MPI; install libopenmpi-dev and reconfigure "
              "(cmake -DEMBER_MPI=ON makes its absence a configure error)");
  return nullptr;
}

void mpi_abort_if_running(const std::string&) {}  // no job to stop

}  // namespace ember::distributed::detail
