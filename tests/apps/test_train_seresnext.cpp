// `ember train seresnext` on a tiny synthetic image folder (16x16 PNGs, class k a bright
// horizontal bar at rows 2k + 2..2k + 3, so flips keep the class), se_resnext_cifar at depth 11
// and width 8: it learns, writes its files, resumes bitwise (mixup and accumulation on), and
// the recipe's parts (schedule, weight-decay groups, accumulation, top-k, Beta draws) match
// hand computations.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>
#include <sstream>

#include "apps/train/mixup.h"
#include "apps/train/train_seresnext.h"
#include "apps/train/training_loop.h"
#include "datasets/idx_fixtures.h"
#include "datasets/png_write.h"
#include "ember.h"
#include "support/test_support.h"
#include "train_fixtures.h"

using namespace ember;
using ember::apps::TrainSeresnextConfig;

namespace {

constexpr int64_t kClasses = test::kBarClasses;

TrainSeresnextConfig small_config(const test::TempDir& dir) {
  TrainSeresnextConfig c;
  c.data = dir.path.string();
  c.epochs = 2;
  c.batch_size = 16;
  c.width = 8;
  c.image_size = 16;
  c.crop_scale = 1.0;  // the bars must stay in the crop
  c.lr = 4.0;          // per 256: 0.25 at batch 16
  c.seed = 3;
  c.workers = 2;
  return c;
}

apps::TrainSeresnextResult run(const TrainSeresnextConfig& c, std::string* log = nullptr) {
  std::ostringstream out, progress;
  auto r = apps::train_seresnext(c, out, progress, /*interactive=*/false);
  if (log) *log = out.str();
  return r;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

double column(const std::string& row, int index) {
  std::stringstream s(row);
  std::string cell;
  for (int i = 0; i <= index; ++i) std::getline(s, cell, ',');
  return std::stod(cell);
}

}  // namespace

TEST_CASE("train seresnext: learns a synthetic image folder, prints top-1/top-5, writes CSV and checkpoint") {
  test::TempDir dir("train_seresnext_learns");
  test::write_bar_folders(dir, 16);
  TrainSeresnextConfig c = small_config(dir);
  c.epochs = 4;
  c.log = dir.file("run.csv");
  c.plot = dir.file("curves.svg");
  c.save = dir.file("ck.safetensors");
  std::string log;
  const auto r = run(c, &log);
  INFO(log);
  CHECK(log.find("top-1 ") != std::string::npos);
  CHECK(log.find("top-5 ") != std::string::npos);
  CHECK(r.top1 >= 0.0);
  CHECK(r.top1 <= r.top5);
  CHECK(r.top5 <= 1.0);
  CHECK(r.top1 > 2.0 / kClasses);  // chance is 1/6

  const std::vector<std::string> csv = lines_of(c.log);
  REQUIRE(csv.size() == 5);
  CHECK(csv[0] == "epoch,train_loss,test_loss,val_top1,val_top5,seconds,lr");
  CHECK(column(csv[4], 1) < column(csv[1], 1));  // the train loss falls
  for (size_t i = 1; i < csv.size(); ++i) {
    CHECK(column(csv[i], 3) >= 0.0);
    CHECK(column(csv[i], 4) <= 1.0);
  }
  CHECK(load_checkpoint(c.save).epoch == 4);
}

TEST_CASE("train seresnext: --resume after 1 epoch equals an uninterrupted 2-epoch run bitwise (mixup, accumulation)") {
  test::TempDir dir("train_seresnext_resume");
  test::write_bar_folders(dir, 6);
  TrainSeresnextConfig full = small_config(dir);
  full.mixup = 0.2;
  full.target_batch = 32;  // 2 micro-batches of 16 per step
  full.schedule_unit = "step";
  full.save = dir.file("full.safetensors");
  run(full);

  TrainSeresnextConfig first = full;
  first.stop_after = 1;
  first.save = dir.file("half.safetensors");
  run(first);
  TrainSeresnextConfig rest = small_config(dir);
  rest.epochs = 0;  // the checkpoint's
  rest.workers = 1; // run control: the result must not depend on it
  rest.resume = first.save;
  rest.save = dir.file("resumed.safetensors");
  std::string log;
  run(rest, &log);
  CHECK(log.find("resumed") != std::string::npos);
  CHECK(log.find("batch 16 x 2 = 32 per step") != std::string::npos);

  const TrainingCheckpoint a = load_checkpoint(full.save), b = load_checkpoint(rest.save);
  CHECK(a.step == b.step);
  CHECK(a.step == 2 * 2);  // 36 images / 32 per step -> 2 steps per epoch
  test::check_bitwise_equal(a.model, b.model);
  test::check_bitwise_equal(a.optimizer, b.optimizer);
}

TEST_CASE("train seresnext: --prefetch is run control, the weights and losses are the same bits at depths 1 and 3") {
  TrainSeresnextConfig c;
  c.workers = 1;
  CHECK(c.resolved_prefetch() == 2);  // DataLoader's default
  c.workers = 4;
  CHECK(c.resolved_prefetch() == 4);  // Note [Prefetch]: >= workers keeps every worker busy
  c.prefetch = 3;
  CHECK(c.resolved_prefetch() == 3);
  c.prefetch = -1;
  CHECK_THROWS_WITH(c.check(), Catch::Contains("--prefetch must be at least 1"));

  test::TempDir dir("train_seresnext_prefetch");
  test::write_bar_folders(dir, 6);
  TrainSeresnextConfig shallow = small_config(dir);
  shallow.mixup = 0.2;  // augmentation and mixup draw per sample and per batch (Note [Per-sample randomness])
  shallow.prefetch = 1;
  shallow.log = dir.file("shallow.csv");
  shallow.save = dir.file("shallow.safetensors");
  TrainSeresnextConfig deep = shallow;
  deep.prefetch = 3;
  deep.log = dir.file("deep.csv");
  deep.save = dir.file("deep.safetensors");
  std::string shallow_log, deep_log;
  const auto a = run(shallow, &shallow_log);
  const auto b = run(deep, &deep_log);
  CHECK(shallow_log.find("2 loader workers (prefetch 1)") != std::string::npos);
  CHECK(deep_log.find("2 loader workers (prefetch 3)") != std::string::npos);

  const TrainingCheckpoint ca = load_checkpoint(shallow.save), cb = load_checkpoint(deep.save);
  test::check_bitwise_equal(ca.model, cb.model);
  test::check_bitwise_equal(ca.optimizer, cb.optimizer);
  CHECK(a.val_loss == b.val_loss);
  CHECK(a.top1 == b.top1);
  const std::vector<std::string> rows_a = lines_of(shallow.log), rows_b = lines_of(deep.log);
  REQUIRE(rows_a.size() == 3);
  REQUIRE(rows_b.size() == 3);
  for (size_t i = 1; i < rows_a.size(); ++i)
    for (int col : {1, 2, 3, 4}) CHECK(column(rows_a[i], col) == column(rows_b[i], col));  // losses and scores
}

TEST_CASE("train seresnext: warmup then cosine, per epoch and per step, against a hand computation") {
  Linear toy(2, 2);
  SGD sgd(toy.parameters(), {.lr = 0.8});
  TrainSeresnextConfig c;
  c.epochs = 10;
  c.warmup_epochs = 2;
  auto per_epoch = apps::make_seresnext_schedule(c, sgd, /*steps_per_epoch=*/5);
  CHECK(per_epoch->lr_at(0.8, 0) == Approx(0.4));   // (0 + 1) / 2
  CHECK(per_epoch->lr_at(0.8, 1) == Approx(0.8));
  CHECK(per_epoch->lr_at(0.8, 2) == Approx(0.8));   // cosine starts at the base
  CHECK(per_epoch->lr_at(0.8, 6) == Approx(0.4));   // halfway through 8 cosine epochs
  CHECK(per_epoch->lr_at(0.8, 8) == Approx(0.8 * (1 + std::cos(std::numbers::pi * 6 / 8)) / 2));
  c.schedule_unit = "step";
  auto per_step = apps::make_seresnext_schedule(c, sgd, 5);
  CHECK(per_step->lr_at(0.8, 4) == Approx(0.8 * 5 / 10));
  CHECK(per_step->lr_at(0.8, 30) == Approx(0.4));   // step 30 of 50 = 20 of 40 cosine steps

  c.warmup_epochs = -1;  // NVIDIA's 8 of 90, scaled
  c.epochs = 90;
  CHECK(c.resolved_warmup_epochs() == 8);
  c.epochs = 30;
  CHECK(c.resolved_warmup_epochs() == 3);
  c.epochs = 4;
  CHECK(c.resolved_warmup_epochs() == 1);  // at least one
  c.epochs = 1;
  CHECK(c.resolved_warmup_epochs() == 0);  // less than the run
  c.batch_size = 64;
  c.target_batch = 200;
  CHECK(c.accumulation() == 4);
  CHECK(c.applied_lr() == Approx(0.256 * 256 / 256));
}

TEST_CASE("train seresnext: no weight decay on BN parameters and biases") {
  auto model = se_resnext_cifar(10, 11, 8);
  auto [decay, no_decay] = split_weight_decay(*model);
  std::set<const void*> decayed;
  for (const Tensor& p : decay) decayed.insert(&p.storage());
  int64_t bn = 0, bias = 0, weights = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    const bool is_bn = name.find("bn") != std::string::npos || name.find("downsample.1.") != std::string::npos;
    const bool is_bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
    INFO(name);
    CHECK(decayed.count(&p.storage()) == (is_bn || is_bias ? 0u : 1u));
    bn += is_bn;
    bias += is_bias && !is_bn;
    weights += !is_bn && !is_bias;
  }
  CHECK(bn > 0);
  CHECK(bias > 0);  // the SE convolutions and the classifier
  CHECK(weights == int64_t(decay.size()));
  CHECK(decay.size() + no_decay.size() == model->parameters().size());
}

