#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "core/error.h"
#include "datasets/image_transforms.h"
#include "image_fixtures.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::test;
using Catch::Matchers::Contains;

namespace {

// The 3x4 one-channel image v(y, x) = 10y + 3x.
Tensor ramp() {
  std::vector<uint8_t> v;
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x) v.push_back(uint8_t(10 * y + 3 * x));
  return u8_image(3, 4, 1, v);
}

void check_values(const Tensor& actual, const std::vector<float>& expected, float tol = 1e-5f) {
  const std::vector<float> v = values_of(actual);
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(v[i] - expected[i]) <= tol);
  }
}

}  // namespace

TEST_CASE("image_transforms: resize_bilinear matches torch's interpolate(bilinear, align_corners=False)") {
  // Expected values from torch 1.13: F.interpolate(ramp[None, None].float(), size, mode="bilinear",
  // align_corners=False) (printed by hand with /usr/bin/python3).
  check_values(resize_bilinear(ramp(), 5, 3), {0.5, 4.5, 8.5, 4.5, 8.5, 12.5, 10.5, 14.5, 18.5, 16.5, 20.5, 24.5, 20.5,
                                               24.5, 28.5});
  check_values(resize_bilinear(ramp(), 2, 3), {3, 7, 11, 18, 22, 26});
  // By hand for (2, 2): scale 1.5 x 2; output (0, 0) samples source (0.25, 0.5):
  // 0.75 * (0 + 3) / 2 + 0.25 * (10 + 13) / 2 = 4.
  check_values(resize_bilinear(ramp(), 2, 2), {4, 10, 19, 25});
  // The same size is the identity; channels are resized independently.
  const Tensor rgb = patterned_image(4, 5);
  CHECK(values_of(resize_bilinear(rgb, 4, 5)) == values_of(rgb));
  CHECK(resize_bilinear(rgb, 3, 2).shape() == Shape{3, 2, 3});
  CHECK_THROWS_WITH(resize_bilinear(rgb, 0, 2), Contains("resize_bilinear") && Contains("to 0x2"));
}

TEST_CASE("image_transforms: resize_shorter_side and center_crop follow torchvision's sizes and offsets") {
  // Resize(2) of a 3x4 image: the shorter side (height) to 2, the width to int(2 * 4 / 3) = 2.
  check_values(resize_shorter_side(ramp(), 2), {4, 10, 19, 25});
  CHECK(resize_shorter_side(patterned_image(10, 4), 3).shape() == Shape{7, 3, 3});  // int(3 * 10 / 4) = 7
  // CenterCrop offsets are int(round((H - h) / 2)): Python rounds 1.5 to 2 and 0.5 to 0.
  CHECK(center_crop_box(5, 4, 2, 2) == CropBox{2, 1, 2, 2});
  CHECK(center_crop_box(4, 3, 3, 2) == CropBox{0, 0, 3, 2});
  check_values(center_crop(ramp(), 1, 2), {13, 16});  // offsets round(1) = 1 and round(1) = 1
  CHECK_THROWS_WITH(center_crop(ramp(), 4, 2), Contains("center_crop") && Contains("does not fit the 3x4 image"));
  CHECK_THROWS_WITH(crop(ramp(), {1, 1, 3, 1}), Contains("is not inside the 3x4 image"));
}

TEST_CASE("image_transforms: horizontal flips mirror the columns, and random ones follow p") {
  const Tensor image = u8_image(2, 3, 2, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  check_values(horizontal_flip(image), {5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8});
  int flipped = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Generator never(seed), always(seed), half(seed);
    CHECK(values_of(random_horizontal_flip(image, never, 0.0)) == values_of(image));
    CHECK(values_of(random_horizontal_flip(image, always, 1.0)) == values_of(horizontal_flip(image)));
    flipped += values_of(random_horizontal_flip(image, half, 0.5)) != values_of(image);
    CHECK(half.offset() == 1);  // one Philox block per flip
  }
  CHECK(flipped > 150);
  CHECK(flipped < 250);
}

