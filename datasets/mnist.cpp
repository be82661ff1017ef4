#include "datasets/mnist.h"

#include <filesystem>

#include "core/error.h"

namespace ember {

namespace {

// dir/name, else dir/name.gz, else an error that says how to get the data.
std::string find_idx_file(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  for (const std::string& candidate : {name, name + ".gz"}) {
    const fs::path path = fs::path(dir) / candidate;
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return path.string();
  }
  EMBER_FAIL("load_mnist_split: '", dir, "' has neither ", name, " nor ", name,
             ".gz; fetch MNIST with `datasets/fetch_mnist.sh ", dir,
             "` (Fashion-MNIST: `datasets/fetch_mnist.sh ", dir, " --fashion`)");
}

}  // namespace

MnistSplit load_mnist_split(const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  MnistSplit split{read_idx(images_path), read_idx(labels_path)};

  const std::vector<int64_t>& images = split.images.dims;
  EMBER_CHECK(images.size() == 3 && images[1] == 28 && images[2] == 28, "load_mnist_split: expected images of shape (N, 28, 28) in '",
              images_path, "', got ", shape_str(images));
  const std::vector<int64_t>& labels = split.labels.dims;
  EMBER_CHECK(labels.size() == 1, "load_mnist_split: expected labels of shape (N,) in '", labels_path, "', got ", shape_str(labels));
  EMBER_CHECK(labels[0] == images[0], "load_mnist_split: '", images_path, "' holds ", images[0], " images but '", labels_path,
              "' holds ", labels[0], " labels");
  for (size_t i = 0; i < split.labels.data.size(); ++i)
    EMBER_CHECK(split.labels.data[i] <= 9, "load_mnist_split: label ", int(split.labels.data[i]), " at index ", i, " in '",
                labels_path, "' is outside 0..9");
  return split;
}

}  // namespace ember
