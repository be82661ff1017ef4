#include "datasets/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace ember {

namespace {

struct ImageDims {
  int64_t height, width, channels;
};

// Checks that `image` is a CPU (H, W, C) u8 or f32 tensor; `op` names the caller in errors.
ImageDims image_dims(const Tensor& image, const char* op) {
  EMBER_CHECK(image.defined() && image.dim() == 3, op, ": expected an (H, W, C) image, got ",
              image.defined() ? shape_str(image.shape()) : std::string("an undefined tensor"));
  EMBER_CHECK(image.is_cpu(), op, ": expected a CPU image, got one on ", image.device());
  EMBER_CHECK(image.dtype() == DType::u8 || image.dtype() == DType::f32, op, ": expected a u8 or f32 image, got ",
              dtype_name(image.dtype()));
  return {image.size(0), image.size(1), image.size(2)};
}

// A uniform double in [0, 1) from two words of a block.
double uniform01(const std::array<uint32_t, 4>& w, int first) { return uniform_double(w[first], w[first + 1]); }

// A uniform integer in [0, n) from two words of a block (modulo bias below 2^-32 for image sizes).
int64_t uniform_below(const std::array<uint32_t, 4>& w, int first, int64_t n) {
  return int64_t((uint64_t(w[first + 1]) << 32 | w[first]) % uint64_t(n));
}

// Python's round(): halves to even (the current rounding mode, round-to-nearest-even).
int64_t round_half_even(double x) { return int64_t(std::nearbyint(x)); }

// Source coordinate of output pixel `out` (torch's area_pixel_compute_source_index with
// align_corners=False): pixel centres aligned, clamped at 0.
struct Tap {
  int64_t i0, step;  // rows/columns i0 and i0 + step (step 0 at the last one)
  float l0, l1;      // their weights
};
Tap bilinear_tap(int64_t out, float scale, int64_t in_size) {
  const float src = std::max(scale * (float(out) + 0.5f) - 0.5f, 0.0f);
  const int64_t i0 = std::min(int64_t(src), in_size - 1);
  const float l1 = src - float(i0);
  return {i0, i0 < in_size - 1 ? 1 : 0, 1.0f - l1, l1};
}

template <class T>
void resize_pixels(const T* src, const ImageDims& in, float* dst, int64_t out_h, int64_t out_w) {
  const float scale_h = float(in.height) / float(out_h), scale_w = float(in.width) / float(out_w);
  const int64_t c_count = in.channels, row = in.width * c_count;
  std::vector<Tap> cols(static_cast<size_t>(out_w));
  for (int64_t x = 0; x < out_w; ++x) cols[size_t(x)] = bilinear_tap(x, scale_w, in.width);
  for (int64_t y = 0; y < out_h; ++y) {
    const Tap r = bilinear_tap(y, scale_h, in.height);
    const T* top = src + r.i0 * row;
    const T* bottom = top + r.step * row;
    for (int64_t x = 0; x < out_w; ++x) {
      const Tap& c = cols[size_t(x)];
      const int64_t a = c.i0 * c_count, b = (c.i0 + c.step) * c_count;
      for (int64_t ch = 0; ch < c_count; ++ch)
        *dst++ = r.l0 * (c.l0 * float(top[a + ch]) + c.l1 * float(top[b + ch])) +
                 r.l1 * (c.l0 * float(bottom[a + ch]) + c.l1 * float(bottom[b + ch]));
    }
  }
}

// (H, W, 3) pixels to (3, H, W): ToTensor's divide, then Normalize's subtract and divide, in f32
// as torchvision does them.
template <class T>
void normalize_pixels(const T* in, int64_t plane, const ImageNormalization& norm, float* dst) {
  for (int64_t c = 0; c < 3; ++c) {
    const float mean = float(norm.mean[size_t(c)]), std = float(norm.std[size_t(c)]);
    for (int64_t i = 0; i < plane; ++i) dst[c * plane + i] = (float(in[i * 3 + c]) / 255.0f - mean) / std;
  }
}

}  // namespace

