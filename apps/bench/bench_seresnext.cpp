#include "apps/bench/bench_seresnext.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <ostream>

#include "apps/bench/machine_peak.h"
#include "apps/bench/peer_script.h"
#include "ops/autocast.h"
#include "apps/bench/timing.h"
#include "cuda/runtime.h"
#include "ember.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct TrainResult {
  double img_s = 0;
  double peak_mib = 0;
};

struct Latency {
  double avg_ms = 0, p95_ms = 0, p99_ms = 0, img_s = 0;
};

// One benchmarked member of the family, as both frameworks build it.
struct Subject {
  const ModelEntry* entry = nullptr;
  ResNetConfig config;
  int64_t image_size = 0;
  int64_t train_batch = 0;
};

// Waits for the device's queued work (launches are asynchronous on cuda); nothing on the CPU.
void synchronize(Device device) {
  if (device.is_cuda()) cuda::synchronize();
}

std::shared_ptr<ResNet> build(const Subject& s, Device device) {
  manual_seed(0);
  auto model = std::dynamic_pointer_cast<ResNet>(s.entry->build(s.config.classes, nullptr));
  model->to(device);
  return model;
}

Subject subject(const std::string& name, const BenchSeresnextOptions& o) {
  Subject s;
  s.entry = &find_model(name);
  auto net = std::dynamic_pointer_cast<ResNet>(s.entry->build(s.entry->classes, nullptr));
  EMBER_CHECK(net != nullptr, "bench seresnext: '", name, "' is not a member of the ResNet family (see ember models)");
  s.config = net->config();
  s.image_size = o.image_size > 0 ? o.image_size : s.entry->image_size;
  // Batches that keep 2 CPU cores busy for about a second per step; a GPU needs 4-8x more work per step.
  const int64_t small = o.device.is_cuda() ? 256 : 64, large = o.device.is_cuda() ? 64 : 8;
  s.train_batch = o.train_batch > 0 ? o.train_batch : (s.image_size <= 64 ? small : large);
  return s;
}

Tensor synthetic_images(int64_t batch, int64_t size, Device device) { return randn({batch, 3, size, size}).to(device); }

