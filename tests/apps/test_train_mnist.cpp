// `ember train mnist` end to end on a small synthetic MNIST-layout dataset: it learns, the
// files it writes are well formed, and --resume continues bitwise identically on the CPU.
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "apps/train/train_mnist.h"
#include "cuda/runtime.h"
#include "datasets/idx_fixtures.h"
#include "ember.h"
#include "support/test_support.h"
#include "train_fixtures.h"

using namespace ember;
using ember::apps::TrainMnistConfig;

namespace {

TrainMnistConfig small_config(const test::TempDir& dir) {
  TrainMnistConfig c;
  c.data = dir.path.string();
  c.epochs = 2;
  c.batch_size = 32;
  c.seed = 7;
  return c;
}

apps::TrainMnistResult run(const TrainMnistConfig& c, std::string* log = nullptr) {
  std::ostringstream out, progress;
  auto r = apps::train_mnist(c, out, progress, /*interactive=*/false);
  if (log) *log = out.str();
  return r;
}

}  // namespace

TEST_CASE("train mnist: learns a synthetic dataset and writes CSV, SVG and checkpoint") {
  test::TempDir dir("train_mnist_learns");
  test::write_synthetic_mnist(dir, 320, 100);
  TrainMnistConfig c = small_config(dir);
  c.log = dir.file("run.csv");
  c.plot = dir.file("curves.svg");
  c.save = dir.file("ck.safetensors");
  std::string log;
  const auto r = run(c, &log);
  CHECK(r.test_accuracy >= 0.9);
  CHECK(log.find("epoch 2/2") != std::string::npos);

  std::ifstream csv(c.log);
  std::string header, row1, row2, extra;
  std::getline(csv, header);
  std::getline(csv, row1);
  std::getline(csv, row2);
  CHECK(header == "epoch,train_loss,test_loss,test_accuracy,seconds,lr");
  CHECK(row1.rfind("1,", 0) == 0);
  CHECK(row2.rfind("2,", 0) == 0);
  CHECK_FALSE(std::getline(csv, extra));

  std::ifstream svg(c.plot);
  std::stringstream svg_text;
  svg_text << svg.rdbuf();
  CHECK(svg_text.str().rfind("<svg", 0) == 0);
  CHECK(svg_text.str().find("test accuracy") != std::string::npos);
  CHECK(svg_text.str().find("</svg>") != std::string::npos);

  const TrainingCheckpoint ck = load_checkpoint(c.save);
  CHECK(ck.epoch == 2);
  CHECK(ck.model.count("0.weight") == 1);
}

TEST_CASE("train mnist: --resume continues bitwise identically to an uninterrupted run") {
  test::TempDir dir("train_mnist_resume");
  test::write_synthetic_mnist(dir, 160, 40);
  TrainMnistConfig full = small_config(dir);
  full.save = dir.file("full.safetensors");
  run(full);

  TrainMnistConfig first = small_config(dir);
  first.stop_after = 1;  // interrupted after epoch 1 of 2
  first.save = dir.file("half.safetensors");
  run(first);
  TrainMnistConfig rest;
  rest.data = dir.path.string();
  rest.epochs = 0;  // the checkpoint's
  rest.resume = first.save;
  rest.save = dir.file("resumed.safetensors");
  std::string log;
  run(rest, &log);
  CHECK(log.find("resumed") != std::string::npos);

  const TrainingCheckpoint a = load_checkpoint(full.save), b = load_checkpoint(rest.save);
  CHECK(a.step == b.step);
  test::check_bitwise_equal(a.model, b.model);
  test::check_bitwise_equal(a.optimizer, b.optimizer);
}

namespace {

// The CSV's rows without their seconds column (the time differs from run to run).
std::vector<std::string> csv_rows_without_seconds(const std::string& path) {
  std::ifstream csv(path);
  std::vector<std::string> rows;
  for (std::string line; std::getline(csv, line);) {
    const size_t lr = line.rfind(','), seconds = line.rfind(',', lr - 1);
    rows.push_back(line.substr(0, seconds) + line.substr(lr));
  }
  return rows;
}

}  // namespace

