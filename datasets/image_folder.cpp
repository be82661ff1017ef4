#include "datasets/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>

#include "core/error.h"

namespace ember {

namespace fs = std::filesystem;

namespace {

bool has_image_suffix(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The names of `dir`'s entries for which `keep` holds, sorted (byte order).
template <class Keep>
std::vector<std::string> sorted_entries(const fs::path& dir, Keep keep) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (keep(*it)) names.push_back(it->path().filename().string());
  EMBER_CHECK(!ec, "ImageFolder: cannot list ", dir.string(), " (", ec.message(), ")");
  std::sort(names.begin(), names.end());
  return names;
}

void report_to_stderr(const std::string& message) { std::cerr << message << "\n"; }

}  // namespace

BadImages parse_bad_images(const std::string& name) {
  if (name == "fail") return BadImages::fail;
  if (name == "skip") return BadImages::skip;
  EMBER_FAIL("--bad-images: expected skip or fail, got '", name, "'");
}

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions options) : options_(std::move(options)) {
  if (!options_.transform) options_.transform = normalize_transform();
  if (!options_.report) options_.report = report_to_stderr;
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(root, ec), "ImageFolder: ", root, " is not a directory");
  classes_ = sorted_entries(root, [](const fs::directory_entry& e) { return e.is_directory(); });
  EMBER_CHECK(!classes_.empty(), "ImageFolder: ", root, " has no class folders (expected root/<class>/<image>)");
  for (size_t label = 0; label < classes_.size(); ++label) {
    const fs::path dir = fs::path(root) / classes_[label];
    // Any entry with an image suffix: a directory named x.png is kept and fails when read, like
    // any other file that is not an image, so --bad-images decides about it.
    const auto files = sorted_entries(dir, [](const fs::directory_entry& e) { return has_image_suffix(e.path()); });
    EMBER_CHECK(!files.empty(), "ImageFolder: the class folder ", dir.string(), " has no .png, .jpg or .jpeg file");
    for (const std::string& file : files) samples_.push_back({(dir / file).string(), int64_t(label)});
  }
}

Tensor ImageFolder::load(int64_t index) const {
  EMBER_CHECK(index >= 0 && index < size(), "ImageFolder: sample ", index, " of ", size(), " does not exist");
  return read_image_file(samples_[size_t(index)].path, options_.limits);
}

bool ImageFolder::known_bad(int64_t index) const {
  std::lock_guard lock(bad_mutex_);
  return bad_.count(index) > 0;
}

void ImageFolder::mark_bad(int64_t index, const std::string& reason) const {
  {
    std::lock_guard lock(bad_mutex_);
    if (!bad_.insert(index).second) return;  // another worker reported it already
  }
  options_.report("ember: skipping a bad image (--bad-images skip): " + reason);
}

int64_t ImageFolder::bad_count() const {
  std::lock_guard lock(bad_mutex_);
  return int64_t(bad_.size());
}

Sample ImageFolder::get(int64_t index, Generator& rng) const {
  EMBER_CHECK(index >= 0 && index < size(), "ImageFolder: sample ", index, " of ", size(), " does not exist");
  auto target = [&](int64_t i) {
    Tensor label = Tensor::empty({}, {.dtype = DType::i64});
    *label.data<int64_t>() = samples_[size_t(i)].label;
    return label;
  };
  if (options_.bad_images == BadImages::fail) return {options_.transform(load(index), rng), target(index)};
  // Note [Bad images]: the first sample from `index` on (wrapping) that decodes.
  for (int64_t step = 0; step < size(); ++step) {
    const int64_t i = (index + step) % size();
    if (known_bad(i)) continue;
    Tensor image;
    try {
      image = load(i);
    } catch (const Error& e) {
      mark_bad(i, e.what());
      continue;
    }
    return {options_.transform(image, rng), target(i)};
  }
  EMBER_FAIL("ImageFolder: none of the ", size(), " images decodes (--bad-images skip has nothing to substitute)");
}

}  // namespace ember
