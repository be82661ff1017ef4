// ImageFolder: a labelled image data set stored as root/<class>/<file>, as torchvision's
// ImageFolder reads it.
//
//   auto train = std::make_shared<ImageFolder>("photos/train", ImageFolderOptions{
//       .transform = train_transform({.size = 224}), .bad_images = parse_bad_images("skip")});
//   train->classes();     // {"cat", "dog"}: the sub-folders, sorted by name; label = position
//   DataLoader loader(train, {.batch_size = 32, .prefetch = 4, .workers = 4});
//   // batches: inputs (32, 3, 224, 224) f32, targets (32) i64
//
// Scanning: the classes are root's sub-folders sorted by name (byte order, as Python's
// sorted()); the samples are each class's files with a .png, .jpg or .jpeg suffix (any case),
// sorted by name, class after class (nested folders and other files are ignored, as
// ImageFolder's default extensions do). An empty root, a missing root, or a class folder with no
// image is an error naming the path. Files are decoded when a sample is read (on the loader's
// workers), as u8 (H, W, 3) RGB (datasets/image_decode.h), then passed through `transform`.
//
// Note [Bad images]: a file that fails to read or decode is an ember::Error naming its path
// (BadImages::fail, the default). With BadImages::skip it is reported once through `report`
// (default: a line on stderr) and the sample is replaced by the next sample in scan order that
// decodes (wrapping around), with that sample's own label. Substituting rather than dropping
// keeps size(), every epoch's order and every batch's size fixed, so resume and the worker count
// stay deterministic: a bad file is found only when it is read, and dropping it then would change
// the batches after it. The substitute is a function of the index alone (not of timing), and it
// is passed the same per-sample generator, so skip is as reproducible as fail. Known-bad indices
// are remembered, so each is decoded (and reported) once.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_decode.h"
#include "datasets/image_transforms.h"

namespace ember {

enum class BadImages { fail, skip };
BadImages parse_bad_images(const std::string& name);  // "fail" or "skip"

struct ImageFolderOptions {
  // u8 (H, W, 3) -> the sample's input; default: ToTensor + ImageNet Normalize.
  ImageTransform transform;
  BadImages bad_images = BadImages::fail;
  ImageLimits limits;
  std::function<void(const std::string& message)> report;  // skip's reports; default: stderr
};

struct ImageFile {
  std::string path;
  int64_t label = 0;
};

class ImageFolder : public Dataset {
 public:
  explicit ImageFolder(const std::string& root, ImageFolderOptions options = {});

  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<ImageFile>& samples() const { return samples_; }
  int64_t size() const override { return int64_t(samples_.size()); }

  // Sample `index` decoded, u8 (H, W, 3); an Error naming the path if it does not decode.
  Tensor load(int64_t index) const;
  // (transform(image), label as an i64 scalar), with Note [Bad images]'s policy.
  Sample get(int64_t index, Generator& rng) const override;
  // Files found bad so far (skip only).
  int64_t bad_count() const;

 private:
  bool known_bad(int64_t index) const;
  void mark_bad(int64_t index, const std::string& reason) const;

  std::vector<std::string> classes_;
  std::vector<ImageFile> samples_;
  ImageFolderOptions options_;
  mutable std::mutex bad_mutex_;
  mutable std::set<int64_t> bad_;
};

}  // namespace ember