TEST_CASE("train mnist: a run stopped and resumed writes the whole run's CSV and curves") {
  test::TempDir dir("train_mnist_resume_log");
  test::write_synthetic_mnist(dir, 160, 40);
  TrainMnistConfig full = small_config(dir);
  full.epochs = 3;
  full.log = dir.file("full.csv");
  full.plot = dir.file("full.svg");
  run(full);

  TrainMnistConfig first = small_config(dir);
  first.epochs = 3;
  first.stop_after = 1;
  first.save = dir.file("part.safetensors");
  first.log = dir.file("part.csv");
  run(first);
  // Resumed twice, one epoch each time (--stop-after counts the run's epochs), writing the same
  // files: each resume adds its epoch to those before it.
  for (int stop_after : {2, 3}) {
    TrainMnistConfig rest;
    rest.data = dir.path.string();
    rest.epochs = 0;
    rest.stop_after = stop_after;
    rest.resume = first.save;
    rest.save = first.save;
    rest.log = first.log;
    rest.plot = dir.file("part.svg");
    std::string out;
    run(rest, &out);
    CHECK(out.find("no --save given") == std::string::npos);
  }
  const std::vector<std::string> whole = csv_rows_without_seconds(full.log), resumed = csv_rows_without_seconds(first.log);
  REQUIRE(whole.size() == 4);  // the header and epochs 1-3
  CHECK(resumed == whole);     // the same losses and accuracies, bit for bit as printed
  // The curves draw no times, so they are the uninterrupted run's, byte for byte.
  const auto text = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  CHECK(text(dir.file("part.svg")) == text(full.plot));
  CHECK(load_checkpoint(first.save).history.find("\"epoch\":3") != std::string::npos);

  // Outputs come from the command line: a resume without --save says that it writes no checkpoint.
  TrainMnistConfig unsaved;
  unsaved.data = dir.path.string();
  unsaved.epochs = 0;  // the checkpoint's: all done, nothing to train
  unsaved.resume = first.save;
  std::string out;
  run(unsaved, &out);
  CHECK(out.find("note: no --save given, so this run writes no checkpoint") != std::string::npos);

  // A history that does not end at the checkpoint's epoch is refused before any work.
  TrainingCheckpoint edited = load_checkpoint(first.save);
  edited.history = R"([{"epoch":1,"train_loss":2,"test_loss":2,"scores":{"test_accuracy":0.5},"seconds":1,"lr":0}])";
  const std::string edited_path = dir.file("edited.safetensors");
  save_checkpoint(edited_path, edited);
  unsaved.resume = edited_path;
  CHECK_THROWS_WITH(run(unsaved), Catch::Contains("checkpoint '" + edited_path + "' history: its last epoch is 1, "
                                                  "the checkpoint's 3"));
}

