// MNIST and Fashion-MNIST in their standard layout: four IDX files in one directory.
//
//   MnistSplit train = load_mnist_split("/work/data/mnist", /*train=*/true);
//   // train.images.dims == {60000, 28, 28} (u8 pixels), train.labels.dims == {60000} (0..9)
//
// The files are train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte, each optionally gzip-compressed with a ".gz" suffix. When they are
// missing, the error says which command fetches them (datasets/fetch_mnist.sh).
#pragma once

#include <string>

#include "datasets/idx.h"

namespace ember {

struct MnistSplit {
  IdxArray images;  // (N, 28, 28)
  IdxArray labels;  // (N), values 0..9
};

MnistSplit load_mnist_split(const std::string& dir, bool train);

}  // namespace ember
