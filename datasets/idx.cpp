#include "datasets/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace ember {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;

// Names of the element types the IDX format defines, for the "unsupported" message.
const char* idx_type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "i16";
    case 0x0C: return "i32";
    case 0x0D: return "f32";
    case 0x0E: return "f64";
    default: return nullptr;
  }
}

std::string hex_byte(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

struct GzCloser { void operator()(gzFile f) const { gzclose(f); } };

// The file's bytes, inflated when it is gzip (zlib's gzread passes other files through).
std::vector<uint8_t> read_possibly_gzipped(const std::string& path) {
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  EMBER_CHECK(probe, "read_idx '", path, "': cannot open the file: ", std::strerror(errno));
  std::fclose(probe);
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  EMBER_CHECK(gz, "read_idx '", path, "': cannot open the file: ", std::strerror(errno));
  gzbuffer(gz.get(), 1 << 17);
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = 1 << 20;
  while (true) {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    const int n = gzread(gz.get(), bytes.data() + old_size, kChunk);
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(gz.get(), &code);
      EMBER_FAIL("read_idx '", path, "': corrupt gzip data: ", message);
    }
    bytes.resize(old_size + static_cast<size_t>(n));
    if (static_cast<size_t>(n) < kChunk) break;
  }
  // A gzip stream cut short reads as a short file plus this error.
  int code = 0;
  const char* message = gzerror(gz.get(), &code);
  EMBER_CHECK(code == Z_OK, "read_idx '", path, "': corrupt or truncated gzip data: ", message);
  return bytes;
}

}  // namespace

IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& what) {
  const size_t size = bytes.size();
  EMBER_CHECK(size >= 4, "read_idx '", what, "': expected at least 4 bytes (the IDX magic), got ", size);
  EMBER_CHECK(bytes[0] == 0 && bytes[1] == 0, "read_idx '", what, "': not an IDX file: expected the magic to start with 0x00 0x00, got ",
              hex_byte(bytes[0]), " ", hex_byte(bytes[1]));
  const uint8_t type = bytes[2];
  if (type != kUnsignedByte) {
    const char* name = idx_type_name(type);
    if (name) EMBER_FAIL("read_idx '", what, "': unsupported element type ", hex_byte(type), " (", name, "); ember reads only 0x08 (unsigned byte)");
    EMBER_FAIL("read_idx '", what, "': not an IDX file: unknown element type ", hex_byte(type));
  }
  const size_t ndims = bytes[3];
  EMBER_CHECK(ndims >= 1, "read_idx '", what, "': expected at least 1 dimension, got 0");
  const size_t header = 4 + 4 * ndims;
  EMBER_CHECK(size >= header, "read_idx '", what, "': truncated header: ", ndims, " dims need ", header,
              " header bytes, the file has ", size);

  IdxArray array;
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t i = 0; i < ndims; ++i) {
    const uint8_t* p = bytes.data() + 4 + 4 * i;
    const uint32_t d = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    array.dims.push_back(d);
    overflow |= __builtin_mul_overflow(numel, uint64_t{d}, &numel);
  }
  EMBER_CHECK(!overflow, "read_idx '", what, "': dims ", shape_str(array.dims), " overflow 64-bit element counts");
  const uint64_t data_size = size - header;
  EMBER_CHECK(data_size >= numel, "read_idx '", what, "': truncated: dims ", shape_str(array.dims), " need ", numel,
              " data bytes, the file has ", data_size);
  EMBER_CHECK(data_size == numel, "read_idx '", what, "': ", data_size - numel, " trailing bytes after the ", numel,
              " data bytes of dims ", shape_str(array.dims));
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  array.data = std::move(bytes);
  return array;
}

IdxArray read_idx(const std::string& path) { return parse_idx(read_possibly_gzipped(path), path); }

}  // namespace ember
