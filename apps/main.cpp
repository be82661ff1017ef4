// The ember command-line app: `ember demo`, `ember train mnist|metric`, `ember bench ...`,
// `ember models`.
// Usage errors (unknown flag, bad value) print one line and exit with status 2; failures while
// running print "ember: error: ..." and exit with status 1 (Ctrl-C during training: 130).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <optional>
#include <string_view>

#include "apps/bench/bench_allocator.h"
#include "apps/bench/bench_image_loader.h"
#include "apps/bench/bench_kernels.h"
#include "apps/bench/bench_losses.h"
#include "apps/bench/bench_matmul.h"
#include "apps/bench/bench_mnist.h"
#include "apps/bench/bench_mnist_ranks.h"
#include "apps/bench/bench_ops.h"
#include "apps/bench/bench_seresnext.h"
#include "apps/bench/openmp_spin.h"
#include "apps/data_command.h"
#include "apps/demo.h"
#include "apps/models_command.h"
#include "apps/train/data_parallel.h"
#include "apps/train/progress.h"
#include "apps/train/train_metric.h"
#include "apps/train/train_mnist.h"
#include "apps/train/train_seresnext.h"
#include "apps/train/training_loop.h"
#include "core/error.h"
#include "core/parallel.h"
#include "nn/models/zoo.h"

namespace {

// What the command line sets, and which subcommand it named. The parser writes each flag into
// these fields through pointers, so a CommandLine is neither copied nor moved.
struct CommandLine {
  CommandLine() = default;
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  int threads = 0;

  CLI::App* demo = nullptr;
  ember::apps::DemoOptions demo_options;

  CLI::App* train_mnist = nullptr;
  ember::apps::TrainMnistConfig train_mnist_config;
  bool dry_run = false;

  CLI::App* train_metric = nullptr;
  ember::apps::TrainMetricConfig train_metric_config;

  CLI::App* train_seresnext = nullptr;
  ember::apps::TrainSeresnextConfig train_seresnext_config;

  CLI::App* bench_ops = nullptr;
  CLI::App* bench_allocator = nullptr;

  CLI::App* bench_kernels = nullptr;
  std::string bench_kernels_device = "cpu";
  ember::bench::BenchKernelsOptions bench_kernels_options;

  CLI::App* bench_matmul = nullptr;
  ember::bench::BenchMatmulOptions bench_matmul_options;

  CLI::App* bench_mnist = nullptr;
  ember::bench::BenchMnistOptions bench_mnist_options;
  ember::bench::BenchMnistRanksOptions bench_mnist_ranks_options;
  bool bench_mnist_rank_worker = false;
  bool no_pytorch = false;

  CLI::App* bench_losses = nullptr;
  std::string bench_losses_device = "cpu";
  std::string bench_seresnext_device = "cpu";
  ember::bench::BenchLossesOptions bench_losses_options;
  bool no_capacity = false;

  CLI::App* data_image_folder = nullptr;
  ember::apps::ImageFolderExport image_folder_export;

  CLI::App* bench_image_loader = nullptr;
  ember::bench::BenchImageLoaderOptions bench_image_loader_options;

  CLI::App* bench_seresnext = nullptr;
  ember::bench::BenchSeresnextOptions bench_seresnext_options;

  CLI::App* models = nullptr;
  ember::apps::ModelsOptions models_options;
};

void add_global_options(CLI::App& app, CommandLine& cl) {
  app.require_subcommand(1);
  app.fallthrough();
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    return "ember: " + std::string(e.what()) + " (see: " + failed->get_name() + " --help)\n";
  });
  app.add_option("--threads", cl.threads, "CPU threads for parallel loops (default: EMBER_NUM_THREADS or all)")
      ->check(CLI::Range(1, 1024));
}

void add_demo_command(CLI::App& app, CommandLine& cl) {
  cl.demo = app.add_subcommand("demo", "Fit a small network with autograd and print the loss falling");
  cl.demo->add_option("--steps", cl.demo_options.steps, "SGD steps")->check(CLI::Range(1, 1000000));
  cl.demo->add_option("--lr", cl.demo_options.lr, "learning rate")->check(CLI::PositiveNumber);
  cl.demo->add_option("--seed", cl.demo_options.seed, "random seed");
}

