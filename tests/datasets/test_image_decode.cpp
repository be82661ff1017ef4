#include <catch2/catch.hpp>

#include <filesystem>

#include "core/error.h"
#include "datasets/image_decode.h"
#include "datasets/png_write.h"
#include "idx_fixtures.h"
#include "image_fixtures.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::test;
using Catch::Matchers::Contains;

namespace {

std::string fuzz_seed(const std::string& name) {
  return std::string(EMBER_TEST_DATA_DIR) + "/../fuzz/corpus/image_decode/" + name;
}

}  // namespace

TEST_CASE("image_decode: a PNG written by encode_png decodes to the same pixels") {
  const Tensor rgb = patterned_image(5, 7, 11);
  const Tensor decoded = decode_image(encode_png(rgb), "rgb.png");
  CHECK(decoded.shape() == Shape{5, 7, 3});
  CHECK(decoded.dtype() == DType::u8);
  CHECK(values_of(decoded) == values_of(rgb));

  // Gray is replicated into R, G, B; alpha is dropped (PIL's convert("RGB")).
  const Tensor gray = u8_image(2, 3, 1, {0, 10, 20, 30, 40, 255});
  CHECK(values_of(decode_image(encode_png(gray), "gray.png")) ==
        std::vector<float>{0, 0, 0, 10, 10, 10, 20, 20, 20, 30, 30, 30, 40, 40, 40, 255, 255, 255});
  const Tensor rgba = u8_image(1, 2, 4, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(values_of(decode_image(encode_png(rgba), "rgba.png")) == std::vector<float>{1, 2, 3, 5, 6, 7});
}

TEST_CASE("image_decode: a small JPEG decodes close to PIL's pixels") {
  // tests/data/make_image_fixtures.py: four flat quadrants, quality 95, no chroma subsampling;
  // PIL (libjpeg) decodes the quadrant centres to these values; stb's IDCT may differ by a step.
  const Tensor image = read_image_file(data_path("images/quadrants_16x16.jpg"));
  REQUIRE(image.shape() == Shape{16, 16, 3});
  const std::vector<float> v = values_of(image);
  auto pixel = [&](int y, int x, int c) { return v[size_t((y * 16 + x) * 3 + c)]; };
  const int centres[4][2] = {{4, 4}, {4, 12}, {12, 4}, {12, 12}};  // (y, x)
  const float pil[4][3] = {{200, 30, 39}, {20, 179, 60}, {30, 60, 210}, {240, 240, 240}};
  for (int q = 0; q < 4; ++q)
    for (int c = 0; c < 3; ++c) CHECK(std::abs(pixel(centres[q][0], centres[q][1], c) - pil[q][c]) <= 2);
}

TEST_CASE("image_decode: the seed corpus's valid files decode, in RGB") {
  CHECK(read_image_file(fuzz_seed("valid_gray_3x2.png")).shape() == Shape{2, 3, 3});
  CHECK(read_image_file(fuzz_seed("valid_16bit_2x2.png")).shape() == Shape{2, 2, 3});
  CHECK(read_image_file(fuzz_seed("valid_palette_5x5.png")).shape() == Shape{5, 5, 3});
  CHECK(read_image_file(fuzz_seed("valid_progressive_8x8.jpg")).shape() == Shape{8, 8, 3});
  CHECK(read_image_file(fuzz_seed("valid_gray_8x8.jpg")).shape() == Shape{8, 8, 3});
}

TEST_CASE("image_decode: malformed files are errors naming the path and the reason") {
  TempDir dir("image_decode");
  const std::vector<uint8_t> png = encode_png(patterned_image(6, 6));
  const std::string truncated = dir.file("truncated.png"), garbage = dir.file("garbage.png"),
                    empty = dir.file("empty.png"), folder = dir.file("folder.png"), missing = dir.file("missing.png");
  write_file(truncated, std::vector<uint8_t>(png.begin(), png.begin() + std::ptrdiff_t(png.size() / 2)));
  write_file(garbage, std::vector<uint8_t>(100, 0xAB));
  write_file(empty, {});
  std::filesystem::create_directory(folder);

  CHECK_THROWS_WITH(read_image_file(truncated), Contains(truncated) && Contains("corrupt PNG data"));
  CHECK_THROWS_WITH(read_image_file(garbage), Contains(garbage) && Contains("not a PNG or JPEG"));
  CHECK_THROWS_WITH(read_image_file(empty), Contains(empty) && Contains("empty (0 bytes)"));
  CHECK_THROWS_WITH(read_image_file(folder), Contains(folder) && Contains("not a regular file"));
  CHECK_THROWS_WITH(read_image_file(missing), Contains(missing) && Contains("no such file"));
  // A valid header claiming 100000x100000 is refused before any pixel is decoded.
  CHECK_THROWS_WITH(read_image_file(fuzz_seed("bad_huge_header.png")),
                    Contains("bad_huge_header.png") && Contains("width 100000, height 100000") && Contains("1..16384"));
  CHECK_THROWS_WITH(read_image_file(fuzz_seed("bad_zero_width.png")), Contains("bad_zero_width.png"));
  CHECK_THROWS_WITH(read_image_file(fuzz_seed("bad_gif_header.gif")), Contains("not a PNG or JPEG"));
  // Found by the fuzz target: a DHT segment whose code counts sum past 256 (Note [stb DHT overflow]).
  CHECK_THROWS_WITH(read_image_file(fuzz_seed("regression_dht_counts_over_256.jpg")),
                    Contains("regression_dht_counts_over_256.jpg") && Contains("a Huffman table with"));
  // Found by the fuzz target: a progressive scan reading AC table 0, which no DHT defined (Note [stb
  // undefined Huffman table]); without the check stb indexes its tables with garbage.
  CHECK_THROWS_WITH(read_image_file(fuzz_seed("regression_jpeg_undefined_huffman_table.jpg")),
                    Contains("regression_jpeg_undefined_huffman_table.jpg") && Contains("AC Huffman table 0") &&
                        Contains("which no DHT segment defined"));
  CHECK_THROWS_WITH(read_image_file(fuzz_seed("bad_truncated.jpg")), Contains("bad_truncated.jpg") && Contains("corrupt JPEG data"));
  // Found by the fuzz target: a second IDAT claiming 1.7 GB, which stb allocated 2 GiB for before
  // reading (Note [stb IDAT allocation]).
  CHECK_THROWS_WITH(read_image_file(fuzz_seed("regression_idat_length_past_the_end.png")),
                    Contains("regression_idat_length_past_the_end.png") &&
                        Contains("chunk 'IDAT' at byte 61 claims 1761607696 bytes; only 36 follow its header"));
}

TEST_CASE("image_decode: the limits bound the sides, the pixel count and the file size") {
  const std::vector<uint8_t> png = encode_png(patterned_image(20, 30));
  CHECK(decode_image(png, "ok.png", {.max_side = 30, .max_pixels = 600}).shape() == Shape{20, 30, 3});
  CHECK_THROWS_WITH(decode_image(png, "wide.png", {.max_side = 29}), Contains("wide.png") && Contains("width 30, height 20"));
  CHECK_THROWS_WITH(decode_image(png, "many.png", {.max_pixels = 599}), Contains("at most 599 pixels"));
  TempDir dir("image_limits");
  write_file(dir.file("big.png"), png);
  CHECK_THROWS_WITH(read_image_file(dir.file("big.png"), {.max_file_bytes = 10}),
                    Contains("big.png") && Contains("more than the limit of 10"));
}
