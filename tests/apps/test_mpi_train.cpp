// `ember train mnist`, `train metric` and `train seresnext` as one of the two ranks of `mpirun -np
// 2` (Note [Training under mpirun] in apps/train/data_parallel.h): the job trains what one process
// trains on the same global batch (a metric loss over both ranks' embeddings together), only
// rank 0 prints and writes, and the job's checkpoint resumes alone and at two ranks. Every
// rank runs every case in the same order (Note [MPI tests], tests/nn/distributed/CMakeLists.txt).
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "apps/train/train_metric.h"
#include "apps/train/train_mnist.h"
#include "apps/train/train_seresnext.h"
#include "ember.h"
#include "support/test_support.h"
#include "train_fixtures.h"

using namespace ember;
using ember::apps::TrainMnistConfig;

namespace {

std::shared_ptr<distributed::ProcessGroup> world() {
  auto group = distributed::init_process_group();
  REQUIRE(group->size() == 2);
  return group;
}

// The same data on every rank (each writes its own copy), a small model, a constant lr so that
// runs of different lengths share one recipe.
TrainMnistConfig recipe(const test::TempDir& data, int64_t batch_size) {
  TrainMnistConfig c;
  c.data = data.path.string();
  c.model = "mlp";
  c.epochs = 2;
  c.batch_size = batch_size;
  c.schedule = "none";
  c.seed = 11;
  return c;
}

struct Run {
  apps::TrainMnistResult result;
  std::string out, progress;
};

Run train(const TrainMnistConfig& c) {
  std::ostringstream out, progress;
  Run r{apps::train_mnist(c, out, progress, /*interactive=*/false), "", ""};
  r.out = out.str();
  r.progress = progress.str();
  return r;
}

// Rank 0's directory (its TempDir is named after its pid), seen from every rank.
std::string rank0_dir(distributed::ProcessGroup& group, const test::TempDir& mine) {
  Tensor pid = tensor<int64_t>({int64_t(::getpid())});
  group.broadcast(pid, 0);
  return (mine.path.parent_path() / ("ember_mpi_train_" + std::to_string(pid.data<int64_t>()[0]))).string();
}

void check_state_close(const StateDict& got, const StateDict& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(got.count(name) == 1);
    test::check_close(got.at(name), t, 1e-4, 1e-5);  // the same sums, added in another order
  }
}

}  // namespace

TEST_CASE("mpi train mnist: two ranks at batch 16 train what one process trains at batch 32") {
  auto group = world();
  test::TempDir dir("mpi_train");
  test::write_synthetic_mnist(dir, 320, 100);
  const std::string shared = rank0_dir(*group, dir);

  TrainMnistConfig job = recipe(dir, 16);
  job.group = group;
  job.save = shared + "/job.safetensors";
  job.log = shared + "/job.csv";
  const Run ran = train(job);
  // Rank 0 alone prints, shows progress and writes; the others are silent.
  if (group->rank() == 0) {
    CHECK(ran.out.find("batch 16 per rank x 2 ranks") != std::string::npos);
    CHECK(ran.out.find("epoch 2/2") != std::string::npos);
  } else {
    CHECK(ran.out.empty());
    CHECK(ran.progress.empty());
  }
  CHECK(std::filesystem::exists(job.save));  // written before any rank went on
  CHECK(ran.result.test_accuracy >= 0.9);

  if (group->rank() == 0) {
    TrainMnistConfig alone = recipe(dir, 32);
    alone.save = dir.file("alone.safetensors");
    const Run single = train(alone);
    check_state_close(load_checkpoint(job.save).model, load_checkpoint(alone.save).model);
    // The sharded evaluation scores the whole test set.
    CHECK(ran.result.test_accuracy == Approx(single.result.test_accuracy).margin(0.011));
    CHECK(ran.result.test_loss == Approx(single.result.test_loss).epsilon(1e-3));
  }
  group->barrier();
}

TEST_CASE("mpi train mnist: the job's checkpoint resumes alone and at two ranks, keeping the global batch") {
  auto group = world();
  test::TempDir dir("mpi_train");
  test::write_synthetic_mnist(dir, 320, 100);
  const std::string shared = rank0_dir(*group, dir);

  // Two epochs at 2 x 16, then a third: by the job, and alone from the same checkpoint.
  TrainMnistConfig first = recipe(dir, 16);
  first.group = group;
  first.save = shared + "/two_epochs.safetensors";
  train(first);

  TrainMnistConfig again;
  again.data = dir.path.string();
  again.resume = first.save;
  again.epochs = 3;
  again.group = group;
  again.save = shared + "/job3.safetensors";
  train(again);

  if (group->rank() == 0) {
    TrainMnistConfig alone;
    alone.data = dir.path.string();
    alone.resume = first.save;
    alone.epochs = 3;
    alone.save = dir.file("alone3.safetensors");
    const Run single = train(alone);
    CHECK(single.out.find("batch 32 per rank on 1 rank(s) keeps the checkpoint's global batch of 32") !=
          std::string::npos);
    check_state_close(load_checkpoint(alone.save).model, load_checkpoint(again.save).model);
    // And three epochs alone at batch 32 from the start are the same run.
    TrainMnistConfig straight = recipe(dir, 32);
    straight.epochs = 3;
    straight.save = dir.file("straight3.safetensors");
    train(straight);
    check_state_close(load_checkpoint(straight.save).model, load_checkpoint(alone.save).model);
  }
  group->barrier();
}

