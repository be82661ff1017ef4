// GradScaler (nn/grad_scaler.h): PyTorch's dynamic loss scaling rules (growth after exactly
// growth_interval good steps, backoff and a skipped step on Inf/NaN), the call-order errors,
// the disabled no-op, option and state validation, and a bitwise resume through a training
// checkpoint; gradients on the CPU, on the cuda device (simulator or GPU), and on both.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "autograd/graph.h"
#include "core/error.h"
#include "cuda/runtime.h"
#include "datasets/data_loader.h"
#include "nn/nn.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Bitwise equality of two tensors (NaN payloads and signed zeros included).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ha = a.detach().cpu().contiguous(), hb = b.detach().cpu().contiguous();
  return std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

bool same_bits(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a)
    if (!b.count(name) || !same_bits(t, b.at(name))) return false;
  return true;
}

// Two leaf parameters and an SGD with momentum (so a step also changes optimizer state).
struct Params {
  Tensor a, b;
  std::unique_ptr<SGD> opt;
  explicit Params(Device device = Device::cpu(), Device b_device = Device::cpu()) {
    a = tensor<float>({1.f, -2.f, 3.f}).to(device).requires_grad_(true);
    b = tensor<float>({0.5f, 0.25f}).to(b_device).requires_grad_(true);
    opt = std::make_unique<SGD>(std::vector{a, b}, SgdOptions{.lr = 0.1, .momentum = 0.9});
  }
  // Sets the gradients to `scale` times (ga, gb), as a scaled backward would leave them.
  void set_grads(std::vector<float> ga, std::vector<float> gb, float scale) {
    for (float& v : ga) v *= scale;
    for (float& v : gb) v *= scale;
    a.set_grad(tensor<float>(ga).to(a.device()));
    b.set_grad(tensor<float>(gb).to(b.device()));
  }
};

// One good iteration of `scaler` on `p`; returns whether it stepped.
bool good_iteration(GradScaler& scaler, Params& p) {
  p.set_grads({1, 2, 3}, {4, 5}, scaler.scale_value());
  const bool stepped = scaler.step(*p.opt);
  scaler.update();
  return stepped;
}

// Shared by the CPU, cuda and mixed-device cases: one good step (so momentum state exists),
// then a gradient holding `bad` in `which` (0: a, 1: b) must leave parameters and optimizer
// state bitwise unchanged, back the scale off and restart the tracker.
void check_skip_on(float bad, int which, Device a_device, Device b_device) {
  Params p(a_device, b_device);
  GradScaler scaler({.init_scale = 1024, .growth_interval = 10});
  REQUIRE(good_iteration(scaler, p));
  REQUIRE(good_iteration(scaler, p));
  CHECK(scaler.growth_tracker() == 2);
  const Tensor a_before = p.a.detach().clone(), b_before = p.b.detach().clone();
  const StateDict opt_before = p.opt->state_dict();

  std::vector<float> ga{1, 2, 3}, gb{4, 5};
  (which == 0 ? ga : gb)[1] = bad;
  p.set_grads(ga, gb, scaler.scale_value());
  CHECK_FALSE(scaler.step(*p.opt));
  CHECK(same_bits(p.a, a_before));
  CHECK(same_bits(p.b, b_before));
  CHECK(same_bits(p.opt->state_dict(), opt_before));
  scaler.update();
  CHECK(scaler.scale_value() == 512.f);
  CHECK(scaler.growth_tracker() == 0);

  // The next good step is taken, at the backed-off scale.
  CHECK(good_iteration(scaler, p));
  CHECK_FALSE(same_bits(p.a, a_before));
  CHECK(scaler.scale_value() == 512.f);
  CHECK(scaler.growth_tracker() == 1);
}

}  // namespace