CropBox random_resized_crop_box(int64_t height, int64_t width, Generator& rng, const RandomResizedCropOptions& o) {
  EMBER_CHECK(height > 0 && width > 0, "random_resized_crop: expected a non-empty image, got ", height, "x", width);
  EMBER_CHECK(0 < o.scale_min && o.scale_min <= o.scale_max && 0 < o.ratio_min && o.ratio_min <= o.ratio_max,
              "random_resized_crop: expected 0 < scale_min <= scale_max and 0 < ratio_min <= ratio_max, got scale (",
              o.scale_min, ", ", o.scale_max, ") ratio (", o.ratio_min, ", ", o.ratio_max, ")");
  const double area = double(height) * double(width);
  const double log_min = std::log(o.ratio_min), log_max = std::log(o.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const auto w = rng.block(rng.reserve(1));
    const double target_area = area * (o.scale_min + (o.scale_max - o.scale_min) * uniform01(w, 0));
    const double aspect = std::exp(log_min + (log_max - log_min) * uniform01(w, 2));
    const int64_t cw = round_half_even(std::sqrt(target_area * aspect));
    const int64_t ch = round_half_even(std::sqrt(target_area / aspect));
    if (0 < cw && cw <= width && 0 < ch && ch <= height) {
      const auto place = rng.block(rng.reserve(1));
      return {uniform_below(place, 0, height - ch + 1), uniform_below(place, 2, width - cw + 1), ch, cw};
    }
  }
  // The fallback: the largest center crop whose ratio is within [ratio_min, ratio_max].
  const double in_ratio = double(width) / double(height);
  int64_t cw = width, ch = height;
  if (in_ratio < o.ratio_min) ch = round_half_even(double(cw) / o.ratio_min);
  else if (in_ratio > o.ratio_max) cw = round_half_even(double(ch) * o.ratio_max);
  return {(height - ch) / 2, (width - cw) / 2, ch, cw};
}

CropBox center_crop_box(int64_t height, int64_t width, int64_t crop_height, int64_t crop_width) {
  EMBER_CHECK(0 < crop_height && crop_height <= height && 0 < crop_width && crop_width <= width, "center_crop: a ",
              crop_height, "x", crop_width, " crop (height x width) does not fit the ", height, "x", width,
              " image; resize it first");
  return {round_half_even(double(height - crop_height) / 2.0), round_half_even(double(width - crop_width) / 2.0),
          crop_height, crop_width};
}

Tensor crop(const Tensor& image, const CropBox& box) {
  const ImageDims d = image_dims(image, "crop");
  EMBER_CHECK(box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 && box.top + box.height <= d.height &&
                  box.left + box.width <= d.width,
              "crop: the box (top ", box.top, ", left ", box.left, ", ", box.height, "x", box.width,
              ") is not inside the ", d.height, "x", d.width, " image");
  // Row copies on this thread: transforms run on the loader's workers, and the op layer's copy
  // would queue on the shared parallel pool from every worker at once.
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty({box.height, box.width, d.channels}, {.dtype = src.dtype()});
  const size_t pixel = size_t(d.channels) * dtype_size(src.dtype()), row = size_t(box.width) * pixel;
  const auto* in = static_cast<const uint8_t*>(src.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t y = 0; y < box.height; ++y)
    std::copy_n(in + (size_t(box.top + y) * size_t(d.width) + size_t(box.left)) * pixel, row, dst + size_t(y) * row);
  return out;
}

Tensor center_crop(const Tensor& image, int64_t crop_height, int64_t crop_width) {
  const ImageDims d = image_dims(image, "center_crop");
  return crop(image, center_crop_box(d.height, d.width, crop_height, crop_width));
}

