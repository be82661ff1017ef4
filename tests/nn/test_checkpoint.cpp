#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "autograd/graph.h"
#include "core/error.h"
#include "core/json.h"
#include "datasets/data_loader.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

// A file path in the temp directory, removed at the end of the test.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("ember_test_nn_" + name)).string()) {}
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("checkpoint: save_tensors / load_tensors round trip every dtype, 0-d and empty tensors") {
  TempFile file("tensors.safetensors");
  StateDict in = {
      {"w", arange(6.0).reshape({2, 3}).t()},  // non-contiguous: saved in logical order
      {"d", tensor<double>({1.0 / 3.0, -2.5})},
      {"i", tensor<int64_t>({int64_t{1} << 40, -3})},
      {"j", tensor<int32_t>({7}, Shape{})},
      {"u", tensor<uint8_t>({0, 255})},
      {"b", gt(tensor<float>({1, -1}), 0.0)},
      {"e", zeros({0, 4})},
  };
  save_tensors(file.path, in, {{"note", "hi"}});
  std::map<std::string, std::string> meta;
  const StateDict out = load_tensors(file.path, &meta);
  CHECK(meta.at("note") == "hi");
  REQUIRE(out.size() == in.size());
  CHECK(out.at("w").shape() == Shape{3, 2});
  CHECK(out.at("w").to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(out.at("d").to_vector<double>() == std::vector<double>{1.0 / 3.0, -2.5});
  CHECK(out.at("i").to_vector<int64_t>() == std::vector<int64_t>{int64_t{1} << 40, -3});
  CHECK(out.at("j").shape().empty());
  CHECK(out.at("j").item() == 7);
  CHECK(out.at("u").to_vector<uint8_t>() == std::vector<uint8_t>{0, 255});
  CHECK(out.at("b").dtype() == DType::boolean);
  CHECK(out.at("b").to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(out.at("e").shape() == Shape{0, 4});
}

TEST_CASE("checkpoint: bf16 and f16 tensors round-trip bit for bit") {
  Generator gen(3);
  const Tensor f = mul(randn({3, 4}, {}, &gen), 1000.0);
  TempFile file("reduced_precision.safetensors");
  save_tensors(file.path, {{"b", f.to(DType::bf16)}, {"h", f.to(DType::f16)}});
  const StateDict in = load_tensors(file.path);
  CHECK(in.at("b").dtype() == DType::bf16);
  CHECK(in.at("h").dtype() == DType::f16);
  CHECK(in.at("b").to(DType::f32).to_vector<float>() == f.to(DType::bf16).to(DType::f32).to_vector<float>());
  CHECK(in.at("h").to(DType::f32).to_vector<float>() == f.to(DType::f16).to(DType::f32).to_vector<float>());
}

TEST_CASE("checkpoint: a file written by Python (json + numpy) loads into tensors") {
  const std::string path = std::string(EMBER_TEST_DATA_DIR) + "/python_written.safetensors";
  const StateDict loaded = load_tensors(path);
  CHECK(loaded.size() == 10);
  // numpy's float16 and the script's round-to-nearest-even bfloat16 bits, widened exactly.
  CHECK(loaded.at("half").dtype() == DType::f16);
  CHECK(loaded.at("half").to(DType::f32).to_vector<float>() == std::vector<float>{1.f, -2.f, 0.099975586f, 65504.f});
  CHECK(loaded.at("brain").dtype() == DType::bf16);
  CHECK(loaded.at("brain").to(DType::f32).to_vector<float>() ==
        std::vector<float>{1.f, -3.f, 0.15625f, float(BFloat16(3.0e38f))});
  CHECK(BFloat16(3.0e38f).bits == 0x7f62);  // rounded up: the nearest bf16, not the truncation 0x7f61
  CHECK(loaded.at("weight").shape() == Shape{2, 3});
  CHECK(loaded.at("weight").to_vector<float>() == std::vector<float>{-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f});
  CHECK(loaded.at("bias").to_vector<double>() == std::vector<double>{1.0 / 3.0, -2.5e-300, 1e300});
  CHECK(loaded.at("labels").to_vector<int64_t>() ==
        std::vector<int64_t>{0, -1, int64_t{1} << 40, -(int64_t{1} << 62)});
  CHECK(loaded.at("counts").to_vector<int32_t>() == std::vector<int32_t>{7, -8});
  CHECK(loaded.at("mask").to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(loaded.at("scalar").item() == 42.25);
  CHECK(loaded.at("empty").shape() == Shape{0, 4});
}

namespace {

// Everything one training run owns; `init_seed` only changes the initial weights.
struct Run {
  std::shared_ptr<Sequential> model;
  std::unique_ptr<SGD> opt;
  std::unique_ptr<CosineWithWarmup> sched;
  std::unique_ptr<DataLoader> loader;

  explicit Run(uint64_t init_seed, std::shared_ptr<const TensorDataset> data) {
    Generator init(init_seed);
    model = mlp({6, 16, 3}, &init);
    auto [decay, no_decay] = split_weight_decay(*model);
    opt = std::make_unique<SGD>(std::vector<ParamGroup<SgdOptions>>{
        {decay, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true}},
        {no_decay, {.lr = 0.1, .momentum = 0.9}}});
    sched = std::make_unique<CosineWithWarmup>(*opt, 1, 10);
    loader = std::make_unique<DataLoader>(data, DataLoaderOptions{.batch_size = 8, .shuffle = true, .seed = 5});
  }

  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      std::optional<Batch> batch = loader->next();
      if (!batch) batch = loader->next();  // epoch boundary
      opt->zero_grad();
      // Noise from the default generator, so that its state matters for the resume.
      Tensor noise = mul(randn(batch->targets.shape()), 0.01);
      Tensor loss = square((*model)(batch->inputs) - batch->targets - noise).mean();
      loss.backward();
      clip_grad_norm_(model->parameters(), 5.0);
      opt->step();
      sched->step();
    }
  }

  TrainingCheckpoint checkpoint(int64_t step) const {
    TrainingCheckpoint ck;
    ck.model = model->state_dict();
    ck.optimizer = opt->state_dict();
    ck.scheduler = sched->state_dict();
    ck.step = step;
    ck.epoch = loader->epoch();
    const DataLoaderState ls = loader->state();
    ck.rng["default"] = rng_state(default_generator());
    ck.rng["loader"] = {ls.seed, ls.offset};
    ck.counters["loader.epoch"] = ls.epoch;
    ck.counters["loader.batch"] = ls.batch;
    ck.config = R"({"model":"mlp","sizes":[6,16,3],"lr":0.1})";
    return ck;
  }

  void restore(const TrainingCheckpoint& ck) {
    model->load_state_dict(ck.model);
    opt->load_state_dict(ck.optimizer);
    sched->load_state_dict(ck.scheduler);
    restore_rng(default_generator(), ck.rng.at("default"));
    loader->set_state({ck.rng.at("loader").seed, ck.rng.at("loader").offset, ck.counters.at("loader.epoch"),
                       ck.counters.at("loader.batch")});
  }
};

}  // namespace

