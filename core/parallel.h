// Parallel loops on ember's thread pool.
//
//   parallel_for(0, n, /*grain=*/4096, [&](int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
//   });
//
// Note [Dynamic chunks]: the cores are shared with other work, so a static split would make
// every loop as slow as its most-interrupted thread. The range is cut into chunks of at least
// `grain` iterations (about four per thread) that threads claim from an atomic counter; a
// thread that is descheduled simply claims fewer. The caller works too, so one thread means no
// pool at all. A parallel_for inside another runs inline on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace ember {

// Threads used by parallel loops (the caller included). Defaults to EMBER_NUM_THREADS, else
// the number of hardware threads.
int num_threads();
void set_num_threads(int n);

// True while the calling thread runs a chunk of a parallel_for.
bool in_parallel_region();

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ember