// An output flag needs a file name: `--save ''` is a usage error, not a run that saves nothing.
CLI::Validator non_empty_path() {
  return CLI::Validator([](std::string& path) { return path.empty() ? std::string("expected a file name") : ""; },
                        "PATH");
}

// The options every train command shares (apps/train/training_options.h).
void add_training_options(CLI::App& cmd, ember::apps::TrainingOptions& c, bool& dry_run) {
  cmd.add_option("--data", c.data, "folder with the four IDX files (default: data/mnist or data/fashion-mnist)");
  cmd.add_option("--dataset", c.dataset, "mnist or fashion-mnist")->check(CLI::IsMember({"mnist", "fashion-mnist"}));
  cmd.add_option("--epochs", c.epochs, "passes over the training set")->check(CLI::Range(1, 100000));
  cmd.add_option("--batch-size", c.batch_size, "images per step")->check(CLI::Range(int64_t(1), int64_t(60000)));
  cmd.add_option("--lr", c.lr, "learning rate")->check(CLI::PositiveNumber);
  cmd.add_option("--momentum", c.momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999999));
  cmd.add_option("--optimizer", c.optimizer, "sgd, adam or adamw")->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd.add_option("--weight-decay", c.weight_decay, "L2 (sgd, adam) or decoupled (adamw) weight decay")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--schedule", c.schedule, "learning-rate schedule: cosine (per step, to 0) or none")
      ->check(CLI::IsMember({"cosine", "none"}));
  cmd.add_option("--seed", c.seed, "random seed (initialisation, shuffling)")->check(CLI::NonNegativeNumber);
  cmd.add_option("--device", c.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--save", c.save, "write a training checkpoint (safetensors) after every epoch")->check(non_empty_path());
  cmd.add_option("--resume", c.resume, "continue from a checkpoint written by --save")->check(CLI::ExistingFile);
  cmd.add_option("--log", c.log, "write one CSV row per epoch")->check(non_empty_path());
  cmd.add_option("--plot", c.plot, "write the loss and test-score curves as SVG")->check(non_empty_path());
  cmd.add_option("--stop-after", c.stop_after, "stop after this many epochs (the schedule still spans --epochs; "
                                               "continue with --resume)")->check(CLI::Range(1, 100000));
  cmd.add_option("--precision", c.precision, "fp32, or mixed precision: bf16 or fp16 (with loss scaling) for "
                 "convolutions, linear layers and matmuls; losses, normalisation and weights stay f32")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd.add_flag("--dry-run", dry_run, "a few batches per epoch, to check the setup quickly");
  cmd.add_flag("--detect-anomaly", c.detect_anomaly, "stop at the first op whose output or gradient is NaN/Inf and "
                                                     "name it (slow: a device sync per op)");
}

void add_train_mnist_options(CLI::App& cmd, ember::apps::TrainMnistConfig& c, bool& dry_run) {
  add_training_options(cmd, c, dry_run);
  cmd.add_option("--model", c.model, "mnist_cnn, lenet5 or mlp")->check(CLI::IsMember({"mnist_cnn", "lenet5", "mlp"}));
}

// --loss accepts the rows of the loss table; anything else is a usage error that lists them.
CLI::Validator metric_loss_validator() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        for (const std::string& known : ember::apps::metric_loss_names())
          if (name == known) return "";
        return "'" + name + "' is not a loss of this build (it has: " + ember::apps::metric_loss_list() + ")";
      },
      "LOSS");
}

void add_train_metric_options(CLI::App& cmd, ember::apps::TrainMetricConfig& c, bool& dry_run) {
  add_training_options(cmd, c, dry_run);
  std::string losses;
  for (const auto& row : ember::apps::metric_loss_table()) losses += "\n  " + row.name + ": " + row.description;
  cmd.add_option("--loss", c.loss, "metric-learning loss (default ntxent):" + losses)->check(metric_loss_validator());
  cmd.add_option("--dim", c.dim, "embedding size")->check(CLI::Range(int64_t(1), int64_t(65536)));
  cmd.add_option("--per-class", c.per_class, "images of each class in a batch (--batch-size must be a multiple)")
      ->check(CLI::Range(int64_t(1), int64_t(60000)));
}

