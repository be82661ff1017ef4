// PNG and JPEG decoding (stb_image, compiled into ember with only those two decoders) into
// u8 (H, W, 3) RGB tensors, bounded and checked before any pixel is decoded.
//
//   Tensor rgb = read_image_file("photos/cat/001.jpg");            // (H, W, 3) u8
//   Tensor png = decode_image(bytes, "upload.png");                // from memory; name for errors
//
// Channels: always 3. Gray is replicated into R, G and B and alpha is dropped, which is what
// torchvision's ImageFolder loader (PIL's convert("RGB")) gives for gray, gray+alpha and RGBA
// files. 16-bit PNGs are reduced to 8 bits. Every failure (unreadable file, a file over
// max_file_bytes, unknown format, a header with width or height 0 or beyond the limits, corrupt
// or truncated data) is an ember::Error naming the file and stb's reason.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"

namespace ember {

struct ImageLimits {
  int64_t max_side = 16384;              // width and height each
  int64_t max_pixels = int64_t(1) << 26;  // width * height (64 Mi pixels: 192 MiB of RGB)
  int64_t max_file_bytes = int64_t(1) << 28;
};

// Decodes a PNG or JPEG held in memory; `what` names it in errors.
Tensor decode_image(std::span<const uint8_t> bytes, const std::string& what, const ImageLimits& limits = {});

// Reads `path` (a regular file of at most limits.max_file_bytes) and decodes it.
Tensor read_image_file(const std::string& path, const ImageLimits& limits = {});

}  // namespace ember