TEST_CASE("grad_scaler: the scale grows after exactly growth_interval good steps") {
  Params p;
  GradScaler scaler({.init_scale = 8, .growth_factor = 4, .growth_interval = 3});
  CHECK(scaler.scale_value() == 8.f);
  const Tensor loss = tensor<float>({1.5f}, Shape{});
  CHECK(scaler.scale(loss).item() == 12.0);
  for (int i = 1; i <= 2; ++i) {
    REQUIRE(good_iteration(scaler, p));
    CHECK(scaler.scale_value() == 8.f);
    CHECK(scaler.growth_tracker() == i);
  }
  REQUIRE(good_iteration(scaler, p));
  CHECK(scaler.scale_value() == 32.f);
  CHECK(scaler.growth_tracker() == 0);
  for (int i = 0; i < 3; ++i) good_iteration(scaler, p);
  CHECK(scaler.scale_value() == 128.f);

  SECTION("a growth that would overflow f32 is not applied, and the tracker still restarts") {
    GradScaler big({.init_scale = 3e38, .growth_interval = 1});
    p.set_grads({1, 2, 3}, {4, 5}, 1.f);  // finite: the step is good
    REQUIRE(big.step(*p.opt));
    big.update();
    CHECK(big.scale_value() == 3e38f);
    CHECK(big.growth_tracker() == 0);
  }
}

TEST_CASE("grad_scaler: Inf or NaN gradients skip the step, leave everything bitwise unchanged and back off") {
  SECTION("+Inf in the first parameter") { check_skip_on(kInf, 0, Device::cpu(), Device::cpu()); }
  SECTION("-Inf in the second parameter") { check_skip_on(-kInf, 1, Device::cpu(), Device::cpu()); }
  SECTION("NaN in the first parameter") { check_skip_on(kNaN, 0, Device::cpu(), Device::cpu()); }
  SECTION("NaN in the second parameter") { check_skip_on(kNaN, 1, Device::cpu(), Device::cpu()); }
}

TEST_CASE("grad_scaler: unscale_ divides every gradient by the scale, once") {
  Params p;
  GradScaler scaler({.init_scale = 4096});
  p.set_grads({1, -2, 3}, {0.125f, 5}, scaler.scale_value());
  scaler.unscale_(*p.opt);
  CHECK(p.a.grad().to_vector<float>() == std::vector<float>{1, -2, 3});
  CHECK(p.b.grad().to_vector<float>() == std::vector<float>{0.125f, 5});
  // step() after unscale_ does not divide again: the update uses the true gradients.
  REQUIRE(scaler.step(*p.opt));
  CHECK(p.a.grad().to_vector<float>() == std::vector<float>{1, -2, 3});
  CHECK(p.a.detach().to_vector<float>() == std::vector<float>{1.f - 0.1f * 1, -2.f + 0.1f * 2, 3.f - 0.1f * 3});

  SECTION("a scale that is no power of two: multiplied by the f32 reciprocal, as PyTorch") {
    Params q;
    GradScaler odd({.init_scale = 3});
    q.set_grads({1, 2, 3}, {4, 5}, 1.f);
    odd.unscale_(*q.opt);
    const float inv = float(1.0 / 3.0);
    CHECK(q.a.grad().to_vector<float>() == std::vector<float>{1 * inv, 2 * inv, 3 * inv});
  }
  SECTION("parameters without a gradient are left alone") {
    Params q;
    GradScaler s({.init_scale = 2});
    q.a.set_grad(tensor<float>({2, 4, 6}));
    s.unscale_(*q.opt);
    CHECK(q.a.grad().to_vector<float>() == std::vector<float>{1, 2, 3});
    CHECK_FALSE(q.b.grad().defined());
    CHECK(s.step(*q.opt));
  }
}

TEST_CASE("grad_scaler: calls out of order are errors naming the method") {
  Params p;
  GradScaler scaler;
  p.set_grads({1, 2, 3}, {4, 5}, scaler.scale_value());
  scaler.unscale_(*p.opt);
  CHECK(test::error_of([&] { scaler.unscale_(*p.opt); }) ==
        "GradScaler::unscale_: unscale_() has already been called on this optimizer since the last update()");
  // The failed call changed nothing: the gradients were divided once.
  CHECK(p.a.grad().to_vector<float>() == std::vector<float>{1, 2, 3});
  scaler.step(*p.opt);
  CHECK_THAT(test::error_of([&] { scaler.step(*p.opt); }),
             Contains("GradScaler::step: step() has already been called since the last update()"));
  CHECK_THAT(test::error_of([&] { scaler.unscale_(*p.opt); }),
             Contains("GradScaler::unscale_: unscale_() is being called after step()"));
  scaler.update();
  CHECK_THAT(test::error_of([&] { scaler.update(); }),
             Contains("GradScaler::update: no inf checks were recorded prior to update()"));
  // After update() the cycle starts again.
  p.set_grads({1, 2, 3}, {4, 5}, scaler.scale_value());
  scaler.unscale_(*p.opt);
  CHECK(scaler.step(*p.opt));
  scaler.update();
  CHECK(scaler.growth_tracker() == 2);
}