// The ResNet family's members as --model accepts them (3-channel, any image size).
CLI::Validator resnet_family_validator() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        std::string known;
        for (const ember::ModelEntry& m : ember::model_zoo()) {
          if (m.channels != 3 || !m.any_image_size) continue;
          if (m.name == name) return "";
          known += (known.empty() ? "" : ", ") + m.name;
        }
        return "'" + name + "' is not a member of the ResNet family (it has: " + known + ")";
      },
      "MODEL");
}

void add_train_seresnext_options(CLI::App& cmd, ember::apps::TrainSeresnextConfig& c, bool& dry_run) {
  add_training_options(cmd, c, dry_run);
  cmd.remove_option(cmd.get_option("--dataset"));
  cmd.get_option("--data")->description("folder holding train/ and val/ image folders, as `ember data image-folder` "
                                        "writes them (default data/fashion-mnist-png)");
  cmd.get_option("--lr")->description("learning rate per 256 images, scaled by the images per step (default 0.256)");
  cmd.add_option("--model", c.model, "a member of the ResNet family (default se_resnext_cifar)")
      ->check(resnet_family_validator());
  cmd.add_option("--depth", c.depth, "se_resnext_cifar's depth: 11, 20, 29, ...")->check(CLI::Range(int64_t(11), int64_t(1000)));
  cmd.add_option("--width", c.width, "se_resnext_cifar's first-stage width (a multiple of 8)")
      ->check(CLI::Range(int64_t(8), int64_t(4096)));
  cmd.add_option("--image-size", c.image_size, "square training size (default: the model's, 32 or 224)")
      ->check(CLI::Range(int64_t(8), int64_t(1024)));
  cmd.add_option("--crop-scale", c.crop_scale, "RandomResizedCrop's smallest area fraction (default 0.35 for "
                                               "se_resnext_cifar, NVIDIA's 0.08 otherwise)")
      ->check(CLI::Range(0.01, 1.0));
  cmd.add_option("--warmup-epochs", c.warmup_epochs, "linear warmup length (default round(8 * epochs / 90), >= 1)")
      ->check(CLI::Range(0, 100000));
  cmd.add_option("--schedule-unit", c.schedule_unit, "step the lr schedule per epoch (NVIDIA's, default) or per step")
      ->check(CLI::IsMember({"epoch", "step"}));
  cmd.add_option("--label-smoothing", c.label_smoothing, "default 0.1")->check(CLI::Range(0.0, 0.999));
  cmd.add_option("--mixup", c.mixup, "mixup alpha (NVIDIA's option: 0.2; default 0: off)")->check(CLI::Range(0.0, 100.0));
  cmd.add_flag("--sync-bn", c.sync_bn, "under mpirun: batch norm statistics over every rank's batch (PyTorch's "
               "SyncBatchNorm); alone it changes nothing");
  cmd.add_option("--target-batch", c.target_batch, "images per optimizer step: accumulate ceil(target / batch) "
                                                   "micro-batches of --batch-size")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd.add_option("--workers", c.workers, "loader threads decoding images (default 2)")->check(CLI::Range(1, 256));
  cmd.add_option("--prefetch", c.prefetch, "batches decoded ahead of training (default max(2, --workers), so "
                                           "every worker is busy)")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--bad-images", c.bad_images, "a file that does not decode: fail (default) or skip (report it "
                                               "once, use the next image)")
      ->check(CLI::IsMember({"fail", "skip"}));
}

