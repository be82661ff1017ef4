#include "datasets/tensor_dataset.h"

#include "core/error.h"

namespace ember {

namespace {

Tensor checked_rows(Tensor t, const char* role) {
  EMBER_CHECK(t.defined() && t.dim() >= 1, "TensorDataset: ", role, " must have at least one dim (the samples)");
  EMBER_CHECK(t.is_cpu(), "TensorDataset: ", role, " must be on the cpu, got ", t.device());
  EMBER_CHECK(t.is_contiguous(), "TensorDataset: ", role, " must be contiguous (call contiguous() first)");
  return t;  // rows are copied out with memcpy: batches never carry autograd history
}

Tensor mnist_images(const IdxArray& images, const MnistNormalization& norm) {
  EMBER_CHECK(images.dims.size() == 3 && images.dims[1] == 28 && images.dims[2] == 28,
              "MnistDataset: expected images (N, 28, 28), got ", shape_str(images.dims));
  EMBER_CHECK(norm.std > 0, "MnistDataset: std must be > 0, got ", norm.std);
  Tensor out = Tensor::empty({images.dims[0], 1, 28, 28});
  float* dst = out.data<float>();
  // One table for the 256 possible pixel values instead of a divide per pixel.
  float table[256];
  for (int v = 0; v < 256; ++v) table[v] = float((v / 255.0 - norm.mean) / norm.std);
  for (size_t i = 0; i < images.data.size(); ++i) dst[i] = table[images.data[i]];
  return out;
}

Tensor mnist_labels(const IdxArray& labels, int64_t n) {
  EMBER_CHECK(labels.dims.size() == 1 && labels.dims[0] == n, "MnistDataset: expected labels ", shape_str({n}), ", got ",
              shape_str(labels.dims));
  Tensor out = Tensor::empty({n}, {.dtype = DType::i64});
  int64_t* dst = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) dst[i] = labels.data[size_t(i)];
  return out;
}

}  // namespace

TensorDataset::TensorDataset(Tensor inputs, Tensor targets)
    : inputs_(checked_rows(std::move(inputs), "inputs")), targets_(checked_rows(std::move(targets), "targets")) {
  EMBER_CHECK(inputs_.size(0) == targets_.size(0), "TensorDataset: inputs have ", inputs_.size(0),
              " samples but targets have ", targets_.size(0));
}

Sample TensorDataset::get(int64_t index, Generator&) const {
  EMBER_CHECK(index >= 0 && index < size(), "TensorDataset::get: sample ", index, " of ", size(), " does not exist");
  return {inputs_.select(0, index), targets_.select(0, index)};
}

MnistDataset::MnistDataset(const MnistSplit& split, MnistNormalization norm)
    : TensorDataset(mnist_images(split.images, norm), mnist_labels(split.labels, split.images.dims.empty() ? -1 : split.images.dims[0])) {}

MnistDataset::MnistDataset(const std::string& dir, bool train, MnistNormalization norm)
    : MnistDataset(load_mnist_split(dir, train), norm) {}

}  // namespace ember