// Note [Training step of the bench]: NVIDIA's recipe without its schedule (constant lr): SGD
// momentum 0.875 with weight decay, cross-entropy with label smoothing 0.1, one fixed
// synthetic batch, so that data loading is not timed, as NVIDIA's --data-backend synthetic.
TrainResult ember_train(const Subject& s, const BenchSeresnextOptions& o, DType autocast) {
  auto model = build(s, o.device);
  model->train();
  SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.875, .weight_decay = 6.103515625e-05});
  Tensor x = synthetic_images(s.train_batch, s.image_size, o.device);
  Tensor y = randint(0, s.config.classes, {s.train_batch}).to(o.device);
  auto step = [&] {
    Tensor loss;
    {
      const AutocastGuard guard(autocast);  // DType::f32: off
      loss = cross_entropy((*model)(x), y, Reduction::mean, /*label_smoothing=*/0.1);
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  Allocator& memory = allocator_for(o.device);
  synchronize(o.device);
  memory.reset_peak_stats();
  const int64_t before = memory.stats().allocated_bytes;
  for (int i = 0; i < o.warmup; ++i) step();
  synchronize(o.device);
  const auto start = Clock::now();
  for (int i = 0; i < o.iters; ++i) step();
  synchronize(o.device);
  const double seconds = seconds_since(start);
  return {double(s.train_batch * o.iters) / seconds,
          double(memory.stats().peak_allocated_bytes - before) / double(1 << 20)};
}

Latency latency_of(std::vector<double> ms, int64_t batch) {
  std::sort(ms.begin(), ms.end());
  auto pick = [&](double q) { return ms[std::min(ms.size() - 1, size_t(q * double(ms.size())))]; };
  double sum = 0;
  for (double v : ms) sum += v;
  const double avg = sum / double(ms.size());
  return {avg, pick(0.95), pick(0.99), double(batch) * 1e3 / avg};
}

// Latency per batch size; with `cap_s` > 0 the list ends after the first batch whose first call
// took longer (the batches measured are the keys of the result).
std::map<int64_t, Latency> ember_infer(const Subject& s, const std::vector<int64_t>& batches,
                                       const BenchSeresnextOptions& o, double cap_s) {
  auto model = build(s, o.device);
  model->eval();
  autograd::NoGradGuard no_grad;
  // One call, waited for: latency is per call, so on cuda each call ends with a synchronisation.
  auto call = [&](const Tensor& x) {
    (*model)(x);
    synchronize(o.device);
  };
  std::map<int64_t, Latency> result;
  for (int64_t batch : batches) {
    Tensor x = synthetic_images(batch, s.image_size, o.device);
    synchronize(o.device);
    auto first = Clock::now();
    call(x);
    const bool over_cap = cap_s > 0 && seconds_since(first) > cap_s;
    for (int i = 1; i < o.infer_warmup; ++i) call(x);
    std::vector<double> ms;
    for (int i = 0; i < o.infer_iters; ++i) {
      const auto start = Clock::now();
      call(x);
      ms.push_back(seconds_since(start) * 1e3);
    }
    result[batch] = latency_of(ms, batch);
    if (over_cap) break;
  }
  return result;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s.append(s.empty() ? "" : ",").append(std::to_string(x));
  return s;
}

// torch_seresnext.py's flags for the same network on the same device.
std::vector<std::string> peer_architecture(const Subject& s, Device device) {
  return {"--threads", std::to_string(num_threads()),
          "--device", device.is_cuda() ? "cuda" : "cpu",
          "--layers", join(s.config.blocks),
          "--widths", join(s.config.widths),
          "--stem-channels", std::to_string(s.config.stem_width),
          "--expansion", std::to_string(s.config.expansion),
          "--groups", std::to_string(s.config.cardinality),
          "--se-squeeze", std::to_string(s.config.se_squeeze),
          "--stem", s.config.stem == StemKind::imagenet ? "imagenet" : "cifar",
          "--classes", std::to_string(s.config.classes),
          "--image-size", std::to_string(s.image_size)};
}

std::map<std::string, double> peer_run(const Subject& s, Device device, std::vector<std::string> mode) {
  std::vector<std::string> args = peer_architecture(s, device);
  args.insert(args.end(), mode.begin(), mode.end());
  return run_peer_script("torch_seresnext.py", args);
}

std::string value_or_na(const std::map<std::string, double>& m, const std::string& key, int decimals) {
  auto it = m.find(key);
  return it == m.end() ? "n/a" : fixed(it->second, decimals);
}

std::string ratio_or_na(const std::map<std::string, double>& m, const std::string& key, double ours, bool ours_over_theirs) {
  auto it = m.find(key);
  if (it == m.end() || it->second <= 0 || ours <= 0) return "n/a";
  return fixed(ours_over_theirs ? ours / it->second : it->second / ours, 2) + "x";
}

void keep_best(std::map<std::string, double>& best, const std::map<std::string, double>& round,
               const std::string& key, bool higher_is_better) {
  auto it = round.find(key);
  if (it == round.end()) return;
  auto [b, inserted] = best.emplace(key, it->second);
  if (!inserted) b->second = higher_is_better ? std::max(b->second, it->second) : std::min(b->second, it->second);
}

DType autocast_of(const std::string& precision) {
  if (precision == "bf16") return DType::bf16;
  if (precision == "fp16") return DType::f16;
  EMBER_CHECK(precision == "fp32", "bench seresnext: unknown precision '", precision, "' (expected fp32, bf16 or fp16)");
  return DType::f32;
}

// One row per precision; every round measures each precision in turn, ember then PyTorch.
void bench_training(const Subject& s, const BenchSeresnextOptions& o, std::ostream& out, std::ostream& log) {
  std::map<std::string, TrainResult> ours;
  std::map<std::string, std::map<std::string, double>> theirs;
  for (int r = 0; r < o.rounds; ++r) {
    for (const std::string& precision : o.precisions) {
      log << "bench seresnext: " << s.entry->name << " training " << precision << ", round " << r + 1 << "/"
          << o.rounds << "\n" << std::flush;
      TrainResult t = ember_train(s, o, autocast_of(precision));
      TrainResult& best = ours[precision];
      best.img_s = std::max(best.img_s, t.img_s);
      best.peak_mib = std::max(best.peak_mib, t.peak_mib);
      if (!o.with_pytorch) continue;
      auto p = peer_run(s, o.device, {"train", "--batch", std::to_string(s.train_batch), "--warmup", std::to_string(o.warmup),
                            "--iters", std::to_string(o.iters), "--precision", precision});
      keep_best(theirs[precision], p, "train_img_s", true);
      keep_best(theirs[precision], p, "train_peak_mib", false);
    }
  }
  Table table({"model", "image", "batch", "precision", "ember img/s", "vs fp32", "pytorch img/s", "speedup",
               "ember peak MiB", "pytorch peak MiB"},
              {20, 5, 5, 9, 11, 7, 13, 7, 14, 16});
  out << table.header() << "\n";
  for (const std::string& precision : o.precisions) {
    const TrainResult& t = ours.at(precision);
    auto fp32 = ours.find("fp32");
    const std::string vs = fp32 == ours.end() ? "n/a" : fixed(t.img_s / fp32->second.img_s, 2) + "x";
    const auto& peer = theirs[precision];
    out << table.row({s.entry->name, std::to_string(s.image_size), std::to_string(s.train_batch), precision,
                      fixed(t.img_s, 2), vs, value_or_na(peer, "train_img_s", 2),
                      ratio_or_na(peer, "train_img_s", t.img_s, true), fixed(t.peak_mib, 1),
                      value_or_na(peer, "train_peak_mib", 1)})
        << "\n";
  }
  out << "\n" << std::flush;
}

void bench_inference(const Subject& s, const BenchSeresnextOptions& o, std::ostream& out, std::ostream& log) {
  std::vector<int64_t> batches;
  for (int64_t b = 1; b <= o.max_infer_batch; b *= 2) batches.push_back(b);
  std::map<int64_t, Latency> ours;
  std::map<std::string, double> theirs;
  for (int r = 0; r < o.rounds; ++r) {
    log << "bench seresnext: " << s.entry->name << " inference, round " << r + 1 << "/" << o.rounds << "\n" << std::flush;
    auto round = ember_infer(s, batches, o, r == 0 ? o.infer_cap_s : 0.0);
    if (r == 0) {  // the cap fixed the list for both frameworks and every later round
      batches.clear();
      for (auto& [b, l] : round) batches.push_back(b);
    }
    for (auto& [b, l] : round) {
      auto [it, inserted] = ours.emplace(b, l);
      if (!inserted && l.avg_ms < it->second.avg_ms) it->second = l;
    }
    if (!o.with_pytorch) continue;
    // The peer stops at the cap too, so that a batch list ember runs quickly cannot keep a slower
    // peer busy for minutes per call (its missing rows read n/a).
    auto p = peer_run(s, o.device, {"infer", "--batches", join(batches), "--warmup", std::to_string(o.infer_warmup),
                                    "--iters", std::to_string(o.infer_iters), "--cap-s", std::to_string(o.infer_cap_s)});
    for (int64_t b : batches) {  // a round's three percentiles stay together: the round with the best average
      const std::string key = "infer " + std::to_string(b) + " ";
      auto avg = p.find(key + "avg_ms");
      if (avg == p.end()) continue;
      auto best = theirs.find(key + "avg_ms");
      if (best != theirs.end() && best->second <= avg->second) continue;
      for (const char* field : {"avg_ms", "p95_ms", "p99_ms", "img_s"}) theirs[key + field] = p[key + field];
    }
  }
  Table table({"batch", "ember avg ms", "p95", "p99", "img/s", "pytorch avg ms", "p95", "p99", "img/s", "latency ratio"},
              {5, 12, 9, 9, 8, 14, 9, 9, 8, 13});
  out << s.entry->name << " inference at " << s.image_size << "x" << s.image_size << " (eval mode, no autograd; "
      << o.infer_iters << " calls after " << o.infer_warmup << " warm-up)\n"
      << table.header() << "\n";
  for (auto& [b, l] : ours) {
    const std::string key = "infer " + std::to_string(b) + " ";
    out << table.row({std::to_string(b), fixed(l.avg_ms, 2), fixed(l.p95_ms, 2), fixed(l.p99_ms, 2), fixed(l.img_s, 1),
                      value_or_na(theirs, key + "avg_ms", 2), value_or_na(theirs, key + "p95_ms", 2),
                      value_or_na(theirs, key + "p99_ms", 2), value_or_na(theirs, key + "img_s", 1),
                      ratio_or_na(theirs, key + "avg_ms", l.avg_ms, true)})
        << "\n" << std::flush;
  }
  out << "\n";
}

}  // namespace