TEST_CASE("grad_scaler: a disabled scaler is a no-op") {
  Params p;
  GradScaler scaler({.enabled = false});
  CHECK_FALSE(scaler.is_enabled());
  CHECK(scaler.scale_value() == 1.f);
  const Tensor loss = tensor<float>({2.5f}, Shape{});
  CHECK(scaler.scale(loss).impl_ptr() == loss.impl_ptr());
  p.set_grads({1, kInf, 3}, {4, 5}, 1.f);
  scaler.unscale_(*p.opt);
  scaler.unscale_(*p.opt);  // no call-order checks either
  CHECK(p.a.grad().to_vector<float>() == std::vector<float>{1, kInf, 3});
  CHECK(scaler.step(*p.opt));  // steps even on Inf: nothing is checked
  CHECK(std::isinf(p.a.detach().to_vector<float>()[1]));
  scaler.update();
  scaler.update();
  CHECK(scaler.scale_value() == 1.f);
  CHECK(scaler.state_dict().empty());
  scaler.load_state_dict({});
  GradScaler enabled;
  scaler.load_state_dict(enabled.state_dict());
  CHECK(scaler.scale_value() == 1.f);
}

TEST_CASE("grad_scaler: invalid options name the option, what was expected and what was given") {
  const double nan = std::nan("");
  struct Case {
    GradScalerOptions options;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{.init_scale = 0}, "option init_scale: expected a finite number > 0 (and finite as f32), got 0"},
      {{.init_scale = -1}, "option init_scale: expected a finite number > 0 (and finite as f32), got -1"},
      {{.init_scale = nan}, "option init_scale: expected a finite number > 0 (and finite as f32), got nan"},
      {{.init_scale = 1e39}, "option init_scale: expected a finite number > 0 (and finite as f32), got 1e+39"},
      {{.growth_factor = 1}, "option growth_factor: expected a finite number > 1, got 1"},
      {{.growth_factor = 0.5}, "option growth_factor: expected a finite number > 1, got 0.5"},
      {{.backoff_factor = 1}, "option backoff_factor: expected a number in (0, 1), got 1"},
      {{.backoff_factor = 0}, "option backoff_factor: expected a number in (0, 1), got 0"},
      {{.backoff_factor = nan}, "option backoff_factor: expected a number in (0, 1), got nan"},
      {{.growth_interval = 0}, "option growth_interval: expected an integer >= 1, got 0"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    CHECK(test::error_of([&] { GradScaler s(c.options); }) == "GradScaler: " + c.message);
  }
  CHECK(test::error_of([] { GradScaler s({.init_scale = 1, .growth_interval = 1}); }) == "(no error)");
}

TEST_CASE("grad_scaler: state_dict round trip and load_state_dict validation") {
  Params p;
  GradScaler scaler({.init_scale = 64, .growth_factor = 3, .backoff_factor = 0.25, .growth_interval = 5});
  good_iteration(scaler, p);
  good_iteration(scaler, p);
  const StateDict sd = scaler.state_dict();
  CHECK(sd.size() == 5);
  CHECK(sd.at("scale").dtype() == DType::f32);
  CHECK(sd.at("growth_tracker").item() == 2);

  GradScaler back;  // other options: the saved ones replace them
  back.load_state_dict(sd);
  CHECK(back.scale_value() == 64.f);
  CHECK(back.growth_tracker() == 2);
  CHECK(back.options().growth_factor == 3);
  CHECK(back.options().backoff_factor == 0.25);
  CHECK(back.options().growth_interval == 5);
  CHECK(same_bits(back.state_dict(), sd));

  CHECK_THAT(test::error_of([&] { back.load_state_dict({}); }), Contains("the state is empty"));
  StateDict bad = sd;
  bad["growth_tracker"] = tensor<int64_t>({5}, Shape{});
  bad["scale"] = tensor<double>({64}, Shape{});
  bad["extra"] = ones({1});
  bad.erase("backoff_factor");
  const std::string msg = test::error_of([&] { back.load_state_dict(bad); });
  CHECK_THAT(msg, Contains("'scale' must be one f32 value, got f64 ()"));
  CHECK_THAT(msg, Contains("missing 'backoff_factor'"));
  CHECK_THAT(msg, Contains("unexpected 'extra'"));
  CHECK_THAT(msg, Contains("'growth_tracker' must be in [0, growth_interval = 5), got 5"));
  StateDict inf_scale = sd;
  inf_scale["scale"] = tensor<float>({kInf}, Shape{});
  CHECK_THAT(test::error_of([&] { back.load_state_dict(inf_scale); }), Contains("'scale' must be a finite number > 0"));
  CHECK(same_bits(back.state_dict(), sd));  // a refused state changed nothing
}

