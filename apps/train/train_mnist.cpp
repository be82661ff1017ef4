#include "apps/train/train_mnist.h"

#include <filesystem>
#include <memory>
#include <ostream>

#include "apps/bench/timing.h"
#include "apps/train/progress.h"
#include "apps/train/run_log.h"
#include "datasets/data_loader.h"
#include "datasets/tensor_dataset.h"
#include "ember.h"

namespace ember::apps {

Json TrainMnistConfig::to_json() const {
  Json j = Json::object();
  j.set("data", data);
  j.set("dataset", dataset);
  j.set("model", model);
  j.set("epochs", int64_t(epochs));
  j.set("batch_size", batch_size);
  j.set("lr", lr);
  j.set("momentum", momentum);
  j.set("optimizer", optimizer);
  j.set("weight_decay", weight_decay);
  j.set("schedule", schedule);
  j.set("seed", std::to_string(seed));
  j.set("device", device);
  return j;
}

TrainMnistConfig TrainMnistConfig::from_json(const Json& j) {
  TrainMnistConfig c;
  for (const auto& [key, value] : j.as_object()) {
    if (key == "data") c.data = value.as_string();
    else if (key == "dataset") c.dataset = value.as_string();
    else if (key == "model") c.model = value.as_string();
    else if (key == "epochs") c.epochs = int(value.as_int());
    else if (key == "batch_size") c.batch_size = value.as_int();
    else if (key == "lr") c.lr = value.as_double();
    else if (key == "momentum") c.momentum = value.as_double();
    else if (key == "optimizer") c.optimizer = value.as_string();
    else if (key == "weight_decay") c.weight_decay = value.as_double();
    else if (key == "schedule") c.schedule = value.as_string();
    else if (key == "seed") c.seed = std::stoull(value.as_string());
    else if (key == "device") c.device = value.as_string();
    else EMBER_FAIL("train mnist: unknown configuration key '", key, "' in the checkpoint");
  }
  return c;
}

namespace {

std::unique_ptr<Optimizer> make_optimizer(const TrainMnistConfig& c, const Module& model) {
  auto [decay, no_decay] = split_weight_decay(model);
  if (c.optimizer == "sgd") {
    const SgdOptions with{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.weight_decay};
    SgdOptions without = with;
    without.weight_decay = 0;
    return std::make_unique<SGD>(std::vector<ParamGroup<SgdOptions>>{{decay, with}, {no_decay, without}});
  }
  const AdamOptions with{.lr = c.lr, .weight_decay = c.weight_decay};
  AdamOptions without = with;
  without.weight_decay = 0;
  std::vector<ParamGroup<AdamOptions>> groups{{decay, with}, {no_decay, without}};
  if (c.optimizer == "adam") return std::make_unique<Adam>(std::move(groups));
  if (c.optimizer == "adamw") return std::make_unique<AdamW>(std::move(groups));
  EMBER_FAIL("train mnist: unknown optimizer '", c.optimizer, "' (expected sgd, adam or adamw)");
}

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

Evaluation evaluate(Module& model, const TensorDataset& test, Device device) {
  autograd::NoGradGuard no_grad;
  model.eval();
  const int64_t n = test.size(), chunk = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    Tensor x = test.inputs().narrow(0, start, len).to(device);
    Tensor y = test.targets().narrow(0, start, len).to(device);
    Tensor logits = model(x);
    loss_sum += cross_entropy(logits, y, Reduction::sum).item();
    correct += int64_t(sum(eq(argmax(logits, 1), y).to(DType::i64)).item());
  }
  model.train();
  return {loss_sum / double(n), double(correct) / double(n)};
}

std::string model_title(const TrainMnistConfig& c) { return c.model + " on " + c.dataset; }

}  // namespace

