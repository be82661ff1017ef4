// The train commands under hostile or careless input (issue #12): outputs checked before any
// work, a diverging run stopped at its first non-finite loss without touching the last good
// checkpoint, checkpoint recipes validated field by field, resume conflicts reported, empty
// test sets refused. Shared by both commands through training_loop / training_options, so
// `train mnist` exercises them here.
#include <csignal>
#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <sstream>

#include "apps/train/train_mnist.h"
#include "apps/train/training_loop.h"
#include "datasets/idx_fixtures.h"
#include "ember.h"
#include "support/test_support.h"
#include "train_fixtures.h"

using namespace ember;
using ember::apps::TrainMnistConfig;
using Catch::Contains;

namespace {

TrainMnistConfig small_config(const test::TempDir& dir) {
  TrainMnistConfig c;
  c.data = dir.path.string();
  c.model = "mlp";
  c.epochs = 2;
  c.batch_size = 32;
  c.seed = 7;
  return c;
}

std::string run(const TrainMnistConfig& c) {
  std::ostringstream out, progress;
  apps::train_mnist(c, out, progress, /*interactive=*/false);
  return out.str();
}

// Runs `c` expecting an Error containing `message`; returns what the run printed before it.
std::string run_failing(const TrainMnistConfig& c, const std::string& message) {
  std::ostringstream out, progress;
  CHECK_THROWS_WITH(apps::train_mnist(c, out, progress, false), Contains(message));
  return out.str();
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A copy of checkpoint `from` at `to` with its config JSON edited by `edit`.
void write_with_config(const std::string& from, const std::string& to, const std::function<void(Json&)>& edit) {
  std::map<std::string, std::string> metadata;
  StateDict tensors = load_tensors(from, &metadata);
  Json config = Json::parse(metadata.at("config"));
  edit(config);
  metadata["config"] = config.dump();
  save_tensors(to, tensors, metadata);
}

}  // namespace

TEST_CASE("train reliability: unwritable outputs fail before any training") {
  test::TempDir dir("train_rel_outputs");
  test::write_synthetic_mnist(dir, 64, 20);
  for (const char* flag : {"save", "log", "plot"}) {
    INFO(flag);
    TrainMnistConfig c = small_config(dir);
    const std::string bad = dir.file("no/such/dir/out");
    (std::string(flag) == "save" ? c.save : std::string(flag) == "log" ? c.log : c.plot) = bad;
    const std::string printed = run_failing(c, std::string("--") + flag + ": cannot write '" + bad + "'");
    CHECK(printed.find("epoch") == std::string::npos);  // not one epoch was spent
  }
  TrainMnistConfig c = small_config(dir);
  c.save = "/dev/null";
  run_failing(c, "'/dev/null' exists and is not a regular file (a device)");
}

// A good epoch saved to dir/ck.safetensors (its bytes in `before`), then the config of a run
// that diverges (lr 1e6) and would save over it.
static TrainMnistConfig checkpoint_then_diverging_config(const test::TempDir& dir, std::string& before) {
  test::write_synthetic_mnist(dir, 640, 20);
  TrainMnistConfig good = small_config(dir);
  good.save = dir.file("ck.safetensors");
  good.stop_after = 1;
  run(good);
  before = file_bytes(good.save);
  REQUIRE(!before.empty());
  TrainMnistConfig wild = small_config(dir);
  wild.model = "mnist_cnn";
  wild.lr = 1e6;
  wild.save = good.save;
  return wild;
}

TEST_CASE("train reliability: a diverging run stops at the first non-finite loss, and the last checkpoint survives") {
  test::TempDir dir("train_rel_nan");
  std::string before;
  TrainMnistConfig wild = checkpoint_then_diverging_config(dir, before);
  wild.optimizer = "sgd";
  wild.log = dir.file("wild.csv");
  const std::string printed = run_failing(wild, "training diverged: the loss is ");
  CHECK(printed.find("nan") == std::string::npos);
  CHECK(file_bytes(wild.save) == before);
  CHECK_FALSE(std::filesystem::exists(wild.log));
  std::ostringstream out, progress;
  try {
    apps::train_mnist(wild, out, progress, false);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("at epoch 1, step ") && Contains("the last checkpoint is unchanged"));
  }
}