namespace {

// A small training run with loss scaling whose scale both backs off (the first scales overflow
// f32 in backward) and grows (growth_interval 2), so that a resume that lost the scaler's state
// would diverge.
struct ScaledRun {
  std::shared_ptr<Sequential> model;
  std::unique_ptr<SGD> opt;
  std::unique_ptr<DataLoader> loader;
  GradScaler scaler;
  int skipped = 0, grown = 0;
  std::vector<int64_t> trackers;  // the growth tracker after each step

  ScaledRun(std::shared_ptr<const TensorDataset> data, GradScalerOptions options) : scaler(options) {
    Generator init(123);
    model = mlp({6, 16, 3}, &init);
    opt = std::make_unique<SGD>(model->parameters(), SgdOptions{.lr = 1e-5, .momentum = 0.9});
    loader = std::make_unique<DataLoader>(data, DataLoaderOptions{.batch_size = 8, .shuffle = true, .seed = 5});
  }

  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      std::optional<Batch> batch = loader->next();
      if (!batch) batch = loader->next();
      opt->zero_grad();
      Tensor loss = square((*model)(batch->inputs) - batch->targets).mean();
      scaler.scale(loss).backward();
      const float before = scaler.scale_value();
      if (!scaler.step(*opt)) ++skipped;
      scaler.update();
      if (scaler.scale_value() > before) ++grown;
      trackers.push_back(scaler.growth_tracker());
    }
  }

  TrainingCheckpoint checkpoint() const {
    TrainingCheckpoint ck;
    ck.model = model->state_dict();
    ck.optimizer = opt->state_dict();
    ck.grad_scaler = scaler.state_dict();
    const DataLoaderState ls = loader->state();
    ck.rng["loader"] = {ls.seed, ls.offset};
    ck.counters["loader.epoch"] = ls.epoch;
    ck.counters["loader.batch"] = ls.batch;
    return ck;
  }

  void restore(const TrainingCheckpoint& ck) {
    model->load_state_dict(ck.model);
    opt->load_state_dict(ck.optimizer);
    scaler.load_state_dict(ck.grad_scaler);
    loader->set_state({ck.rng.at("loader").seed, ck.rng.at("loader").offset, ck.counters.at("loader.epoch"),
                       ck.counters.at("loader.batch")});
  }
};

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("ember_test_grad_scaler_" + name)).string()) {}
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("grad_scaler: resume through a checkpoint file is bitwise identical to an uninterrupted run") {
  Generator data_gen(77);
  // Targets of size ~1000 make losses of ~1e6 (2^20), so scales above ~2^98 overflow in backward.
  auto data = std::make_shared<TensorDataset>(randn({24, 6}, {}, &data_gen), mul(randn({24, 3}, {}, &data_gen), 1000.0));
  const GradScalerOptions options{.init_scale = 0x1p116, .growth_interval = 2};
  TempFile file("resume.safetensors");
  constexpr int kSteps = 24;

  ScaledRun straight(data, options);
  straight.train(kSteps);
  // Save at the first step from the middle on where the tracker is not 0, so that the file must
  // carry the tracker as well as the scale.
  int half = kSteps / 2;
  while (half < kSteps && straight.trackers[size_t(half - 1)] == 0) ++half;
  REQUIRE(half < kSteps - 2);
  INFO("skipped " << straight.skipped << ", grown " << straight.grown << ", final scale " << straight.scaler.scale_value());
  // The run exercised both rules, before and after the save point.
  REQUIRE(straight.skipped >= 2);
  REQUIRE(straight.grown >= 2);

  ScaledRun first(data, options);
  first.train(half);
  REQUIRE(first.skipped >= 1);
  REQUIRE(first.grown >= 1);
  REQUIRE(first.scaler.growth_tracker() != 0);
  REQUIRE(straight.skipped > first.skipped);  // both rules also act after the save point
  REQUIRE(straight.grown > first.grown);
  save_checkpoint(file.path, first.checkpoint());

  ScaledRun resumed(data, {});  // default options and a fresh scale: all of it comes from the file
  const TrainingCheckpoint ck = load_checkpoint(file.path);
  CHECK(ck.grad_scaler.size() == 5);
  resumed.restore(ck);
  CHECK(resumed.scaler.scale_value() == first.scaler.scale_value());
  resumed.train(kSteps - half);

  CHECK(resumed.scaler.scale_value() == straight.scaler.scale_value());
  CHECK(resumed.scaler.growth_tracker() == straight.scaler.growth_tracker());
  CHECK(first.skipped + resumed.skipped == straight.skipped);
  CHECK(same_bits(resumed.opt->state_dict(), straight.opt->state_dict()));
  const auto want = straight.model->named_parameters(), got = resumed.model->named_parameters();
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(same_bits(got[i].second, want[i].second));
  }

  SECTION("without the scaler's state the continuation differs (the test can fail)") {
    ScaledRun lost(data, options);
    lost.restore(ck);
    lost.scaler = GradScaler(options);  // the scaler's state is lost: back to init_scale
    lost.train(kSteps - half);
    bool all_same = lost.scaler.scale_value() == straight.scaler.scale_value();
    const auto lost_params = lost.model->named_parameters();
    for (size_t i = 0; i < want.size(); ++i) all_same = all_same && same_bits(lost_params[i].second, want[i].second);
    CHECK_FALSE(all_same);
  }
}