TEST_CASE("checkpoint: resume after save + load is bitwise identical to an uninterrupted run") {
  Generator data_gen(77);
  auto data = std::make_shared<TensorDataset>(randn({20, 6}, {}, &data_gen), randn({20, 3}, {}, &data_gen));
  TempFile file("resume.safetensors");

  manual_seed(1);
  Run uninterrupted(123, data);
  uninterrupted.train(5);  // 3 batches per epoch: crosses an epoch boundary after the save point
  const RngState rng_after = rng_state(default_generator());

  manual_seed(1);
  Run first_half(123, data);
  first_half.train(2);
  save_checkpoint(file.path, first_half.checkpoint(2));

  manual_seed(999);  // a different process state
  Run resumed(456, data);
  const TrainingCheckpoint ck = load_checkpoint(file.path);
  CHECK(ck.step == 2);
  CHECK(ck.counters.at("loader.batch") == 2);
  CHECK(Json::parse(ck.config).at("sizes").size() == 3);
  resumed.restore(ck);
  resumed.train(3);

  const auto want = uninterrupted.model->named_parameters();
  const auto got = resumed.model->named_parameters();
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(want[i].second.to_vector<float>() == got[i].second.to_vector<float>());
  }
  CHECK(uninterrupted.opt->lr(0) == resumed.opt->lr(0));
  CHECK(rng_state(default_generator()) == rng_after);
  CHECK(uninterrupted.loader->state().batch == resumed.loader->state().batch);
}

