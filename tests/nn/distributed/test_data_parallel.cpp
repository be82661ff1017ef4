// DistributedDataParallel's bucketing, launch order and no_sync, in one process: the group is
// a stand-in for rank 0 of two whose peer always contributes ones, so an averaged gradient is
// (g + 1) / 2 and every collective is logged. The same code over MPI: test_mpi_*.cpp.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "nn/distributed/distributed.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::distributed;
using Catch::Matchers::Contains;
using Log = std::vector<std::string>;

namespace {

class LoggedWork : public Work {
 public:
  LoggedWork(Tensor t, Log& log) : t_(std::move(t)), log_(log) {}
  void wait() override {
    if (done_) return;
    done_ = true;
    log_.push_back("wait " + std::to_string(t_.numel()));
    autograd::NoGradGuard no_grad;
    t_.add_(ones_like(t_)).mul_(0.5);  // the peer's ones, averaged
  }
  bool test() override { return done_; }

 private:
  Tensor t_;
  Log& log_;
  bool done_ = false;
};

class PeerOfOnes : public ProcessGroup {
 public:
  Log log;
  std::string backend() const override { return "test"; }
  Device device() const override { return Device::cpu(); }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check_collective_tensor("all_reduce", *this, t, true);
    REQUIRE(op == ReduceOp::Average);
    log.push_back("launch " + std::to_string(t.numel()));
    return std::make_unique<LoggedWork>(t, log);
  }
  void broadcast(const Tensor& t, int root) override { log.push_back("broadcast " + std::to_string(t.numel())); }
  Tensor all_gather(const Tensor& t, std::vector<int64_t>*) override { return t; }
  Tensor reduce_scatter(const Tensor& t, const std::vector<int64_t>&, ReduceOp) override { return t; }
  void barrier() override {}
  [[noreturn]] void abort(const std::string& why) override { throw std::runtime_error(why); }

 protected:
  void check_same_on_all_ranks(const char*, const Tensor&, bool) override {}
};

// Linear(4, 3) -> a probe that logs when backward passes it -> Linear(3, 2); plus a Linear
// that forward never uses.
class Probed : public Module {
 public:
  explicit Probed(Log& log) : Module("Probed"), log_(log) {
    first = register_module("first", std::make_shared<Linear>(4, 3));
    second = register_module("second", std::make_shared<Linear>(3, 2));
    unused = register_module("unused", std::make_shared<Linear>(2, 1));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = (*first)(x);
    Tensor probed = h.detach().clone();
    autograd::record("probe", {h}, probed, [this](const Tensor& g) {
      log_.push_back("probe");
      return autograd::TensorList{g};
    });
    return (*second)(probed);
  }
  std::shared_ptr<Linear> first, second, unused;

 private:
  Log& log_;
};

std::vector<Tensor> local_grads(Module& m, const Tensor& x) {
  m.zero_grad();
  (m)(x).sum().backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : m.parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  m.zero_grad();
  return grads;
}

}  // namespace

TEST_CASE("DDP broadcasts rank 0's state and buckets parameters in reverse order") {
  auto group = std::make_shared<PeerOfOnes>();
  auto model = std::make_shared<Probed>(group->log);
  DistributedDataParallel one_bucket(model, group);
  CHECK(one_bucket.bucket_layout() == std::vector<std::vector<std::string>>{
                                          {"unused.bias", "unused.weight", "second.bias", "second.weight",
                                           "first.bias", "first.weight"}});
  CHECK(group->log == Log{"broadcast 12", "broadcast 3", "broadcast 6", "broadcast 2", "broadcast 2", "broadcast 1"});
}

TEST_CASE("DDP all-reduces each bucket when ready, waits at the end of backward, averages into .grad()") {
  auto group = std::make_shared<PeerOfOnes>();
  auto model = std::make_shared<Probed>(group->log);
  Tensor x = randn({5, 4});
  const std::vector<Tensor> local = local_grads(*model, x);
  // A cap below every parameter's size: one bucket each.
  DistributedDataParallel ddp(model, group, {.bucket_cap_mib = 1e-9});
  REQUIRE(ddp.bucket_layout().size() == 6);
  group->log.clear();
  ddp(x).sum().backward();
  // second's gradients launch before backward reaches first (the probe); the unused layer's
  // buckets come first in order but have no gradient, so they wait for the end of the pass,
  // and so does everything after them: launches stay in bucket order on every rank.
  CHECK(group->log == Log{"probe", "launch 1", "launch 2", "launch 2", "launch 6", "launch 3", "launch 12",
                          "wait 1", "wait 2", "wait 2", "wait 6", "wait 3", "wait 12"});
  const std::vector<Tensor> params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor local_grad = local[i].defined() ? local[i] : zeros_like(params[i]);
    REQUIRE_THAT(params[i].grad(), test::all_close(add(local_grad, 1.0).mul_(0.5), 1e-6, 1e-6));
  }
}

