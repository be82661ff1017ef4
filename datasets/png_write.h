// PNG encoding of u8 images, for tools that write image folders (`ember data image-folder`)
// and for tests that need PNG files.
//
//   write_png("out/train/3/00042.png", image);   // image: (H, W) gray or (H, W, C), C in 1..4
//   std::vector<uint8_t> bytes = encode_png(image);
//
// Uses stb_image_write (Debian's libstb-dev header) compiled into this one translation unit with
// static symbols, its own deflate; only the PNG writer is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember {

std::vector<uint8_t> encode_png(const Tensor& image);
void write_png(const std::string& path, const Tensor& image);

}  // namespace ember