TEST_CASE("checkpoint: malformed checkpoints fail with specific messages") {
  TempFile file("bad.safetensors");
  save_tensors(file.path, {{"w", ones({2})}});
  CHECK_THROWS_WITH(load_checkpoint(file.path), Contains("has no 'format' entry"));

  save_tensors(file.path, {{"w", ones({2})}}, {{"format", "ember.training_checkpoint.v1"}});
  CHECK_THROWS_WITH(load_checkpoint(file.path), Contains("holds tensor 'w', which belongs to no section"));

  TrainingCheckpoint ck;
  ck.model = {{"fc.weight", ones({2, 2})}};
  ck.config = "{not json";
  CHECK_THROWS_WITH(save_checkpoint(file.path, ck), Contains("config"));
  ck.config = "{}";
  ck.rng["default"] = {~uint64_t{0}, 12};  // the full uint64 range survives the JSON
  save_checkpoint(file.path, ck);
  const TrainingCheckpoint back = load_checkpoint(file.path);
  CHECK(back.rng.at("default").seed == ~uint64_t{0});
  CHECK(back.model.at("fc.weight").shape() == Shape{2, 2});

  // Loading it into a model of another shape names the parameters.
  Linear fc(3, 2);
  CHECK_THROWS_WITH(fc.load_state_dict(back.model),
                    Contains("missing keys [bias, weight]; unexpected keys [fc.weight]"));

  std::ofstream(file.path, std::ios::binary) << "garbage";
  CHECK_THROWS_AS(load_checkpoint(file.path), Error);
}

namespace {

// A checkpoint file with the given __metadata__ entries (format added) and one model tensor.
void write_with_metadata(const std::string& path, std::map<std::string, std::string> metadata) {
  metadata["format"] = "ember.training_checkpoint.v1";
  if (!metadata.count("config")) metadata["config"] = "{}";
  save_tensors(path, {{"model.w", ones({2})}}, metadata);
}

}  // namespace

// Note [Checkpoint fields]: a well-formed file with unexpected metadata is an ember::Error that
// names the file and the field, never std::out_of_range / std::invalid_argument.
TEST_CASE("checkpoint: unexpected metadata values name the file and the field") {
  TempFile file("fields.safetensors");
  const std::string good_rng = R"({"default": {"seed": "1", "offset": "0"}, "loader": {"seed": "2", "offset": "0"}})";
  const std::string good_progress = R"({"epoch": 1, "step": 3, "counters": {"loader.epoch": 1, "loader.batch": 0}})";
  struct Case { std::string progress, rng, message; };
  const std::vector<Case> cases = {
      {R"({"epoch": "3", "step": 3, "counters": {}})", good_rng, "progress.epoch: expected an integer, got a string '3'"},
      {R"({"epoch": -5, "step": 3, "counters": {}})", good_rng, "progress.epoch: expected an integer in [0, "},
      {R"({"step": 3, "counters": {}})", good_rng, "progress: missing the field 'epoch'"},
      {R"({"epoch": 1, "step": -1, "counters": {}})", good_rng, "progress.step: expected an integer in [0, "},
      {R"({"epoch": 1, "step": 3})", good_rng, "progress: missing the field 'counters'"},
      {R"({"epoch": 1, "step": 3, "counters": []})", good_rng, "progress.counters: expected an object, got an array"},
      {R"({"epoch": 1, "step": 3, "counters": {"loader.batch": -2}})", good_rng, "progress.counters.loader.batch"},
      {R"([1, 2])", good_rng, "progress: expected an object, got an array"},
      {good_progress, R"({"default": {"seed": 1, "offset": "0"}})", "rng.default.seed: expected a string, got an integer"},
      {good_progress, R"({"default": {"seed": "-1", "offset": "0"}})", "rng.default.seed: expected an unsigned 64-bit"},
      {good_progress, R"({"default": {"offset": "0"}})", "rng.default: missing the field 'seed'"},
      {good_progress, R"({"default": 7})", "rng.default: expected an object, got an integer"},
      {good_progress, R"("x")", "rng: expected an object, got a string"},
  };
  for (const Case& c : cases) {
    INFO(c.progress << " / " << c.rng);
    write_with_metadata(file.path, {{"progress", c.progress}, {"rng", c.rng}});
    CHECK_THROWS_AS(load_checkpoint(file.path), Error);
    CHECK_THROWS_WITH(load_checkpoint(file.path), Contains("checkpoint '" + file.path + "'") && Contains(c.message));
  }

  // Entries a resume needs but the file lacks: an Error naming the file, not map::at.
  write_with_metadata(file.path, {{"progress", R"({"epoch": 1, "step": 3, "counters": {}})"},
                                  {"rng", R"({"default": {"seed": "1", "offset": "0"}})"}});
  const TrainingCheckpoint ck = load_checkpoint(file.path);
  CHECK(checkpoint_rng(ck, "default").seed == 1);
  CHECK_THROWS_WITH(checkpoint_rng(ck, "loader"), Contains(file.path) && Contains("no 'loader' generator"));
  CHECK_THROWS_WITH(checkpoint_counter(ck, "loader.batch"), Contains(file.path) && Contains("no 'loader.batch'"));
  // A checkpoint from before the history was kept has none: an empty one.
  CHECK(ck.history == "[]");
}