// A BN-free toy (Linear + cross-entropy): with BatchNorm the micro-batches would normalise with
// their own statistics and the two runs would differ by design (Note [Gradient accumulation]).
TEST_CASE("train seresnext: accumulating 2 micro-batches gives the gradient of one double batch") {
  manual_seed(5);
  Linear model(6, 4);
  const Tensor x = randn({8, 6}), y = tensor(std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0});
  auto loss_of = [&](int64_t start, int64_t length) {
    return cross_entropy(model(x.narrow(0, start, length)), y.narrow(0, start, length), Reduction::mean, 0.1);
  };
  std::vector<std::vector<float>> grads[2];
  double losses[2];
  for (int micro : {8, 4}) {
    for (Tensor& p : model.parameters()) p.set_grad(Tensor());
    losses[micro == 4] = apps::accumulate_gradients(8, micro, loss_of);
    for (const Tensor& p : model.parameters()) grads[micro == 4].push_back(p.grad().contiguous().to_vector<float>());
  }
  CHECK(losses[1] == Approx(losses[0]).epsilon(1e-6));
  for (size_t i = 0; i < grads[0].size(); ++i)
    for (size_t j = 0; j < grads[0][i].size(); ++j) CHECK(grads[1][i][j] == Approx(grads[0][i][j]).margin(1e-6));
}

