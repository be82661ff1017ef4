#include <catch2/catch.hpp>

#include <zlib.h>

#include <filesystem>

#include "core/error.h"
#include "datasets/idx.h"
#include "idx_fixtures.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("idx: reads plain and gzip files with the same result") {
  TempDir dir("idx");
  std::vector<uint8_t> pixels(2 * 3 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 10);
  const std::vector<uint8_t> bytes = idx_bytes({2, 3, 4}, pixels);
  write_bytes(dir.file("images"), bytes);
  write_bytes(dir.file("images.gz"), bytes, /*gzip=*/true);
  write_bytes(dir.file("gzip-without-suffix"), bytes, /*gzip=*/true);  // detected by magic, not name
  for (const char* name : {"images", "images.gz", "gzip-without-suffix"}) {
    INFO(name);
    const IdxArray a = read_idx(dir.file(name));
    CHECK(a.dims == std::vector<int64_t>{2, 3, 4});
    CHECK(a.data == pixels);
  }
  CHECK(std::filesystem::file_size(dir.file("images.gz")) != bytes.size());  // really compressed
}

TEST_CASE("idx: 1-d labels, large dims, empty arrays") {
  const IdxArray labels = parse_idx(idx_bytes({5}, {3, 1, 4, 1, 5}), "labels");
  CHECK(labels.dims == std::vector<int64_t>{5});
  CHECK(labels.data == std::vector<uint8_t>{3, 1, 4, 1, 5});
  // A dim above 2^24 checks the big-endian decoding of all four bytes.
  const IdxArray empty = parse_idx(idx_bytes({0, 0x01020304}, {}), "empty");
  CHECK(empty.dims == std::vector<int64_t>{0, 0x01020304});
  CHECK(empty.data.empty());
}

