#include "datasets/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

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

// Reads up to `n` more bytes onto the end of `bytes`, growing it as data arrives (never by
// more than a chunk beyond what was read); stops early at the end of the stream.
void read_up_to(gzFile gz, std::vector<uint8_t>& bytes, uint64_t n, const std::string& path) {
  constexpr uint64_t kChunk = 1 << 20;
  while (n > 0) {
    const auto want = static_cast<unsigned>(std::min(n, kChunk));
    const size_t old_size = bytes.size();
    bytes.resize(old_size + want);
    const int got = gzread(gz, bytes.data() + old_size, want);
    if (got < 0) {
      int code = 0;
      EMBER_FAIL("read_idx '", path, "': corrupt gzip data: ", gzerror(gz, &code));
    }
    bytes.resize(old_size + static_cast<size_t>(got));
    if (static_cast<unsigned>(got) < want) return;
    n -= want;
  }
}

// Header plus data size the IDX header at the start of `bytes` promises; nullopt when the
// header is incomplete or its product overflows (parse_idx then reports it).
std::optional<uint64_t> promised_size(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 4) return std::nullopt;
  const size_t header = 4 + 4 * size_t(bytes[3]);
  if (bytes.size() < header) return std::nullopt;
  uint64_t total = 1;
  for (size_t i = 4; i < header; i += 4) {
    const uint64_t d = (uint64_t{bytes[i]} << 24) | (uint64_t{bytes[i + 1]} << 16) | (uint64_t{bytes[i + 2]} << 8) |
                       bytes[i + 3];
    if (__builtin_mul_overflow(total, d, &total)) return std::nullopt;
  }
  if (__builtin_add_overflow(total, uint64_t{header}, &total)) return std::nullopt;
  return total;
}

// Note [Bounded inflate]: a small gzip file can inflate to gigabytes. The IDX header says how
// many bytes follow, so the file is inflated only that far plus one byte (to detect trailing
// data); and that promise must fit what the compressed size can hold at all (deflate expands
// at most 1032:1), so a lying header fails before any large allocation.
constexpr uint64_t kMaxDeflateRatio = 1032;

// The file's bytes, inflated when it is gzip (zlib's gzread passes other files through).
std::vector<uint8_t> read_possibly_gzipped(const std::string& path) {
  struct stat st {};
  EMBER_CHECK(::stat(path.c_str(), &st) == 0, "read_idx '", path, "': cannot open the file: ", std::strerror(errno));
  EMBER_CHECK(S_ISREG(st.st_mode), "read_idx '", path, "': expected a regular file");
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  EMBER_CHECK(gz, "read_idx '", path, "': cannot open the file: ", std::strerror(errno));
  gzbuffer(gz.get(), 1 << 17);
  std::vector<uint8_t> bytes;
  read_up_to(gz.get(), bytes, 4, path);
  if (bytes.size() == 4) read_up_to(gz.get(), bytes, 4 * uint64_t{bytes[3]}, path);
  if (const std::optional<uint64_t> total = promised_size(bytes)) {
    const uint64_t most = kMaxDeflateRatio * uint64_t(st.st_size) + 64;
    EMBER_CHECK(*total <= most, "read_idx '", path, "': the header promises ", *total, " bytes, but a file of ",
                st.st_size, " bytes inflates to at most ", most);
    read_up_to(gz.get(), bytes, *total - bytes.size() + 1, path);
    EMBER_CHECK(bytes.size() <= *total, "read_idx '", path, "': the data inflates beyond the ", *total,
                " bytes its header promises (trailing data)");
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
