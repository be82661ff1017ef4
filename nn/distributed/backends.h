// The backends behind init_process_group (process_group.cpp). Each is one source file chosen
// by CMake: the real one when the build found its library, else a stand-in that says how to
// get it (mpi_unavailable.cpp, nccl_unavailable.cpp), so no code tests a macro to dispatch.
#pragma once

#include <memory>
#include <string>

#include "nn/distributed/process_group.h"

namespace ember::distributed::detail {

bool mpi_built();
std::shared_ptr<ProcessGroup> mpi_process_group();  // world, CPU tensors
void mpi_abort_if_running(const std::string& why);  // abort_job_if_distributed

bool nccl_built();
std::shared_ptr<ProcessGroup> nccl_process_group(int device_index);

}  // namespace ember::distributed::detail