TEST_CASE("idx: malformed files fail with a specific error") {
  struct Case { const char* name; std::vector<uint8_t> bytes; const char* message; };
  std::vector<uint8_t> bad_magic = idx_bytes({2}, {1, 2});
  bad_magic[1] = 0x08;
  const Case cases[] = {
      {"empty", {}, "read_idx 'bad': expected at least 4 bytes (the IDX magic), got 0"},
      {"short magic", {0, 0, 8}, "expected at least 4 bytes (the IDX magic), got 3"},
      {"bad magic", bad_magic, "not an IDX file: expected the magic to start with 0x00 0x00, got 0x00 0x08"},
      {"text file", {'h', 'e', 'l', 'l', 'o'}, "not an IDX file: expected the magic to start with 0x00 0x00, got 0x68 0x65"},
      {"f32 elements", idx_bytes({1}, {0, 0, 0, 0}, 0x0D), "unsupported element type 0x0D (f32); ember reads only 0x08 (unsigned byte)"},
      {"i32 elements", idx_bytes({1}, {0, 0, 0, 0}, 0x0C), "unsupported element type 0x0C (i32)"},
      {"unknown type", idx_bytes({1}, {0}, 0x42), "not an IDX file: unknown element type 0x42"},
      {"zero dims", {0, 0, 8, 0, 1}, "expected at least 1 dimension, got 0"},
      {"truncated dims", {0, 0, 8, 3, 0, 0, 0, 2, 0, 0}, "truncated header: 3 dims need 16 header bytes, the file has 10"},
      {"short data", idx_bytes({2, 3}, {1, 2, 3, 4, 5}), "truncated: dims (2, 3) need 6 data bytes, the file has 5"},
      {"trailing bytes", idx_bytes({2}, {1, 2, 3}), "1 trailing bytes after the 2 data bytes of dims (2,)"},
      {"count overflow", idx_bytes({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}), "dims (4294967295, 4294967295, 4294967295) overflow 64-bit element counts"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK_THROWS_AS(parse_idx(c.bytes, "bad"), Error);
    CHECK_THROWS_WITH(parse_idx(c.bytes, "bad"), Catch::Contains(c.message));
  }
}

TEST_CASE("idx: file-level failures: missing, truncated gzip, corrupt gzip") {
  TempDir dir("idx_files");
  CHECK_THROWS_WITH(read_idx(dir.file("nope")), Catch::Contains("read_idx '") && Catch::Contains("nope': cannot open the file: No such file or directory"));

  std::vector<uint8_t> data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 7919) >> 3);
  write_bytes(dir.file("full.gz"), idx_bytes({64, 64}, data), true);
  std::vector<uint8_t> gz(std::filesystem::file_size(dir.file("full.gz")));
  {
    std::FILE* f = std::fopen(dir.file("full.gz").c_str(), "rb");
    REQUIRE(std::fread(gz.data(), 1, gz.size(), f) == gz.size());
    std::fclose(f);
  }
  // Cut in the middle of the deflate stream: zlib reports the unexpected end.
  write_bytes(dir.file("cut.gz"), std::vector<uint8_t>(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
  CHECK_THROWS_WITH(read_idx(dir.file("cut.gz")), Catch::Contains("cut.gz': corrupt or truncated gzip data"));
  // Flipped bytes inside the stream: a data error or a CRC mismatch, never garbage pixels.
  std::vector<uint8_t> corrupt = gz;
  for (size_t i = 20; i < 40 && i < corrupt.size(); ++i) corrupt[i] ^= 0x5A;
  write_bytes(dir.file("corrupt.gz"), corrupt);
  CHECK_THROWS_WITH(read_idx(dir.file("corrupt.gz")), Catch::Contains("corrupt.gz': corrupt"));
  // A valid gzip of a malformed IDX reports the IDX problem with the file name.
  write_bytes(dir.file("short.gz"), idx_bytes({10}, {1, 2, 3}), true);
  CHECK_THROWS_WITH(read_idx(dir.file("short.gz")), Catch::Contains("short.gz': truncated: dims (10,) need 10 data bytes, the file has 3"));
}

// Note [Bounded inflate] (datasets/idx.cpp).
TEST_CASE("idx: gzip is inflated only as far as the header promises") {
  TempDir dir("idx_bomb");
  // A bomb: a 10-byte array followed by 64 MiB of zeros, about 64 KiB compressed. Reading
  // stops one byte past the promise instead of inflating it all.
  const std::string bomb = dir.file("bomb.gz");
  {
    gzFile f = gzopen(bomb.c_str(), "wb");
    REQUIRE(f);
    const std::vector<uint8_t> head = idx_bytes({10}, std::vector<uint8_t>(10, 1));
    REQUIRE(gzwrite(f, head.data(), unsigned(head.size())) == int(head.size()));
    const std::vector<uint8_t> zeros(1 << 20, 0);
    for (int i = 0; i < 64; ++i) REQUIRE(gzwrite(f, zeros.data(), unsigned(zeros.size())) == int(zeros.size()));
    gzclose(f);
  }
  CHECK_THROWS_WITH(read_idx(bomb), Catch::Contains("the data inflates beyond the 18 bytes its header promises"));

  // A header that promises more than the compressed size can hold fails before reading on.
  write_bytes(dir.file("liar.gz"), idx_bytes({1u << 20, 1u << 20}, std::vector<uint8_t>(64, 3)), true);
  CHECK_THROWS_WITH(read_idx(dir.file("liar.gz")), Catch::Contains("the header promises 1099511627788 bytes, but a file of"));

  // Files that keep their promise still read (plain and gzip).
  write_bytes(dir.file("ok.gz"), idx_bytes({3, 2}, {1, 2, 3, 4, 5, 6}), true);
  CHECK(read_idx(dir.file("ok.gz")).data.size() == 6);
}

// parse_idx_file: what read_idx does with a file's bytes (and what fuzz_gzip fuzzes).
TEST_CASE("idx: file bytes in memory: plain, gzip members in a row, and bytes after the gzip data") {
  const std::vector<uint8_t> image = idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(parse_idx_file(image, "plain").data == std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
  CHECK(parse_idx_file(gzip_bytes(image), "gzip").data == std::vector<uint8_t>{1, 2, 3, 4, 5, 6});

  // Two members (as `cat a.gz b.gz` makes) inflate to their concatenation, as with gzip -d.
  std::vector<uint8_t> two = gzip_bytes({image.begin(), image.begin() + 5});
  const std::vector<uint8_t> second = gzip_bytes({image.begin() + 5, image.end()});
  two.insert(two.end(), second.begin(), second.end());
  const IdxArray joined = parse_idx_file(two, "two members");
  CHECK(joined.dims == std::vector<int64_t>{2, 3});
  CHECK(joined.data == std::vector<uint8_t>{1, 2, 3, 4, 5, 6});

  // Bytes after the last member that are not another member are corrupt data, not ignored.
  std::vector<uint8_t> trailing = gzip_bytes(image);
  trailing.push_back('x');
  CHECK_THROWS_WITH(parse_idx_file(trailing, "trailing"), Catch::Contains("read_idx 'trailing': corrupt gzip data: the 1 bytes after the end of the gzip data do not start another gzip member"));
  // A cut stream reports the truncation, whatever member it is in.
  const std::vector<uint8_t> cut(two.begin(), two.end() - 3);
  CHECK_THROWS_WITH(parse_idx_file(cut, "cut"), Catch::Contains("read_idx 'cut': corrupt or truncated gzip data"));
  CHECK_THROWS_WITH(parse_idx_file({}, "empty"), Catch::Contains("expected at least 4 bytes (the IDX magic), got 0"));
}