Tensor resize_bilinear(const Tensor& image, int64_t out_height, int64_t out_width) {
  const ImageDims d = image_dims(image, "resize_bilinear");
  EMBER_CHECK(out_height > 0 && out_width > 0 && d.height > 0 && d.width > 0, "resize_bilinear: cannot resize a ",
              d.height, "x", d.width, " image to ", out_height, "x", out_width);
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty({out_height, out_width, d.channels});
  if (src.dtype() == DType::u8) resize_pixels(src.data<uint8_t>(), d, out.data<float>(), out_height, out_width);
  else resize_pixels(src.data<float>(), d, out.data<float>(), out_height, out_width);
  return out;
}

Tensor resize_shorter_side(const Tensor& image, int64_t size) {
  const ImageDims d = image_dims(image, "resize_shorter_side");
  EMBER_CHECK(size > 0, "resize_shorter_side: expected a size > 0, got ", size);
  const int64_t shorter = std::min(d.height, d.width), longer = std::max(d.height, d.width);
  EMBER_CHECK(shorter > 0, "resize_shorter_side: cannot resize an empty ", d.height, "x", d.width, " image");
  const auto new_longer = int64_t(double(size) * double(longer) / double(shorter));
  return d.width <= d.height ? resize_bilinear(image, new_longer, size) : resize_bilinear(image, size, new_longer);
}

Tensor horizontal_flip(const Tensor& image) {
  const ImageDims d = image_dims(image, "horizontal_flip");
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty(src.shape(), {.dtype = src.dtype()});
  const size_t pixel = size_t(d.channels) * dtype_size(src.dtype());
  const auto* in = static_cast<const uint8_t*>(src.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t y = 0; y < d.height; ++y)
    for (int64_t x = 0; x < d.width; ++x)
      std::copy_n(in + (y * d.width + (d.width - 1 - x)) * pixel, pixel, dst + (y * d.width + x) * pixel);
  return out;
}

Tensor random_horizontal_flip(const Tensor& image, Generator& rng, double p) {
  const auto w = rng.block(rng.reserve(1));
  return uniform01(w, 0) < p ? horizontal_flip(image) : image;
}

Tensor to_tensor_normalized(const Tensor& image, const ImageNormalization& norm) {
  const ImageDims d = image_dims(image, "to_tensor_normalized");
  EMBER_CHECK(d.channels == 3, "to_tensor_normalized: expected 3 channels (RGB) to match the 3 means and stds, got ",
              d.channels);
  for (double s : norm.std) EMBER_CHECK(s > 0, "to_tensor_normalized: every std must be > 0, got ", s);
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty({3, d.height, d.width});
  if (src.dtype() == DType::u8) normalize_pixels(src.data<uint8_t>(), d.height * d.width, norm, out.data<float>());
  else normalize_pixels(src.data<float>(), d.height * d.width, norm, out.data<float>());
  return out;
}

ImageTransform train_transform(TrainTransformOptions o) {
  EMBER_CHECK(o.size > 0, "train_transform: expected a size > 0, got ", o.size);
  return [o](const Tensor& image, Generator& rng) {
    const ImageDims d = image_dims(image, "train_transform");
    const Tensor cropped = crop(image, random_resized_crop_box(d.height, d.width, rng, o.crop));
    return to_tensor_normalized(random_horizontal_flip(resize_bilinear(cropped, o.size, o.size), rng, o.flip_p), o.norm);
  };
}

ImageTransform eval_transform(EvalTransformOptions o) {
  EMBER_CHECK(o.resize > 0 && o.crop > 0 && o.crop <= o.resize, "eval_transform: expected 0 < crop <= resize, got crop ",
              o.crop, " resize ", o.resize);
  return [o](const Tensor& image, Generator&) {
    return to_tensor_normalized(center_crop(resize_shorter_side(image, o.resize), o.crop, o.crop), o.norm);
  };
}

ImageTransform normalize_transform(ImageNormalization norm) {
  return [norm](const Tensor& image, Generator&) { return to_tensor_normalized(image, norm); };
}

}  // namespace ember