TrainMnistResult train_mnist(const TrainMnistConfig& given, std::ostream& out, std::ostream& progress_out,
                             bool interactive) {
  TrainMnistConfig c = given;
  TrainingCheckpoint resumed;
  const bool resuming = !c.resume.empty();
  if (resuming) {
    resumed = load_checkpoint(c.resume);
    TrainMnistConfig stored = TrainMnistConfig::from_json(Json::parse(resumed.config, "checkpoint config"));
    // The run's recipe comes from the checkpoint; where the data lives and how long to train
    // come from the command line.
    stored.data = c.data;
    if (c.epochs > 0) stored.epochs = c.epochs;
    stored.save = c.save;
    stored.log = c.log;
    stored.plot = c.plot;
    stored.max_batches = c.max_batches;
    stored.stop_after = c.stop_after;
    stored.resume = c.resume;
    c = stored;
  }
  EMBER_CHECK(c.dataset == "mnist" || c.dataset == "fashion-mnist", "train mnist: unknown dataset '", c.dataset,
              "' (expected mnist or fashion-mnist)");
  EMBER_CHECK(c.epochs >= 1, "train mnist: epochs must be at least 1, got ", c.epochs);
  EMBER_CHECK(c.batch_size >= 1, "train mnist: batch size must be at least 1, got ", c.batch_size);
  const Device device = parse_device(c.device);

  manual_seed(c.seed);
  auto train_data = std::make_shared<MnistDataset>(c.data, true);
  auto test_data = std::make_shared<MnistDataset>(c.data, false);
  std::shared_ptr<Module> model = make_mnist_model(c.model);
  model->to(device);
  std::unique_ptr<Optimizer> opt = make_optimizer(c, *model);
  EMBER_CHECK(c.schedule == "cosine" || c.schedule == "none", "train mnist: unknown schedule '", c.schedule,
              "' (expected cosine or none)");
  DataLoader loader(train_data, {.batch_size = c.batch_size, .shuffle = true, .drop_last = false, .seed = c.seed + 1});

  // The schedule spans the whole run as configured (a resumed run continues the same curve).
  const int64_t steps_per_epoch = c.max_batches > 0 ? std::min(c.max_batches, loader.size()) : loader.size();
  std::unique_ptr<LrScheduler> schedule;
  if (c.schedule == "cosine") schedule = std::make_unique<CosineWithWarmup>(*opt, 0, steps_per_epoch * c.epochs);

  int64_t start_epoch = 0, step = 0;
  RunLog log;
  if (resuming) {
    model->load_state_dict(resumed.model);
    opt->load_state_dict(resumed.optimizer);
    if (schedule) schedule->load_state_dict(resumed.scheduler);
    restore_rng(default_generator(), resumed.rng.at("default"));
    const RngState ls = resumed.rng.at("loader");
    loader.set_state({ls.seed, ls.offset, resumed.counters.at("loader.epoch"), resumed.counters.at("loader.batch")});
    start_epoch = resumed.epoch;
    step = resumed.step;
    out << "resumed " << c.resume << " at epoch " << start_epoch << " (step " << step << ")\n";
  }

  out << "train " << model_title(c) << ": " << train_data->size() << " train / " << test_data->size()
      << " test images, " << model->num_parameters() << " parameters, " << c.optimizer << " lr " << c.lr
      << (c.schedule == "cosine" ? " (cosine)" : "") << ", batch " << c.batch_size << ", " << num_threads() << " threads, device " << device << "\n";
  out << model->summary({1, 1, 28, 28});
  TrainMnistResult result;
  const int64_t last_epoch = c.stop_after > 0 ? std::min<int64_t>(c.epochs, c.stop_after) : c.epochs;
  for (int64_t epoch = start_epoch; epoch < last_epoch; ++epoch) {
    const int64_t batches = c.max_batches > 0 ? std::min(c.max_batches, loader.size()) : loader.size();
    Progress bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(c.epochs), batches, c.batch_size,
                 progress_out, interactive);
    double loss_sum = 0;
    int64_t seen = 0;
    for (int64_t b = 0; b < batches; ++b) {
      std::optional<Batch> batch = loader.next();
      if (!batch && b == 0) batch = loader.next();  // a restored loader first reports its old epoch's end
      if (!batch) break;
      Tensor x = batch->inputs.to(device), y = batch->targets.to(device);
      Tensor loss = cross_entropy((*model)(x), y);
      opt->zero_grad();
      loss.backward();
      opt->step();
      if (schedule) schedule->step();
      ++step;
      // Reading the loss is the one host synchronisation per step (for display).
      const double value = loss.item();
      loss_sum += value * double(x.size(0));
      seen += x.size(0);
      bar.update(b + 1, loss_sum / double(seen));
    }
    // Finish the loader's epoch so the next one starts fresh (a dry run stops early).
    while (loader.next()) {}
    bar.finish();
    const double train_seconds = bar.elapsed_seconds();
    const Evaluation ev = evaluate(*model, *test_data, device);
    const EpochRecord rec{.epoch = int(epoch + 1), .train_loss = loss_sum / double(std::max<int64_t>(seen, 1)),
                          .test_loss = ev.loss, .test_accuracy = ev.accuracy, .seconds = train_seconds, .lr = opt->lr()};
    log.add(rec);
    out << "epoch " << rec.epoch << "/" << c.epochs << "  train loss " << bench::fixed(rec.train_loss, 4)
        << "  test loss " << bench::fixed(rec.test_loss, 4) << "  test accuracy " << bench::fixed(100 * rec.test_accuracy, 2)
        << "%  time " << format_duration(rec.seconds) << " (" << bench::fixed(double(seen) / rec.seconds, 0)
        << " img/s)" << std::endl;
    result.test_accuracy = ev.accuracy;
    result.test_loss = ev.loss;
    result.seconds += rec.seconds;

    if (!c.save.empty()) {
      TrainingCheckpoint ck;
      ck.model = model->state_dict();
      ck.optimizer = opt->state_dict();
      if (schedule) ck.scheduler = schedule->state_dict();
      ck.epoch = epoch + 1;
      ck.step = step;
      ck.config = c.to_json().dump();
      ck.rng["default"] = rng_state(default_generator());
      const DataLoaderState ls = loader.state();
      ck.rng["loader"] = {ls.seed, ls.offset};
      ck.counters["loader.epoch"] = ls.epoch;
      ck.counters["loader.batch"] = ls.batch;
      save_checkpoint(c.save, ck);
    }
    if (!c.log.empty()) log.write_csv(c.log);
    if (!c.plot.empty()) log.write_svg(c.plot, model_title(c));
  }
  if (!c.save.empty()) out << "checkpoint: " << c.save << "\n";
  return result;
}

}  // namespace ember::apps