TEST_CASE("checkpoint: the history round-trips, and must be a JSON array") {
  TempFile file("history.safetensors");
  TrainingCheckpoint ck;
  ck.model = {{"w", ones({2})}};
  ck.history = R"([{"epoch":1,"train_loss":0.5}])";
  save_checkpoint(file.path, ck);
  CHECK(load_checkpoint(file.path).history == ck.history);

  ck.history = R"({"epoch":1})";
  CHECK_THROWS_WITH(save_checkpoint(file.path, ck), Contains("history to be a JSON array"));
  ck.history = "[1,";
  CHECK_THROWS_WITH(save_checkpoint(file.path, ck), Contains("history"));

  const std::string progress = R"({"epoch": 1, "step": 3, "counters": {}})", rng = R"({})";
  write_with_metadata(file.path, {{"progress", progress}, {"rng", rng}, {"history", "7"}});
  CHECK_THROWS_WITH(load_checkpoint(file.path),
                    Contains("checkpoint '" + file.path + "' history") && Contains("expected a JSON array"));
  write_with_metadata(file.path, {{"progress", progress}, {"rng", rng}, {"history", "[{"}});
  CHECK_THROWS_WITH(load_checkpoint(file.path), Contains("checkpoint '" + file.path + "' history"));
}

TEST_CASE("checkpoint: state of the wrong dtype or out of range is refused by model, optimizer and schedule") {
  Linear fc(2, 2);
  StateDict sd = fc.state_dict();
  sd["weight"] = sd["weight"].to(DType::i32);
  CHECK_THROWS_WITH(fc.load_state_dict(sd), Contains("dtype mismatches [weight: given dtype i32, module has f32]"));

  SGD opt(fc.parameters(), {.lr = 0.1, .momentum = 0.9});
  sum(fc(ones({1, 2}))).backward();
  opt.step();
  StateDict os = opt.state_dict();
  StateDict bad = os;
  bad["state.0.step"] = full({}, -4.0, {.dtype = DType::i64});
  CHECK_THROWS_WITH(opt.load_state_dict(bad), Contains("'state.0.step' must be non-negative, got -4"));
  bad = os;
  bad["param_groups.0.lr"] = full({}, std::nan(""), {.dtype = DType::f64});
  CHECK_THROWS_WITH(opt.load_state_dict(bad), Contains("'param_groups.0.lr' must be a finite non-negative number"));
  bad = os;
  for (auto& [name, t] : bad)
    if (name.find("momentum") != std::string::npos) t = t.to(DType::f64);
  CHECK_THROWS_WITH(opt.load_state_dict(bad), Contains("has dtype f64, parameter 0 has f32"));

  CosineWithWarmup sched(opt, 0, 10);
  StateDict ss = sched.state_dict();
  ss["last_step"] = full({}, -3.0, {.dtype = DType::i64});
  CHECK_THROWS_WITH(sched.load_state_dict(ss), Contains("'last_step' must be non-negative, got -3"));
}