TEST_CASE("DDP launches a bucket during backward once the buckets before it are out") {
  auto group = std::make_shared<PeerOfOnes>();
  auto model = std::make_shared<Probed>(group->log);
  // Freeze the unused layer: then second's buckets are the first ones and leave before first's
  // gradients exist.
  for (auto& [name, p] : model->unused->named_parameters()) p.requires_grad_(false);
  DistributedDataParallel ddp(model, group, {.bucket_cap_mib = 1e-9});
  group->log.clear();
  ddp(randn({5, 4})).sum().backward();
  CHECK(group->log == Log{"launch 2", "launch 6", "probe", "launch 3", "launch 12", "wait 2", "wait 6", "wait 3", "wait 12"});
}

TEST_CASE("DDP no_sync accumulates locally, then the next backward averages the sum") {
  auto group = std::make_shared<PeerOfOnes>();
  auto model = std::make_shared<Probed>(group->log);
  for (auto& [name, p] : model->unused->named_parameters()) p.requires_grad_(false);
  Tensor x1 = randn({3, 4}), x2 = randn({2, 4});
  const std::vector<Tensor> g1 = local_grads(*model, x1), g2 = local_grads(*model, x2);
  DistributedDataParallel ddp(model, group);
  group->log.clear();
  {
    auto guard = ddp.no_sync();
    ddp(x1).sum().backward();
  }
  CHECK(group->log == Log{"probe"});
  ddp(x2).sum().backward();
  CHECK(group->log == Log{"probe", "probe", "launch 23", "wait 23"});
  REQUIRE_THAT(model->first->weight().grad(), test::all_close(add(add(g1[0], g2[0]), 1.0).mul_(0.5), 1e-6, 1e-6));
}

TEST_CASE("distributed entry points say what the build lacks") {
  if (!available(Device::cpu())) {
    CHECK_THROWS_WITH(init_process_group(), Contains("ember was built without MPI; install libopenmpi-dev and reconfigure"));
    CHECK_THROWS_WITH(DistributedDataParallel(std::make_shared<Linear>(2, 2)), Contains("built without MPI"));
  }
  if (!available(Device::cuda(0))) {  // a build without NCCL (Note [NCCL seam])
    CHECK_THROWS_WITH(init_process_group(Device::cuda(0)), Contains("ember was built without NCCL"));
  }
}

TEST_CASE("collectives refuse tensors they cannot send, naming the op") {
  PeerOfOnes group;
  CHECK_THROWS_WITH(check_collective_tensor("all_reduce", group, randn({3, 4}).t(), true),
                    Contains("all_reduce: expected a contiguous tensor"));
  CHECK_THROWS_WITH(check_collective_tensor("broadcast", group, zeros({2}, {.dtype = DType::u8}), true),
                    Contains("broadcast: expected a f32, f64 or i64 tensor, got u8"));
  CHECK_THROWS_WITH(check_collective_tensor("all_reduce", group, zeros({2}, {.requires_grad = true}), true),
                    Contains("all_reduce: in-place write to a tensor that requires grad"));
}

namespace {
// Sets an environment variable for one scope, restoring the previous value (or its absence).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};
}  // namespace

TEST_CASE("under mpirun, --device cuda means one GPU per rank on each machine") {
  CHECK(device_for_local_rank("cuda", 0, 8) == "cuda:0");
  CHECK(device_for_local_rank("cuda", 5, 8) == "cuda:5");
  CHECK(device_for_local_rank("cuda", 9, 8) == "cuda:1");  // more ranks than GPUs: they share
  CHECK(device_for_local_rank("cuda:3", 5, 8) == "cuda:3");  // an explicit index is kept
  CHECK(device_for_local_rank("cpu", 5, 8) == "cpu");
  CHECK_THROWS_WITH(device_for_local_rank("cuda", 2, 0), Contains("local rank 2: this machine has no CUDA device"));

  ScopedEnv open_mpi("OMPI_COMM_WORLD_LOCAL_RANK", nullptr), mpich("MPI_LOCALRANKID", nullptr),
      slurm("SLURM_LOCALID", nullptr);
  CHECK(launched_local_rank() == 0);
  {
    ScopedEnv set("SLURM_LOCALID", "3");
    CHECK(launched_local_rank() == 3);
    ScopedEnv first("OMPI_COMM_WORLD_LOCAL_RANK", "1");  // Open MPI's name wins
    CHECK(launched_local_rank() == 1);
  }
  ScopedEnv bad("MPI_LOCALRANKID", "-1");
  CHECK_THROWS_WITH(launched_local_rank(), Contains("MPI_LOCALRANKID='-1'") && Contains("not a local rank"));
}