TEST_CASE("train mnist: --precision bf16 and fp16 learn, keep f32 weights, and fp16 resumes bitwise") {
  test::TempDir dir("train_mnist_precision");
  test::write_synthetic_mnist(dir, 320, 100);
  for (const std::string precision : {"bf16", "fp16"}) {
    INFO(precision);
    TrainMnistConfig c = small_config(dir);
    c.precision = precision;
    c.save = dir.file(precision + ".safetensors");
    const auto r = run(c);
    CHECK(r.test_accuracy >= 0.9);
    const TrainingCheckpoint ck = load_checkpoint(c.save);
    CHECK(ck.model.at("0.weight").dtype() == DType::f32);  // master weights
    CHECK(Json::parse(ck.config).find("precision")->as_string() == precision);
    // Only fp16 scales its loss; the scaler's state travels in the checkpoint.
    CHECK(ck.grad_scaler.empty() == (precision == "bf16"));
  }
  // fp16: stop after one epoch, resume, and end where an uninterrupted run ends.
  TrainMnistConfig full = small_config(dir);
  full.precision = "fp16";
  full.save = dir.file("full16.safetensors");
  run(full);
  TrainMnistConfig first = full;
  first.stop_after = 1;
  first.save = dir.file("half16.safetensors");
  run(first);
  TrainMnistConfig rest;
  rest.data = dir.path.string();
  rest.epochs = 0;
  rest.resume = first.save;
  rest.save = dir.file("resumed16.safetensors");
  run(rest);
  const TrainingCheckpoint a = load_checkpoint(full.save), b = load_checkpoint(rest.save);
  CHECK(a.step == b.step);
  test::check_bitwise_equal(a.model, b.model);
  test::check_bitwise_equal(a.grad_scaler, b.grad_scaler);

  TrainMnistConfig bad = small_config(dir);
  bad.precision = "fp8";
  CHECK_THROWS_WITH(run(bad), Catch::Contains("unknown precision 'fp8' (expected fp32, bf16 or fp16)"));
}

TEST_CASE("train mnist: missing data names the command that fetches it") {
  test::TempDir dir("train_mnist_missing");
  TrainMnistConfig c = small_config(dir);
  CHECK_THROWS_WITH(run(c), Catch::Contains("fetch_mnist.sh"));
}

TEST_CASE("train mnist: bad configuration values are clear errors") {
  test::TempDir dir("train_mnist_bad");
  test::write_synthetic_mnist(dir, 20, 10);
  TrainMnistConfig c = small_config(dir);
  c.optimizer = "rmsprop";
  CHECK_THROWS_WITH(run(c), Catch::Contains("unknown optimizer 'rmsprop'"));
  c = small_config(dir);
  c.dataset = "cifar";
  CHECK_THROWS_WITH(run(c), Catch::Contains("unknown dataset 'cifar'"));
}

TEST_CASE("train mnist: on cuda the run follows the CPU run") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  test::TempDir dir("train_mnist_cuda");
  test::write_synthetic_mnist(dir, 16, 8);  // tiny: on the simulator every kernel launch costs milliseconds
  TrainMnistConfig c = small_config(dir);
  c.epochs = 1;
  c.batch_size = 8;
  c.model = "lenet5";
  const auto on_cpu = run(c);
  c.device = "cuda";
  const auto on_cuda = run(c);
  CHECK(on_cuda.test_loss == Approx(on_cpu.test_loss).epsilon(1e-4));
  CHECK(on_cuda.test_accuracy == on_cpu.test_accuracy);
}

#ifdef EMBER_CLI_PATH
#include "apps/bench/bench_mnist_ranks.h"

// `ember bench mnist --ranks 1,2` end to end on the synthetic data (a smoke of the mpirun jobs and
// the table, not a figure): both rank counts report img/s, and two ranks an efficiency. Hidden from
// the test_apps run: CTest runs it as mpi_bench_mnist_ranks with the other MPI tests.
TEST_CASE("bench mnist --ranks: runs an mpirun job per rank count and prints the scaling table", "[.][mpi]") {
  test::TempDir dir("bench_mnist_ranks");
  test::write_synthetic_mnist(dir, 320, 20);
  bench::BenchMnistRanksOptions o;
  o.data = dir.path.string();
  o.batch = 16;
  o.steps = 2;
  o.rounds = 1;
  o.program = EMBER_CLI_PATH;
  std::ostringstream out;
  bench::bench_mnist_ranks(o, out);
  INFO(out.str());
  CHECK(out.str().find("exposed comm ms/step") != std::string::npos);
  std::istringstream lines(out.str());
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    int ranks = 0;
    double images_per_second = 0;
    std::string efficiency;
    if (fields >> ranks >> images_per_second >> efficiency) {
      ++rows;
      CHECK(images_per_second > 0);
      CHECK(efficiency.back() == '%');
    }
  }
  CHECK(rows == 2);
}
#endif
