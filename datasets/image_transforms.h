// Image transforms for training on image folders, as torchvision's, on (H, W, C) tensors
// (u8 as decoded, or f32 holding 0..255 after a resize), ending in an f32 (C, H, W) tensor.
//
//   ImageTransform train = train_transform({.size = 224});     // RandomResizedCrop, flip, normalise
//   ImageTransform eval = eval_transform({.resize = 256, .crop = 224});
//   Tensor x = train(read_image_file(path), rng);              // (3, 224, 224) f32
//
// The steps, each usable alone:
//   random_resized_crop_box  torchvision's RandomResizedCrop.get_params: 10 attempts drawing an
//                            area fraction uniform in `scale` and an aspect ratio log-uniform in
//                            `ratio`; the first box that fits is placed uniformly; else the
//                            center crop of the ratio-clamped image.
//   resize_bilinear          torch.nn.functional.interpolate(mode="bilinear",
//                            align_corners=False, antialias=False), in f32.
//   resize_shorter_side      torchvision's Resize(int): the shorter side to `size`, the longer
//                            one int(size * long / short).
//   crop, center_crop        torchvision's crop and CenterCrop (offset int(round((H - h) / 2))).
//   horizontal_flip, random_horizontal_flip (probability p).
//   to_tensor_normalized     ToTensor + Normalize: (v / 255 - mean[c]) / std[c], (H, W, C) ->
//                            (C, H, W) f32.
//
// Note [Resize without rounding]: torchvision on PIL images resizes with PIL's bilinear filter,
// which antialiases when shrinking and rounds back to u8. ember follows torchvision's tensor
// path instead (plain bilinear as F.interpolate, no antialias) and keeps the resized values in
// f32 until normalisation, so no rounding step is added. Expect differences from a PIL
// pipeline of about a u8 step on upscales and more on strong downscales.
//
// All randomness comes from the Generator passed in (the sample's own stream, Note
// [Per-sample randomness] in datasets/data_loader.h): a crop attempt takes one Philox block,
// placing the crop one more, a flip one; so a sample's augmentation is a function of that
// stream alone. Sizes that the image cannot satisfy (a center crop larger than the image,
// where torchvision would pad with zeros) are errors naming both sizes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "core/rng.h"
#include "core/tensor.h"

namespace ember {

// (u8 (H, W, 3) image, the sample's generator) -> the model's input tensor.
using ImageTransform = std::function<Tensor(const Tensor& image, Generator& rng)>;

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

struct RandomResizedCropOptions {
  double scale_min = 0.08, scale_max = 1.0;             // fraction of the image's area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
};

struct ImageNormalization {  // ImageNet's, as torchvision's reference scripts use
  std::array<double, 3> mean{0.485, 0.456, 0.406};
  std::array<double, 3> std{0.229, 0.224, 0.225};
};

CropBox random_resized_crop_box(int64_t height, int64_t width, Generator& rng,
                                const RandomResizedCropOptions& options = {});
CropBox center_crop_box(int64_t height, int64_t width, int64_t crop_height, int64_t crop_width);

Tensor crop(const Tensor& image, const CropBox& box);  // a contiguous copy
Tensor center_crop(const Tensor& image, int64_t crop_height, int64_t crop_width);
Tensor resize_bilinear(const Tensor& image, int64_t out_height, int64_t out_width);  // -> f32
Tensor resize_shorter_side(const Tensor& image, int64_t size);                      // -> f32
Tensor horizontal_flip(const Tensor& image);
Tensor random_horizontal_flip(const Tensor& image, Generator& rng, double p = 0.5);
Tensor to_tensor_normalized(const Tensor& image, const ImageNormalization& norm = {});

struct TrainTransformOptions {
  int64_t size = 224;
  RandomResizedCropOptions crop;
  double flip_p = 0.5;
  ImageNormalization norm;
};
// RandomResizedCrop(size) -> RandomHorizontalFlip(flip_p) -> ToTensor -> Normalize.
ImageTransform train_transform(TrainTransformOptions options = {});

struct EvalTransformOptions {
  int64_t resize = 256;
  int64_t crop = 224;
  ImageNormalization norm;
};
// Resize(resize) -> CenterCrop(crop) -> ToTensor -> Normalize; no randomness.
ImageTransform eval_transform(EvalTransformOptions options = {});

// ToTensor -> Normalize only (images that already have the model's size).
ImageTransform normalize_transform(ImageNormalization norm = {});

}  // namespace ember
