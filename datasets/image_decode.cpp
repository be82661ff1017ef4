#include "datasets/image_decode.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"

// Note [stb_image]: this is the one translation unit that compiles stb_image (Debian's
// libstb-dev header, not its prebuilt libstb, which enables every format). Only the PNG and
// JPEG decoders are built (a smaller attack surface for files from the internet), the symbols
// are static (no clash with another copy in the same program), and files are read by ember
// (STBI_NO_STDIO) so the size bound applies before stb sees a byte. stb's failure reason is
// thread-local in this version (STBI_THREAD_LOCAL), so decoding on several loader workers is
// safe.
//
// Note [Image header checks]: the format is told by its signature first, so that the error
// says "neither PNG nor JPEG" or names the format stb failed on. A PNG's size is read from its
// IHDR chunk directly (fixed offsets) and checked against ImageLimits before stb parses it:
// stb's own info call refuses sizes whose pixels exceed 1 GiB with only a generic "unknown
// image type", and the user should see the size the header claims. A JPEG's size comes from
// stbi_info_from_memory (stb checks it against its default 2^24 bound), then the same limits.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_FAILURE_USERMSG
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace ember {

namespace {

// stb's reason for the last failure on this thread.
const char* stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason != nullptr ? reason : "no reason given";
}

bool starts_with(std::span<const uint8_t> bytes, std::initializer_list<uint8_t> prefix) {
  return bytes.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), bytes.begin());
}

uint32_t big_endian32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

void check_size(int64_t width, int64_t height, const std::string& what, const ImageLimits& limits) {
  EMBER_CHECK(width > 0 && height > 0 && width <= limits.max_side && height <= limits.max_side &&
                  width * height <= limits.max_pixels,
              "decode_image: ", what, ": its header says width ", width, ", height ", height,
              "; expected each side in 1..", limits.max_side, " and at most ", limits.max_pixels, " pixels");
}

// Note [stb DHT overflow]: stb_image 2.27 (Debian's libstb-dev) trusts the 16 code counts of a
// JPEG Huffman table (DHT segment): when they sum to more than 256 it writes past its 257-entry
// size table and its 256-entry value table (found by tests/fuzz/fuzz_image_decode in its first
// second; the input is corpus/image_decode/regression_dht_counts_over_256.jpg). ember walks the
// JPEG's segments the way stb does before stb sees them: markers (after any garbage and 0xFF
// fill bytes), their lengths, and after a start-of-scan the entropy-coded data up to the next
// marker (0xFF then a byte that is neither a stuffed 0x00 nor a restart); every DHT table is
// checked. Bytes past the end read as 0, as stb's reader returns them.
//
// Note [stb undefined Huffman table]: stb 2.27 also decodes a scan with a Huffman table that no
// DHT segment defined: its tables live in an uninitialised allocation, so the decoder indexes
// its value table with garbage (UBSan: index -95 at stb_image.h:2120; found by
// fuzz_image_decode, corpus/image_decode/regression_jpeg_undefined_huffman_table.jpg). The walk
// records which tables (DC/AC, ids 0-3) were defined and refuses a scan that reads one that was
// not: a baseline scan reads its components' DC and AC tables, a progressive one its DC table
// in a first DC scan (Ss = 0, Ah = 0), none in a DC refinement, and its AC table in an AC scan.
void check_jpeg_huffman_tables(std::span<const uint8_t> bytes, const std::string& what) {
  const size_t n = bytes.size();
  auto at = [&](size_t i) -> uint32_t { return i < n ? bytes[i] : 0; };
  bool defined[2][4] = {};  // [DC = 0, AC = 1][table id]
  bool progressive = false;
  auto require_table = [&](uint32_t table_class, uint32_t id) {
    if (id > 3) return;  // stb refuses ids above 3 itself
    EMBER_CHECK(defined[table_class][id], "decode_image: ", what, ": corrupt JPEG (a scan uses ",
                table_class == 0 ? "DC" : "AC", " Huffman table ", id, ", which no DHT segment defined before it)");
  };
  size_t pos = 2;  // after SOI
  while (pos < n) {
    while (pos < n && bytes[pos] != 0xFF) ++pos;  // garbage between segments
    while (pos < n && bytes[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= n) return;
    const uint32_t marker = bytes[pos++];
    if (marker == 0xD9) return;                                           // end of image
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01 || marker == 0x00) continue;  // no length
    const size_t length = at(pos) << 8 | at(pos + 1);
    if (marker == 0xC4) {
      int64_t left = int64_t(length) - 2;
      size_t table = pos + 2;
      while (left > 0) {
        uint32_t count = 0;
        const uint32_t table_class = at(table) >> 4, id = at(table) & 15;
        if (table_class <= 1 && id <= 3) defined[table_class][id] = true;  // stb refuses others
        for (size_t i = 0; i < 16; ++i) count += at(table + 1 + i);
        EMBER_CHECK(count <= 256, "decode_image: ", what, ": corrupt JPEG (a Huffman table with ", count,
                    " codes; at most 256 exist)");
        table += 17 + count;
        left -= int64_t(17 + count);
        if (table >= n) return;
      }
    }
    if (marker == 0xC0 || marker == 0xC1 || marker == 0xC2) progressive = marker == 0xC2;
    if (marker == 0xDA) {  // which Huffman tables the scan reads
      const uint32_t components = at(pos + 2);
      const size_t spectral = pos + 3 + 2 * size_t(components);
      const uint32_t start = at(spectral), high_bit = at(spectral + 2) >> 4;
      for (uint32_t c = 0; c < components; ++c) {
        const uint32_t tables = at(pos + 4 + 2 * size_t(c));
        const bool reads_dc = !progressive || (start == 0 && high_bit == 0);
        const bool reads_ac = !progressive || start > 0;
        if (reads_dc) require_table(0, tables >> 4);
        if (reads_ac) require_table(1, tables & 15);
      }
    }
    pos += length;
    if (marker == 0xDA) {  // entropy-coded data up to the next marker
      while (pos + 1 < n && !(bytes[pos] == 0xFF && bytes[pos + 1] != 0x00 && !(bytes[pos + 1] >= 0xD0 && bytes[pos + 1] <= 0xD7)))
        ++pos;
    }
  }
}

