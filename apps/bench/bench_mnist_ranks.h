// `ember bench mnist --ranks 1,2`: data-parallel scaling of mnist_cnn training on this machine
// (issue #13). For each rank count the benchmark starts an `mpirun -np R` job of this same
// binary, one thread per rank, and reports the job's img/s, the scaling efficiency against one
// rank, and the communication per step that backward could not hide.
//
// Note [Scaling benchmark]: every rank trains `steps` steps of mnist_cnn (SGD lr 0.01,
// cross-entropy) at `batch` images per rank on its DistributedSampler shard, after 5 warm-up
// steps, wrapped in DistributedDataParallel; one rank trains the plain model (no wrapper), so the
// efficiency, img/s(R) / (R x img/s(1)), charges everything data parallelism adds: bucket copies,
// all-reduces, and waiting for the slower rank. The job sizes run in alternating rounds (1, 2,
// 1, 2, ...) and each keeps its best round, as the other benchmarks do on a shared machine. The
// exposed communication is DistributedDataParallel's own measure (DdpStats): the time the end of
// each backward pass spends waiting for and copying back the all-reduces.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ember::bench {

struct BenchMnistRanksOptions {
  std::string data = "data/mnist";
  std::vector<int> ranks = {1, 2};
  int64_t batch = 64;  // per rank
  int steps = 100;     // per rank, timed
  int rounds = 3;
  std::string program;  // the `ember` binary the jobs run; empty: this one
};

// The table (runs the mpirun jobs). Throws when mpirun is missing or a job fails.
void bench_mnist_ranks(const BenchMnistRanksOptions& options, std::ostream& out);

// One rank of such a job (`ember bench mnist --rank-worker`): trains and, on rank 0, prints one
// line "rank-worker <ranks> <images> <seconds> <exposed seconds> <steps>".
void bench_mnist_rank_worker(const BenchMnistRanksOptions& options, std::ostream& out);

}  // namespace ember::bench
