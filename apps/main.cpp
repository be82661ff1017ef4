// The ember command-line app: `ember demo`, `ember bench ...` (and the training apps).
#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/bench/bench_allocator.h"
#include "apps/bench/bench_ops.h"
#include "apps/demo.h"
#include "core/error.h"
#include "core/parallel.h"

int main(int argc, char** argv) {
  CLI::App app{"ember: a small deep-learning framework (C++20/CUDA)", "ember"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads for parallel loops (default: EMBER_NUM_THREADS or all)")
      ->check(CLI::Range(1, 1024));

  ember::apps::DemoOptions demo;
  auto* demo_cmd = app.add_subcommand("demo", "Fit a small network with autograd and print the loss falling");
  demo_cmd->add_option("--steps", demo.steps, "SGD steps")->check(CLI::Range(1, 1000000));
  demo_cmd->add_option("--lr", demo.lr, "learning rate")->check(CLI::PositiveNumber);
  demo_cmd->add_option("--seed", demo.seed, "random seed");

  auto* bench = app.add_subcommand("bench", "Benchmarks (tables of measured figures)");
  bench->require_subcommand(1);
  auto* bench_ops = bench->add_subcommand("ops", "matmul GFLOP/s and elementwise GB/s against the machine's peaks");
  auto* bench_alloc = bench->add_subcommand("allocator", "cached vs uncached allocation cost, 1 KiB..64 MiB");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // usage errors exit 2
  }
  try {
    if (threads > 0) ember::set_num_threads(threads);
    if (*demo_cmd) ember::apps::run_demo(demo, std::cout);
    else if (*bench_ops) ember::bench::bench_ops(std::cout);
    else if (*bench_alloc) ember::bench_allocator(std::cout);
  } catch (const ember::Error& e) {
    std::cerr << "ember: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
