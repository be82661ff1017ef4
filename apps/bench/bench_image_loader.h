// `ember bench image-loader`: images per second that the DataLoader decodes and augments from an
// image folder (ImageFolder + train_transform), for several worker counts.
//
//   ember data image-folder out/mnist && ember bench image-loader --folder out/mnist/train
//   bench_image_loader({.folder = "out/mnist/train", .workers = {1, 2}}, std::cout);
//
// Each round runs every worker count once, alternating (so a slow moment of a shared machine
// hits them alike); each row reports its best round. The batches are consumed and dropped: the
// figure is the input pipeline alone (decode, RandomResizedCrop, flip, normalise, batching).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ember::bench {

struct BenchImageLoaderOptions {
  std::string folder;
  std::vector<int> workers{1, 2, 4};
  int64_t size = 224;        // RandomResizedCrop's output side
  int64_t batch_size = 64;
  int64_t batches = 20;      // timed batches per run (after one untimed)
  int rounds = 3;
  std::string bad_images = "fail";  // --bad-images: fail or skip (Note [Bad images])
};

void bench_image_loader(const BenchImageLoaderOptions& options, std::ostream& out);

}  // namespace ember::bench
