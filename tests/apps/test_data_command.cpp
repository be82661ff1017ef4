#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <sstream>

#include "apps/data_command.h"
#include "core/error.h"
#include "datasets/idx_fixtures.h"
#include "datasets/image_folder.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::test;
using Catch::Matchers::Contains;

TEST_CASE("data image-folder: IDX images -> PNG folders -> ImageFolder gives back the IDX pixels and labels") {
  // 13 images of 4x5 (not square, so a swapped height and width would show) with labels 0..9.
  MnistSplit split;
  const int64_t n = 13, h = 4, w = 5;
  split.images.dims = {n, h, w};
  for (int64_t i = 0; i < n * h * w; ++i) split.images.data.push_back(uint8_t((i * 37 + 5) % 256));
  split.labels.dims = {n};
  for (int64_t i = 0; i < n; ++i) split.labels.data.push_back(uint8_t((i * 7) % 10));

  TempDir dir("data_image_folder");
  std::ostringstream progress;
  const std::vector<std::string> classes = apps::image_folder_class_names("fashion-mnist");
  apps::write_split_as_pngs(split, classes, dir.file("train"), "train", progress);
  CHECK_THAT(progress.str(), Contains("train 13/13 images"));

  const ImageFolder folder(dir.file("train"));
  CHECK(folder.classes() == classes);  // sorted folder names are the label order
  // ImageFolder's order: by class, then by file name (the IDX position).
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return split.labels.data[size_t(a)] < split.labels.data[size_t(b)]; });
  REQUIRE(folder.size() == n);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = order[size_t(k)];
    INFO("IDX image " << i);
    CHECK(folder.samples()[size_t(k)].label == split.labels.data[size_t(i)]);
    const std::vector<uint8_t> rgb = folder.load(k).to_vector<uint8_t>();
    REQUIRE(rgb.size() == size_t(h * w * 3));
    for (int64_t p = 0; p < h * w; ++p)
      for (int c = 0; c < 3; ++c) CHECK(rgb[size_t(p * 3 + c)] == split.images.data[size_t(i * h * w + p)]);
  }
}

TEST_CASE("data image-folder: class names, and bad input named") {
  CHECK(apps::image_folder_class_names("mnist").front() == "0");
  std::vector<std::string> fashion = apps::image_folder_class_names("fashion-mnist");
  CHECK(std::is_sorted(fashion.begin(), fashion.end()));
  CHECK_THROWS_WITH(apps::image_folder_class_names("cifar"), Contains("unknown dataset 'cifar'"));
  MnistSplit bad;
  bad.images.dims = {1, 2, 2};
  bad.images.data = {0, 0, 0, 0};
  bad.labels.dims = {1};
  bad.labels.data = {12};
  TempDir dir("data_image_folder_bad");
  std::ostringstream progress;
  CHECK_THROWS_WITH(apps::write_split_as_pngs(bad, apps::image_folder_class_names("mnist"), dir.file("x"), "x", progress),
                    Contains("label 12 has no class folder"));
}
