// `ember bench mnist --ranks` (bench_mnist_ranks.h).
#include "apps/bench/bench_mnist_ranks.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>

#include "apps/bench/timing.h"
#include "datasets/data_loader.h"
#include "datasets/distributed_sampler.h"
#include "ember.h"
#include "nn/distributed/data_parallel.h"

namespace ember::bench {
namespace {

constexpr int kWarmupSteps = 5;

struct JobResult {
  double images_per_second = 0;
  double exposed_ms_per_step = 0;
};

// mpirun from $MPIEXEC or the PATH; root (a container) needs Open MPI's consent. Binding is off:
// the ranks share the machine's cores with the OS's scheduling, as the one-rank run does.
std::string mpirun_command(int ranks) {
  const char* env = std::getenv("MPIEXEC");
  std::string mpirun = env && *env ? env : "mpirun";
  std::string cmd = "'" + mpirun + "' -np " + std::to_string(ranks) + " --oversubscribe --bind-to none";
  if (::geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

JobResult run_job(const BenchMnistRanksOptions& o, int ranks) {
  const std::string self =
      o.program.empty() ? std::filesystem::read_symlink("/proc/self/exe").string() : o.program;
  const std::string cmd = mpirun_command(ranks) + " '" + self + "' --threads 1 bench mnist --rank-worker --data '" +
                          o.data + "' --batch-sizes " + std::to_string(o.batch) + " --steps " +
                          std::to_string(o.steps) + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  EMBER_CHECK(pipe != nullptr, "bench mnist --ranks: could not start '", cmd, "'");
  std::string output, line;
  char buffer[512];
  JobResult result;
  bool found = false;
  while (std::fgets(buffer, sizeof buffer, pipe.get())) {
    line = buffer;
    output += line;
    std::istringstream fields(line);
    std::string tag;
    int job_ranks = 0;
    int64_t images = 0, steps = 0;
    double seconds = 0, exposed = 0;
    if (fields >> tag >> job_ranks >> images >> seconds >> exposed >> steps && tag == "rank-worker") {
      result = {double(images) / seconds, 1000 * exposed / double(steps)};
      found = true;
    }
  }
  const int status = pclose(pipe.release());
  EMBER_CHECK(found && status == 0, "bench mnist --ranks: the ", ranks, "-rank job failed (is Open MPI installed? "
              "apt-get install openmpi-bin); its output:\n", output);
  return result;
}

}  // namespace

void bench_mnist_rank_worker(const BenchMnistRanksOptions& o, std::ostream& out) {
  auto group = distributed::init_process_group();
  auto train = std::make_shared<MnistDataset>(o.data, true);
  DataLoaderOptions loader_options;
  loader_options.batch_size = o.batch;
  loader_options.drop_last = true;
  loader_options.seed = 1;
  loader_options.sampler = std::make_shared<DistributedSampler>(
      train->size(), DistributedSamplerOptions{.rank = group->rank(), .world_size = group->size()});
  DataLoader loader(train, loader_options);
  EMBER_CHECK(loader.size() >= kWarmupSteps + o.steps, "bench mnist --ranks: ", o.steps, " steps of batch ", o.batch,
              " need more than the ", train->size(), " images' ", loader.size(), " batches per rank");
  manual_seed(0);
  std::shared_ptr<Module> model = mnist_cnn();
  std::shared_ptr<distributed::DistributedDataParallel> ddp;
  if (group->size() > 1) ddp = std::make_shared<distributed::DistributedDataParallel>(model, group);
  Module& trained = ddp ? static_cast<Module&>(*ddp) : *model;
  SGD opt(model->parameters(), {.lr = 0.01});
  auto step = [&] {
    std::optional<Batch> batch = loader.next();
    Tensor loss = cross_entropy(trained(batch->inputs), batch->targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < kWarmupSteps; ++i) step();
  group->barrier();
  const distributed::DdpStats before = ddp ? ddp->stats() : distributed::DdpStats{};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) step();
  group->barrier();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double exposed = ddp ? ddp->stats().exposed_seconds - before.exposed_seconds : 0.0;
  if (group->rank() == 0)
    out << "rank-worker " << group->size() << " " << int64_t(o.steps) * o.batch * group->size() << " " << seconds
        << " " << exposed << " " << o.steps << std::endl;
}

void bench_mnist_ranks(const BenchMnistRanksOptions& o, std::ostream& out) {
  EMBER_CHECK(!o.ranks.empty(), "bench mnist --ranks: expected at least one rank count");
  out << "ember bench mnist --ranks: mnist_cnn, SGD, batch " << o.batch << " per rank, " << o.steps
      << " timed steps per rank, 1 thread per rank, best of " << o.rounds
      << " alternating rounds (Note [Scaling benchmark])\n\n";
  std::map<int, JobResult> best;
  for (int round = 0; round < o.rounds; ++round)
    for (int r : o.ranks) {
      const JobResult got = run_job(o, r);
      JobResult& b = best[r];
      if (got.images_per_second > b.images_per_second) b = got;
    }
  const double one = best.count(1) ? best[1].images_per_second : 0.0;
  Table table({"ranks", "img/s", "efficiency", "exposed comm ms/step"}, {6, 10, 11, 21});
  out << table.header() << "\n";
  for (int r : o.ranks) {
    const JobResult& b = best[r];
    out << table.row({std::to_string(r), fixed(b.images_per_second, 0),
                      one > 0 ? fixed(100 * b.images_per_second / (r * one), 1) + "%" : "n/a",
                      r > 1 ? fixed(b.exposed_ms_per_step, 2) : "-"})
        << "\n";
  }
  out << "\nefficiency = img/s at R ranks / (R x img/s at 1 rank); exposed comm = the time each backward pass "
         "waited for its gradient all-reduces after the last gradient was ready (DdpStats)\n";
}

}  // namespace ember::bench