TEST_CASE("image_transforms: random_resized_crop_box follows torchvision's algorithm") {
  // scale 0.25 of an 8x8 image at ratio 1: a 4x4 box, placed uniformly at offsets 0..4.
  std::set<int64_t> tops, lefts;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Generator g(seed);
    const CropBox box = random_resized_crop_box(8, 8, g, {.scale_min = 0.25, .scale_max = 0.25, .ratio_min = 1, .ratio_max = 1});
    CHECK(box.height == 4);
    CHECK(box.width == 4);
    tops.insert(box.top);
    lefts.insert(box.left);
    CHECK(g.offset() == 2);  // one block for the attempt, one for the placement
  }
  CHECK(tops == std::set<int64_t>{0, 1, 2, 3, 4});
  CHECK(lefts == std::set<int64_t>{0, 1, 2, 3, 4});
  // Area 50 at ratio 2 (width / height): width round(sqrt(100)) = 10, height round(sqrt(25)) = 5.
  Generator g(3);
  const CropBox wide = random_resized_crop_box(10, 10, g, {.scale_min = 0.5, .scale_max = 0.5, .ratio_min = 2, .ratio_max = 2});
  CHECK(wide.height == 5);
  CHECK(wide.width == 10);
  CHECK(wide.left == 0);
  // No attempt fits a 10x20 image at scale 1, ratio 1 (a 14x14 box): 10 attempts, then the
  // fallback, the center crop clamped to ratio 1: 10x10 at left (20 - 10) / 2 = 5.
  Generator h(4);
  CHECK(random_resized_crop_box(10, 20, h, {.scale_min = 1, .scale_max = 1, .ratio_min = 1, .ratio_max = 1}) ==
        CropBox{0, 5, 10, 10});
  CHECK(h.offset() == 10);
  // Defaults: every box inside the image, area and ratio within the ranges (up to rounding).
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Generator d(seed);
    const CropBox b = random_resized_crop_box(60, 80, d);
    CHECK(b.top >= 0);
    CHECK(b.left >= 0);
    CHECK(b.top + b.height <= 60);
    CHECK(b.left + b.width <= 80);
    const double area = double(b.height * b.width) / (60 * 80), ratio = double(b.width) / double(b.height);
    CHECK(area >= 0.06);
    CHECK(ratio >= 0.7);
    CHECK(ratio <= 1.45);
  }
  Generator same_a(77), same_b(77);
  CHECK(random_resized_crop_box(60, 80, same_a) == random_resized_crop_box(60, 80, same_b));
  Generator bad(1);
  CHECK_THROWS_WITH(random_resized_crop_box(4, 4, bad, {.scale_min = 0}), Contains("0 < scale_min"));
}

TEST_CASE("image_transforms: to_tensor_normalized is ToTensor + Normalize into (C, H, W)") {
  const Tensor image = u8_image(1, 2, 3, {0, 255, 51, 102, 153, 204});
  const Tensor out = to_tensor_normalized(image);
  CHECK(out.shape() == Shape{3, 1, 2});
  const double mean[3] = {0.485, 0.456, 0.406}, stdev[3] = {0.229, 0.224, 0.225};
  const double pixels[2][3] = {{0, 255, 51}, {102, 153, 204}};
  std::vector<float> expected;
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 2; ++p) expected.push_back(float((pixels[p][c] / 255.0 - mean[c]) / stdev[c]));
  check_values(out, expected, 2e-6f);
  CHECK_THROWS_WITH(to_tensor_normalized(ramp()), Contains("expected 3 channels"));
  CHECK_THROWS_WITH(to_tensor_normalized(image, {.std = {1, 0, 1}}), Contains("every std must be > 0"));
}

TEST_CASE("image_transforms: train and eval pipelines give the model's size, deterministic per generator") {
  const Tensor image = patterned_image(37, 53, 5);
  const ImageTransform train = train_transform({.size = 16});
  Generator a(9), b(9), c(10);
  const Tensor x = train(image, a);
  CHECK(x.shape() == Shape{3, 16, 16});
  CHECK(values_of(x) == values_of(train(image, b)));
  CHECK(values_of(x) != values_of(train(image, c)));
  // eval: Resize(2) + CenterCrop(2) with mean 0, std 1 is the resized ramp over 255.
  const Tensor gray3 = resize_bilinear(ramp(), 3, 4);  // f32, one channel: replicate to RGB
  Tensor rgb = Tensor::empty({3, 4, 3});
  for (int64_t i = 0; i < 12; ++i)
    for (int c = 0; c < 3; ++c) rgb.data<float>()[i * 3 + c] = gray3.data<float>()[i];
  const Tensor e = eval_transform({.resize = 2, .crop = 2, .norm = {.mean = {0, 0, 0}, .std = {1, 1, 1}}})(rgb, a);
  std::vector<float> expected;
  for (int c = 0; c < 3; ++c)
    for (float v : {4.f, 10.f, 19.f, 25.f}) expected.push_back(v / 255.0f);
  check_values(e, expected, 1e-6f);
}