TEST_CASE("mpi train seresnext: two ranks with accumulation and sync BN, rank 0 prints and writes, both report the job's scores") {
  auto group = world();
  test::TempDir dir("mpi_train");
  test::write_bar_folders(dir, 6);
  const std::string shared = rank0_dir(*group, dir);

  apps::TrainSeresnextConfig c;
  c.data = dir.path.string();
  c.epochs = 1;
  c.batch_size = 8;
  c.target_batch = 32;  // global: 2 micro-batches of 8 on each of 2 ranks per step
  c.width = 8;
  c.image_size = 16;
  c.crop_scale = 1.0;
  c.workers = 1;
  c.seed = 3;
  c.sync_bn = true;
  c.group = group;
  c.save = shared + "/seresnext.safetensors";
  std::ostringstream out, progress;
  const apps::TrainSeresnextResult r = apps::train_seresnext(c, out, progress, /*interactive=*/false);
  if (group->rank() == 0)
    CHECK(out.str().find("batch 8 x 2 x 2 ranks = 32 per step (synchronised batch norm)") != std::string::npos);
  else
    CHECK(out.str().empty());
  CHECK(std::filesystem::exists(c.save));
  // Each rank scored its half of the val folder; both report the sums over the job.
  Tensor mine = tensor<double>({r.top1, r.val_loss});
  Tensor rank0 = mine.clone();
  group->broadcast(rank0, 0);
  CHECK(mine.data<double>()[0] == rank0.data<double>()[0]);
  CHECK(mine.data<double>()[1] == rank0.data<double>()[1]);
  group->barrier();
}

TEST_CASE("mpi train metric: two ranks at batch 16 train what one process trains at batch 32, loss module included") {
  auto group = world();
  test::TempDir dir("mpi_train");
  test::write_synthetic_mnist(dir, 320, 100);
  const std::string shared = rank0_dir(*group, dir);
  const std::string loss = GENERATE(as<std::string>{}, "ntxent", "arcface");
  INFO(loss);
  auto recipe = [&](int64_t batch_size) {
    apps::TrainMetricConfig c;
    c.data = dir.path.string();
    c.loss = loss;
    c.dim = 16;
    c.per_class = 8;  // global batches of 4 classes x 8
    c.epochs = 2;
    c.batch_size = batch_size;
    c.optimizer = "sgd";  // Adam's first steps are sign-like: rounding-level gradient differences would show
    c.lr = 0.05;
    c.schedule = "none";
    c.seed = 5;
    return c;
  };
  auto train_metric = [](const apps::TrainMetricConfig& c, std::string* printed = nullptr) {
    std::ostringstream out, progress;
    const apps::TrainMetricResult r = apps::train_metric(c, out, progress, /*interactive=*/false);
    if (printed) *printed = out.str();
    return r;
  };

  apps::TrainMetricConfig job = recipe(16);
  job.group = group;
  job.save = shared + "/metric_" + loss + ".safetensors";
  std::string printed;
  const apps::TrainMetricResult ran = train_metric(job, &printed);
  if (group->rank() == 0)
    CHECK(printed.find("batch 32 (4 classes x 8), 16 per rank x 2 ranks") != std::string::npos);
  else
    CHECK(printed.empty());
  // Both ranks score the gathered test embeddings: the same retrieval figures.
  Tensor mine = tensor<double>({ran.metrics.precision_at_1, ran.metrics.map_at_r, ran.train_loss});
  Tensor rank0 = mine.clone();
  group->broadcast(rank0, 0);
  REQUIRE_THAT(mine, test::all_close(rank0, 0, 0));

  if (group->rank() == 0) {
    apps::TrainMetricConfig alone = recipe(32);
    alone.save = dir.file("alone.safetensors");
    const apps::TrainMetricResult single = train_metric(alone);
    // The model's weights and, for arcface, the class weights "loss.W".
    check_state_close(load_checkpoint(job.save).model, load_checkpoint(alone.save).model);
    CHECK(ran.train_loss == Approx(single.train_loss).epsilon(1e-4));
    CHECK(ran.metrics.precision_at_1 == Approx(single.metrics.precision_at_1).margin(0.011));
    CHECK(ran.metrics.map_at_r == Approx(single.metrics.map_at_r).margin(0.011));

    // The job's checkpoint resumes alone, at the recipe's global batch.
    apps::TrainMetricConfig resumed;
    resumed.data = dir.path.string();
    resumed.resume = job.save;
    resumed.epochs = 3;
    std::string resumed_out;
    train_metric(resumed, &resumed_out);
    CHECK(resumed_out.find("batch 32 per rank on 1 rank(s) keeps the checkpoint's global batch of 32") !=
          std::string::npos);
  }
  group->barrier();
}