// Note [stb IDAT allocation]: stb_image 2.27 grows its buffer for a PNG's IDAT chunks to fit
// the length a chunk's header claims (doubling from 4 KiB) before it reads the chunk's bytes, so
// a few dozen bytes claiming a 1.7 GB IDAT made it allocate 2 GiB and then fail (found by
// tests/fuzz/fuzz_image_decode; corpus/image_decode/regression_idat_length_past_the_end.png).
// ember walks the chunks the way stb reads them, from the signature to IEND, and refuses a chunk
// whose data would run past the end of the file: stb could not read those bytes anyway, and its
// buffer then stays within the file's size.
void check_png_chunk_lengths(std::span<const uint8_t> bytes, const std::string& what) {
  const size_t n = bytes.size();
  for (size_t pos = 8; pos + 8 <= n;) {  // length (4), type (4), data, CRC (4)
    const uint32_t length = big_endian32(&bytes[pos]);
    const std::string type(reinterpret_cast<const char*>(&bytes[pos + 4]), 4);
    EMBER_CHECK(length <= n - pos - 8, "decode_image: ", what, ": corrupt PNG data (chunk '", type, "' at byte ", pos,
                " claims ", length, " bytes; only ", n - pos - 8, " follow its header)");
    if (type == "IEND") return;
    pos += 12 + size_t(length);
  }
}

struct StbPixels {
  stbi_uc* data = nullptr;
  ~StbPixels() { stbi_image_free(data); }
};

}  // namespace

Tensor decode_image(std::span<const uint8_t> bytes, const std::string& what, const ImageLimits& limits) {
  EMBER_CHECK(!bytes.empty(), "decode_image: ", what, ": the file is empty (0 bytes)");
  EMBER_CHECK(bytes.size() <= size_t(std::numeric_limits<int>::max()), "decode_image: ", what, ": ", bytes.size(),
              " bytes is beyond what the decoder accepts");
  const bool png = starts_with(bytes, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'});
  EMBER_CHECK(png || starts_with(bytes, {0xFF, 0xD8, 0xFF}), "decode_image: ", what,
              ": not a PNG or JPEG (its first bytes are neither signature)");
  const char* name = png ? "PNG" : "JPEG";
  // Note [Image header checks]: a PNG's IHDR is the first chunk, its size at bytes 16..23.
  if (png && bytes.size() >= 24 && std::equal(bytes.begin() + 12, bytes.begin() + 16, "IHDR"))
    check_size(big_endian32(&bytes[16]), big_endian32(&bytes[20]), what, limits);
  if (png) check_png_chunk_lengths(bytes, what);
  else check_jpeg_huffman_tables(bytes, what);
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int length = int(bytes.size());
  int width = 0, height = 0, channels = 0;
  EMBER_CHECK(stbi_info_from_memory(data, length, &width, &height, &channels) == 1, "decode_image: ", what,
              ": a ", name, " whose header cannot be read (", stb_reason(), ")");
  check_size(width, height, what, limits);
  StbPixels pixels;
  int w = 0, h = 0;
  pixels.data = stbi_load_from_memory(data, length, &w, &h, &channels, 3);
  EMBER_CHECK(pixels.data != nullptr, "decode_image: ", what, ": corrupt ", name, " data (", stb_reason(), ")");
  EMBER_CHECK(w == width && h == height, "decode_image: ", what, ": decoded width ", w, ", height ", h,
              " but the header said width ", width, ", height ", height);
  Tensor out = Tensor::empty({h, w, 3}, {.dtype = DType::u8});
  std::memcpy(out.raw_data(), pixels.data, out.nbytes());
  return out;
}

Tensor read_image_file(const std::string& path, const ImageLimits& limits) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  EMBER_CHECK(!ec && std::filesystem::exists(status), "read_image_file: ", path, ": no such file");
  EMBER_CHECK(std::filesystem::is_regular_file(status), "read_image_file: ", path, ": not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  EMBER_CHECK(!ec, "read_image_file: ", path, ": cannot read its size (", ec.message(), ")");
  EMBER_CHECK(int64_t(size) <= limits.max_file_bytes, "read_image_file: ", path, ": ", size,
              " bytes, more than the limit of ", limits.max_file_bytes);
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "read_image_file: ", path, ": cannot open it");
  Tensor bytes = Tensor::empty({int64_t(size)}, {.dtype = DType::u8});
  in.read(static_cast<char*>(bytes.raw_data()), std::streamsize(size));
  EMBER_CHECK(in.gcount() == std::streamsize(size), "read_image_file: ", path, ": read ", in.gcount(), " of ", size,
              " bytes");
  return decode_image({bytes.data<uint8_t>(), size_t(size)}, path, limits);
}

}  // namespace ember