TEST_CASE("train seresnext: top-k counts the rows whose target is among the k largest") {
  const Tensor logits = tensor(std::vector<float>{0.1f, 0.9f, 0.5f, 0.3f, 0.7f, 0.2f, 0.6f, 0.1f, 0.0f}, {3, 3});
  const Tensor y = tensor(std::vector<int64_t>{1, 0, 2});
  CHECK(apps::topk_correct(logits, y, 1) == 1);  // row 0 only
  CHECK(apps::topk_correct(logits, y, 2) == 2);  // row 0 and row 1 (0.3 is second)
  CHECK(apps::topk_correct(logits, y, 3) == 3);
}

TEST_CASE("train seresnext: mixup's Beta(0.2, 0.2) draws have the right mean and variance") {
  Generator gen(11);
  const int n = 20000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double b = apps::sample_beta(0.2, 0.2, gen);
    REQUIRE(b >= 0.0);
    REQUIRE(b <= 1.0);
    sum += b;
    sum_sq += b * b;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  CHECK(mean == Approx(0.5).margin(0.01));
  CHECK(var == Approx(0.04 / (0.16 * 1.4)).margin(0.005));  // ab / ((a + b)^2 (a + b + 1))
}

TEST_CASE("train seresnext: a bad image fails naming its path, or is skipped with --bad-images skip") {
  test::TempDir dir("train_seresnext_bad");
  test::write_bar_folders(dir, 3);
  const std::string bad = (dir.path / "train" / "c0" / "zz_broken.png").string();
  test::write_bytes(bad, {1, 2, 3, 4});
  TrainSeresnextConfig c = small_config(dir);
  c.epochs = 1;
  CHECK_THROWS_WITH(run(c), Catch::Contains("zz_broken.png"));
  c.bad_images = "skip";
  const auto r = run(c);
  CHECK(r.top5 >= 0.0);
}

TEST_CASE("train seresnext: a missing folder is an error naming it") {
  test::TempDir dir("train_seresnext_missing");
  TrainSeresnextConfig c = small_config(dir);
  CHECK_THROWS_WITH(run(c), Catch::Contains((dir.path / "train").string()));
}