TEST_CASE("train reliability: --detect-anomaly names the first op that produces NaN/Inf, and the checkpoint survives") {
  test::TempDir dir("train_rel_anomaly");
  std::string before;
  TrainMnistConfig wild = checkpoint_then_diverging_config(dir, before);
  wild.detect_anomaly = true;
  std::ostringstream out, progress;
  std::string message = "(no error)";
  try {
    apps::train_mnist(wild, out, progress, false);
  } catch (const autograd::AnomalyError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK_THAT(message, Contains("anomaly: ") && Contains(" at element ") && Contains("(epoch 1, step "));
  CHECK(((message.find("forward of ") != std::string::npos) || (message.find("backward of ") != std::string::npos)));
  CHECK_THAT(message, Contains("the last checkpoint is unchanged"));
  CHECK(file_bytes(wild.save) == before);
  CHECK_FALSE(autograd::is_anomaly_enabled());  // the run's guard is gone with it
  // The flag is run control, not recipe: a checkpoint does not record it.
  CHECK(before.find("detect_anomaly") == std::string::npos);
}

TEST_CASE("train reliability: checkpoint recipes are validated field by field") {
  test::TempDir dir("train_rel_recipe");
  test::write_synthetic_mnist(dir, 64, 20);
  TrainMnistConfig first = small_config(dir);
  first.save = dir.file("ck.safetensors");
  first.stop_after = 1;
  run(first);

  struct Case { const char* key; Json value; const char* message; };
  const std::vector<Case> cases = {
      {"momentum", Json(5.0), "config.momentum: expected a finite number in [0, 1], got 5"},
      {"lr", Json(-1.0), "config.lr: expected a finite number in [0, "},
      {"seed", Json("abc"), "config.seed: expected an unsigned 64-bit integer as a decimal string, got 'abc'"},
      {"seed", Json(int64_t(3)), "config.seed: expected a string, got an integer"},
      {"epochs", Json(int64_t(-2)), "config.epochs: expected an integer in [1, "},
      {"batch_size", Json("64"), "config.batch_size: expected an integer, got a string '64'"},
      {"model", Json(int64_t(1)), "config.model: expected a string, got an integer"},
  };
  for (const Case& k : cases) {
    INFO(k.key);
    const std::string edited = dir.file("edited.safetensors");
    write_with_config(first.save, edited, [&](Json& j) { j.set(k.key, k.value); });
    TrainMnistConfig resume = small_config(dir);
    resume.epochs = 0;
    resume.resume = edited;
    run_failing(resume, "checkpoint '" + edited + "' " + k.message);
  }

  // A weight of another dtype is refused by name rather than converted.
  std::map<std::string, std::string> metadata;
  StateDict tensors = load_tensors(first.save, &metadata);
  for (auto& [name, t] : tensors)
    if (name.rfind("model.", 0) == 0 && name.find("weight") != std::string::npos) t = t.to(DType::i32);
  save_tensors(dir.file("i32.safetensors"), tensors, metadata);
  TrainMnistConfig resume = small_config(dir);
  resume.epochs = 0;
  resume.resume = dir.file("i32.safetensors");
  run_failing(resume, "given dtype i32, module has f32");

  // A checkpoint without the loader's generator: an Error naming the file, not map::at.
  metadata.clear();
  tensors = load_tensors(first.save, &metadata);
  metadata["rng"] = R"({"default": {"seed": "7", "offset": "0"}})";
  save_tensors(dir.file("no_loader.safetensors"), tensors, metadata);
  resume.resume = dir.file("no_loader.safetensors");
  run_failing(resume, "no 'loader' generator");
}

// Note [Resume conflicts] (apps/train/training_options.h).
TEST_CASE("train reliability: resume flags that contradict the checkpoint's recipe are listed") {
  test::TempDir dir("train_rel_conflicts");
  test::write_synthetic_mnist(dir, 64, 20);
  TrainMnistConfig first = small_config(dir);
  first.save = dir.file("ck.safetensors");
  first.stop_after = 1;
  run(first);

  TrainMnistConfig resume = small_config(dir);
  resume.epochs = 0;
  resume.resume = first.save;
  resume.model = "lenet5";
  resume.lr = 0.5;
  resume.batch_size = 16;
  resume.optimizer = "adam";
  resume.explicit_keys = {"model", "lr", "batch_size", "optimizer", "data"};
  run_failing(resume, "--resume continues the checkpoint's recipe, but the command line contradicts it: "
                      "--model \"lenet5\" (checkpoint: \"mlp\"), --lr 0.5 (checkpoint: 0.05), --batch-size 16 "
                      "(checkpoint: 32), --optimizer \"adam\" (checkpoint: \"sgd\")");

  // Flags that agree with the checkpoint are fine, and so are the ones that are not set.
  resume = small_config(dir);
  resume.epochs = 0;
  resume.resume = first.save;
  resume.explicit_keys = {"model", "lr"};
  CHECK(run(resume).find("resumed") != std::string::npos);
  resume.model = "lenet5";
  resume.explicit_keys = {};
  CHECK(run(resume).find("resumed") != std::string::npos);  // the checkpoint's mlp, as before
}

TEST_CASE("train reliability: an empty test set is an error, not accuracy nan") {
  test::TempDir dir("train_rel_empty");
  test::write_synthetic_mnist(dir, 64, 0);
  run_failing(small_config(dir), "the test set in '" + dir.path.string() + "' has no images");
}

namespace {

// A results stream that sends this process SIGINT once the run has printed epoch 1's line:
// Ctrl-C arriving at a known point, during the run, with the run's handler installed.
class InterruptAfterEpoch1 : public std::stringbuf {
 protected:
  int sync() override {
    if (!sent_ && str().find("epoch 1/") != std::string::npos) {
      sent_ = true;
      std::raise(SIGINT);
    }
    return std::stringbuf::sync();
  }

 private:
  bool sent_ = false;
};

}  // namespace

// Note [Ctrl-C] (apps/train/training_loop.h).
TEST_CASE("train reliability: Ctrl-C stops after the step, and --resume from the last epoch finishes the run bitwise") {
  test::TempDir dir("train_rel_sigint");
  test::write_synthetic_mnist(dir, 160, 20);
  TrainMnistConfig full = small_config(dir);
  full.epochs = 3;
  full.save = dir.file("full.safetensors");
  run(full);

  TrainMnistConfig interrupted = full;
  interrupted.save = dir.file("interrupted.safetensors");
  std::ostringstream progress;
  InterruptAfterEpoch1 buffer;
  std::ostream out(&buffer);
  try {
    apps::train_mnist(interrupted, out, progress, false);
    FAIL("expected Interrupted");
  } catch (const apps::Interrupted& e) {
    CHECK_THAT(e.what(), Contains("interrupted in epoch 2 after step 6") && Contains("holds epoch 1"));
  }
  const TrainingCheckpoint last = load_checkpoint(interrupted.save);
  CHECK(last.epoch == 1);  // the last completed epoch: Note [Ctrl-C]
  CHECK(last.step == 5);

  TrainMnistConfig rest;
  rest.data = dir.path.string();
  rest.epochs = 0;
  rest.resume = interrupted.save;
  rest.save = dir.file("resumed.safetensors");
  run(rest);
  const TrainingCheckpoint a = load_checkpoint(full.save), b = load_checkpoint(rest.save);
  CHECK(a.step == b.step);
  test::check_bitwise_equal(a.model, b.model);
  test::check_bitwise_equal(a.optimizer, b.optimizer);
}
