#include "apps/bench/bench_losses.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "apps/bench/device_timing.h"
#include "apps/bench/peer_script.h"
#include "apps/bench/timing.h"
#include "apps/train/metric_losses.h"
#include "core/allocator.h"
#include "core/parallel.h"
#include "cuda/runtime.h"
#include "ember.h"

namespace ember::bench {

namespace {

struct Profile {
  const char* name;
  int64_t batch, dim, per_class, classes;  // classes: of ArcFace / ProxyAnchor
};
constexpr Profile kProfiles[] = {{"standard", 512, 128, 4, 1024}, {"large", 512, 512, 16, 10000}};

DType embedding_dtype(const BenchLossesOptions& o);

// Seeded standard-normal embeddings (a leaf that requires grad) and the profile's labels: i / per_class
// for the pair losses, i % classes (cyclic) for the class losses.
struct Inputs {
  Tensor embeddings, labels;
};
Inputs make_inputs(const Profile& p, int64_t batch, bool class_loss, Device device, DType dtype) {
  Generator gen(1234);
  Tensor emb = randn({batch, p.dim}, {}, &gen).to(device).to(dtype).detach().requires_grad_();
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = class_loss ? i % p.classes : i / p.per_class;
  return {emb, tensor<int64_t>(labels, {batch}).to(device)};
}

// A loss of the apps' table (apps/train/metric_losses.h) for profile p on `device`; a loss with
// parameters has one weight per class (ArcFace, ProxyAnchor) and gets cyclic labels.
std::unique_ptr<apps::MetricLoss> make_loss(const std::string& name, const Profile& p, Device device) {
  Generator gen(7);
  std::unique_ptr<apps::MetricLoss> loss = apps::make_metric_loss(name, {.num_classes = p.classes,
                                                                         .embedding_size = p.dim, .gen = &gen});
  loss->to(device);
  return loss;
}
bool is_class_loss(const apps::MetricLoss& loss) { return !loss.parameters().empty(); }

// One forward+backward of `loss` on `in`, gradients dropped first.
void step(apps::MetricLoss& loss, const Inputs& in) {
  in.embeddings.zero_grad();
  for (const Tensor& p : loss.parameters()) p.zero_grad();
  loss(in.embeddings, in.labels).backward();
}

std::string row_name(const std::string& loss, const Profile& p) { return loss + " " + p.name; }

// Milliseconds per forward+backward and the allocator's peak above what was live before one.
struct Measured {
  double ms = 0;
  double peak_mib = 0;
};
Measured measure(const std::string& name, const Profile& p, Device device, DType dtype) {
  const std::unique_ptr<apps::MetricLoss> loss_ptr = make_loss(name, p, device);
  apps::MetricLoss& loss = *loss_ptr;
  const Inputs in = make_inputs(p, p.batch, is_class_loss(loss), device, dtype);
  Allocator& allocator = allocator_for(device);
  step(loss, in);
  in.embeddings.zero_grad();
  for (const Tensor& q : loss.parameters()) q.zero_grad();
  if (device.is_cuda()) cuda::synchronize();
  const int64_t before = allocator.stats().allocated_bytes;
  allocator.reset_peak_stats();
  step(loss, in);
  if (device.is_cuda()) cuda::synchronize();
  Measured m;
  m.peak_mib = double(allocator.stats().peak_allocated_bytes - before) / double(1 << 20);
  m.ms = median_ms([&] { step(loss, in); }, timing_for(device));
  return m;
}

// The largest batch (doubling from the profile's) whose forward+backward fits `budget` extra
// bytes and `time_cap` seconds, and why the search stopped.
struct Capacity {
  int64_t batch = 0;
  std::string stop;
};
Capacity capacity(const std::string& name, const Profile& p, const BenchLossesOptions& o, std::ostream& log) {
  const std::unique_ptr<apps::MetricLoss> loss_ptr = make_loss(name, p, o.device);
  apps::MetricLoss& loss = *loss_ptr;
  Allocator& allocator = allocator_for(o.device);
  Capacity c{0, "reached --max-batch"};
  for (int64_t batch = p.batch; batch <= o.max_batch; batch *= 2) {
    const Inputs in = make_inputs(p, batch, is_class_loss(loss), o.device, embedding_dtype(o));
    if (o.device.is_cuda()) cuda::synchronize();
    allocator.set_memory_limit(size_t(allocator.stats().allocated_bytes + o.budget_mib * (int64_t(1) << 20)));
    const auto t0 = std::chrono::steady_clock::now();
    try {
      step(loss, in);
      if (o.device.is_cuda()) cuda::synchronize();
    } catch (const OutOfMemory&) {
      c.stop = detail::concat("batch ", batch, " over the budget");
      break;
    }
    allocator.set_memory_limit(0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log << "bench losses: capacity " << name << " batch " << batch << ": " << fixed(seconds, 2) << " s\n"
        << std::flush;
    if (seconds > o.time_cap_s) {
      c.stop = detail::concat("batch ", batch, " over the time cap");
      break;
    }
    c.batch = batch;
  }
  allocator.set_memory_limit(0);
  return c;
}

DType embedding_dtype(const BenchLossesOptions& o) {
  EMBER_CHECK(o.precision == "fp32" || o.precision == "bf16", "bench losses: unknown precision '", o.precision,
              "' (expected fp32 or bf16)");
  return o.precision == "bf16" ? DType::bf16 : DType::f32;
}

// Whether `name` is in `only` (an empty list takes every name).
bool selected(const std::vector<std::string>& only, const std::string& name) {
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

void keep_best(std::map<std::string, double>& best, const std::string& name, double ms) {
  auto [it, inserted] = best.try_emplace(name, ms);
  if (!inserted) it->second = std::min(it->second, ms);
}

std::string ratio(const std::map<std::string, double>& peer, const std::string& name, double ember_ms,
                  std::string* peer_ms) {
  auto it = peer.find(name);
  if (it == peer.end()) return *peer_ms = "n/a";
  *peer_ms = fixed(it->second, 3);
  return fixed(it->second / ember_ms, 2) + "x";
}

// Comma-joined names, for the peer script's filters.
std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

}  // namespace

void bench_losses(std::ostream& out, std::ostream& log, const BenchLossesOptions& o) {
  const int threads = num_threads(), rounds = std::max(o.rounds, 1);
  std::vector<std::string> args = {"--threads", std::to_string(threads), "--device",
                                   o.device.is_cuda() ? "cuda" : "cpu", "--precision", o.precision};
  std::vector<std::string> losses;
  for (const std::string& name : apps::metric_loss_names())
    if (selected(o.losses, name)) losses.push_back(name);
  EMBER_CHECK(!losses.empty(), "bench losses: --losses names none of the losses (", joined(apps::metric_loss_names()),
              "), got ", joined(o.losses));
  std::vector<Profile> profiles;
  for (const Profile& p : kProfiles)
    if (selected(o.profiles, p.name)) profiles.push_back(p);
  if (!o.losses.empty()) args.insert(args.end(), {"--losses", joined(losses)});
  if (!o.profiles.empty()) args.insert(args.end(), {"--profiles", joined(o.profiles)});
  out << "ember bench losses on " << o.device << ": ms per forward+backward (" << o.precision
      << " embeddings), median of 7 blocks after warm-up, "
      << "best of " << rounds << " alternating round(s), " << threads << " CPU thread(s); PyTorch (the same formulas, "
      << "eager, as PML computes them) measured in the same run (" << peer_python() << ")\npeer: " << peer_identity()
      << "\n\n" << std::flush;

  std::map<std::string, Measured> ember;  // best round per row
  std::map<std::string, double> torch;
  for (int round = 1; round <= rounds; ++round) {
    log << "bench losses: round " << round << "/" << rounds << ": ember" << std::flush;
    for (const Profile& p : profiles)
      for (const std::string& name : losses) {
        const Measured m = measure(name, p, o.device, embedding_dtype(o));
        auto [it, inserted] = ember.try_emplace(row_name(name, p), m);
        if (!inserted) it->second.ms = std::min(it->second.ms, m.ms), it->second.peak_mib = m.peak_mib;
      }
    log << ", pytorch\n" << std::flush;
    for (const auto& [name, ms] : run_peer_script("torch_losses.py", args)) keep_best(torch, name, ms);
  }

  for (const Profile& p : profiles) {
    out << "profile " << p.name << ": batch " << p.batch << ", dim " << p.dim << ", " << p.per_class
        << " per class; ArcFace/ProxyAnchor " << p.classes << " classes, cyclic labels\n";
    Table table({"loss", "ember ms", "pytorch ms", "speedup", "ember peak MiB"}, {14, 10, 11, 8, 15});
    out << table.header() << "\n";
    for (const std::string& loss : losses) {
      const std::string name = row_name(loss, p);
      const Measured& m = ember.at(name);
      std::string peer_ms;
      const std::string speedup = ratio(torch, name, m.ms, &peer_ms);
      out << table.row({loss, fixed(m.ms, 3), peer_ms, speedup, fixed(m.peak_mib, 2)}) << "\n";
    }
    out << "\n" << std::flush;
  }

  if (!o.capacity) return;
  const Profile& p = kProfiles[0];
  out << "batch capacity (profile " << p.name << ", doubling from " << p.batch << "): extra memory budget "
      << o.budget_mib << " MiB, time cap " << fixed(o.time_cap_s, 1) << " s per forward+backward\n";
  std::vector<std::string> peer_args = args;
  for (const std::string& a : {std::string("--capacity"), std::string("--budget-mib"), std::to_string(o.budget_mib),
                               std::string("--time-cap-s"), fixed(o.time_cap_s, 1), std::string("--max-batch"),
                               std::to_string(o.max_batch)})
    peer_args.push_back(a);
  const std::map<std::string, double> torch_capacity = run_peer_script("torch_losses.py", peer_args);
  Table table({"loss", "ember batch", "pytorch batch", "ember stopped at"}, {14, 12, 14, 36});
  out << table.header() << "\n";
  for (const std::string& name : losses) {
    const Capacity c = capacity(name, p, o, log);
    auto it = torch_capacity.find("capacity " + name);
    const std::string peer = it == torch_capacity.end() ? "n/a" : std::to_string(int64_t(it->second));
    out << table.row({name, std::to_string(c.batch), peer, c.stop}) << "\n" << std::flush;
  }
  out << "\nember: the caching allocator's limit (Note [Memory limit]) above what was live before the call; "
         "PyTorch: peak resident memory of a fresh process above its baseline\n";
}

}  // namespace ember::bench