TEST_CASE("grad_scaler: a checkpoint without a grad_scaler section (written before it existed) still loads") {
  TempFile file("old.safetensors");
  // The layout of a checkpoint from before the section: model, optimizer, no grad_scaler.*.
  Params p;
  TrainingCheckpoint ck;
  ck.model = {{"a", p.a.detach()}};
  ck.optimizer = p.opt->state_dict();
  save_checkpoint(file.path, ck);
  const SafetensorsFile raw = read_safetensors(file.path);
  for (const SafetensorsTensor& t : raw.tensors) CHECK(t.name.rfind("grad_scaler.", 0) != 0);
  const TrainingCheckpoint back = load_checkpoint(file.path);
  CHECK(back.grad_scaler.empty());
  CHECK(back.model.size() == 1);
  // A caller that finds no section starts a fresh scaler; loading the empty state is refused.
  GradScaler scaler;
  CHECK_THAT(test::error_of([&] { scaler.load_state_dict(back.grad_scaler); }), Contains("no grad_scaler section"));
}

TEST_CASE("grad_scaler: gradients on the cuda device (simulator or GPU), and on two devices") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  SECTION("unscale_ on cuda matches the CPU bitwise") {
    Params cpu, gpu(Device::cuda(), Device::cuda());
    GradScaler s_cpu({.init_scale = 3}), s_gpu({.init_scale = 3});
    cpu.set_grads({1, 2, 3}, {4, 5}, 3.f);
    gpu.set_grads({1, 2, 3}, {4, 5}, 3.f);
    REQUIRE(gpu.a.grad().device().is_cuda());
    CHECK(s_cpu.step(*cpu.opt));
    CHECK(s_gpu.step(*gpu.opt));
    CHECK(same_bits(gpu.a.grad(), cpu.a.grad()));
    CHECK(same_bits(gpu.a, cpu.a));
    CHECK(same_bits(gpu.b, cpu.b));
  }
  SECTION("Inf on cuda") { check_skip_on(kInf, 0, Device::cuda(), Device::cuda()); }
  SECTION("NaN on cuda, second parameter") { check_skip_on(kNaN, 1, Device::cuda(), Device::cuda()); }
  SECTION("Inf on the CPU parameter of a two-device optimizer") { check_skip_on(kInf, 1, Device::cuda(), Device::cpu()); }
  SECTION("NaN on the cuda parameter of a two-device optimizer") { check_skip_on(kNaN, 0, Device::cuda(), Device::cpu()); }
}
