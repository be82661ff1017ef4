// `ember train metric` end to end on a small synthetic MNIST-layout dataset: it learns an
// embedding that retrieves by class, writes its CSV, SVG and checkpoint, resumes bitwise on the
// CPU (a module loss's parameters included), and rejects bad configurations clearly.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

#include "apps/train/train_metric.h"
#include "cuda/runtime.h"
#include "ember.h"
#include "support/test_support.h"
#include "toy_proxy_loss.h"
#include "train_fixtures.h"

using namespace ember;
using ember::apps::TrainMetricConfig;

namespace {

TrainMetricConfig small_config(const test::TempDir& dir) {
  TrainMetricConfig c;
  c.data = dir.path.string();
  c.epochs = 2;
  c.batch_size = 40;  // 10 classes x 4
  c.per_class = 4;
  c.dim = 16;
  c.seed = 7;
  return c;
}

// The default table plus a small module loss ("toy"): the module path (trained, checkpointed,
// resumed) at a size the simulator runs quickly.
const std::vector<apps::MetricLossRow>& table_with_toy() {
  static const std::vector<apps::MetricLossRow> table = [] {
    std::vector<apps::MetricLossRow> t = apps::metric_loss_table();
    t.push_back({"toy", "normalised softmax over learned proxies", [](const apps::MetricLossContext& c) {
                   return apps::module_loss(std::make_shared<test::ToyProxyLoss>(c.num_classes, c.embedding_size, c.gen));
                 }});
    return t;
  }();
  return table;
}

apps::TrainMetricResult run(const TrainMetricConfig& c, std::string* log = nullptr) {
  std::ostringstream out, progress;
  auto r = apps::train_metric(c, out, progress, /*interactive=*/false, table_with_toy());
  if (log) *log = out.str();
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("train metric: learns a synthetic dataset and writes CSV, SVG and checkpoint") {
  test::TempDir dir("train_metric_learns");
  test::write_synthetic_mnist(dir, 400, 100);
  TrainMetricConfig c = small_config(dir);
  c.log = dir.file("run.csv");
  c.plot = dir.file("curves.svg");
  c.save = dir.file("ck.safetensors");
  std::string log;
  const auto r = run(c, &log);
  CHECK(r.metrics.queries == 100);
  CHECK(r.metrics.precision_at_1 >= 0.9);
  CHECK(r.metrics.map_at_r >= 0.5);
  CHECK(r.metrics.map_at_r <= r.metrics.r_precision + 1e-12);  // MAP@R never exceeds R-Precision
  CHECK(log.find("epoch 2/2") != std::string::npos);
  CHECK(log.find("MAP@R") != std::string::npos);
  CHECK(log.find("10 classes x 4") != std::string::npos);

  std::istringstream csv(read_file(c.log));
  std::string header, row1, row2, extra;
  std::getline(csv, header);
  std::getline(csv, row1);
  std::getline(csv, row2);
  CHECK(header == "epoch,train_loss,precision_at_1,r_precision,map_at_r,seconds,lr");
  CHECK(row1.rfind("1,", 0) == 0);
  CHECK(row2.rfind("2,", 0) == 0);
  CHECK_FALSE(std::getline(csv, extra));

  const std::string svg = read_file(c.plot);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("map at r") != std::string::npos);
  CHECK(svg.find("test loss") == std::string::npos);  // a metric run has none

  const TrainingCheckpoint ck = load_checkpoint(c.save);
  CHECK(ck.epoch == 2);
  CHECK(ck.step == 2 * (400 / 40));
  CHECK(ck.model.count("9.weight") == 1);  // the embedding head
  CHECK(ck.model.at("9.weight").shape() == Shape{16, 128});
}

TEST_CASE("train metric: --resume continues bitwise identically, a module loss's parameters included") {
  for (const std::string loss : {"ntxent", "toy"}) {
    INFO("loss " << loss);
    test::TempDir dir("train_metric_resume_" + loss);
    test::write_synthetic_mnist(dir, 200, 40);
    TrainMetricConfig full = small_config(dir);
    full.loss = loss;
    full.save = dir.file("full.safetensors");
    const auto full_result = run(full);

    TrainMetricConfig first = full;
    first.stop_after = 1;  // interrupted after epoch 1 of 2
    first.save = dir.file("half.safetensors");
    run(first);
    TrainMetricConfig rest;
    rest.data = dir.path.string();
    rest.epochs = 0;  // the checkpoint's
    rest.resume = first.save;
    rest.save = dir.file("resumed.safetensors");
    std::string log;
    const auto resumed_result = run(rest, &log);
    CHECK(log.find("resumed") != std::string::npos);

    const TrainingCheckpoint a = load_checkpoint(full.save), b = load_checkpoint(rest.save);
    CHECK(a.step == b.step);
    CHECK(a.model.count("loss.proxies") == (loss == "toy" ? 1u : 0u));
    test::check_bitwise_equal(a.model, b.model);
    test::check_bitwise_equal(a.optimizer, b.optimizer);
    CHECK(resumed_result.metrics.map_at_r == full_result.metrics.map_at_r);
    if (loss == "toy") {  // the proxies were trained, not left at their initial values
      const TrainingCheckpoint half = load_checkpoint(first.save);
      CHECK(std::memcmp(half.model.at("loss.proxies").raw_data(), a.model.at("loss.proxies").raw_data(),
                        a.model.at("loss.proxies").nbytes()) != 0);
    }
  }
}

TEST_CASE("train metric: bad configurations are errors that name the flag and the value") {
  test::TempDir dir("train_metric_bad");
  test::write_synthetic_mnist(dir, 40, 20);
  TrainMetricConfig c = small_config(dir);
  c.loss = "circle";
  CHECK_THROWS_WITH(run(c), Catch::Contains("--loss: 'circle' is not a loss of this build (it has: ntxent, supcon,"));
  c = small_config(dir);
  c.per_class = 3;
  CHECK_THROWS_WITH(run(c), Catch::Contains("--batch-size 40 must be a multiple of --per-class 3"));
  c = small_config(dir);
  c.per_class = 2;
  CHECK_THROWS_WITH(run(c), Catch::Contains("20 classes per batch, but the dataset has 10"));
  c = small_config(dir);
  c.optimizer = "rmsprop";
  CHECK_THROWS_WITH(run(c), Catch::Contains("train metric: unknown optimizer 'rmsprop'"));
  CHECK(TrainMetricConfig{}.flag_problem().empty());  // the defaults are consistent
}

TEST_CASE("train metric: on cuda the run follows the CPU run") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  test::TempDir dir("train_metric_cuda");
  test::write_synthetic_mnist(dir, 20, 20);  // tiny: on the simulator every kernel launch costs milliseconds
  TrainMetricConfig c = small_config(dir);
  c.epochs = 1;
  c.batch_size = 10;  // 5 classes x 2, one step
  c.per_class = 2;
  c.max_batches = 1;
  const auto on_cpu = run(c);
  c.device = "cuda";
  const auto on_cuda = run(c);
  CHECK(on_cuda.train_loss == Approx(on_cpu.train_loss).epsilon(1e-4));
  CHECK(on_cuda.metrics.precision_at_1 == on_cpu.metrics.precision_at_1);
  CHECK(on_cuda.metrics.map_at_r == Approx(on_cpu.metrics.map_at_r).epsilon(1e-4));
}
