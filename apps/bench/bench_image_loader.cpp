#include "apps/bench/bench_image_loader.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <ostream>

#include "core/error.h"
#include "datasets/data_loader.h"
#include "datasets/image_folder.h"

namespace ember::bench {

namespace {

// Images per second over `batches` batches of one epoch, after one untimed batch.
double images_per_second(const std::shared_ptr<const ImageFolder>& data, const BenchImageLoaderOptions& o, int workers) {
  // Fields set one by one: GCC 12 warns (-Wmissing-field-initializers) about every member a
  // designated initializer leaves to its default.
  DataLoaderOptions options;
  options.batch_size = o.batch_size;
  options.seed = 1;
  options.prefetch = 2 * workers;
  options.workers = workers;
  DataLoader loader(data, options);
  EMBER_CHECK(loader.size() > o.batches, "bench image-loader: ", o.folder, " has ", loader.size(),
              " batches of ", o.batch_size, "; the run needs ", o.batches + 1);
  loader.next();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < o.batches; ++b) loader.next();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return double(o.batches * o.batch_size) / seconds;
}

}  // namespace

void bench_image_loader(const BenchImageLoaderOptions& o, std::ostream& out) {
  TrainTransformOptions transform;
  transform.size = o.size;
  ImageFolderOptions folder;
  folder.transform = train_transform(transform);
  folder.bad_images = parse_bad_images(o.bad_images);
  auto data = std::make_shared<const ImageFolder>(o.folder, folder);
  out << "image loader: " << o.folder << " (" << data->size() << " images, " << data->classes().size()
      << " classes), RandomResizedCrop " << o.size << " + flip + normalise, batch " << o.batch_size << ", "
      << o.batches << " batches timed, best of " << o.rounds << " alternating rounds\n";
  std::map<int, double> best;
  for (int round = 0; round < o.rounds; ++round)
    for (int workers : o.workers) best[workers] = std::max(best[workers], images_per_second(data, o, workers));
  out << "workers  images/s  vs 1 worker\n";
  for (int workers : o.workers) {
    char line[96];
    const double ratio = best.count(1) ? best[workers] / best[1] : 0.0;
    std::snprintf(line, sizeof line, "%7d  %8.0f  %10.2fx\n", workers, best[workers], ratio);
    out << line;
  }
}

}  // namespace ember::bench