void add_train_commands(CLI::App& app, CommandLine& cl) {
  CLI::App* train = app.add_subcommand("train", "Train a model end to end");
  train->require_subcommand(1);
  cl.train_mnist = train->add_subcommand("mnist", "Train an MNIST / Fashion-MNIST classifier (default: mnist_cnn, "
                                                  "5 epochs, SGD lr 0.05 momentum 0.9, cosine schedule, batch 64)");
  add_train_mnist_options(*cl.train_mnist, cl.train_mnist_config, cl.dry_run);
  cl.train_metric = train->add_subcommand(
      "metric", "Train an MNIST / Fashion-MNIST embedding with a metric-learning loss and score retrieval "
                "(default: ntxent, dim 128, batch 128 = 8 classes x 16, 4 epochs, Adam lr 1e-3, cosine schedule)");
  add_train_metric_options(*cl.train_metric, cl.train_metric_config, cl.dry_run);
  cl.train_seresnext = train->add_subcommand(
      "seresnext", "Train a ResNet-family member on image folders with NVIDIA's recipe (default: se_resnext_cifar, "
                   "90 epochs, SGD 0.256 per 256 images momentum 0.875, warmup + cosine per epoch, label smoothing "
                   "0.1, batch 64); reports top-1 and top-5");
  add_train_seresnext_options(*cl.train_seresnext, cl.train_seresnext_config, cl.dry_run);
}

void add_bench_kernels_options(CLI::App& cmd, CommandLine& cl) {
  cmd.add_option("--device", cl.bench_kernels_device, "cpu, or cuda (a GPU; ember and PyTorch CUDA)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--rounds", cl.bench_kernels_options.rounds,
                 "ember and PyTorch run this many times alternately; each reports its best (default 5)")
      ->check(CLI::Range(1, 100));
  cmd.add_option("--only", cl.bench_kernels_options.only, "run only one set of rows: conv, nn or seresnext")
      ->check(CLI::IsMember({"conv", "nn", "seresnext"}));
}

void add_bench_matmul_options(CLI::App& cmd, CommandLine& cl) {
  cmd.add_flag("--sim", cl.bench_matmul_options.sim, "run the kernels on the SIMT simulator at small sizes "
                                                     "(a correctness smoke, not a figure)");
}