void bench_seresnext(const BenchSeresnextOptions& o, std::ostream& out, std::ostream& log) {
  EMBER_CHECK(o.rounds >= 1 && o.iters >= 1 && o.infer_iters >= 1 && o.max_infer_batch >= 1,
              "bench seresnext: --rounds, --iters, --infer-iters and --max-infer-batch must be at least 1");
  EMBER_CHECK(!o.precisions.empty(), "bench seresnext: --precision needs at least one of fp32, bf16, fp16");
  for (const std::string& p : o.precisions) (void)autocast_of(p);
  out << "ember bench seresnext on " << o.device << ": NVIDIA's protocol on synthetic data, " << num_threads()
      << " CPU thread(s), best of " << o.rounds << " alternating rounds; training: " << o.iters << " SGD steps after "
      << o.warmup << " warm-up; PyTorch " << (o.with_pytorch ? "measured in the same run" : "skipped")
      << "\ncpu: " << cpu_identity()
      << (o.device.is_cuda() ? "\ngpu: " + cuda::device_properties(o.device.index).name : std::string())
      << (o.with_pytorch ? "\npeer: " + peer_identity() : std::string()) << "\n\n";
  for (const std::string& name : o.models) {
    Subject s = subject(name, o);
    bench_training(s, o, out, log);
    bench_inference(s, o, out, log);
  }
  out << "precision: fp32, or the forward under autocast (ember: AutocastGuard; PyTorch: torch.autocast) with f32 "
         "weights; vs fp32 = ember img/s / ember fp32 img/s\n"
         "speedup = ember img/s / pytorch img/s; latency ratio = ember ms / pytorch ms (below 1: ember is faster);\n"
         "peak MiB: what the training steps needed above the model and the batch (ember: the caching allocator's "
         "peak; PyTorch: "
      << (o.device.is_cuda() ? "torch.cuda.max_memory_allocated" : "the growth of the peak resident set") << ")\n";
}

}  // namespace ember::bench
