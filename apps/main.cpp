// The ember command-line app: `ember demo`, `ember train mnist`, `ember bench ...`.
// Usage errors (unknown flag, bad value) print one line and exit with status 2; failures while
// running print "ember: error: ..." and exit with status 1.
#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/bench/bench_allocator.h"
#include "apps/bench/bench_kernels.h"
#include "apps/bench/bench_matmul.h"
#include "apps/bench/bench_mnist.h"
#include "apps/bench/bench_ops.h"
#include "apps/demo.h"
#include "apps/train/progress.h"
#include "apps/train/train_mnist.h"
#include "core/error.h"
#include "core/parallel.h"

namespace {

void add_train_mnist_options(CLI::App& cmd, ember::apps::TrainMnistConfig& c, bool& dry_run) {
  cmd.add_option("--data", c.data, "folder with the four IDX files (default: data/mnist or data/fashion-mnist)");
  cmd.add_option("--dataset", c.dataset, "mnist or fashion-mnist")->check(CLI::IsMember({"mnist", "fashion-mnist"}));
  cmd.add_option("--model", c.model, "mnist_cnn, lenet5 or mlp")->check(CLI::IsMember({"mnist_cnn", "lenet5", "mlp"}));
  cmd.add_option("--epochs", c.epochs, "passes over the training set")->check(CLI::Range(1, 100000));
  cmd.add_option("--batch-size", c.batch_size, "images per step")->check(CLI::Range(int64_t(1), int64_t(60000)));
  cmd.add_option("--lr", c.lr, "learning rate")->check(CLI::PositiveNumber);
  cmd.add_option("--momentum", c.momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999999));
  cmd.add_option("--optimizer", c.optimizer, "sgd, adam or adamw")->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd.add_option("--weight-decay", c.weight_decay, "L2 (sgd, adam) or decoupled (adamw) weight decay")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--schedule", c.schedule, "learning-rate schedule: cosine (per step, to 0) or none")
      ->check(CLI::IsMember({"cosine", "none"}));
  cmd.add_option("--seed", c.seed, "random seed (initialisation, shuffling)");
  cmd.add_option("--device", c.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--save", c.save, "write a training checkpoint (safetensors) after every epoch");
  cmd.add_option("--resume", c.resume, "continue from a checkpoint written by --save")->check(CLI::ExistingFile);
  cmd.add_option("--log", c.log, "write one CSV row per epoch");
  cmd.add_option("--plot", c.plot, "write the loss and accuracy curves as SVG");
  cmd.add_option("--stop-after", c.stop_after, "stop after this many epochs (the schedule still spans --epochs; "
                                               "continue with --resume)")->check(CLI::Range(1, 100000));
  cmd.add_flag("--dry-run", dry_run, "a few batches per epoch, to check the setup quickly");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ember: a small deep-learning framework (C++20/CUDA)", "ember"};
  app.require_subcommand(1);
  app.fallthrough();
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    return "ember: " + std::string(e.what()) + " (see: " + failed->get_name() + " --help)\n";
  });
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads for parallel loops (default: EMBER_NUM_THREADS or all)")
      ->check(CLI::Range(1, 1024));

  ember::apps::DemoOptions demo;
  auto* demo_cmd = app.add_subcommand("demo", "Fit a small network with autograd and print the loss falling");
  demo_cmd->add_option("--steps", demo.steps, "SGD steps")->check(CLI::Range(1, 1000000));
  demo_cmd->add_option("--lr", demo.lr, "learning rate")->check(CLI::PositiveNumber);
  demo_cmd->add_option("--seed", demo.seed, "random seed");

  auto* train = app.add_subcommand("train", "Train a model end to end");
  train->require_subcommand(1);
  ember::apps::TrainMnistConfig mnist;
  bool dry_run = false;
  auto* train_mnist = train->add_subcommand("mnist", "Train an MNIST / Fashion-MNIST classifier (default: mnist_cnn, "
                                                     "5 epochs, SGD lr 0.05 momentum 0.9, cosine schedule, batch 64)");
  add_train_mnist_options(*train_mnist, mnist, dry_run);

  auto* bench = app.add_subcommand("bench", "Benchmarks (tables of measured figures)");
  bench->require_subcommand(1);
  auto* bench_ops = bench->add_subcommand("ops", "matmul GFLOP/s and elementwise GB/s against the machine's peaks");
  auto* bench_alloc = bench->add_subcommand("allocator", "cached vs uncached allocation cost, 1 KiB..64 MiB");
  auto* bench_kernels = bench->add_subcommand("kernels", "CNN kernels (conv, pool, softmax, cross-entropy, relu, "
                                                         "matmul): ember vs PyTorch, ms per call");
  std::string kernels_device = "cpu";
  ember::bench::BenchKernelsOptions kernels_bench;
  bench_kernels->add_option("--device", kernels_device, "cpu, or cuda (a GPU; ember and PyTorch CUDA)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  bench_kernels->add_option("--rounds", kernels_bench.rounds,
                            "ember and PyTorch run this many times alternately; each reports its best (default 5)")
      ->check(CLI::Range(1, 100));

  ember::bench::BenchMatmulOptions matmul_bench;
  auto* bench_matmul = bench->add_subcommand("matmul", "CUDA matmul kernels (tiled, register-blocked) vs cuBLAS on a GPU");
  bench_matmul->add_flag("--sim", matmul_bench.sim, "run the kernels on the SIMT simulator at small sizes "
                                                   "(a correctness smoke, not a figure)");

  ember::bench::BenchMnistOptions mnist_bench;
  bool no_pytorch = false;
  auto* bench_mnist = bench->add_subcommand("mnist", "one epoch of mnist_cnn per batch size, ember vs PyTorch");
  bench_mnist->add_option("--data", mnist_bench.data, "folder with the MNIST IDX files");
  bench_mnist->add_option("--batch-sizes", mnist_bench.batch_sizes, "batch sizes (default 32 64 128 256 512 1024)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(60000)));
  bench_mnist->add_flag("--no-pytorch", no_pytorch, "skip the PyTorch column");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (threads > 0) ember::set_num_threads(threads);
    if (*demo_cmd) {
      ember::apps::run_demo(demo, std::cout);
    } else if (*train_mnist) {
      if (train_mnist->count("--data") == 0 && mnist.dataset == "fashion-mnist") mnist.data = "data/fashion-mnist";
      if (dry_run) mnist.max_batches = 20;
      if (!mnist.resume.empty() && train_mnist->count("--epochs") == 0) mnist.epochs = 0;  // the checkpoint's
      ember::apps::train_mnist(mnist, std::cout, std::cerr, ember::apps::Progress::stderr_is_terminal());
    } else if (*bench_ops) {
      ember::bench::bench_ops(std::cout);
    } else if (*bench_kernels) {
      kernels_bench.device = ember::parse_device(kernels_device);
      ember::bench::bench_kernels(std::cout, std::cerr, kernels_bench);
    } else if (*bench_matmul) {
      return ember::bench::bench_matmul(std::cout, matmul_bench);
    } else if (*bench_mnist) {
      mnist_bench.with_pytorch = !no_pytorch;
      ember::bench::bench_mnist(mnist_bench, std::cout);
    } else if (*bench_alloc) {
      ember::bench_allocator(std::cout);
    }
  } catch (const ember::Error& e) {
    std::cerr << "ember: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