void add_bench_mnist_options(CLI::App& cmd, CommandLine& cl) {
  cmd.add_option("--data", cl.bench_mnist_options.data, "folder with the MNIST IDX files");
  cmd.add_option("--batch-sizes", cl.bench_mnist_options.batch_sizes, "batch sizes (default 32 64 128 256 512 1024)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(60000)));
  cmd.add_flag("--no-pytorch", cl.no_pytorch, "skip the PyTorch column");
  cmd.add_option("--precisions", cl.bench_mnist_options.precisions, "precisions, alternating (default fp32,bf16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd.add_option("--max-batches", cl.bench_mnist_options.max_batches, "time only the first N batches of each epoch")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd.add_option("--epoch-rounds", cl.bench_mnist_options.rounds,
                 "alternating rounds per batch size and precision, fastest kept (default 1)")
      ->check(CLI::Range(1, 100));
  ember::bench::BenchMnistRanksOptions& r = cl.bench_mnist_ranks_options;
  cmd.add_option("--ranks", r.ranks, "data-parallel scaling instead: mpirun jobs of these rank counts (e.g. 1,2)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--steps", r.steps, "with --ranks: timed steps per rank (default 100)")->check(CLI::Range(1, 100000));
  cmd.add_option("--rounds", r.rounds, "with --ranks: alternating rounds, best kept (default 3)")
      ->check(CLI::Range(1, 100));
  cmd.add_flag("--rank-worker", cl.bench_mnist_rank_worker, "one rank of a --ranks job (started by the benchmark)")
      ->group("");  // internal
}

void add_bench_losses_options(CLI::App& cmd, CommandLine& cl) {
  ember::bench::BenchLossesOptions& o = cl.bench_losses_options;
  cmd.add_option("--device", cl.bench_losses_device, "cpu, or cuda (a GPU; ember and PyTorch CUDA)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--rounds", o.rounds, "ember and PyTorch run this many times alternately; each reports its best "
                                       "(default 3)")
      ->check(CLI::Range(1, 100));
  cmd.add_option("--budget-mib", o.budget_mib, "extra memory a batch-capacity run may use (default 256)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd.add_option("--time-cap-s", o.time_cap_s, "longest forward+backward a batch-capacity run may take (default 5)")
      ->check(CLI::Range(0.001, 3600.0));
  cmd.add_option("--max-batch", o.max_batch, "the batch-capacity search stops here (default 65536)")
      ->check(CLI::Range(int64_t(512), int64_t(1) << 24));
  cmd.add_flag("--no-capacity", cl.no_capacity, "skip the batch-capacity table");
  cmd.add_option("--losses", o.losses, "only these losses, comma-separated (default: all)")->delimiter(',');
  cmd.add_option("--profiles", o.profiles, "only these profiles, comma-separated: standard, large (default: both)")
      ->delimiter(',')
      ->check(CLI::IsMember({"standard", "large"}));
  cmd.add_option("--precision", o.precision, "embeddings in fp32 (default) or bf16, as PML's BF16 table; class "
                                             "weights stay f32")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

void add_bench_seresnext_options(CLI::App& cmd, CommandLine& cl) {
  ember::bench::BenchSeresnextOptions& o = cl.bench_seresnext_options;
  cmd.add_option("--models", o.models, "members of the ResNet family (default se_resnext_cifar,se_resnext50_32x4d)")
      ->delimiter(',');
  cmd.add_option("--image-size", o.image_size, "square input size (default: each model's, 32 or 224)")
      ->check(CLI::Range(int64_t(8), int64_t(1024)));
  cmd.add_option("--batch-size", o.train_batch, "training batch (default 64 at 32x32, 8 at 224x224; cuda: 256 and 64)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd.add_option("--warmup", o.warmup, "untimed training steps (default 2)")->check(CLI::Range(0, 1000));
  cmd.add_option("--iters", o.iters, "timed training steps (default 5)")->check(CLI::Range(1, 100000));
  cmd.add_option("--precision", o.precisions, "training rows: fp32, bf16, fp16 (autocast forward; default fp32,bf16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd.add_option("--max-infer-batch", o.max_infer_batch, "inference batches 1, 2, 4, ... up to this (default 256)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd.add_option("--infer-iters", o.infer_iters, "timed inference calls per batch (default 10)")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--infer-cap-s", o.infer_cap_s, "the inference list ends after a batch whose first call takes "
                                                  "longer (default 2)")
      ->check(CLI::Range(0.001, 3600.0));
  cmd.add_option("--rounds", o.rounds, "ember and PyTorch run this many times alternately; each reports its best "
                                       "(default 2)")
      ->check(CLI::Range(1, 100));
  cmd.add_option("--device", cl.bench_seresnext_device, "cpu, or cuda (a GPU; ember and PyTorch with cuDNN)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_flag("--no-pytorch", cl.no_pytorch, "skip the PyTorch columns");
}

void add_bench_commands(CLI::App& app, CommandLine& cl) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (tables of measured figures)");
  bench->require_subcommand(1);
  bench->footer(std::string("OpenMP peers (oneDNN, PyTorch): ") + ember::bench::openmp_spin_setting() +
                " (Note [OpenMP spinning in the benchmarks])");
  cl.bench_ops = bench->add_subcommand("ops", "matmul GFLOP/s and elementwise GB/s against the machine's peaks");
  cl.bench_allocator = bench->add_subcommand("allocator", "cached vs uncached allocation cost, 1 KiB..64 MiB");
  cl.bench_kernels = bench->add_subcommand("kernels", "CNN kernels (conv, pool, softmax, cross-entropy, relu, "
                                                      "sigmoid, tanh, matmul): ember vs PyTorch, ms per call");
  add_bench_kernels_options(*cl.bench_kernels, cl);
  cl.bench_matmul = bench->add_subcommand("matmul", "CUDA matmul kernels (tiled, register-blocked) vs cuBLAS on a GPU");
  add_bench_matmul_options(*cl.bench_matmul, cl);
  cl.bench_mnist = bench->add_subcommand("mnist", "one epoch of mnist_cnn per batch size, ember vs PyTorch");
  add_bench_mnist_options(*cl.bench_mnist, cl);
  cl.bench_losses = bench->add_subcommand("losses", "metric-learning losses: ms per forward+backward, peak memory "
                                                    "and batch capacity, ember vs PyTorch (PML's formulas)");
  add_bench_losses_options(*cl.bench_losses, cl);
  cl.bench_seresnext = bench->add_subcommand("seresnext", "the ResNet family by NVIDIA's protocol: training img/s, "
                                                          "inference latency, peak memory, ember vs PyTorch");
  add_bench_seresnext_options(*cl.bench_seresnext, cl);
}

void add_data_commands(CLI::App& app, CommandLine& cl) {
  CLI::App* data = app.add_subcommand("data", "Data set tools");
  data->require_subcommand(1);
  cl.data_image_folder = data->add_subcommand(
      "image-folder", "Write MNIST / Fashion-MNIST as PNG folders OUT/train/<class>/<index>.png and OUT/val/...");
  ember::apps::ImageFolderExport& o = cl.image_folder_export;
  cl.data_image_folder->add_option("--dataset", o.dataset, "mnist or fashion-mnist")
      ->check(CLI::IsMember({"mnist", "fashion-mnist"}));
  cl.data_image_folder->add_option("--data", o.data, "folder with the four IDX files (default: data/<dataset>)");
  cl.data_image_folder->add_option("OUT", o.out, "output folder")->required();
}

// `ember bench image-loader`, registered under the existing `bench` command.
void add_bench_image_loader_command(CLI::App& app, CommandLine& cl) {
  ember::bench::BenchImageLoaderOptions& o = cl.bench_image_loader_options;
  cl.bench_image_loader = app.get_subcommand("bench")->add_subcommand(
      "image-loader", "images/s that the DataLoader decodes and augments from an image folder, per worker count");
  cl.bench_image_loader->add_option("--folder", o.folder, "an image folder root/<class>/<file>")
      ->required()
      ->check(CLI::ExistingDirectory);
  cl.bench_image_loader->add_option("--workers", o.workers, "worker counts (default 1,2,4)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  cl.bench_image_loader->add_option("--size", o.size, "crop side (default 224)")->check(CLI::Range(1, 4096));
  cl.bench_image_loader->add_option("--batches", o.batches, "timed batches per run (default 20)")
      ->check(CLI::Range(1, 100000));
  cl.bench_image_loader->add_option("--rounds", o.rounds, "alternating rounds; the best is reported (default 3)")
      ->check(CLI::Range(1, 100));
  cl.bench_image_loader->add_option("--bad-images", o.bad_images, "a file that does not decode: fail (default) or "
                                                                  "skip (report it once, use the next image)")
      ->check(CLI::IsMember({"fail", "skip"}));
}

// `ember models [NAME [--image-size S] [--classes C]]`; an unknown NAME is a usage error that
// lists the known ones.
void add_models_command(CLI::App& app, CommandLine& cl) {
  ember::apps::ModelsOptions& o = cl.models_options;
  cl.models = app.add_subcommand("models", "List every model with parameters and MACs, or print one model's "
                                           "summary (layers, output shapes, parameters, MACs)");
  CLI::Option* name =
      cl.models->add_option("name", o.name, "a model to summarise")
          ->check(CLI::Validator(
              [](std::string& model) -> std::string {
                for (const ember::ModelEntry& m : ember::model_zoo())
                  if (m.name == model) return "";
                return "'" + model + "' is not a model of this build (it has: " + ember::model_names() + ")";
              },
              "MODEL"));
  cl.models->add_option("--image-size", o.image_size, "input height and width (default: the model's)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)))
      ->needs(name);
  cl.models->add_option("--classes", o.classes, "outputs of the classifier (default: the model's)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->needs(name);
}

// The exit status when parsing ends the program: 0 after --help, 2 after a usage error (CLI11
// has printed the message); nothing when the command should run.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// The defaults that depend on other flags: the Fashion-MNIST folder, --dry-run's batch limit, and
// the checkpoint's epoch count when --resume is given without --epochs.
void apply_dependent_defaults(const CLI::App& cmd, bool dry_run, ember::apps::TrainingOptions& c) {
  if (cmd.count("--data") == 0 && c.dataset == "fashion-mnist") c.data = "data/fashion-mnist";
  if (dry_run) c.max_batches = 20;
  if (!c.resume.empty() && cmd.count("--epochs") == 0) c.epochs = 0;  // the checkpoint's
  for (const CLI::Option* option : cmd.get_options())  // Note [Resume conflicts] (training_options.h)
    if (option->count() > 0 && option->get_name().rfind("--", 0) == 0) {
      std::string key = option->get_name().substr(2);
      for (char& ch : key) ch = ch == '-' ? '_' : ch;
      c.explicit_keys.push_back(key);
    }
}

// Note [Training under mpirun] (apps/train/data_parallel.h): the ranks come from the MPI
// environment; every train command runs alone or as one rank of a job.
void join_data_parallel_job(ember::apps::TrainingOptions& c) {
  if (ember::distributed::launched_world_size() <= 1) return;
  c.group = ember::apps::process_group_from_environment(ember::apps::training_device(c.device));
}

ember::apps::TrainMnistConfig train_mnist_config(const CommandLine& cl) {
  ember::apps::TrainMnistConfig c = cl.train_mnist_config;
  apply_dependent_defaults(*cl.train_mnist, cl.dry_run, c);
  join_data_parallel_job(c);
  return c;
}

ember::apps::TrainMetricConfig train_metric_config(const CommandLine& cl) {
  ember::apps::TrainMetricConfig c = cl.train_metric_config;
  apply_dependent_defaults(*cl.train_metric, cl.dry_run, c);
  join_data_parallel_job(c);
  return c;
}

ember::apps::TrainSeresnextConfig train_seresnext_config(const CommandLine& cl) {
  ember::apps::TrainSeresnextConfig c = cl.train_seresnext_config;
  apply_dependent_defaults(*cl.train_seresnext, cl.dry_run, c);
  join_data_parallel_job(c);
  return c;
}

// Flag combinations the parser cannot check one flag at a time (train metric's batch layout):
// one line and exit status 2, like any usage error. A resumed run takes them from the
// checkpoint, so they are checked only for a fresh one.
std::optional<int> check_flag_combinations(const CommandLine& cl) {
  if (!*cl.train_metric || !cl.train_metric_config.resume.empty()) return std::nullopt;
  ember::apps::TrainMetricConfig c = cl.train_metric_config;
  c.ranks = ember::distributed::launched_world_size();  // every rank's loss sees the global batch
  const std::string problem = c.flag_problem();
  if (problem.empty()) return std::nullopt;
  std::cerr << "ember: " << problem << " (see: ember train metric --help)\n";
  return 2;
}

// Runs the subcommand the command line named; returns the exit status.
int run_command(const CommandLine& cl) {
  if (cl.threads > 0) ember::set_num_threads(cl.threads);
  if (*cl.demo) {
    ember::apps::run_demo(cl.demo_options, std::cout);
  } else if (*cl.train_mnist) {
    ember::apps::train_mnist(train_mnist_config(cl), std::cout, std::cerr, ember::apps::Progress::stderr_is_terminal());
  } else if (*cl.train_metric) {
    ember::apps::train_metric(train_metric_config(cl), std::cout, std::cerr,
                              ember::apps::Progress::stderr_is_terminal());
  } else if (*cl.train_seresnext) {
    ember::apps::train_seresnext(train_seresnext_config(cl), std::cout, std::cerr,
                                 ember::apps::Progress::stderr_is_terminal());
  } else if (*cl.bench_ops) {
    ember::bench::bench_ops(std::cout);
  } else if (*cl.bench_kernels) {
    ember::bench::BenchKernelsOptions options = cl.bench_kernels_options;
    options.device = ember::parse_device(cl.bench_kernels_device);
    ember::bench::bench_kernels(std::cout, std::cerr, options);
  } else if (*cl.bench_matmul) {
    return ember::bench::bench_matmul(std::cout, cl.bench_matmul_options);
  } else if (*cl.bench_mnist) {
    ember::bench::BenchMnistOptions options = cl.bench_mnist_options;
    options.with_pytorch = !cl.no_pytorch;
    const bool scaling = cl.bench_mnist->count("--ranks") > 0 || cl.bench_mnist_rank_worker;
    if (!scaling) {
      ember::bench::bench_mnist(options, std::cout);
      return 0;
    }
    // Note [Scaling benchmark]: one batch size, per rank (the first of --batch-sizes, default 64).
    ember::bench::BenchMnistRanksOptions ranks = cl.bench_mnist_ranks_options;
    ranks.data = options.data;
    if (cl.bench_mnist->count("--batch-sizes") > 0) ranks.batch = options.batch_sizes.front();
    if (cl.bench_mnist_rank_worker) ember::bench::bench_mnist_rank_worker(ranks, std::cout);
    else ember::bench::bench_mnist_ranks(ranks, std::cout);
  } else if (*cl.bench_losses) {
    ember::bench::BenchLossesOptions options = cl.bench_losses_options;
    options.device = ember::parse_device(cl.bench_losses_device);
    options.capacity = !cl.no_capacity;
    ember::bench::bench_losses(std::cout, std::cerr, options);
  } else if (*cl.bench_seresnext) {
    ember::bench::BenchSeresnextOptions options = cl.bench_seresnext_options;
    options.with_pytorch = !cl.no_pytorch;
    options.device = ember::parse_device(cl.bench_seresnext_device);
    ember::bench::bench_seresnext(options, std::cout, std::cerr);
  } else if (*cl.bench_allocator) {
    ember::bench_allocator(std::cout);
  } else if (*cl.data_image_folder) {
    ember::apps::export_image_folder(cl.image_folder_export, std::cerr);
  } else if (*cl.bench_image_loader) {
    ember::bench::bench_image_loader(cl.bench_image_loader_options, std::cout);
  } else if (*cl.models) {
    if (cl.models_options.name.empty()) ember::apps::list_models(std::cout);
    else ember::apps::print_model_summary(cl.models_options, std::cout);
  }
  return 0;
}

// A failure while running is one line on stderr and exit status 1 (130 after Ctrl-C), whatever was thrown: an
// exception that is not an ember::Error is a bug to fix, but still no abort. One rank of an mpirun job instead
// stops the whole job with that line (Note [Failing ranks]), so the other ranks do not wait for it forever.
int run_reporting_errors(const CommandLine& cl) {
  std::string message;
  int status = 1;
  try {
    return run_command(cl);
  } catch (const ember::apps::Interrupted& e) {  // Ctrl-C (Note [Ctrl-C] in training_loop.h)
    message = e.what();
    status = 130;
  } catch (const ember::Error& e) {
    message = std::string("error: ") + e.what();
  } catch (const std::bad_alloc&) {
    message = "error: out of memory";
  } catch (const std::exception& e) {
    message = std::string("error: ") + e.what();
  } catch (...) {
    message = "error: unknown exception";
  }
  ember::distributed::abort_job_if_distributed(message);
  std::cerr << "ember: " << message << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything runs: it may re-execute the program (Note [OpenMP spinning in the benchmarks]).
  // "bench" anywhere: global options (--threads 2) may come first; a stray match only sets the
  // variable for a command that runs no OpenMP.
  if (std::any_of(argv + 1, argv + argc, [](const char* a) { return std::string_view(a) == "bench"; }))
    ember::bench::bound_openmp_spinning(argv);
  CLI::App app{"ember: a small deep-learning framework (C++20/CUDA)", "ember"};
  CommandLine cl;
  add_global_options(app, cl);
  add_demo_command(app, cl);
  add_train_commands(app, cl);
  add_bench_commands(app, cl);
  add_data_commands(app, cl);
  add_bench_image_loader_command(app, cl);
  add_models_command(app, cl);
  if (const std::optional<int> status = parse_command_line(app, argc, argv)) return *status;
  if (const std::optional<int> status = check_flag_combinations(cl)) return *status;
  return run_reporting_errors(cl);
}
