// A two-rank program whose rank 1 fails while rank 0 waits in a collective (Note [Failing
// ranks] in nn/distributed/process_group.h); CTest checks that mpirun ends promptly with the
// failing rank's message. `fault_probe throw|return|kill|ok`.
#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "nn/distributed/process_group.h"
#include "ops/ops.h"

using namespace ember;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto group = distributed::init_process_group();
  Tensor t = ones({4});
  if (group->rank() == 1 && mode == "throw") throw std::runtime_error("planted failure on rank 1");
  if (group->rank() == 1 && mode == "kill") std::raise(SIGKILL);  // dies without a word
  if (group->rank() == 1 && mode == "return") {
    std::fprintf(stderr, "fault_probe: rank 1 returns early\n");
    return 3;  // exits normally, leaving rank 0 in all_reduce
  }
  group->all_reduce(t);
  std::printf("fault_probe: rank %d finished with %g\n", group->rank(), double(t.to_vector<float>()[0]));
  return 0;
}
